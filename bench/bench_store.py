"""What the sentence store costs to build: the first N segments of a Lucene index encoded into a dense
index without and with its sentence store, twice each, and the store's size.

    RAGNAROK_DATA_DIR=/tmp/bench-data python bench/bench_store.py [--segments 500] [--index DIR]

``--index`` defaults to the demo index in ``RAGNAROK_DATA_DIR`` (built first when missing). Printed: seconds,
segments/s and the store's bytes per build; the ratio of the two is the store's build cost.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.stages.retrieve.dense import shared_encoder  # noqa: E402
from ragnarok.stages.retrieve.dense_build import build_dense_index, segments_from_lucene  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=500)
    ap.add_argument("--index", type=Path)
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    index = args.index or ensure_demo_index(
        Settings(data_dir=Path(os.environ.get("RAGNAROK_DATA_DIR", ROOT / ".bench-data")))
    )
    items = list(itertools.islice(segments_from_lucene(index, with_segment=True), args.segments))
    encoder = shared_encoder("minilm")
    encoder.encode(["warm up"])
    print(f"{len(items)} segments of {index}; encoder {encoder.backend_name}; load {os.getloadavg()[0]:.1f}")
    seconds: dict[bool, list[float]] = {False: [], True: []}
    for store in (False, True, False, True):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "dense"
            start = time.perf_counter()
            build_dense_index(iter(items), out, sentence_store=store)
            seconds[store].append(time.perf_counter() - start)
            size = sum(f.stat().st_size for f in (out / "sentences").iterdir()) if store else 0
        print(
            f"  store={store!s:<5} {seconds[store][-1]:6.1f} s  {len(items) / seconds[store][-1]:5.1f} segments/s"
            f"  store {size:,} bytes ({size / len(items):,.0f} per segment)",
            flush=True,
        )
    print(f"with the store / without: {min(seconds[True]) / min(seconds[False]):.2f}x the build time")


if __name__ == "__main__":
    main()
