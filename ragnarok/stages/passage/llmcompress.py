"""The LLM compressor: a generator condenses the top k segments for the query, over the AG service's
``POST /v1/write`` (each call cached there per generator, prompt and input).

``llmcompress:GEN[:MODE]@k`` with three modes: ``select`` keeps each segment's helpful sentences verbatim,
``refine`` and ``tree_summarize`` (LlamaIndex's) hand on one summary under the best segment's id, so citations
stay valid references. Work is bounded in calls and time.

Design notes: docs/internals/stages.md.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

from ragnarok.core.registry import ComponentArgumentError
from ragnarok.core.trace import StageError
from ragnarok.core.types import Candidate, Request
from ragnarok.runtime.quoting import quote
from ragnarok.stages.passage.base import Detail, StageContext, change
from ragnarok.stages.passage.compress import _with_text, sentences

MODES = ("select", "refine", "tree_summarize")
#: Text handed to the generator in one call: segments packed in rank order, a longer segment cut.
CHUNK_CHARS = 3_000
#: Summaries merged by one call at each level of the tree.
FAN_IN = 4
MAX_CALLS = 16
DEADLINE_S = 600.0
#: What one summary may be: tokens the generator writes, characters kept.
SUMMARY_MAX_TOKENS = 128
MAX_SUMMARY_CHARS = 2_000
#: Bounds of one ``POST /v1/write`` summarising call (texts, characters of texts + summary in all).
MAX_WRITE_TEXTS = 8
MAX_WRITE_CHARS = 12_000

Messages = list[dict[str, str]]
_SYSTEM = (
    "You condense passages for a question. Keep only what the passages say that helps answer the "
    "question, in plain sentences. Add nothing the passages do not say."
)


def summarize_messages(query: str, texts: list[str]) -> Messages:
    """Summarise ``texts`` (segments or summaries) for ``query``."""
    body = "\n\n".join(" ".join(t.split()) for t in texts)
    return [
        {"role": "system", "content": _SYSTEM},
        {
            "role": "user",
            "content": f"Question: {query}\n\nPassages:\n{body}\n\n"
            "Summary of what the passages say that helps answer the question:",
        },
    ]


def refine_messages(query: str, summary: str, text: str) -> Messages:
    """Rewrite the running ``summary`` with what ``text`` adds for ``query``."""
    return [
        {"role": "system", "content": _SYSTEM},
        {
            "role": "user",
            "content": f"Question: {query}\n\nSummary so far:\n{' '.join(summary.split())}\n\n"
            f"New passage:\n{' '.join(text.split())}\n\n"
            "Rewrite the summary so that it also keeps what the new passage says that "
            "helps answer the question. If the new passage adds nothing, repeat the "
            "summary unchanged.\nSummary:",
        },
    ]


def parse_summary(raw: str) -> str:
    """The summary a model wrote: reasoning blocks dropped, whitespace collapsed, at most
    ``MAX_SUMMARY_CHARS`` characters (cut at a word); possibly empty."""
    text = " ".join(re.sub(r"<think>.*?</think>", " ", raw, flags=re.DOTALL).split())
    if len(text) > MAX_SUMMARY_CHARS:
        text = text[:MAX_SUMMARY_CHARS].rsplit(" ", 1)[0]
    return text


@dataclass
class Chunk:
    text: str
    ids: list[str]


def pack(candidates: list[Candidate], budget: int = CHUNK_CHARS) -> tuple[list[Chunk], int]:
    """Segments in rank order packed into chunks of at most ``budget`` characters (one segment longer than
    that is cut to it); also the number of characters cut."""
    chunks: list[Chunk] = []
    cut = 0
    for c in candidates:
        text = " ".join((c.doc.segment or "").split())
        if not text:
            continue
        if len(text) > budget:
            cut += len(text) - budget
            text = text[:budget]
        if chunks and len(chunks[-1].text) + 2 + len(text) <= budget:
            chunks[-1].text += "\n\n" + text
            chunks[-1].ids.append(c.docid)
        else:
            chunks.append(Chunk(text, [c.docid]))
    return chunks, cut


def tree_calls(leaves: int, fan_in: int = FAN_IN) -> int:
    """Generator calls a tree over ``leaves`` chunks makes: one per chunk, then one per group at each level."""
    calls, level = leaves, leaves
    while level > 1:
        level = math.ceil(level / fan_in)
        calls += level
    return calls


@dataclass
class _Calls:
    """The generator calls one request made (counted against the cap) and how many came from the cache."""

    made: int = 0
    cached: int = 0
    ms: list[float] = field(default_factory=list)


@dataclass
class LLMCompress:
    name: str = "llmcompress"
    generator: str = ""
    mode: str = "select"
    max_calls: int = MAX_CALLS
    deadline_s: float = DEADLINE_S

    @classmethod
    def create(cls, arg: str | None = None) -> LLMCompress:
        if not arg:
            raise ComponentArgumentError(
                f"llmcompress names its generator: llmcompress:GENERATOR[:MODE]@k (MODE: {', '.join(MODES)})"
            )
        generator, _, mode = arg.partition(":")
        if not generator:
            raise ComponentArgumentError(f"llmcompress names its generator first, got {quote(arg, 40)}")
        if mode and mode not in MODES:
            raise ComponentArgumentError(
                f"llmcompress:GENERATOR:MODE takes a mode of {', '.join(MODES)}, got {quote(mode, 40)}"
            )
        return cls(generator=generator, mode=mode or "select")

    @property
    def label(self) -> str:
        return f"passage {self.name}:{self.generator}" + ("" if self.mode == "select" else f":{self.mode}")

    async def apply(self, request: Request, k: int, ctx: StageContext) -> tuple[Request, Detail]:
        top = request.model_copy(update={"candidates": request.candidates[:k]})
        calls = _Calls()
        try:
            async with asyncio.timeout(self.deadline_s):
                if self.mode == "select":
                    out, extra = await self._select(top, ctx, calls)
                else:
                    out, extra = await self._summarize(top, ctx, calls)
        except TimeoutError:
            raise StageError(
                self.label,
                504,
                f"{self.mode} did not finish within {self.deadline_s:g} s ({calls.made} generator calls made)",
            ) from None
        return out, {
            **change(top, out),
            "mode": self.mode,
            **extra,
            "calls": calls.made,
            "cached": calls.cached,
            "llm_ms": round(sum(calls.ms), 1),
        }

    async def _write(self, ctx: StageContext, calls: _Calls, fields: dict[str, Any]) -> dict[str, Any]:
        calls.made += 1
        start = time.perf_counter()
        answer = await ctx.write({"generator": self.generator, "query": ctx.topic.text, **fields})
        calls.ms.append((time.perf_counter() - start) * 1000)
        calls.cached += bool(answer.get("cached"))
        return answer

    async def _select(self, top: Request, ctx: StageContext, calls: _Calls) -> tuple[Request, Detail]:
        split = [sentences(c.doc.segment or "") for c in top.candidates]
        asked = [i for i, s in enumerate(split) if s][: self.max_calls]
        answers = dict(
            zip(
                asked,
                await asyncio.gather(
                    *(self._write(ctx, calls, {"task": "select", "sentences": split[i]}) for i in asked)
                ),
            )
        )
        out_cands, dropped = [], 0
        for i, (c, sents) in enumerate(zip(top.candidates, split)):
            if i not in answers:  # no text, or past the call cap: the segment stays whole
                out_cands.append(c)
                continue
            chosen = sorted(
                {int(j) for j in answers[i].get("items", []) if str(j).isdigit() and 0 <= int(j) < len(sents)}
            )
            chosen = chosen or list(range(len(sents)))  # nothing usable picked: the segment stays whole
            dropped += len(sents) - len(chosen)
            out_cands.append(_with_text(c, [sents[j] for j in chosen]))
        skipped = sum(1 for i, s in enumerate(split) if s and i not in answers)
        return top.model_copy(update={"candidates": out_cands}), {
            "sentences_dropped": dropped,
            "segments_skipped": skipped,
        }

    async def _summarize(self, top: Request, ctx: StageContext, calls: _Calls) -> tuple[Request, Detail]:
        chunks, cut = pack(top.candidates)
        planned = (lambda n: n) if self.mode == "refine" else tree_calls
        used = len(chunks)
        while used and planned(used) > self.max_calls:
            used -= 1
        skipped = chunks[used:]
        chunks = chunks[:used]
        summary = ""
        derived: list[str] = []
        steps: list[int] = []
        if self.mode == "refine":
            for chunk in chunks:
                fields = (
                    {"task": "refine", "summary": summary, "texts": [chunk.text]}
                    if summary
                    else {"task": "summarize", "texts": [chunk.text]}
                )
                new = parse_summary(str(((await self._write(ctx, calls, fields)).get("items") or [""])[0]))
                if new and new != summary:
                    summary = new
                    derived += chunk.ids
                steps.append(len(summary))
        elif chunks:
            level = await self._level(ctx, calls, [([c.text], c.ids) for c in chunks])
            steps.append(len(level))
            while len(level) > 1:
                groups = [level[i : i + FAN_IN] for i in range(0, len(level), FAN_IN)]
                level = await self._level(
                    ctx, calls, [([s for s, _ in g], [d for _, ids in g for d in ids]) for g in groups]
                )
                steps.append(len(level))
            if level:
                summary, derived = level[0]
        detail: Detail = {
            "chunks": len(chunks),
            "chunks_skipped": len(skipped),
            "segments_skipped": sum(len(c.ids) for c in skipped),
            "chars_cut": cut,
            "steps": steps,
            "derived_from": derived,
            "fallback": not summary,
        }
        if not summary:
            return top, detail
        best = top.candidates[0]
        doc = best.doc.model_copy(update={"segment": summary, "derived_from": derived})  # Doc keeps extra keys
        out = top.model_copy(update={"candidates": [best.model_copy(update={"doc": doc})]})
        return out, detail

    async def _level(
        self, ctx: StageContext, calls: _Calls, groups: list[tuple[list[str], list[str]]]
    ) -> list[tuple[str, list[str]]]:
        """One level of the tree: each group of texts summarised (in parallel); empty summaries dropped."""
        answers = await asyncio.gather(
            *(self._write(ctx, calls, {"task": "summarize", "texts": texts}) for texts, _ in groups)
        )
        out = []
        for (_, ids), answer in zip(groups, answers):
            if text := parse_summary(str((answer.get("items") or [""])[0])):
                out.append((text, ids))
        return out
