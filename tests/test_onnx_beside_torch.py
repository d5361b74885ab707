"""The ONNX query encoder beside PyTorch models and the JVM in one process: a shortened run of
bench/stress_onnx_torch.py in a child process (a native crash kills the child, not the test run). Four threads
at once for 20 s: ONNX single-query encodes, PyTorch MiniLM batches, a PyTorch cross-encoder reranking, BM25
searches on a LuceneSearcher; every ONNX vector must equal PyTorch's within 1e-5, and no call may fail."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_onnx_encoder_beside_torch_models_and_the_jvm_under_threads():
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "stress_onnx_torch.py"),
            "--seconds",
            "20",
            "--threads",
            "4",
            "--roles",
            "onnx,torch,lucene,rerank",
            "--order",
            "onnx,jvm,torch,rerank",
            "--fixed-queries",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    lines = proc.stdout.strip().splitlines()
    assert lines, f"no summary (exit {proc.returncode}):\n{proc.stderr[-4000:]}"
    summary = json.loads(lines[-1])
    assert proc.returncode == 0 and summary["ok"], f"{json.dumps(summary)}\n{proc.stderr[-4000:]}"
    assert summary["errors"] == 0 and summary["mismatches"] == 0
    assert all(summary["calls"].get(role, 0) > 0 for role in ("onnx", "torch", "lucene", "rerank")), summary
    assert summary["max_abs_diff"]["onnx"] <= 1e-5 and summary["max_abs_diff"]["onnx-reference"] <= 1e-5
