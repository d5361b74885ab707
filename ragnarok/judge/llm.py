"""An LLM as judge: any configured generator that can complete a chat (an OpenAI-compatible server, GPT-4o,
the embedded SmolLM2), through the AG service's backends with their deadlines and redaction.

Each judgment: the prompt's messages -> the model's text -> a parser. A malformed answer is asked again once
with the prompt's ``retry`` reminder; still malformed, it is counted as failed (None), never guessed. Results,
failures included, are cached (:class:`~ragnarok.judge.cache.JudgeCache`) under the judge's name and model,
the prompt's name and version and the inputs."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ragnarok.judge.cache import JudgeCache, judgment_key
from ragnarok.judge.nuggets import ASSIGNMENTS, MAX_NUGGETS, Nugget
from ragnarok.judge.parse import parse_choice, parse_grade, parse_labels, parse_list, parse_umbrela, parse_verdict
from ragnarok.judge.prompts import JudgePrompt, Messages, judge_prompt
from ragnarok.stages.generate.prompts import approx_tokens

T = TypeVar("T")
SUPPORT_LABELS = ("full_support", "partial_support", "no_support")
GEVAL = {  # G-Eval's four summary criteria, phrased for answers
    "coherence": "the answer is well structured and its sentences build a coherent whole",
    "consistency": "every statement in the answer is factually consistent, with no contradiction or invention",
    "fluency": "the answer is grammatical, readable and well written",
    "relevance": "the answer addresses the question and contains no irrelevant or redundant information",
}
WINDOW = 10  # nuggets per assignment/scoring call, segments per creation call (nuggetizer's window)


@dataclass
class JudgeStats:
    judged: int = 0
    cached: int = 0
    failed: int = 0
    calls: int = 0
    tokens: int = 0  # estimated (characters / 4) over prompts and answers
    defaulted: int = 0  # UMBRELA-parity grades that could not be read and were set to 0, as umbrela does
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)

    def __str__(self) -> str:
        return (
            f"{self.judged} judgments ({self.cached} from the cache, {self.failed} failed"
            + (f", {self.defaulted} unreadable grades set to 0 as umbrela does" if self.defaulted else "")
            + f"), {self.calls} model calls, ~{self.tokens:,} tokens (estimated)"
        )


class LLMJudge:
    proxy = False

    def __init__(
        self,
        name: str,
        complete: Callable[[Messages], str],
        cache: JudgeCache,
        retries: int = 1,
        retry_failed: bool = False,
    ):
        self.name, self.complete, self.cache, self.retries = name, complete, cache, retries
        self.retry_failed = retry_failed  # judgments cached as failed (unreadable) are asked again
        self.stats = JudgeStats()

    def describe(self) -> str:
        return f"LLM judge {self.name}"

    def ask(self, prompt: JudgePrompt, inputs: dict[str, Any], parse: Callable[[str], T | None]) -> T | None:
        key = judgment_key(self.name, prompt.key, inputs)
        if (hit := self.cache.get(key)) is not None and not (hit[0] is None and self.retry_failed):
            self.stats.add(judged=1, cached=1, failed=hit[0] is None)
            return hit[0]
        messages = prompt.messages(**inputs)
        result: T | None = None
        raw = ""
        for attempt in range(self.retries + 1):
            raw = self.complete(messages)
            self.stats.add(calls=1, tokens=sum(approx_tokens(m["content"]) for m in messages) + approx_tokens(raw))
            result = parse(raw)
            if result is not None:
                break
            if attempt < self.retries:
                messages = [
                    *messages,
                    {"role": "assistant", "content": raw[:2000]},
                    {"role": "user", "content": prompt.retry.format(**inputs)},
                ]
        self.cache.put(key, self.name, prompt.key, result, raw)
        self.stats.add(judged=1, failed=result is None)
        return result

    # --- the tasks ---------------------------------------------------------------------------------------
    def assign(self, query: str, passage: str, nuggets: Sequence[str]) -> list[str | None]:
        """support / partial_support / not_support per nugget (None: failed), WINDOW nuggets per call."""
        out: list[str | None] = []
        prompt = judge_prompt("nugget_assignment")
        for start in range(0, len(nuggets), WINDOW):
            chunk = list(nuggets[start : start + WINDOW])
            labels = self.ask(
                prompt,
                {"query": query, "context": passage, "nuggets": repr(chunk), "n": len(chunk)},
                lambda text, n=len(chunk): parse_labels(text, ASSIGNMENTS, n),
            )
            out.extend(labels if labels is not None else [None] * len(chunk))
        return out

    def importance(self, query: str, nuggets: Sequence[str]) -> list[str | None]:
        out: list[str | None] = []
        prompt = judge_prompt("nugget_scoring")
        for start in range(0, len(nuggets), WINDOW):
            chunk = list(nuggets[start : start + WINDOW])
            labels = self.ask(
                prompt,
                {"query": query, "nuggets": repr(chunk), "n": len(chunk)},
                lambda text, n=len(chunk): parse_labels(text, ("vital", "okay"), n),
            )
            out.extend(labels if labels is not None else [None] * len(chunk))
        return out

    def create(self, query: str, segments: Sequence[str], max_nuggets: int = MAX_NUGGETS) -> list[Nugget]:
        """Nuggets from segments, WINDOW segments at a time, the list carried from batch to batch; then each
        labelled vital/okay. A batch whose answer cannot be read keeps the list as it was. A nugget whose
        importance cannot be read is dropped (never guessed)."""
        nuggets: list[str] = []
        prompt = judge_prompt("nugget_creation")
        for start in range(0, len(segments), WINDOW):
            context = "\n".join(f"[{i + 1}] {s}" for i, s in enumerate(segments[start : start + WINDOW]))
            found = self.ask(
                prompt,
                {
                    "query": query,
                    "context": context,
                    "nuggets": repr(nuggets),
                    "nuggets_length": len(nuggets),
                    "max_nuggets": max_nuggets,
                },
                parse_list,
            )
            if found:
                nuggets = list(dict.fromkeys(found))[:max_nuggets]
        labels = self.importance(query, nuggets)
        return [Nugget(text=text, importance=label) for text, label in zip(nuggets, labels) if label]  # type: ignore[arg-type]

    def support(self, sentence: str, passage: str) -> str | None:
        """full_support / partial_support / no_support."""

        def parse(text: str) -> str | None:
            labels = parse_labels(text, SUPPORT_LABELS, 1)
            return labels[0] if labels else parse_choice(text, SUPPORT_LABELS)

        return self.ask(judge_prompt("citation_support"), {"sentence": sentence, "passage": passage}, parse)

    def relevance(self, query: str, passage: str, mode: str = "umbrela") -> int | None:
        """0-3. ``umbrela`` (default): castorini/umbrela's prompt (empty system prompt) and parser -- an
        unreadable answer is graded 0, as there (counted in ``stats.defaulted``); ``strict``: our prompt and
        parser, an unreadable answer is a failure (None). The caller passes the passage the mode wants
        (umbrela: the segment alone)."""
        if mode == "strict":
            return self.ask(
                judge_prompt("umbrela_strict"),
                {"query": query, "passage": passage},
                lambda text: parse_grade(text, 0, 3),
            )
        if mode != "umbrela":
            raise ValueError(f"unknown UMBRELA mode {mode!r} (umbrela or strict)")
        found = self.ask(
            judge_prompt("umbrela"), {"query": query, "passage": passage}, lambda text: list(parse_umbrela(text))
        )
        if found is None:
            return None
        grade, readable = found
        if not readable:
            self.stats.add(defaulted=1)
        return int(grade)

    def prefer(self, query: str, answer_a: str, answer_b: str) -> str | None:
        """A, B or tie for one ordering of the two answers."""
        return self.ask(
            judge_prompt("pairwise"), {"query": query, "answer_a": answer_a, "answer_b": answer_b}, parse_verdict
        )

    def geval(self, query: str, answer: str) -> dict[str, int | None]:
        """A 1-5 score per G-Eval criterion (None: unreadable)."""
        prompt = judge_prompt("geval")
        return {
            name: self.ask(
                prompt,
                {"criterion": name, "definition": definition, "query": query, "answer": answer},
                lambda text: parse_grade(text, 1, 5),
            )
            for name, definition in GEVAL.items()
        }
