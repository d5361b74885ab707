"""``POST /v1/evaluate``: one RAG answer judged as ``ragnarok eval-rag`` judges a run's (the same code:
:func:`ragnarok.judge.evalrag.judge_topic`) -- the four nugget scores, citation support precision/recall and,
given gold answers, the reference metrics -- so other clients (the arena, a pipeline search) score answers
without a run file.

The judge is the one named in the body, else the ``judge`` setting, else the PROXY judge (no LLM); the answer
says which. Work is bounded: at most ``MAX_*`` sentences, citations, nuggets, segments and characters (413),
and the whole evaluation has ``judge_timeout_s`` (504; each LLM call also has its generator's timeout).
Judgments of an LLM judge are cached in the data directory's ``judgments.db``, as the CLI's are."""

from __future__ import annotations

import time
from typing import Literal

from fastapi import APIRouter
from fastapi import Request as HttpRequest
from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from api.auth import reserve
from api.body import StrictJSONRoute
from api.deps import GenerationDep, RetrievalDep, SettingsDep
from api.errors import BadInput, errors
from ragnarok.auth.cost import evaluate_cost
from ragnarok.core.types import RagAnswer
from ragnarok.runtime.cancel import InFlight, run_watched
from ragnarok.stages.generate.base import guard_of

router = APIRouter(prefix="/v1", tags=["evaluation"], route_class=StrictJSONRoute)

MAX_SENTENCES = 64  # answer sentences
MAX_CITATIONS = 256  # citations over all sentences: one support judgment each
MAX_NUGGETS = 100  # nuggetizer makes at most ~30 a topic
MAX_SEGMENTS = 256  # segment texts given
MAX_GOLD = 16  # gold answers
MAX_CHARS = 400_000  # answer, nuggets, segments and gold answers together


class NuggetIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=2000)
    importance: Literal["vital", "okay"] = "okay"

    @field_validator("importance", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:  # "Vital", " OKAY " as in the CLI's nugget files
        return value.strip().lower() if isinstance(value, str) else value


class EvaluateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: RagAnswer = Field(
        description="The answer in the TREC RAG 2024 format (what `POST /rag` returns): "
        "topic_id, topic (the question), references (segment ids) and "
        "sentences citing 0-based indices into them."
    )
    nuggets: list[NuggetIn] | None = Field(
        None, description=f"The topic's nuggets (vital/okay), at most {MAX_NUGGETS}: the four AutoNuggetizer scores."
    )
    segments: dict[str, str] | None = Field(
        None, description="The cited segments' text by segment id: citation support precision/recall."
    )
    index: str | None = Field(
        None,
        min_length=1,
        description="Instead of `segments`: look the cited segments up in this local index (GET /v1/indexes).",
    )
    gold_answers: list[str] | None = Field(
        None, description=f"Reference answers (at most {MAX_GOLD}): ROUGE-L, BLEU, chrF, METEOR, token F1, SemScore."
    )
    judge: str | None = Field(
        None,
        description="A configured LLM generator as judge (GET /v1/generators), or "
        "`proxy`; default: the `judge` setting, else the proxy judge.",
    )
    geval: StrictBool = Field(
        False,
        description="Also G-Eval-style 1-5 scores (coherence, consistency, fluency, relevance); needs an LLM judge.",
    )


class AssignedNugget(BaseModel):
    text: str
    importance: Literal["vital", "okay"]
    assignment: Literal["support", "partial_support", "not_support"] | None = Field(
        description="The judge's label; null where it could not give one (scored as not_support)."
    )


class EvaluateOut(BaseModel):
    judge: str = Field(description="The judge that was used (a PROXY judge says so).")
    proxy: bool = Field(description="Whether the scores come from the proxy judge (no LLM).")
    scores: dict[str, float] = Field(
        description="strict_vital, vital, strict_all, all (with nuggets); "
        "support_precision, support_recall (with segments); rouge_l, "
        "bleu, chrf, meteor, token_f1, semscore (with gold answers); "
        "geval_coherence ... (with geval)."
    )
    nuggets: list[AssignedNugget] = Field(description="Each nugget with its assignment.")
    support: list[list[str | None]] | None = Field(
        description="Per answer sentence, per citation: "
        "full_support, partial_support, no_support (null: "
        "the segment was not found or not judged)."
    )
    missing_segments: list[str] = Field(description="Cited segment ids with no text (no support).")
    failed: int = Field(description="Judgments the judge could not give (never guessed).")
    judgments: int
    cached: int = Field(description="Judgments that came from the cache.")
    ms: float


def _bounds(body: EvaluateBody, max_segment_chars: int, max_query_chars: int) -> None:
    answer = body.answer
    if not answer.answer or not any(s.text.strip() for s in answer.answer):
        raise BadInput("the answer has no sentence to evaluate")
    if (
        body.nuggets is None
        and body.segments is None
        and body.index is None
        and body.gold_answers is None
        and not body.geval
    ):
        raise BadInput("nothing to score: give nuggets, segments (or an index), gold_answers and/or geval")
    if body.segments is not None and body.index is not None:
        raise BadInput("give the cited segments' text (segments) or an index to look them up in, not both")
    if len(answer.topic) > max_query_chars:
        raise BadInput(f"topic has {len(answer.topic):,} characters; the limit is {max_query_chars:,}", 413)
    citations = sum(len(s.citations) for s in answer.answer)
    sizes = {
        "answer sentences": (len(answer.answer), MAX_SENTENCES),
        "citations": (citations, MAX_CITATIONS),
        "references": (len(answer.references), MAX_CITATIONS),
        "nuggets": (len(body.nuggets or []), MAX_NUGGETS),
        "segments": (len(body.segments or {}), MAX_SEGMENTS),
        "gold answers": (len(body.gold_answers or []), MAX_GOLD),
    }
    for what, (n, limit) in sizes.items():
        if n > limit:
            raise BadInput(f"{n:,} {what}; the limit is {limit:,}", 413)
    if body.nuggets is not None and not body.nuggets:
        raise BadInput("nuggets is empty: give at least one, or leave it out")
    if body.gold_answers is not None and not any(g.strip() for g in body.gold_answers):
        raise BadInput("gold_answers has no non-empty answer")
    for docid, text in (body.segments or {}).items():
        if len(text) > max_segment_chars:
            raise BadInput(
                f"segment {docid[:64]!r} has {len(text):,} characters; the limit is {max_segment_chars:,}", 413
            )
    chars = (
        sum(len(s.text) for s in answer.answer)
        + sum(len(n.text) for n in body.nuggets or [])
        + sum(len(t) for t in (body.segments or {}).values())
        + sum(map(len, body.gold_answers or []))
    )
    if chars > MAX_CHARS:
        raise BadInput(f"{chars:,} characters of text to judge; the limit is {MAX_CHARS:,}", 413)


@router.post("/evaluate", response_model=EvaluateOut, responses=errors(400, 404, 413, 422, 502, 503, 504))
async def evaluate(
    body: EvaluateBody, http: HttpRequest, settings: SettingsDep, generation: GenerationDep, retrieval: RetrievalDep
) -> EvaluateOut:
    """Judge one answer against its nuggets, the segments it cites and/or gold answers. 404: an unknown judge
    or index; 422: a judge that is not an LLM or is unavailable; 502/504: the judge's backend failed or did
    not answer in time (judgments made before are cached)."""
    import anyio.to_thread

    from ragnarok.judge.answers import Answer, SegmentText, retriever_segments
    from ragnarok.judge.evalrag import judge_topic
    from ragnarok.judge.nuggets import Nugget, TopicNuggets
    from ragnarok.judge.service import Watched, make_judge
    from ragnarok.service.retrieval_service import source_kind
    from ragnarok.stages.retrieve.lucene import LuceneRetriever

    _bounds(body, settings.max_segment_chars, settings.max_query_chars)
    start = time.perf_counter()
    try:  # may probe the judge's backend (bounded by its own timeouts): in a thread
        judge = await anyio.to_thread.run_sync(make_judge, settings, body.judge, generation, http.app.state.judge_cache)
    except ValueError as exc:  # a generator that is not an LLM
        raise BadInput(str(exc)) from None
    if body.geval and judge.proxy:
        raise BadInput("geval needs an LLM judge (name one in `judge`); the proxy judge gives no G-Eval scores")
    if not judge.proxy:  # the judge's worst case: every nugget batch, citation and criterion asked twice
        citations = (
            sum(len(s.citations) for s in body.answer.answer)
            if body.segments is not None or body.index is not None
            else 0
        )
        judge_name = body.judge or settings.judge
        await reserve(
            http, evaluate_cost(judge_name, len(body.nuggets or []), citations, body.geval, generation.configs)
        )
    lookup: SegmentText | None = None
    if body.segments is not None:
        lookup = body.segments.get
    elif body.index is not None:
        # an unknown index is a 404 naming the known ones; opening it may start Java: in a thread
        retriever = await anyio.to_thread.run_sync(retrieval.get, "bm25", body.index)
        if source_kind(retrieval.sources()[body.index]) != "local" or not isinstance(retriever, LuceneRetriever):
            raise BadInput(f"index {body.index!r} is not a local Lucene index: give the segments' text instead")
        lookup = retriever_segments(retriever)
    missing: set[str] = set()

    def segments(docid: str) -> str | None:
        text = lookup(docid) if lookup is not None else None
        if text is None:
            missing.add(docid)
        return text

    answer = Answer(
        body.answer.topic_id,
        body.answer.topic,
        [(s.text, list(s.citations)) for s in body.answer.answer],
        list(body.answer.references),
    )
    nuggets = (
        None
        if body.nuggets is None
        else TopicNuggets(
            qid=answer.qid,
            query=answer.query,
            nuggets=[Nugget(text=n.text, importance=n.importance) for n in body.nuggets],
        )
    )
    gold = [g for g in body.gold_answers or [] if g.strip()] or None
    watched = Watched(judge)
    inflight: InFlight = http.app.state.inflight
    cited = segments if lookup is not None else None

    def work():  # type: ignore[no-untyped-def]
        return judge_topic(watched, answer, nuggets, gold, cited, body.geval)  # type: ignore[arg-type]

    guard = guard_of(judge)  # an LLM judge: a thread of its backend's share, not of the default pool
    with inflight.token() as token:
        result, _ = await run_watched(
            work,
            token,
            timeout_s=settings.judge_timeout_s,
            disconnected=http.is_disconnected,
            limiter=guard.callers if guard else None,
        )
    labels = result.labels or [None] * len(result.nuggets)
    return EvaluateOut(
        judge=judge.describe(),
        proxy=judge.proxy,
        scores=result.scores,
        nuggets=[
            AssignedNugget(text=n.text, importance=n.importance, assignment=label)
            for n, label in zip(result.nuggets, labels)
        ],
        support=result.support,
        missing_segments=sorted(missing),
        failed=result.failed,
        judgments=judge.stats.judged,
        cached=judge.stats.cached,
        ms=(time.perf_counter() - start) * 1000,
    )
