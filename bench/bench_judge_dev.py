"""Score a judge against labelled answers: ``judge-dev`` (../shared/data/judge-dev, 16 demo topics x 8
answer variants, gold nugget and citation-support labels).

    python bench/bench_judge_dev.py --judge proxy --judge fake-llm --cv [--record]

Per judge: nugget labels (3-class accuracy, Cohen's kappa, confusion matrix), citation-support labels (the
same), per-variant mean ``all`` beside the gold-derived one, whether the variants come out in the gold
order, the judge's goals (the speed goal on the fresh figure), and nugget judgments per second: fresh (a fresh
judge, no judgment cache, no sentence encoded yet, no rule memoised; MiniLM and nltk loaded before the clock
starts) and warm (the same judgments again in that process: vectors and rules memoised, shown only). ``--cv``:
the headline, the proxy's rule families and thresholds chosen on 3 folds of 4 topics and scored on the fourth,
with the ablation (``bench/judge_cv.py``; ``--record`` writes it too). A judge with ``prefetch`` (the
proxy) is given each section's items once, inside the clock, as ``eval-rag`` prefetches once per run: its
time counts. ``--judge`` names: ``proxy``, ``fake-llm`` (the LLM
judge's whole path -- prompts, an OpenAI-compatible HTTP server behind the generator, parsing, retry, cache --
with a scripted server that answers the gold labels, one reply in seven malformed first: it checks that the
path loses nothing, not a model), or any configured LLM generator. ``--record`` writes the kappas to
ragnarok/judge/measured.yaml, which ``eval-rag`` prints next to its scores. ``--families`` also scores each judge on
the adversarial and paraphrase families of ``bench/judge_families.py``, split into the topics the
rules were tuned on and held-out ones."""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime as dt
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from fastapi import FastAPI, Request
from judge_families import DEV  # the topics the proxy's thresholds were calibrated on

from ragnarok.judge.agreement import accuracy, cohen_kappa, confusion, record
from ragnarok.judge.answers import read_answers
from ragnarok.judge.nuggets import Nugget, nugget_scores

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "judge-dev"
NUGGET_CLASSES = ("support", "partial_support", "not_support")
SUPPORT_CLASSES = ("full", "partial", "none")
SUPPORT_NAMES = {"full_support": "full", "partial_support": "partial", "no_support": "none"}
VARIANTS = ("gold", "paraphrase", "partial", "negated", "word_list", "off_topic", "question_echo", "wrong_facts")
ADVERSARIAL = ("word_list", "negated", "off_topic", "question_echo", "wrong_facts")


def load(data: Path):  # type: ignore[no-untyped-def]
    answers = {variant: read_answers(data / "runs" / f"{variant}.jsonl") for variant in VARIANTS}
    nuggets = [json.loads(line) for line in (data / "nugget_labels.jsonl").read_text().splitlines() if line.strip()]
    support = [json.loads(line) for line in (data / "support_labels.jsonl").read_text().splitlines() if line.strip()]
    return answers, nuggets, support


def fake_llm(nugget_rows, support_rows, answers, segments):  # type: ignore[no-untyped-def]
    """An OpenAI-style ``complete(messages)`` that answers judge-dev's gold labels from the prompt's text."""
    by_nuggets = {}
    for row in nugget_rows:
        text = answers[row["variant"]][row["qid"]].text
        by_nuggets[(row["query"], text)] = {n["text"]: n["assignment"] for n in row["nuggets"]}
    by_support = {}
    for row in support_rows:
        answer = answers[row["variant"]][row["qid"]]
        for item in row["support"]:
            passage = segments(item["docid"])
            by_support[(answer.sentences[item["sentence"]][0], passage)] = item["label"] + (
                "_support" if item["label"] != "none" else ""
            )
    calls = {"n": 0}

    def complete(messages):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        prompt = messages[1]["content"]
        if calls["n"] % 7 == 0 and len(messages) == 2:
            return "I think it mostly holds."  # malformed: the judge asks again
        if "Nugget List:" in prompt:
            query = re.search(r"Search Query: (.*)\n", prompt).group(1)
            passage = prompt.split("Passage: ", 1)[1].split("\nNugget List: ", 1)[0]
            listed = ast.literal_eval(re.search(r"Nugget List: (\[.*\])\n", prompt).group(1))
            gold = by_nuggets.get((query, passage), {})
            return str([gold.get(n, "not_support") for n in listed])
        sentence = prompt.split("Statement: ", 1)[1].split("\nPassage: ", 1)[0]
        passage = prompt.split("\nPassage: ", 1)[1].rsplit("\nLabel:", 1)[0]
        label = by_support.get((sentence, passage), "none")
        return str(["no_support" if label == "none" else label])

    return complete


@contextlib.contextmanager
def fake_server(complete):  # type: ignore[no-untyped-def]
    """``complete(messages) -> text`` served as ``POST /v1/chat/completions`` (tests/servers.py's uvicorn)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from servers import serve_app

    app = FastAPI()

    @app.get("/healthz")
    def healthz() -> dict:
        return {}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict:
        text = complete((await request.json())["messages"])
        return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}

    with serve_app(app) as base:
        yield base


def make(
    name: str,
    nugget_rows,
    support_rows,
    answers,
    segments,
    cache_dir: Path,  # type: ignore[no-untyped-def]
    stack: contextlib.ExitStack,
):
    from ragnarok.judge.cache import JudgeCache

    if name == "proxy":
        from ragnarok.judge.proxy import ProxyJudge

        return ProxyJudge()
    from ragnarok.judge.service import make_judge

    if name == "fake-llm":  # served over HTTP as an OpenAI-compatible server, judged through the generator
        from ragnarok.core.settings import Settings
        from ragnarok.stages.generate.base import GeneratorConfig

        base = stack.enter_context(fake_server(fake_llm(nugget_rows, support_rows, answers, segments)))
        settings = Settings(
            data_dir=cache_dir,
            generators=[
                GeneratorConfig(
                    name="fake-llm",
                    backend="openai",
                    base_url=base + "/v1",
                    model="gold-labels",
                    timeout_s=30,
                    max_retries=0,
                )
            ],
        )
        return make_judge(settings, "fake-llm", cache=JudgeCache(cache_dir / "judgments.db"))
    from ragnarok.core.settings import Settings

    return make_judge(Settings(), name)


def evaluate(judge, answers, nugget_rows, support_rows, segments) -> dict:  # type: ignore[no-untyped-def]
    from ragnarok.judge import entail, slots, statements, support_rules, textrules
    from ragnarok.judge.proxy import cosines
    from ragnarok.stages.embed.vectors import text_vectors

    cosines(["warm"], ["up"])  # MiniLM loaded before the clock
    textrules.stem("warm")  # and nltk (its import, ~0.6 s, is a process's start-up, like MiniLM's load)
    text_vectors("minilm").clear()  # fresh: no sentence encoded, no rule worked out by an earlier judge in this process
    for module in (entail, slots, statements, support_rules, textrules):
        for value in vars(module).values():
            if hasattr(value, "cache_clear") and value is not textrules.vocabulary:
                value.cache_clear()
    gold, predicted, held_gold, held_pred = [], [], [], []
    per_variant: dict[str, list[tuple[float, float]]] = defaultdict(list)
    prefetch = getattr(judge, "prefetch", None)  # as eval-rag does: once, before judging, inside the clock
    start, cpu = (
        time.perf_counter(),
        time.process_time(),
    )  # wall, and CPU of every thread (a busy machine's fair figure)
    if prefetch is not None:
        prefetch(
            assign=[
                (row["query"], answers[row["variant"]][row["qid"]].text, [n["text"] for n in row["nuggets"]])
                for row in nugget_rows
            ]
        )
    for row in nugget_rows:
        answer = answers[row["variant"]][row["qid"]]
        labels = judge.assign(row["query"], answer.text, [n["text"] for n in row["nuggets"]])
        labels = [label or "not_support" for label in labels]
        gold += [n["assignment"] for n in row["nuggets"]]
        predicted += labels
        if row["qid"] not in DEV:
            held_gold += [n["assignment"] for n in row["nuggets"]]
            held_pred += labels
        ours = nugget_scores(
            [
                Nugget(text=n["text"], importance=n["importance"], assignment=label)
                for n, label in zip(row["nuggets"], labels)
            ]
        )["all"]
        theirs = nugget_scores(
            [Nugget(**{k: n[k] for k in ("text", "importance", "assignment")}) for n in row["nuggets"]]
        )["all"]
        per_variant[row["variant"]].append((ours, theirs))
    nugget_seconds, nugget_cpu = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()  # warm: the same judgments again (MiniLM's vectors and the rules memoised, as in a
    for row in nugget_rows:  # long-lived process that judged these texts before), no judgment cache
        judge.assign(row["query"], answers[row["variant"]][row["qid"]].text, [n["text"] for n in row["nuggets"]])
    warm_seconds = time.perf_counter() - start
    s_gold, s_pred = [], []
    start = time.perf_counter()
    if prefetch is not None:
        prefetch(
            support=[
                (answers[row["variant"]][row["qid"]].sentences[item["sentence"]][0], segments(item["docid"]))
                for row in support_rows
                for item in row["support"]
            ]
        )
    for row in support_rows:
        answer = answers[row["variant"]][row["qid"]]
        for item in row["support"]:
            label = judge.support(answer.sentences[item["sentence"]][0], segments(item["docid"]))
            s_gold.append(item["label"])
            s_pred.append(SUPPORT_NAMES.get(label or "", "none"))
    support_seconds = time.perf_counter() - start
    means = {v: (sum(o for o, _ in xs) / len(xs), sum(t for _, t in xs) / len(xs)) for v, xs in per_variant.items()}
    return {
        "judge": judge.describe(),
        "name": judge.name,
        "n": len(gold),
        "accuracy": accuracy(gold, predicted),
        "kappa": cohen_kappa(gold, predicted, NUGGET_CLASSES),
        "held_kappa": cohen_kappa(held_gold, held_pred, NUGGET_CLASSES) if held_gold else float("nan"),
        "confusion": confusion(gold, predicted, NUGGET_CLASSES),
        "s_n": len(s_gold),
        "s_accuracy": accuracy(s_gold, s_pred),
        "s_kappa": cohen_kappa(s_gold, s_pred, SUPPORT_CLASSES),
        "s_confusion": confusion(s_gold, s_pred, SUPPORT_CLASSES),
        "means": means,
        "nuggets_per_s": len(gold) / nugget_seconds,
        "nuggets_per_cpu_s": len(gold) / max(nugget_cpu, 1e-9),
        "warm_nuggets_per_s": len(gold) / max(warm_seconds, 1e-9),
        "support_per_s": len(s_gold) / max(support_seconds, 1e-9),
        "stats": str(judge.stats),
    }


def order_violations(means: dict[str, tuple[float, float]]) -> list[str]:
    """Pairs the gold scores order (by more than 0.05) that the judge's means do not order the same way."""
    out = []
    for a in VARIANTS:
        for b in VARIANTS:
            if means[a][1] > means[b][1] + 0.05 and not means[a][0] > means[b][0]:
                out.append(f"{a} !> {b}")
    return out


def goals(r: dict) -> list[tuple[str, bool]]:
    m = r["means"]
    return [
        ("kappa >= 0.6 (nugget labels)", r["kappa"] >= 0.6),
        *((f"{v} <= 0.15", m[v][0] <= 0.15) for v in ADVERSARIAL),
        ("gold >= 0.85", m["gold"][0] >= 0.85),
        ("paraphrase >= 0.7", m["paraphrase"][0] >= 0.7),
        ("gold variant order", not order_violations(m)),
        (">= 500 fresh nugget judgments/s", r["nuggets_per_s"] >= 500),
    ]


def report(results: list[dict]) -> str:
    lines = ["| | " + " | ".join(r["name"] for r in results) + " |", "|---|" + "---|" * len(results)]

    def row(label: str, cells: list[str]) -> None:
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row("nugget labels: accuracy", [f"{r['accuracy']:.3f}" for r in results])
    row("nugget labels: Cohen's κ", [f"**{r['kappa']:.3f}**" for r in results])
    row(
        "nugget labels: Cohen's κ, topics the rules were not tuned on (demo-13 .. 16)",
        [f"{r['held_kappa']:.3f}" for r in results],
    )
    row("support labels: accuracy", [f"{r['s_accuracy']:.3f}" for r in results])
    row("support labels: Cohen's κ", [f"{r['s_kappa']:.3f}" for r in results])
    for v in VARIANTS:
        row(f"mean `all`: {v} (gold {results[0]['means'][v][1]:.3f})", [f"{r['means'][v][0]:.3f}" for r in results])
    row("variant order violations", [", ".join(order_violations(r["means"])) or "none" for r in results])
    row("nugget judgments/s (fresh)", [f"{r['nuggets_per_s']:.0f}" for r in results])
    row("nugget judgments per CPU second (fresh, all threads)", [f"{r['nuggets_per_cpu_s']:.0f}" for r in results])
    row("nugget judgments/s (warm)", [f"{r['warm_nuggets_per_s']:.0f}" for r in results])
    row("support judgments/s (fresh)", [f"{r['support_per_s']:.0f}" for r in results])
    out = "\n".join(lines)
    for r in results:
        met = goals(r)
        out += f"\n\n{r['judge']}: goals met {sum(ok for _, ok in met)}/{len(met)}; not met: " + (
            ", ".join(g for g, ok in met if not ok) or "none"
        )
        out += f"\n  nugget confusion (rows gold {'/'.join(NUGGET_CLASSES)}, columns judged): {r['confusion']}"
        out += f"\n  support confusion (rows gold {'/'.join(SUPPORT_CLASSES)}): {r['s_confusion']}"
        out += f"\n  {r['stats']}"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judge", action="append", help="proxy, fake-llm or a configured LLM")
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--index", default=None, help="Lucene index with the cited segments (default: demo)")
    parser.add_argument("--segments-json", type=Path, default=None, help="docid -> text JSON instead of --index")
    parser.add_argument("--record", action="store_true", help="write the kappas to ragnarok/judge/measured.yaml")
    parser.add_argument(
        "--cv",
        action="store_true",
        help="the headline: the proxy's families and thresholds cross-validated by topic (bench/judge_cv.py)",
    )
    parser.add_argument(
        "--families",
        action="store_true",
        help="also score each judge on bench/judge_families.py's kinds (dev and held-out topics)",
    )
    args = parser.parse_args()
    answers, nugget_rows, support_rows = load(args.data)
    if args.segments_json:
        table = json.loads(args.segments_json.read_text())
        segments = table.get
    else:
        from ragnarok.core.settings import Settings
        from ragnarok.judge.answers import lucene_segments

        if args.index:
            segments = lucene_segments(args.index)
        else:
            from ragnarok.collection.demo_index import ensure_demo_index

            segments = lucene_segments(ensure_demo_index(Settings()))
        ids = {d for a in answers.values() for x in a.values() for d in x.references}
        table = {d: segments(d) for d in ids}
        segments = table.get
    results = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        for name in args.judge or ["proxy"]:
            judge = make(name, nugget_rows, support_rows, answers, segments, Path(tmp), stack)
            result = evaluate(judge, answers, nugget_rows, support_rows, segments)
            results.append(result)
            print(f"{name}: kappa {result['kappa']:.3f}", file=sys.stderr, flush=True)
            if args.record:
                record(
                    judge.name if name != "proxy" else "proxy",
                    {
                        "kappa_nuggets": round(result["kappa"], 3),
                        "kappa_support": round(result["s_kappa"], 3),
                        "judge": result["judge"],
                        "when": dt.date.today().isoformat(),
                        "set": "judge-dev",
                    },
                )
    print(report(results))
    if args.cv:
        import judge_cv  # noqa: PLC0415

        from ragnarok.judge.entail import FAMILIES

        n_rows, s_rows = judge_cv.prepared(answers, nugget_rows, support_rows, segments)
        cv = judge_cv.CrossValidation(n_rows, s_rows, FAMILIES)
        result = cv.run(lambda line: print(line, file=sys.stderr, flush=True))
        print("\n## Cross-validation by topic (4 folds of 4, bench/judge_cv.py)\n")
        print(judge_cv.report(result, FAMILIES))
        if args.record:
            folds = result["folds"]
            record(
                "proxy",
                {
                    "cv": {
                        "kappa_nuggets": round(sum(f["kappa"] for f in folds) / len(folds), 3),
                        "kappa_support": round(sum(f["s_kappa"] for f in folds) / len(folds), 3),
                        "folds": [round(f["kappa"], 3) for f in folds],
                        "judge": results[0]["judge"] if results else "",
                        "when": dt.date.today().isoformat(),
                    }
                },
            )
    if args.families:
        import judge_families  # noqa: PLC0415

        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
            for name in args.judge or ["proxy"]:
                judge = make(name, nugget_rows, support_rows, answers, segments, Path(tmp), stack)
                print(f"\n{judge.describe()}: families (mean `all`)\n")
                print(judge_families.report(judge_families.score(judge, list(judge_families.cases()))))


if __name__ == "__main__":
    main()
