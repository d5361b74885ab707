"""Battles in a row as a visitor meets them, from the server's start: how many could be voted on, and how long each
took, on a quiet machine or beside CPU hogs.

    python bench/bench_arena_visits.py [--battles 20] [--hogs 0] [--data-dir DIR]

``ragnarok serve`` starts as the README starts it (the demo index, its dense index built in the background, the
default pool: every free pipeline, the embedded SmolLM2 included) on ``--data-dir`` (the demo index is built there
first when missing). ``--hogs`` busy-loop processes start with it. As soon as the arena's page answers, one Gradio
API client (``gradio_client``, as a visitor's browser calls the same events) asks ``/battle`` for a demo topic,
then ``/vote_a``, ``--battles`` times (``RAGNAROK_ARENA_BATTLES_PER_MINUTE`` is set to ``--per-minute``, 60: the
default, 6 a minute per client address, would refuse a bench that does not stop to read). Before each battle it reads ``GET /v1/arena/pool`` (which pipelines are
paused). Printed per battle: its seconds, whether its vote was stored (the vote log's rows), its pipelines, and
its status line when the vote was not stored (or no battle was started); then how many were votable, the seconds' p50 and maximum, whether
a paused pipeline was ever drawn, and whether the server is still alive.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from servers import ragnarok_serve  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402


def last_battle(db: Path) -> tuple[str, str, str, bool]:
    """The latest battle's id, pipeline specs and whether it has a vote."""
    with sqlite3.connect(db) as conn:
        row = conn.execute(
            "SELECT b.id, b.pipeline_a, b.pipeline_b, v.battle_id IS NOT NULL FROM battles b "
            "LEFT JOIN votes v ON v.battle_id = b.id ORDER BY b.created_at DESC LIMIT 1"
        ).fetchone()
    if not row:
        return "", "", "", False
    return row[0], json.loads(row[1])["spec"], json.loads(row[2])["spec"], bool(row[3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--battles", type=int, default=20)
    ap.add_argument("--hogs", type=int, default=0, help="busy-loop processes beside the server")
    ap.add_argument("--per-minute", type=int, default=60, help="battles a client may start in a minute")
    ap.add_argument("--data-dir", type=Path, default=Path(tempfile.mkdtemp(prefix="bench-visits-")))
    args = ap.parse_args()
    from gradio_client import Client  # noqa: PLC0415 - gradio's client, installed with gradio

    ensure_demo_index(Settings(data_dir=args.data_dir))
    (args.data_dir / "arena.db").unlink(missing_ok=True)  # a fresh vote log
    topics = [t.text for t in load_topics("demo", ROOT / "topics")]
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    env = {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(args.data_dir),
        "HF_HUB_OFFLINE": "1",
        "RAGNAROK_ARENA_BATTLES_PER_MINUTE": str(args.per_minute),
    }
    rows, started, drawn_paused, seen = [], [], 0, set()
    try:
        with ragnarok_serve(env, dense=True, started=started, output=args.data_dir / "serve.log") as base:
            client = Client(f"{base}/arena/", verbose=False, httpx_kwargs={"timeout": 600})
            for i in range(args.battles):
                paused = {
                    p["spec"]
                    for p in httpx.get(f"{base}/v1/arena/pool", timeout=60).json()["pipelines"]
                    if p["state"] == "paused"
                }
                start = time.perf_counter()
                outputs = client.predict(topics[i % len(topics)], api_name="/battle")
                seconds = time.perf_counter() - start
                client.predict(api_name="/vote_a")
                battle, a, b, voted = last_battle(args.data_dir / "arena.db")
                if battle in seen:  # no battle was started
                    a = b = "(none)"
                    voted = False
                seen.add(battle)
                drawn_paused += bool({a, b} & paused)
                status = " ".join(str(outputs[3]).split())[:160]
                rows.append((seconds, voted))
                print(
                    f"battle {i + 1}: {seconds:6.1f} s, {'voted' if voted else 'NOT votable'}, {a} vs {b}"
                    + ("" if voted else f": {status}")
                    + (f" (paused then: {sorted(paused)})" if paused else ""),
                    flush=True,
                )
            alive = started[0].poll() is None and httpx.get(f"{base}/healthz", timeout=30).status_code == 200
            load = Path("/proc/loadavg").read_text().split()[0]
    finally:
        for hog in hogs:
            hog.kill()
    seconds = [s for s, _ in rows]
    print(
        f"{sum(v for _, v in rows)} of {len(rows)} battles votable; seconds p50 {statistics.median(seconds):.1f}, "
        f"max {max(seconds):.1f}; battles drawn with a paused pipeline: {drawn_paused}; server alive: {alive}; "
        f"hogs {args.hogs}, 1-min load at the end {load}"
    )


if __name__ == "__main__":
    main()
