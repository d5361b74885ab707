"""``ragnarok search`` (a TREC run file from one retriever or a pipeline's retrieval part) and ``ragnarok eval``
(trec_eval-style scores of run files): the retrieval half of the command line, registered by
:mod:`ragnarok.cli.main`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ragnarok.core.settings import Settings, get_settings, index_name, names_a_source, with_index_path
from ragnarok.core.topic_sets import qrels_path, resolve_topics
from ragnarok.runtime import cli_output
from ragnarok.runtime.cli_errors import fails_cleanly, row_names
from ragnarok.runtime.cli_output import Format, OutputFormatOpt, OutputOpt
from ragnarok.runtime.interrupt import resume_with, stops_on_signals, writing


@fails_cleanly
@stops_on_signals(
    "nothing written yet (the run file is written once every topic is searched); run the same command again"
)
def search(
    topics: Annotated[
        str, typer.Option(help="Topic file or set name (demo, rag24, rag25, ...: `ragnarok topics list`).")
    ],
    output: Annotated[Path, typer.Option(help="TREC run file to write.")],
    index: Annotated[
        Optional[str],
        typer.Option(help="Index name, Lucene index directory, or prebuilt:NAME (a name of pyserini's catalogue)."),
    ] = None,
    retriever: Annotated[str, typer.Option(help="bm25, bm25+rocchio, bm25+rm3 or dense:MODEL.")] = "bm25",
    pipeline: Annotated[
        Optional[str],
        typer.Option(
            help="A pipeline (spec, preset name or TOML/YAML file) instead of one retriever, e.g. "
            "'rrf(bm25+rocchio, dense:minilm)@1000 | mmr@100'; its retrieval part is used (a generation stage "
            "is left out), and its stages set the depths."
        ),
    ] = None,
    k: Annotated[
        Optional[int], typer.Option(min=1, max=10_000, help="Hits per topic (one retriever; default 1000).")
    ] = None,
    run_id: Annotated[
        Optional[str],
        typer.Option(
            help="Run tag (default: the retriever name, or the pipeline's "
            "spec made one word, e.g. bm25-100-mmr-0.5-10)."
        ),
    ] = None,
    threads: Annotated[
        int,
        typer.Option(min=1, help="Java search threads (one retriever), or topics in flight at once (a --pipeline)."),
    ] = 2,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show the JVM's and Lucene's log lines.")] = False,
    output_format: OutputFormatOpt = Format.text,
) -> None:
    """Run every topic through a retriever (or a retrieval pipeline) and write a TREC run file."""
    from ragnarok.core.java import set_verbose  # noqa: PLC0415

    cli_output.file_not_format(output)
    set_verbose(verbose)
    settings = with_index_path(get_settings(), index)
    if (
        index is not None
        and not names_a_source(index)
        and index not in settings.index_sources()
        and ("/" in index or index.startswith("."))
    ):
        raise FileNotFoundError(f"no index directory {index} (and no configured index of that name)")
    loaded = resolve_topics(topics, settings)
    parsed = None
    if pipeline:
        if k is not None:
            raise ValueError(
                "--k sets the hits of one --retriever; a --pipeline sets its own depths (e.g. 'bm25@1000 | mmr@100')"
            )
        parsed = _retrieval_part(pipeline, settings, index_name(index))
        sources = [s.name + (f":{s.arg}" if s.arg else "") for s in parsed.sources()]
    else:
        sources = [retriever]
    if (index or settings.default_index) == settings.default_index == "demo" and settings.demo_is_embedded():
        from ragnarok.collection.demo_index import ensure_demo_index, ensure_dense_index  # noqa: PLC0415

        target = ensure_demo_index(settings)
        for model in dense_models(sources):
            ensure_dense_index(target, model)  # built on first use, rebuilt when stale
    failures: list = []
    if parsed is not None:
        ranking, failures = _pipeline_ranking(parsed, loaded, settings, index_name(index), threads)
    else:
        ranking = _retriever_ranking(retriever, loaded, settings, index, k or 1000, threads)
    from ragnarok.core.trec import write_run  # noqa: PLC0415

    output.parent.mkdir(parents=True, exist_ok=True)
    resume_with(f"{output} was written whole; nothing left to do")
    tag = run_id or (retriever.replace(" ", "") if parsed is None else run_tag(parsed))
    with writing():  # an interrupt waits for the whole file
        write_run(output, ranking, tag)
    cli_output.result(
        {
            "output": str(output),
            "run_id": tag,
            "topics": len(ranking),
            "lines": sum(map(len, ranking.values())),
            "failed": [f.qid for f in failures],
        }
    )
    typer.echo(f"wrote {sum(map(len, ranking.values())):,} lines for {len(ranking)} topics to {output}")
    if failures:
        typer.echo(
            f"{len(failures)} of {len(loaded)} topics failed: "
            + ", ".join(f.qid for f in failures[:20])
            + (f" and {len(failures) - 20} more" if len(failures) > 20 else "")
            + f" (each named above; left out of {output}; run the same command again for all of them)",
            err=True,
        )
        cli_output.error(f"{len(failures)} of {len(loaded)} topics failed")
        raise typer.Exit(1)


def run_tag(pipeline: Any, limit: int = 48) -> str:
    """A TREC run tag (one word) that says which pipeline wrote a run: its spec made a word
    (``rrf(bm25, dense:minilm)@100 | mmr:0.5@10`` -> ``rrf-bm25-dense-minilm-100-mmr-0.5-10``); a longer one is
    cut and ends with a digest of the whole spec, so two pipelines never share a tag."""
    import hashlib  # noqa: PLC0415
    import re  # noqa: PLC0415

    spec = str(pipeline)
    tag = re.sub(r"[^A-Za-z0-9+._]+", "-", spec).strip("-") or "pipeline"
    if len(tag) <= limit:
        return tag
    return tag[: limit - 7].rstrip("-") + "-" + hashlib.sha256(spec.encode()).hexdigest()[:6]


def dense_models(retrievers: list[str]) -> list[str]:
    """The embedding models that retrievers named like ``dense:minilm`` (``dense``: MiniLM) need."""
    return sorted({r.partition(":")[2] or "minilm" for r in retrievers if r.partition(":")[0] == "dense"})


def _retrieval_part(spec: str, settings: Settings | None = None, index: str | None = None) -> Any:
    """The pipeline named by ``spec`` (a preset, a spec or a TOML/YAML file) without its generation stage.
    With ``settings``, every component the whole pipeline names (its generator too) is checked first, as
    ``/rag`` and ``ragnarok run`` check it: an unknown name fails with "did you mean ...?"."""
    import dataclasses  # noqa: PLC0415

    parsed = load_pipeline(spec)
    if settings is not None:
        from ragnarok.track.run import check_names  # noqa: PLC0415

        check_names(parsed, settings, index)
    if parsed.generate is not None:
        parsed = dataclasses.replace(parsed, generate=None)
        cli_output.warn(f"search writes rankings: using the retrieval part of the pipeline, {parsed}", prefix="")
    return parsed


def load_pipeline(spec: str) -> Any:
    """The pipeline named by ``spec``: a preset, a spec, or a TOML/YAML file."""
    from ragnarok.core.presets import resolve  # noqa: PLC0415
    from ragnarok.core.spec import parse  # noqa: PLC0415
    from ragnarok.core.spec_mapping import load  # noqa: PLC0415

    return (
        load(Path(spec))
        if Path(spec).suffix in {".toml", ".yaml", ".yml"} and Path(spec).is_file()
        else parse(resolve(spec))
    )


def _retriever_ranking(
    retriever: str, topics: list, settings: Settings, index: str | None, k: int, threads: int
) -> dict[str, list[tuple[str, float]]]:
    from ragnarok.core.registry import UnknownComponentError  # noqa: PLC0415
    from ragnarok.core.types import Query  # noqa: PLC0415
    from ragnarok.service.retrieval_service import RetrievalService  # noqa: PLC0415

    try:
        chosen = RetrievalService(settings).get(retriever, index_name(index))
    except UnknownComponentError as exc:
        if exc.role != "retriever":
            raise
        names = [f"{n}:MODEL" if n == "dense" else n for n in exc.available]
        raise UnknownComponentError("retriever", exc.name, names) from None
    queries = {t.qid: t.text for t in topics}
    if hasattr(chosen, "batch_search"):
        return chosen.batch_search(queries, k, threads)
    from ragnarok.runtime.progress import progress_iter  # noqa: PLC0415

    if hasattr(chosen, "warm_up"):
        chosen.warm_up()  # a missing or stale index fails here, before the bar starts
    return {
        qid: [(c.docid, c.score) for c in chosen.retrieve(Query(text=text, qid=qid), k).candidates]
        for qid, text in progress_iter(queries.items(), len(queries), f"searching ({retriever})")
    }


def _pipeline_ranking(
    parsed: Any, topics: list, settings: Settings, index: str | None, concurrency: int
) -> tuple[dict[str, list[tuple[str, float]]], list[Any]]:
    """The rankings of the topics that succeeded (in the topics' order), and the failures of the others: each
    named on stderr in one line as it fails (after its retries); a refused pipeline stops the search."""
    import asyncio  # noqa: PLC0415

    from ragnarok.runtime.progress import progress  # noqa: PLC0415
    from ragnarok.service.batch import PipelineRefused, run_topics  # noqa: PLC0415

    failures: list[Any] = []
    with progress(len(topics), "running the pipeline") as bar:  # a bar on a terminal, else lines

        def failed(failure: Any) -> None:
            failures.append(failure)
            typer.echo(str(failure), err=True)
            cli_output.error(str(failure))
            bar.update(1)

        def lowered(old: int, new: int) -> None:
            cli_output.warn(
                f"{'a stage timed out' if new < old else 'no timeouts lately'}: "
                f"{new} topics in flight at once (was {old})",
                prefix="note: ",
            )

        try:
            results = asyncio.run(
                run_topics(
                    parsed,
                    topics,
                    settings,
                    index,
                    concurrency,
                    on_result=lambda _topic, _result: bar.update(1),
                    on_failure=failed,
                    on_limit=lowered,
                )
            )
        except PipelineRefused as exc:
            raise PipelineRefused(f"the pipeline was refused, nothing written: {exc}") from None
    # in the topics' order, not the order they finished in: the same search writes the same bytes
    return {
        t.qid: [(c.docid, c.score) for c in results[t.qid].candidates]  # type: ignore[union-attr]
        for t in topics
        if t.qid in results
    }, failures


@fails_cleanly
def evaluate_run(
    qrels: Annotated[str, typer.Argument(help="TREC qrels file, or a set name (demo, rag24, rag25, ...).")],
    runs: Annotated[list[Path], typer.Argument(help="One or more TREC run files.")],
    run_name: Annotated[
        Optional[list[str]], typer.Option(help="Row names, one per run in order (default: the file names).")
    ] = None,
    maxp: Annotated[
        Optional[bool],
        typer.Option(
            "--maxp/--no-maxp",
            help="Score documents by their best segment "
            "(default: when qrels are document-level and runs segment-level).",
        ),
    ] = None,
    output_format: OutputOpt = Format.text,
) -> None:
    """nDCG@10, MAP@100, Recall@100 and MAP of run files, one row per run (the paper's Table 3 layout).

    Segment-level runs against document-level qrels are scored after MaxP (a document scores as its best
    segment) unless --no-maxp; --maxp forces it. Every topic of the qrels counts: one a run does not cover
    scores 0 (trec_eval -c), and a warning on stderr says how many it covers."""
    from ragnarok.core.evaluation import evaluate_all, format_table, read_qrels  # noqa: PLC0415
    from ragnarok.core.trec import read_run  # noqa: PLC0415

    names = row_names(run_name, runs)
    qrels_file = qrels_path(qrels, get_settings())
    judged = read_qrels(qrels_file)
    rows, covers = {}, {}
    for name, path in zip(names, runs):
        scores, covered = evaluate_all(judged, read_run(path), maxp=maxp)
        if covered < len(judged):
            cli_output.warn(
                f"{name} covers {covered} of the {len(judged)} topics of {qrels_file.name}; the "
                f"{len(judged) - covered} missing count as 0"
            )
        rows[name], covers[name] = scores, covered
    # one entry per run, as eval-rag's runs: its name, the qrels' topics it covers, each metric's score
    cli_output.result(
        {
            "qrels": str(qrels_file),
            "topics": len(judged),
            "runs": [{"name": n, "topics": covers[n], "scores": rows[n]} for n in rows],
        }
    )
    typer.echo(format_table(rows))
