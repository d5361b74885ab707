"""Adversarial and paraphrase families for the proxy judge's nugget rules, built by templates from
the demo topics' nuggets (``topics/eval/demo.nuggets.jsonl``) and judge-dev's gold answers, plus the answers
written by hand in ``bench/data/judge_families_written.jsonl`` (paraphrases, nuggets with their own negation,
the question's subject swapped).

Kinds (the score each should get): ``denial`` (each nugget wrapped in a denial that avoids "not": 0),
``contradiction`` (each nugget stated, then its own negation: 0), ``empty`` (the nuggets' terms in sentences
that assert nothing: a question, a "whether"/"if" clause, a report of what people say or ask: 0), ``swap``
(names and values swapped between the topic's nuggets; the nuggets without one stay stated: low), ``stated``
(each nugget stated as a sentence: 1), ``paraphrase`` (written by hand: 1), ``negation_nugget`` (a nugget with
its own negation: the gold sentence 1, the sentence behind "It is not true that" 0, the flipped fact 0),
``subject`` (the question's own subject swapped: 0; the right one: 1), ``value`` (a nugget's value --
``None``, an exception, a quoted literal, a unit, returns/raises -- replaced by another of its class: 0; the
right one: 1).

Topics are split: ``DEV`` (demo-01 .. demo-12, what the rules were tuned on) and the rest held out. Run with
``python bench/bench_judge_dev.py --families``."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUGGETS = ROOT / "topics" / "eval" / "demo.nuggets.jsonl"
WRITTEN = ROOT / "bench" / "data" / "judge_families_written.jsonl"
DEV = (
    {f"demo-{i:02d}" for i in range(1, 13)}
    | {f"neg-{i:02d}" for i in range(1, 6)}
    | {"subj-01", "subj-02"}
    | {f"val-{i:02d}" for i in range(1, 5)}
)
DENIALS = (
    "It is a myth that {}.",
    "It is false that {}.",
    "The idea that {} is a misconception.",
    "Contrary to popular belief, it is untrue that {}.",
    "It would be wrong to claim that {}.",
    "It is a common misconception that {}.",
)
NEGATIONS = (
    "{}. It is not true that {}.",
    "{}. However, it is not the case that {}.",
    "{}, although in fact it is not true that {}.",
)
EMPTY = (
    "Whether {} is a question that comes up often.",
    "People often ask whether {}.",
    "Some say that {}.",
    "It is unclear if {}.",
    "Is it really the case that {}?",
    "If {}, the documentation would say so.",
    "Many developers wonder whether {}.",
)
_CODE = re.compile(
    r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+(?:\(\))?|\w+\s*=\s*\S+|[A-Za-z_]+_[A-Za-z_]+|[a-z]+[A-Z]\w*|"
    r"[A-Z][a-z]+[A-Z]\w*"
)


@dataclass(frozen=True)
class Case:
    kind: str
    qid: str
    query: str
    answer: str
    nuggets: tuple[tuple[str, str], ...]  # (text, importance)
    expect: tuple[str, ...]  # the label each nugget should get

    @property
    def held_out(self) -> bool:
        return self.qid not in DEV


_IMPERATIVE = re.compile(r"^(?:use|open|create|subclass|call|pass|decorate)\b")


def _plain(word: str) -> bool:
    return word.isalpha() and word[1:].islower()


def _clause(nugget: str) -> str:
    """The nugget as a clause to embed ("use X" -> "you should use X"; code keeps its case)."""
    first = nugget.split()[0]
    text = nugget[0].lower() + nugget[1:] if _plain(first) else nugget
    return "you should " + text if _IMPERATIVE.match(text) else text


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] if _plain(text.split()[0]) else text


def _topics() -> list[dict]:
    return [json.loads(line) for line in NUGGETS.read_text().splitlines() if line.strip()]


def _swap(nuggets: list[str]) -> list[str] | None:
    """Each nugget's first name or value replaced by the next named nugget's (a rotation), or None when fewer
    than two nuggets name one."""
    named = [(i, m.group(0)) for i, n in enumerate(nuggets) for m in [_CODE.search(n)] if m]
    if len(named) < 2 or len({name for _, name in named}) < 2:
        return None
    out = list(nuggets)
    for k, (i, name) in enumerate(named):
        other = named[(k + 1) % len(named)][1]
        if other != name:
            out[i] = nuggets[i].replace(name, other, 1)
    return out


def cases() -> Iterator[Case]:
    written = [json.loads(line) for line in WRITTEN.read_text().splitlines() if line.strip()]
    topics = {t["qid"]: t for t in _topics()}
    for n, topic in enumerate(topics.values()):
        texts = [x["text"] for x in topic["nuggets"]]
        nuggets = tuple((x["text"], x["importance"]) for x in topic["nuggets"])
        none = ("not_support",) * len(texts)

        def case(kind: str, sentences: list[str], expect: tuple[str, ...] = none) -> Case:
            return Case(kind, topic["qid"], topic["query"], " ".join(sentences), nuggets, expect)

        yield case("stated", [_sentence(t) + "." for t in texts], ("support",) * len(texts))
        yield case("denial", [DENIALS[(n + k) % len(DENIALS)].format(_clause(t)) for k, t in enumerate(texts)])
        yield case(
            "contradiction",
            [NEGATIONS[(n + k) % len(NEGATIONS)].format(_sentence(t), _clause(t)) for k, t in enumerate(texts)],
        )
        yield case("empty", [EMPTY[(n + k) % len(EMPTY)].format(_clause(t)) for k, t in enumerate(texts)])
        swapped = _swap(texts)
        if swapped:
            yield case(
                "swap",
                [_sentence(t) + "." for t in swapped],
                tuple("support" if a == b else "not_support" for a, b in zip(texts, swapped)),
            )
    judge_dev = ROOT.parent / "shared" / "data" / "judge-dev" / "nugget_labels.jsonl"
    if judge_dev.exists():  # judge-dev's own gold and paraphrase answers, split the same way
        from ragnarok.judge.answers import read_answers

        runs = {v: read_answers(judge_dev.parent / "runs" / f"{v}.jsonl") for v in ("gold", "paraphrase")}
        for line in judge_dev.read_text().splitlines():
            row = json.loads(line) if line.strip() else {}
            if row.get("variant") in runs:
                yield Case(
                    "judge-dev " + row["variant"],
                    row["qid"],
                    row["query"],
                    runs[row["variant"]][row["qid"]].text,
                    tuple((x["text"], x["importance"]) for x in row["nuggets"]),
                    tuple(x["assignment"] for x in row["nuggets"]),
                )
    for row in written:
        topic = topics.get(row["qid"], {"qid": row["qid"], "query": row.get("query", "")})
        nuggets = (
            tuple((x["text"], x["importance"]) for x in topic["nuggets"])
            if "nuggets" in topic
            else tuple((t, "vital") for t in row["nuggets"])
        )
        full, none = ("support",) * len(nuggets), ("not_support",) * len(nuggets)
        query = row.get("query", topic["query"])
        if row["kind"] == "paraphrase":
            yield Case("paraphrase", row["qid"], query, row["answer"], nuggets, full)
        elif row["kind"] == "negation_nugget":
            yield Case("negation_nugget", row["qid"], query, row["answer"], nuggets, full)
            yield Case(
                "negation_nugget_denied",
                row["qid"],
                query,
                "It is not true that " + _clause(row["answer"]),
                nuggets,
                none,
            )
            yield Case("negation_nugget_flipped", row["qid"], query, row["flipped"], nuggets, none)
        elif row["kind"] == "value":
            yield Case("value_right", row["qid"], query, row["answer"], nuggets, full)
            yield Case("value_swapped", row["qid"], query, row["swapped"], nuggets, none)
        elif row["kind"] == "subject":
            yield Case("subject_swapped", row["qid"], query, row["answer"], nuggets, none)
            yield Case("subject_right", row["qid"], query, row["right"], nuggets, full)


def score(judge, selected: list[Case]) -> dict[str, dict[str, tuple[float, float, int]]]:  # type: ignore[no-untyped-def]
    """Per kind, for ``dev`` and ``held-out`` topics: (mean ``all`` judged, mean ``all`` expected, answers)."""
    from ragnarok.judge.nuggets import Nugget, nugget_scores

    sums: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for c in selected:
        labels = judge.assign(c.query, c.answer, [t for t, _ in c.nuggets])
        ours = nugget_scores(
            [Nugget(text=t, importance=i, assignment=lab or "not_support") for (t, i), lab in zip(c.nuggets, labels)]
        )["all"]
        theirs = nugget_scores(
            [Nugget(text=t, importance=i, assignment=lab) for (t, i), lab in zip(c.nuggets, c.expect)]
        )["all"]
        sums[(c.kind, "held-out" if c.held_out else "dev")].append((ours, theirs))
    out: dict[str, dict[str, tuple[float, float, int]]] = defaultdict(dict)
    for (kind, split), xs in sorted(sums.items()):
        out[kind][split] = (sum(o for o, _ in xs) / len(xs), sum(t for _, t in xs) / len(xs), len(xs))
    return out


def report(scores: dict[str, dict[str, tuple[float, float, int]]]) -> str:
    lines = ["| family | expected | dev topics | held-out topics |", "|---|---|---|---|"]
    for kind, splits in scores.items():
        cells = [f"{splits[s][0]:.3f} (n={splits[s][2]})" if s in splits else "-" for s in ("dev", "held-out")]
        expected = next(iter(splits.values()))[1]
        lines.append(f"| {kind} | {expected:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    from ragnarok.judge.proxy import ProxyJudge

    print(report(score(ProxyJudge(), list(cases()))))


if __name__ == "__main__":
    main()
