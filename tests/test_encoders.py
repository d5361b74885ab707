"""The dense encoder backends (ragnarok/retrieve/encoders.py): the ONNX export of the packaged MiniLM gives the
PyTorch vectors within float32 rounding, so the same rankings, on a small fixture."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from test_dense import DOCS, PARAPHRASES

from ragnarok.retrieve.dense import Encoder
from ragnarok.retrieve.encoders import NotExportableError, load_backend

TEXTS = [f"{title}\n{body}" for _, title, body in DOCS]
QUERIES = [q for q, _ in PARAPHRASES] + ["x", "The gzip module provides a simple interface. " * 60]  # > 256 tokens


def torch_vectors(texts: list[str], queries: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's vectors, computed in a child process: onnxruntime and PyTorch running models in turn in one
    process have crashed here (a process uses one backend)."""
    code = ("import json, sys; from ragnarok.retrieve.dense import Encoder; e = Encoder('minilm', backend='torch');"
            " t, q = json.load(sys.stdin); print(json.dumps([e.encode(t).tolist(), e.encode(q, query=True).tolist()]))")
    out = subprocess.run([sys.executable, "-c", code], input=json.dumps([texts, queries]), capture_output=True,
                         text=True, timeout=600, check=True).stdout
    docs, queries_ = json.loads(out.strip().splitlines()[-1])
    return np.array(docs, dtype=np.float32), np.array(queries_, dtype=np.float32)


@pytest.mark.slow
def test_onnx_and_torch_give_the_same_vectors_and_rankings():
    onnx = Encoder("minilm", backend="onnx")
    docs, queries = onnx.encode(TEXTS), onnx.encode(QUERIES, query=True)
    assert onnx.backend_name == "onnx" and docs.shape == (len(TEXTS), 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    torch_docs, torch_queries = torch_vectors(TEXTS, QUERIES)
    assert np.abs(docs - torch_docs).max() < 1e-4 and np.abs(queries - torch_queries).max() < 1e-4
    onnx_rank, torch_rank = np.argsort(-queries @ docs.T, axis=1), np.argsort(-torch_queries @ torch_docs.T, axis=1)
    for row in range(len(QUERIES)):  # the same top 5 (ties aside: none here), and the expected segment first
        assert list(onnx_rank[row, :5]) == list(torch_rank[row, :5])
    ids = [d for d, _, _ in DOCS]
    for row, (_, expected) in enumerate(PARAPHRASES):
        assert ids[onnx_rank[row, 0]] + "#0_0" == expected


def test_backend_choice(tmp_path):
    with pytest.raises(ValueError, match="encoder backend must be one of"):
        load_backend("whatever", "tensorrt", tmp_path)
    (tmp_path / "config.json").write_text("{}")  # a model directory without a tokenizer.json
    with pytest.raises(NotExportableError, match="tokenizer.json"):
        load_backend(str(tmp_path), "onnx", tmp_path)
