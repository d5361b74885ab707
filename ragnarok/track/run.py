"""``ragnarok run`` / ``scripts/run_trec.py``: a pipeline over a topic set, written as a track submission.

* Tasks: ``rag`` (an answer line per topic, 2024 or 2025 format) and ``r`` (a ranking per topic, logged as
  rank_llm Request JSONL, then written as a TREC run file of the top 100).
* AG-only: ``requests`` maps topic ids to given candidates (the track's fixed retrieval results); the
  pipeline then starts with ``given``.
* At most ``concurrency`` topics in flight, each finished one appended as a whole line at once
  (:class:`~ragnarok.track.output.JsonLinesLog`); running the same command again skips the topics already
  written. A topic that fails is retried (exponential backoff); the ones that still fail are reported.
  A stage that refuses the pipeline itself (4xx: unknown component, missing key) stops the run at once.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential
from tqdm import tqdm

from ragnarok.batch import local_services
from ragnarok.gateway import GIVEN, PipelineRunner, StageError
from ragnarok.settings import Settings
from ragnarok.spec import Pipeline, Source, parse
from ragnarok.topics import Topic
from ragnarok.track.formats import answer_record, record_run_id, record_topic
from ragnarok.track.output import JsonLinesLog, read_records
from ragnarok.trec import write_run
from ragnarok.types import Query, RagAnswer, Request

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


class PipelineRefused(RuntimeError):
    """A stage refused the pipeline itself (its 4xx): no topic can succeed, so the run stops."""


def track_pipeline(spec: str, given: bool) -> Pipeline:
    """The pipeline to run; with given candidates it starts with ``given`` (prepended when missing)."""
    if given and not spec.lstrip().startswith(GIVEN):
        spec = f"{GIVEN}@{10_000} | {spec}"
    pipeline = parse(spec)
    if not given and pipeline.retrieve == Source(GIVEN):
        raise ValueError(f"the pipeline starts with `{GIVEN}`: give the candidates with --requests FILE")
    return pipeline


def _record(task: str, result: RagAnswer | Request, topic: Topic, options: TrackOptions) -> dict[str, Any]:
    if task == "r":
        assert isinstance(result, Request)
        request = result.model_copy(update={"query": Query(text=topic.text, qid=topic.qid),
                                            "candidates": result.candidates[:R_DEPTH]})
        return request.model_dump(mode="json", exclude_none=True)  # pure rank_llm Request: AG-only runs read it
    assert isinstance(result, RagAnswer)
    return answer_record(result, year=options.year, run_id=options.run_id, topic_text=topic.text,
                         team_id=options.team_id, run_type=options.run_type)


def _r_topic(record: dict[str, Any]) -> str | None:
    query = record.get("query")
    return str(query.get("qid")) if isinstance(query, dict) else None


def _retryable(exc: BaseException) -> bool:
    return not isinstance(exc, (PipelineRefused, ValueError))


async def run_track(pipeline: Pipeline, topics: Sequence[Topic], settings: Settings, options: TrackOptions,
                    requests: dict[str, Request] | None = None) -> Summary:
    """Run every topic not yet in the output; see the module docstring."""
    if options.task == "rag" and pipeline.generate is None:
        raise ValueError(f"the rag task needs a generator: end the pipeline with one (`{pipeline} | extractive`)")
    if options.task == "r" and pipeline.generate is not None:
        raise ValueError(f"the r task writes rankings: drop the generation stage from `{pipeline}`")
    if requests is not None:
        missing = [t.qid for t in topics if t.qid not in requests]
        if missing:
            raise ValueError(f"no given candidates for {len(missing)} topics: {', '.join(missing[:5])}")
    topic_of = record_topic if options.task == "rag" else _r_topic
    run_of = record_run_id if options.task == "rag" else None
    log = JsonLinesLog(options.log_path, topic_of, run_of, options.run_id).open()
    summary = Summary(topics=len(topics))
    try:
        todo = [t for t in topics if t.qid not in log.done]
        summary.skipped = len(topics) - len(todo)
        services, _app = local_services(settings)
        runner = PipelineRunner(services, options.index)
        slots = asyncio.Semaphore(max(1, options.concurrency))
        show = options.progress if options.progress is not None else os.isatty(2)
        bar = tqdm(total=len(topics), initial=summary.skipped, unit="topic", desc=options.run_id, disable=not show)

        async def attempt(topic: Topic) -> RagAnswer | Request:
            try:
                given = requests[topic.qid] if requests is not None else None
                return (await runner.run(pipeline, Query(text=topic.text, qid=topic.qid), given)).result
            except StageError as exc:
                if 400 <= exc.status < 500:
                    raise PipelineRefused(str(exc)) from None
                raise

        async def one(topic: Topic) -> None:
            async with slots:
                try:
                    async for attempt_ in AsyncRetrying(
                        stop=stop_after_attempt(max(1, options.retries)), reraise=True,
                        wait=wait_exponential(multiplier=0.5, max=8), retry=retry_if_exception(_retryable)):
                        with attempt_:
                            result = await attempt(topic)
                except PipelineRefused:
                    raise
                except Exception as exc:  # noqa: BLE001 - reported per topic in the summary
                    summary.failed[topic.qid] = f"{type(exc).__name__}: {exc}"
                    bar.update(1)
                    return
            log.append(_record(options.task, result, topic, options))
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
    if options.task == "r":
        write_r_run(options)
    return summary


def write_r_run(options: TrackOptions) -> None:
    """The TREC run file (top 100 per topic) from the Request log, replaced atomically."""
    ranking = {}
    for record in read_records(options.log_path):
        ranking[str(record["query"]["qid"])] = [(c["docid"], float(c["score"])) for c in record["candidates"]]
    fd, tmp = tempfile.mkstemp(dir=options.output.parent, prefix=f".{options.output.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            write_run(handle, ranking, options.run_id, depth=R_DEPTH)
        os.replace(tmp, options.output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
        except ValueError as exc:
            first = str(exc).splitlines()[0]
            raise ValueError(f"{path}:{n}: not a rank_llm Request line ({first})") from None
        qid = str(request.query.qid)
        if qid in out:
            raise ValueError(f"{path}:{n}: topic {qid!r} is given twice")
        out[qid] = request
    if not out:
        raise ValueError(f"{path}: no Request lines")
    return out
