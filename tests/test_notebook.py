"""examples/quickstart.ipynb runs top to bottom in a Jupyter kernel of this Python (nbclient + ipykernel), offline
on the demo index, and every cell gives what it says."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"


def execute(path: Path, demo_settings, monkeypatch, timeout: int) -> list[str]:
    """Run the notebook at ``path`` on the session's demo index; each code cell's text output, none an error."""
    monkeypatch.setenv("RAGNAROK_DATA_DIR", str(demo_settings.data_dir))  # the session's demo index
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(path, as_version=4)
    assert all(c.get("outputs", []) == [] for c in nb.cells if c.cell_type == "code"), "commit it without outputs"
    # python3: ipykernel's own kernel spec, which runs this interpreter (the project's venv) on this checkout's code
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    return [
        "".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in c.outputs)
        for c in nb.cells
        if c.cell_type == "code"
    ]


def test_the_quickstart_notebook_runs(demo_settings, monkeypatch):
    outputs = execute(NOTEBOOK, demo_settings, monkeypatch, timeout=120)
    assert "stdlib.gzip#0_0" in outputs[1]  # retrieve: gzip's page first
    assert "Functions that read and write gzipped files" in outputs[2] and "stdlib.gzip" in outputs[2]
    assert outputs[3].startswith("(50, 'demo-01')")  # every demo topic searched
    assert "'bm25+rocchio': {'nDCG@10'" in outputs[4] and "'bm25': {'nDCG@10'" in outputs[4]
    assert "'strict_vital'" in outputs[5] and "'all'" in outputs[5]


EXPERIMENTS = ROOT / "examples" / "experiments.ipynb"


def test_the_experiments_notebook_runs(demo_settings, shared_data, monkeypatch):
    """examples/experiments.ipynb: five pipelines on CACM with Holm-corrected tests, per-topic gains,
    two RAG pipelines on demo topics, DataFrames of results."""
    monkeypatch.setenv("RAGNAROK_SHARED", str(shared_data.parent))
    monkeypatch.setenv("RAGNAROK_EXAMPLE_DENSE", "0")  # encoding CACM takes ~5 min here: the BM25 family only
    outputs = execute(EXPERIMENTS, demo_settings, monkeypatch, timeout=900)
    assert outputs[0] == "(64, 52)"  # CACM's topics, and the topics its qrels judge
    means = outputs[1]
    assert "bm25+rm3@1000" in means and "rrf(bm25, bm25+rocchio)@1000" in means and "0.3123" in means  # BM25 MAP
    assert "largest gains:" in outputs[2] and "largest losses:" in outputs[2]
    assert "bm25+rocchio@20 | extractive" in outputs[3] and "response_length" in outputs[3]
    assert "(6, 4)" in outputs[4] and "'cited'" in outputs[4]
