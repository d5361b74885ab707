"""The dense encoder backends (ragnarok/stages/embed/backends.py): the ONNX export of the packaged MiniLM gives the
PyTorch vectors within float32 rounding, so the same rankings, on a small fixture."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from test_dense import DOCS, PARAPHRASES

from ragnarok.stages.embed.backends import NotExportableError, gpu_driver, load_backend
from ragnarok.stages.retrieve.dense import Encoder

TEXTS = [f"{title}\n{body}" for _, title, body in DOCS]
QUERIES = [q for q, _ in PARAPHRASES] + ["x", "The gzip module provides a simple interface. " * 60]  # > 256 tokens


def torch_vectors(texts: list[str], queries: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's vectors, computed in a child process: onnxruntime and PyTorch running models in turn in one
    process have crashed here (a process uses one backend)."""
    code = (
        "import json, sys; from ragnarok.stages.retrieve.dense import Encoder; e = Encoder('minilm', backend='torch');"
        " t, q = json.load(sys.stdin); print(json.dumps([e.encode(t).tolist(), e.encode(q, query=True).tolist()]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps([texts, queries]),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    ).stdout
    docs, queries_ = json.loads(out.strip().splitlines()[-1])
    return np.array(docs, dtype=np.float32), np.array(queries_, dtype=np.float32)


@pytest.fixture(scope="module")
def torch_reference() -> tuple[np.ndarray, np.ndarray]:
    return torch_vectors(TEXTS, QUERIES)


@pytest.mark.slow
def test_onnx_and_torch_give_the_same_vectors_and_rankings(torch_reference):
    onnx = Encoder("minilm", backend="onnx")
    docs, queries = onnx.encode(TEXTS), onnx.encode(QUERIES, query=True)
    assert onnx.backend_name == "onnx" and docs.shape == (len(TEXTS), 384) and docs.dtype == np.float32
    assert np.allclose(np.linalg.norm(docs, axis=1), 1.0, atol=1e-5)
    torch_docs, torch_queries = torch_reference
    assert np.abs(docs - torch_docs).max() < 1e-4 and np.abs(queries - torch_queries).max() < 1e-4
    onnx_rank, torch_rank = np.argsort(-queries @ docs.T, axis=1), np.argsort(-torch_queries @ torch_docs.T, axis=1)
    for row in range(len(QUERIES)):  # the same top 5 (ties aside: none here), and the expected segment first
        assert list(onnx_rank[row, :5]) == list(torch_rank[row, :5])
    ids = [d for d, _, _ in DOCS]
    for row, (_, expected) in enumerate(PARAPHRASES):
        assert ids[onnx_rank[row, 0]] + "#0_0" == expected


@pytest.mark.slow
def test_int8_vectors_stay_close_to_torch_and_rank_the_paraphrases_alike(torch_reference, tmp_path):
    """The int8 export is not PyTorch's model: its vectors are close (cosine >= 0.97 here; 0.98-0.99 on the demo
    segments) and its own index ranks each paraphrase's segment first, as PyTorch's does."""
    int8 = load_backend(Encoder("minilm").path, "onnx-int8", tmp_path)
    assert int8.name == "onnx-int8" and any((tmp_path / "onnx").rglob("model-int8.onnx"))
    docs, queries = int8.encode(TEXTS), int8.encode(QUERIES[: len(PARAPHRASES)])
    torch_docs, torch_queries = torch_reference
    assert (docs * torch_docs).sum(axis=1).min() >= 0.97
    assert (queries * torch_queries[: len(PARAPHRASES)]).sum(axis=1).min() >= 0.97
    assert np.abs(docs - torch_docs).max() > 1e-4  # really quantised
    ids = [d for d, _, _ in DOCS]
    top = np.argmax(queries @ docs.T, axis=1)
    assert [ids[i] + "#0_0" for i in top] == [expected for _, expected in PARAPHRASES]


def test_backend_choice(tmp_path):
    with pytest.raises(ValueError, match="encoder backend must be one of"):
        load_backend("whatever", "tensorrt", tmp_path)
    (tmp_path / "config.json").write_text("{}")  # a model directory without a tokenizer.json
    with pytest.raises(NotExportableError, match="tokenizer.json"):
        load_backend(str(tmp_path), "onnx", tmp_path)


@pytest.mark.skipif(gpu_driver(), reason="with a GPU driver, auto asks PyTorch (and uses it on a GPU)")
def test_auto_on_a_cpu_runs_onnx_without_loading_torch(tmp_path):
    """``auto`` on a CPU: MiniLM runs on onnxruntime and PyTorch never loads in the process (~180 MB resident
    for a server's life): the GPU check does not import it, nor does the export (a child process's,
    here into a fresh cache)."""
    code = (
        "import sys; from ragnarok.stages.embed.backends import load_backend; from ragnarok.stages.retrieve.dense import Encoder;"
        f" b = load_backend(Encoder('minilm').path, 'auto', {str(tmp_path)!r}); b.encode(['gzip']);"
        " print(b.name, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["onnx", "False"], out.stdout
    assert [p.name for p in (tmp_path / "onnx").rglob("*.onnx*")] == ["model.onnx"]  # no partial file left
