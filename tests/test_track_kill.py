"""A run killed with SIGKILL at random moments, then resumed: exactly one valid line per topic."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from fakes import flaky_openai_app
from servers import serve_app

from ragnarok.core.topics import read_tsv
from ragnarok.track.validate import validate

ROOT = Path(__file__).resolve().parent.parent


def complete_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_sigkill_mid_run_then_resume(demo_settings, tmp_path):
    out = tmp_path / "run.jsonl"
    topics = read_tsv(ROOT / "topics" / "demo.tsv")
    with serve_app(flaky_openai_app()) as url:
        env = {
            **os.environ,
            "RAGNAROK_DATA_DIR": str(demo_settings.data_dir),
            "RAGNAROK_GENERATORS": json.dumps(
                [
                    {
                        "name": "slow200",
                        "backend": "openai",
                        "base_url": f"{url}/v1",
                        "model": "fixed-200ms",
                        "max_concurrency": 8,
                    }
                ]
            ),
        }
        cmd = [
            sys.executable,
            "scripts/run_trec.py",
            "--topics",
            "demo",
            "--pipeline",
            "bm25@20 | slow200",
            "--run-id",
            "killed",
            "--output",
            str(out),
            "--concurrency",
            "4",
            "--no-progress",
        ]
        rng, kills, seen = random.Random(20241122), 0, []
        for _ in range(3):
            before = complete_lines(out)
            proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 180
            while complete_lines(out) <= before and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.4))  # somewhere among the topics in flight
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
            proc.wait(timeout=30)
            proc.stderr.close()
            seen.append(complete_lines(out))
        final = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert final.returncode == 0, final.stderr[-2000:]
    assert kills >= 2 and seen[0] < len(topics), (kills, seen)  # it really was cut off mid-run
    assert seen == sorted(seen)  # nothing written was lost
    assert "already done" in final.stderr and f"{len(topics) - seen[-1]} topics written" in final.stderr
    data = out.read_bytes()
    assert data.endswith(b"\n")
    ids = [json.loads(line)["topic_id"] for line in data.splitlines()]
    assert sorted(ids) == sorted(t.qid for t in topics)  # each topic exactly once
    result = validate(out, {t.qid: t.text for t in topics})
    assert result.ok and not result.warnings, [str(p) for p in result.problems]
