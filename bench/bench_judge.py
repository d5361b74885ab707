"""Judging RAG runs on the demo topics: nugget scores (proxy judge and an LLM judge), citation support and
reference metrics per run; the proxy judge's agreement with the LLM judge's labels; the cache's speed-up.

    python bench/bench_judge.py RUN.jsonl [RUN.jsonl ...] --judge smollm2-server --llm-topics 8

Runs are answer files (``ragnarok run``). Nuggets and references: ``topics/eval/``. The LLM judge is any
configured generator (RAGNAROK_GENERATORS); it judges the first ``--llm-topics`` topics of the first run
twice (the second time from the cache, in a fresh cache file), and with ``--llm-all`` those of every run."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ragnarok.core.settings import Settings
from ragnarok.judge.answers import lucene_segments, read_answers
from ragnarok.judge.cache import JudgeCache
from ragnarok.judge.evalrag import evaluate_run
from ragnarok.judge.llm import LLMJudge
from ragnarok.judge.nuggets import read_nuggets
from ragnarok.judge.proxy import ProxyJudge
from ragnarok.judge.reference import read_references
from ragnarok.judge.service import make_judge

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = (
    "strict_vital",
    "vital",
    "strict_all",
    "all",
    "support_precision",
    "support_recall",
    "rouge_l",
    "bleu",
    "chrf",
    "meteor",
    "token_f1",
    "semscore",
)


def row(name: str, judge: str, result) -> str:  # type: ignore[no-untyped-def]
    means = result.means(COLUMNS)
    cells = [f"{means[c].mean:.3f}" if c in means else "–" for c in COLUMNS]
    return f"| {name} | {judge} | {len(result.topics)} | " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--judge", default=None, help="A configured LLM generator.")
    parser.add_argument("--llm-topics", type=int, default=8)
    parser.add_argument("--llm-support", action="store_true", help="The LLM judge also judges citations.")
    parser.add_argument(
        "--llm-all",
        action="store_true",
        help="The LLM judge judges every run (first "
        "--llm-topics topics each; cached in DATA_DIR/bench-judgments.db), not only the first.",
    )
    parser.add_argument(
        "--skip-proxy",
        action="store_true",
        help="Only the LLM judge (and the agreement with "
        "the proxy's labels, judged again here without support and references).",
    )
    parser.add_argument("--nuggets", type=Path, default=ROOT / "topics/eval/demo.nuggets.jsonl")
    parser.add_argument("--references", type=Path, default=ROOT / "topics/eval/demo.references.jsonl")
    args = parser.parse_args()
    settings = Settings()
    nuggets, refs = read_nuggets(args.nuggets), read_references(str(args.references))
    from ragnarok.collection.demo_index import ensure_demo_index

    segments = lucene_segments(ensure_demo_index(settings))
    print("| run | judge | topics | " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * (len(COLUMNS) + 3))
    proxy = ProxyJudge()
    proxy_results = {}
    for path in args.runs if not args.skip_proxy else []:
        answers = {q: a for q, a in read_answers(path).items() if q in nuggets}
        start = time.perf_counter()
        result = evaluate_run(
            path.stem, answers, proxy, nuggets=nuggets, segments=segments, references=refs, concurrency=2
        )
        proxy_results[path.stem] = result
        print(row(path.stem, f"proxy ({time.perf_counter() - start:.0f} s)", result), flush=True)
    if not args.judge:
        return
    base = make_judge(settings, args.judge)
    assert isinstance(base, LLMJudge)
    first = args.runs[0]
    answers = dict(sorted((q, a) for q, a in read_answers(first).items() if q in nuggets)[: args.llm_topics])
    with tempfile.TemporaryDirectory() as tmp:
        timings = []
        for _ in range(2):
            judge = LLMJudge(base.name, base.complete, JudgeCache(Path(tmp) / "judgments.db"))
            start = time.perf_counter()
            result = evaluate_run(
                first.stem,
                answers,
                judge,
                nuggets=nuggets,
                segments=segments if args.llm_support else None,
                concurrency=1,
            )
            timings.append(time.perf_counter() - start)
            print(row(first.stem, f"{args.judge} ({timings[-1]:.1f} s; {judge.stats})", result), flush=True)
    llm_results = {first.stem: result}
    for path in args.runs[1:] if args.llm_all else []:  # the other runs, the same number of topics each
        answers = dict(sorted((q, a) for q, a in read_answers(path).items() if q in nuggets)[: args.llm_topics])
        judge = LLMJudge(base.name, base.complete, JudgeCache(settings.data_dir / "bench-judgments.db"))
        start = time.perf_counter()
        llm_results[path.stem] = evaluate_run(path.stem, answers, judge, nuggets=nuggets, concurrency=1)
        print(
            row(
                path.stem, f"{args.judge} ({time.perf_counter() - start:.1f} s; {judge.stats})", llm_results[path.stem]
            ),
            flush=True,
        )
    same = total = same_support = failed = labels = 0
    for name, llm_result in llm_results.items():
        if name not in proxy_results:
            answers = {
                q: a
                for q, a in read_answers(next(p for p in args.runs if p.stem == name)).items()
                if q in llm_result.topics
            }
            proxy_results[name] = evaluate_run(name, answers, proxy, nuggets=nuggets, concurrency=1)
        for qid, topic in llm_result.topics.items():
            for llm, px in zip(topic.labels, proxy_results[name].topics[qid].labels):
                labels += 1
                if llm is None:
                    failed += 1
                    continue
                total += 1
                same += llm == px
                same_support += (llm == "not_support") == (px == "not_support")
    print(
        f"\nproxy vs {args.judge} on {total} nugget labels both gave ({len(llm_results)} runs, "
        f"{sum(len(r.topics) for r in llm_results.values())} topics; {failed} of {labels} labels "
        f"{args.judge} could not give): "
        + (f"{same / total:.1%} same label, {same_support / total:.1%} same support/no-support" if total else "-")
    )
    print(f"cache: first run {timings[0]:.1f} s, second {timings[1]:.3f} s: {timings[0] / timings[1]:.0f}x faster")


if __name__ == "__main__":
    main()
