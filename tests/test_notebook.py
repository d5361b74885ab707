"""examples/quickstart.ipynb runs top to bottom in a Jupyter kernel of this Python (nbclient + ipykernel), offline
on the demo index, and every cell gives what it says."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"


def test_the_quickstart_notebook_runs(demo_settings, monkeypatch):
    monkeypatch.setenv("RAGNAROK_DATA_DIR", str(demo_settings.data_dir))  # the session's demo index
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(c.get("outputs", []) == [] for c in nb.cells if c.cell_type == "code"), "commit it without outputs"
    # python3: ipykernel's own kernel spec, which runs this interpreter (the project's venv) on this checkout's code
    client = NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    outputs = ["".join(o.get("text", "") or o.get("data", {}).get("text/plain", "") for o in c.outputs)
               for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert "stdlib.gzip#0_0" in outputs[1]  # retrieve: gzip's page first
    assert "Functions that read and write gzipped files" in outputs[2] and "stdlib.gzip" in outputs[2]
    assert outputs[3].startswith("(50, 'demo-01')")  # every demo topic searched
    assert "'bm25+rocchio': {'nDCG@10'" in outputs[4] and "'bm25': {'nDCG@10'" in outputs[4]
    assert "'strict_vital'" in outputs[5] and "'all'" in outputs[5]
