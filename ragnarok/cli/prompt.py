"""``ragnarok prompt``: the exact messages a generator would be sent for a topic, over the contexts a pipeline's
stages before the generator hand it (retrieval, rerankers, passage stages), nothing sent to any model (the
generator's own code builds them: :mod:`ragnarok.stages.generate.capture`)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Annotated, Any, Optional

import typer

from ragnarok.cli.search import load_pipeline
from ragnarok.core.settings import Settings, get_settings
from ragnarok.runtime import cli_output
from ragnarok.runtime.cli_errors import fails_cleanly
from ragnarok.runtime.cli_output import Format, OutputOpt


@fails_cleanly
def prompt(
    generator: Annotated[
        Optional[str], typer.Option(help="A configured generator (default: the --pipeline's).")
    ] = None,
    template: Annotated[
        Optional[str],
        typer.Option(help="A prompt template (default: the generator's, else the settings' default_template)."),
    ] = None,
    topic: Annotated[Optional[str], typer.Option(help="The topic's text.")] = None,
    topics: Annotated[Optional[str], typer.Option(help="A topic file or set name (with --qid).")] = None,
    qid: Annotated[Optional[str], typer.Option(help="The topic of --topics.")] = None,
    pipeline: Annotated[
        str,
        typer.Option(
            help="The stages that give the generator its contexts (a spec, preset "
            "or TOML/YAML file; its generator is replaced by --generator). "
            "Default: ragnarok run's, the offline preset."
        ),
    ] = "offline",
    k: Annotated[
        Optional[int],
        typer.Option(min=1, max=1000, help="Contexts handed to the generator (default 20, as /rag and run hand it)."),
    ] = None,
    index: Annotated[Optional[str], typer.Option(help="Index name (default from settings).")] = None,
    output_format: OutputOpt = Format.text,
) -> None:
    """Print the messages (system and user, as sent) that the generator would be sent for one topic: the
    pipeline's stages run, the generator builds its prompt, and nothing is sent to a model."""
    from ragnarok.core.types import Query  # noqa: PLC0415
    from ragnarok.service.gateway import GENERATION_K  # noqa: PLC0415
    from ragnarok.track.run import check_names, prepare_demo_index  # noqa: PLC0415

    settings = get_settings()
    query = Query(text=_topic_text(topic, topics, qid, settings), qid=qid or "topic")
    parsed = load_pipeline(pipeline)
    chosen = generator or (parsed.generate.name if parsed.generate is not None else None)
    if chosen is None:
        raise ValueError("give --generator NAME (the --pipeline names no generator)")
    from ragnarok.core.spec import Generate  # noqa: PLC0415

    stage = Generate(
        chosen,
        template
        or (parsed.generate.template if parsed.generate is not None and parsed.generate.name == chosen else None),
    )
    check_names(dataclasses.replace(parsed, generate=stage), settings, index)  # did you mean, before any work
    config = settings.generator_configs()[chosen]
    if config.backend == "extractive":
        raise ValueError(
            f"the generator {chosen!r} is the extractive baseline: it prompts no model; give an "
            "LLM generator (ragnarok doctor lists them)"
        )
    retrieval = dataclasses.replace(parsed, generate=None)
    prepare_demo_index(retrieval, settings, index)  # built on first use, as ragnarok run builds it
    contexts = asyncio.run(_contexts(retrieval, query, settings, index))[: k or GENERATION_K]
    if config.max_contexts is not None:  # the generator keeps its first max_contexts: those are in the prompt
        contexts = contexts[: config.max_contexts]
    sent = _sent(settings, chosen, stage.template, query, contexts)
    typer.echo(
        f"{chosen} ({config.backend}, template {stage.template or config.template or settings.default_template})"
        f" over {len(contexts)} contexts from {retrieval}: {' '.join(c.docid for c in contexts[:20])}"
        + (" ..." if len(contexts) > 20 else ""),
        err=True,
    )
    cli_output.result(
        {
            "generator": chosen,
            "template": stage.template or config.template or settings.default_template,
            "pipeline": str(retrieval),
            "contexts": [c.docid for c in contexts],
            "messages": sent["messages"],
            **({"sent_documents": sent["documents"]} if "documents" in sent else {}),  # Cohere's, apart
        }
    )
    if output_format != Format.json:
        typer.echo(render(sent))


def render(sent: dict[str, Any]) -> str:
    """The messages as ``role: content`` blocks a blank line apart (as ``metadata.prompt`` writes them), then a
    backend's separate ``documents`` as JSON lines."""
    import json  # noqa: PLC0415

    from ragnarok.track.prompt import as_text  # noqa: PLC0415

    text = as_text(sent["messages"])
    if sent.get("documents"):
        text += "\n\ndocuments:\n" + "\n".join(json.dumps(d, ensure_ascii=False) for d in sent["documents"])
    return text


def _topic_text(topic: str | None, topics: str | None, qid: str | None, settings: Settings) -> str:
    """``--topic TEXT``, or the topic ``--qid`` of ``--topics`` (an unknown id: did you mean)."""
    if (topic is None) == (topics is None):
        raise ValueError("give --topic TEXT, or --topics FILE|SET with --qid ID")
    if topic is not None:
        if qid is not None:
            raise ValueError("--qid picks a topic of --topics; with --topic TEXT give no --qid")
        if not topic.strip():
            raise ValueError("--topic is empty")
        return topic
    if qid is None:
        raise ValueError("--topics needs --qid ID: the topic to render")
    from ragnarok.core.registry import UnknownComponentError  # noqa: PLC0415
    from ragnarok.track.cli import resolve_topics  # noqa: PLC0415

    found = {t.qid: t.text for t in resolve_topics(topics, settings)}  # type: ignore[arg-type]
    if qid not in found:
        raise UnknownComponentError(f"topic of {topics}", qid, list(found)[:20] + (["..."] if len(found) > 20 else []))
    return found[qid]


async def _contexts(retrieval: Any, query: Any, settings: Settings, index: str | None) -> list:
    """The candidates the stages before the generator hand on, run as ``ragnarok run`` runs them."""
    from ragnarok.service.batch import local_services  # noqa: PLC0415
    from ragnarok.service.gateway import PipelineRunner  # noqa: PLC0415

    services, _app = local_services(settings)
    runner = PipelineRunner(services, index)
    request = None
    async for item in runner.ranking(retrieval, query):
        request = item
    return list(request.candidates)  # type: ignore[union-attr]


def _sent(settings: Settings, name: str, template: str | None, query: Any, contexts: list) -> dict[str, Any]:
    """What generator ``name`` would send, built by a fresh instance of it (the AG service's template choice)."""
    from ragnarok.stages.components import GENERATOR_BACKENDS  # noqa: PLC0415
    from ragnarok.stages.generate.capture import sent_request  # noqa: PLC0415
    from ragnarok.stages.generate.service import GenerationService  # noqa: PLC0415

    service = GenerationService(settings)
    config = service.configs[name]
    return sent_request(
        GENERATOR_BACKENDS.create(config.backend, config=config), query, contexts, service.template(name, template)
    )
