"""How long ``ragnarok view --html`` takes on a TREC-sized pair of runs, and how long its page takes to open.

    python bench/bench_view.py [--topics ../shared/data/trec-rag/topics.rag24.test.txt] [--refs 20] \
        [--repeat 3]

Builds two synthetic 2024-format runs over the real topics (301 for 2024's test set): each topic's references
are BM25's top ``--refs`` segments of the demo index for the topic's text (so every one is looked up in Lucene
as a real run's are; one in ten replaced by a docid the index lacks), six sentences citing them, and nugget
assignments for both runs (so the page has score bars). Run B cites differently from A on every third topic.
Then times ``ragnarok view A B --assignments X --html OUT`` as a subprocess (the JVM's start included), and
the page's load in Chromium from ``file://`` to its ready marker (``body[data-ready]``), plus expanding one
topic.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from browser import chromium  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import read_topics  # noqa: E402

LABELS = ("support", "partial_support", "not_support")


def build_runs(topics_file: Path, index_dir: Path, out: Path, refs: int) -> tuple[Path, Path, Path, int]:
    from ragnarok.stages.retrieve.lucene import LuceneRetriever  # noqa: PLC0415

    bm25 = LuceneRetriever(name="bm25", source=str(index_dir))
    rng = random.Random(0)
    topics = read_topics(topics_file)
    runs: dict[str, list[dict]] = {"A": [], "B": []}
    labels = []
    for n, topic in enumerate(topics):
        docids = [d for d, _, _ in bm25.search(topic.text, refs)]
        docids = [f"msmarco_v2.1_doc_{n}_{i}#0_0" if i % 10 == 9 else d for i, d in enumerate(docids)]
        for run in runs:
            cited = docids if run == "A" or n % 3 else list(reversed(docids))
            answer = [
                {
                    "text": f"Sentence {s} of run {run} on {topic.text}, with <b>markup</b> & co.",
                    "citations": sorted(rng.sample(range(len(cited)), min(3, len(cited)))),
                }
                for s in range(6)
            ]
            runs[run].append(
                {
                    "run_id": run,
                    "topic_id": topic.qid,
                    "topic": topic.text,
                    "references": cited,
                    "response_length": 90,
                    "answer": answer,
                }
            )
            labels.append(
                {
                    "qid": topic.qid,
                    "run_id": run,
                    "nuggets": [
                        {
                            "text": f"nugget {k} of {topic.qid}",
                            "importance": "vital" if k < 4 else "okay",
                            "assignment": rng.choice(LABELS),
                        }
                        for k in range(10)
                    ],
                }
            )
    paths = []
    for run, records in runs.items():
        path = out / f"{run}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        paths.append(path)
    assignments = out / "assignments.jsonl"
    assignments.write_text("".join(json.dumps(r) + "\n" for r in labels), encoding="utf-8")
    return paths[0], paths[1], assignments, len(topics)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=Path, default=ROOT.parent / "shared/data/trec-rag/topics.rag24.test.txt")
    ap.add_argument("--refs", type=int, default=20, help="references per answer")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR", tempfile.mkdtemp(prefix="bench-")))
    settings = Settings(data_dir=data_dir)
    index_dir = ensure_demo_index(settings)
    work = Path(tempfile.mkdtemp(prefix="bench-view-"))
    a, b, assignments, topics = build_runs(args.topics, Path(index_dir), work, args.refs)
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(data_dir), "PYTHONPATH": str(ROOT)}
    page = work / "view.html"
    for _ in range(args.repeat):
        start = time.monotonic()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "ragnarok.cli",
                "view",
                str(a),
                str(b),
                "--assignments",
                str(assignments),
                "--html",
                str(page),
            ],
            env=env,
            check=True,
            capture_output=True,
        )
        print(
            f"ragnarok view --html ({topics} topics x 2 runs, {args.refs} references each): "
            f"{time.monotonic() - start:.2f} s, {page.stat().st_size / 1e6:.2f} MB; "
            f"load {os.getloadavg()[0]:.1f}"
        )
    with chromium(work / "profile") as context:
        for _ in range(args.repeat):
            tab = context.new_page()
            start = time.monotonic()
            tab.goto(page.as_uri())
            tab.wait_for_selector("body[data-ready='1']")
            wall = time.monotonic() - start
            ready = float(tab.get_attribute("body", "data-ready-ms") or "nan")
            start = time.monotonic()
            tab.locator("details.topic summary").nth(150).click()
            tab.wait_for_selector("#t-150 .cols")
            expand = time.monotonic() - start
            print(
                f"page open to ready: {wall:.2f} s (goto to the marker; the page's own clock at ready "
                f"{ready / 1000:.2f} s after navigation start); "
                f"expanding one topic {expand * 1000:.0f} ms; "
                f"load {os.getloadavg()[0]:.1f}"
            )
            tab.close()


if __name__ == "__main__":
    main()
