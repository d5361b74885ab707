"""``ragnarok run`` / ``scripts/run_trec.py``: a pipeline over a topic set, written as a track submission.

Tasks ``rag`` (answers) and ``r`` (rankings), with given candidates for AG-only runs. Topics run concurrently
and each finished one is appended whole, so running the same command again resumes; failures are retried and
reported, timeouts reduce the concurrency, and a pipeline the stages refuse stops the run at once.

Design notes: docs/internals/track.md.
"""

from __future__ import annotations

import asyncio
import io
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError
from tqdm import tqdm

from ragnarok.core.settings import DEMO_INDEX, Settings
from ragnarok.core.spec import Pipeline, Source, parse
from ragnarok.core.topics import Topic
from ragnarok.core.trec import format_run_lines
from ragnarok.core.types import Query, RagAnswer, Request
from ragnarok.runtime import cli_output
from ragnarok.runtime.progress import LineProgress
from ragnarok.service.batch import AdaptiveLimit, PipelineRefused, describe, local_services, refusal, with_retries
from ragnarok.service.gateway import GIVEN, PipelineRun, PipelineRunner, StageError
from ragnarok.track.formats import answer_record, record_run_id, record_topic, record_year
from ragnarok.track.output import JsonLinesLog, atomic_write, in_topic_order, read_records
from ragnarok.track.prompt import rendered_prompt
from ragnarok.track.resume import check_same, made_with, move_aside, record

R_DEPTH = 100


@dataclass(frozen=True)
class TrackOptions:
    run_id: str
    output: Path
    task: Literal["rag", "r"] = "rag"
    year: int = 2024
    concurrency: int = 4
    retries: int = 3
    team_id: str | None = None
    run_type: str = "automatic"
    index: str | None = None
    progress: bool | None = None  # None: when stderr is a terminal
    backoff_s: float | None = None  # the wait before a topic's first retry (None: settings.topic_backoff_s)
    restart: bool = False  # start over: the old output moved aside (ragnarok.track.resume), not resumed
    with_prompt: bool = False  # 2025: the generator's rendered prompt in metadata.prompt (ragnarok.track.prompt)

    @property
    def log_path(self) -> Path:
        """Where finished topics are appended: the output itself (rag), or its Request JSONL (r)."""
        return self.output if self.task == "rag" else self.output.with_name(self.output.name + ".requests.jsonl")


@dataclass
class Summary:
    topics: int
    skipped: int = 0
    written: int = 0
    failed: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        text = f"{self.written} topics written, {self.skipped} already done, {len(self.failed)} failed"
        details = "".join(f"\n  {qid}: {why}" for qid, why in sorted(self.failed.items()))
        return text + details


def track_pipeline(spec: str, given: bool) -> Pipeline:
    """The pipeline to run; with given candidates it starts with ``given`` (prepended when missing)."""
    if given and not spec.lstrip().startswith(GIVEN):
        spec = f"{GIVEN}@{10_000} | {spec}"
    pipeline = parse(spec)
    if not given and pipeline.retrieve == Source(GIVEN):
        raise ValueError(f"the pipeline starts with `{GIVEN}`: give the candidates with --requests FILE")
    return pipeline


def check_names(pipeline: Pipeline, settings: Settings, index: str | None = None) -> None:
    """Every component the pipeline names exists here: its retrievers, rerankers, generator and template,
    and the index. A cheap look-up in the registry and the settings that builds nothing, so a typo fails in
    a second rather than after the JVM, the indexes and the models load. Stages served by a remote R or AG
    service (``retrieval_url``, ``generation_url``) are left for that service to check.

    Raises :class:`~ragnarok.core.registry.UnknownComponentError` naming the component and what is available."""
    from ragnarok.core.model_paths import looks_like_path  # noqa: PLC0415
    from ragnarok.core.registry import UnknownComponentError, lookup  # noqa: PLC0415
    from ragnarok.stages.components import PASSAGE_STAGES, QUERY_STAGES, RERANKERS, RETRIEVERS, model_choices  # noqa: PLC0415 - the registry
    from ragnarok.stages.generate.prompts import load_templates  # noqa: PLC0415

    for q in pipeline.query:  # query stages run in the gateway
        QUERY_STAGES.get(q.name)
    if settings.retrieval_url is None:
        sources = [s for s in pipeline.sources() if s.name != GIVEN]
        for source in sources:
            RETRIEVERS.get(source.name)
            choices = model_choices(source.name, settings)
            if source.name == "dense" and source.arg and source.arg.startswith("prebuilt:"):
                from ragnarok.stages.retrieve.prebuilt import check_name  # noqa: PLC0415

                check_name(source.arg.removeprefix("prebuilt:").split(":")[0])  # a catalogue name, or a set's
            elif (
                choices is not None
                and source.arg
                and not looks_like_path(source.arg)
                and source.arg not in choices
                and source.arg not in choices.values()
            ):
                raise UnknownComponentError("embedding model", source.arg, list(choices))
        for stage in pipeline.rerank:
            # passage stages run in the gateway; a query stage written here is named as such by the gateway
            if stage.name not in QUERY_STAGES.entries:
                lookup(stage.name, RERANKERS, PASSAGE_STAGES)
        indexes = settings.index_sources()
        if sources and (index or settings.default_index) not in indexes:
            raise UnknownComponentError("index", index or settings.default_index, sorted(indexes))
    if settings.generation_url is None:
        writers = settings.generator_configs()
        for q in pipeline.query:  # a query stage's generator
            if q.generator not in writers:
                raise UnknownComponentError("generator", q.generator, sorted(writers))
    if settings.generation_url is None and pipeline.generate is not None:
        generators = settings.generator_configs()
        if pipeline.generate.name not in generators:
            raise UnknownComponentError("generator", pipeline.generate.name, sorted(generators))
        templates = load_templates()
        template = pipeline.generate.template or settings.default_template
        if template not in templates:
            raise UnknownComponentError("prompt template", template, sorted(templates))


def _record(
    task: str, result: RagAnswer | Request, topic: Topic, options: TrackOptions, prompt: str | None = None
) -> dict[str, Any]:
    if task == "r":
        assert isinstance(result, Request)
        request = result.model_copy(
            update={"query": Query(text=topic.text, qid=topic.qid), "candidates": result.candidates[:R_DEPTH]}
        )
        return request.model_dump(mode="json", exclude_none=True)  # pure rank_llm Request: AG-only runs read it
    assert isinstance(result, RagAnswer)
    return answer_record(
        result,
        year=options.year,
        run_id=options.run_id,
        topic_text=topic.text,
        team_id=options.team_id,
        run_type=options.run_type,
        prompt=prompt,
    )


def _r_topic(record: dict[str, Any]) -> str | None:
    query = record.get("query")
    return str(query.get("qid")) if isinstance(query, dict) else None


def _foreign(options: TrackOptions) -> Callable[[dict[str, Any]], str | None]:
    """Why a line already in the output belongs to another run (None when it is this run's): another format
    (year), run id, or 2025 team id or run type. Resuming into such a file would mix two runs."""
    team = options.team_id or options.run_id

    def why(record: dict[str, Any]) -> str | None:
        year = record_year(record)
        if year != options.year:
            return f"is a {year}-format line, not --year {options.year}; give another --output or the same --year"
        run_id = record_run_id(record)
        if run_id != options.run_id:
            return f"holds run {run_id!r}, not {options.run_id!r}; give another --output or the same --run-id"
        meta = record.get("metadata") if year == 2025 else None
        if isinstance(meta, dict):
            for key, mine, flag in (("team_id", team, "--team-id"), ("type", options.run_type, "--run-type")):
                if meta.get(key) != mine:
                    return (
                        f"has metadata.{key} {meta.get(key)!r}, not {mine!r}; give another --output or the same {flag}"
                    )
        return None

    return why


def prepare_demo_index(pipeline: Pipeline, settings: Settings, index: str | None) -> None:
    """The demo index (and its dense MiniLM index when the pipeline retrieves densely), built on first use:
    only once the output is known to be resumable and topics are left to run."""
    if (index or settings.default_index) == DEMO_INDEX and settings.demo_is_embedded():
        from ragnarok.collection.demo_index import ensure_demo_index  # noqa: PLC0415

        dense = any(s.name == "dense" for s in pipeline.sources())
        ensure_demo_index(settings, dense_model="minilm" if dense else None)


async def run_track(
    pipeline: Pipeline,
    topics: Sequence[Topic],
    settings: Settings,
    options: TrackOptions,
    requests: dict[str, Request] | None = None,
) -> Summary:
    """Run every topic not yet in the output; see the module docstring."""
    if options.task == "rag" and pipeline.generate is None:
        raise ValueError(f"the rag task needs a generator: end the pipeline with one (`{pipeline} | extractive`)")
    if options.task == "r" and pipeline.generate is not None:
        raise ValueError(f"the r task writes rankings: drop the generation stage from `{pipeline}`")
    if requests is not None:
        missing = [t.qid for t in topics if t.qid not in requests]
        if missing:
            raise ValueError(f"no given candidates for {len(missing)} topics: {', '.join(missing[:5])}")
    made = made_with(str(pipeline), options.index or settings.default_index)
    if options.restart:
        for old, new in move_aside(options.output, options.log_path):
            cli_output.warn(f"--restart: moved {old} aside to {new}", prefix="")
    elif (note := check_same(options.log_path, made)) is not None:
        cli_output.warn(note, prefix="")
    topic_of = record_topic if options.task == "rag" else _r_topic
    log = JsonLinesLog(options.log_path, topic_of, _foreign(options) if options.task == "rag" else None).open()
    summary = Summary(topics=len(topics))
    try:
        todo = [t for t in topics if t.qid not in log.done]
        summary.skipped = len(topics) - len(todo)
        if todo and requests is None:
            prepare_demo_index(pipeline, settings, options.index)
        services, _app = local_services(settings)
        runner = PipelineRunner(services, options.index)
        if options.progress or (options.progress is None and os.isatty(2)):
            bar = tqdm(total=len(topics), initial=summary.skipped, unit="topic", desc=options.run_id)
        else:  # not on a terminal: a line per tenth of the topics, with the time left (--no-progress: none)
            bar = LineProgress(
                len(topics),
                options.run_id,
                initial=summary.skipped,
                file=sys.stderr if options.progress is None else io.StringIO(),
            )

        def lowered(old: int, new: int) -> None:
            tqdm.write(
                f"note: {'a stage timed out' if new < old else 'no timeouts lately'}: "
                f"{new} topics in flight at once (was {old})",
                file=sys.stderr,
            )

        limit = AdaptiveLimit(options.concurrency, lowered)
        recorded: list[bool] = []
        backoff_s = settings.topic_backoff_s if options.backoff_s is None else options.backoff_s

        async def attempt(topic: Topic) -> PipelineRun:
            try:
                given = requests[topic.qid] if requests is not None else None
                return await runner.run(pipeline, Query(text=topic.text, qid=topic.qid), given)
            except StageError as exc:
                if (refused := refusal(exc)) is not None:
                    raise refused from None
                raise

        async def one(topic: Topic) -> None:
            try:
                done = await with_retries(lambda: attempt(topic), limit, max(1, options.retries) - 1, backoff_s)
            except PipelineRefused:
                raise
            except Exception as exc:  # noqa: BLE001 - reported per topic in the summary; the others go on
                summary.failed[topic.qid] = describe(topic.qid, exc).reason()
                bar.update(1)
                return
            if not recorded:  # this run's first line: what made it is recorded first
                record(options.log_path, made)
                recorded.append(True)
            prompt = None
            if options.with_prompt and options.task == "rag" and options.year == 2025:
                prompt = rendered_prompt(pipeline, settings, topic.text, done.ranking.candidates)
            log.append(_record(options.task, done.result, topic, options, prompt))
            summary.written += 1
            bar.update(1)

        tasks = [asyncio.create_task(one(t)) for t in todo]
        try:
            await asyncio.gather(*tasks)
        except PipelineRefused:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        finally:
            bar.close()
    finally:
        log.close()
    # lines were appended as topics finished: in the topics' order now, so the same run writes the same bytes
    in_topic_order(options.log_path, [t.qid for t in topics], topic_of)
    if options.task == "r":
        write_r_run(options)
    return summary


def write_r_run(options: TrackOptions) -> None:
    """The TREC run file (top 100 per topic) from the Request log, replaced atomically; nothing when no topic
    was ever written."""
    if not options.log_path.exists():
        return
    ranking = {}
    for logged in read_records(options.log_path):
        ranking[str(logged["query"]["qid"])] = [(c["docid"], float(c["score"])) for c in logged["candidates"]]
    lines = "".join(line + "\n" for line in format_run_lines(ranking, options.run_id, R_DEPTH))
    atomic_write(options.output, lines.encode())


def read_requests(path: str | Path) -> dict[str, Request]:
    """Given candidates: rank_llm Request JSONL, one topic per line (``query.qid``)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise OSError(f"cannot read {path}: {exc.strerror or exc}") from None
    out: dict[str, Request] = {}
    for n, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            request = Request.model_validate_json(line)
        except ValidationError as exc:  # its first line says only "1 validation error for Request": the error
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"])
            raise ValueError(
                f"{path}:{n}: not a rank_llm Request line ({where + ': ' if where else ''}{error['msg']})"
            ) from None
        qid = str(request.query.qid)
        if qid in out:
            raise ValueError(f"{path}:{n}: topic {qid!r} is given twice")
        out[qid] = request
    if not out:
        raise ValueError(f"{path}: no Request lines")
    return out
