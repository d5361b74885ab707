"""How long the arena's first page takes after `ragnarok serve` starts.

    python bench/bench_arena_first_page.py [--after 0 10]

For each ``--after`` delay: a fresh ``ragnarok serve --no-dense`` on the demo index (its own process, a free
port); once ``/healthz`` answers, it waits that many seconds, then times ``GET /arena/`` (the page, with the
Gradio app's config in it) and prints both figures. ``ragnarok serve`` builds the UI in the background as it
starts; before, the first visit built it.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from servers import ragnarok_serve  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--after", type=float, nargs="+", default=[0.0, 10.0], help="seconds after /healthz")
    args = ap.parse_args()
    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR", tempfile.mkdtemp(prefix="bench-")))
    ensure_demo_index(Settings(data_dir=data_dir))
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(data_dir)}
    for after in args.after:
        start = time.monotonic()
        with ragnarok_serve(env, cwd=ROOT) as base:
            up = time.monotonic() - start
            time.sleep(after)
            t = time.monotonic()
            page = httpx.get(f"{base}/arena/", timeout=120, follow_redirects=True)
            page.raise_for_status()
            first = time.monotonic() - t
            t = time.monotonic()
            httpx.get(f"{base}/arena/", timeout=120, follow_redirects=True).raise_for_status()
            second = time.monotonic() - t
        print(
            f"/healthz after {up:.1f} s; first GET /arena/ {after:g} s later: {first:.2f} s "
            f"({len(page.content):,} bytes); the next one {second:.2f} s; load {os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
