"""docs/TREC-RAG.md's runnable blocks, run as they are written, one after the other in one shell (as a participant
follows the runbook in one terminal), on the stand-ins of the track's prebuilt indexes: their directories in
pyserini's cache (``PYSERINI_CACHE``) and the Arctic encoder's directory (``RAGNAROK_ARCTIC_MODEL``) are the only
things the environment adds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_readme import clone, run_block  # noqa: F401 - the fixture: a fresh clone with ../shared beside it

ROOT = Path(__file__).resolve().parent.parent
MARK = re.compile(r"^<!-- runnable: standins -->\n```bash\n(?P<body>.*?)^```$", re.M | re.S)


@pytest.mark.slow
def test_the_runbook_runs_on_the_stand_ins(clone, v21, tmp_path):  # noqa: F811
    blocks = [m["body"] for m in MARK.finditer((ROOT / "docs" / "TREC-RAG.md").read_text(encoding="utf-8"))]
    assert len(blocks) == 3 and "ragnarok prebuilt fetch" in blocks[0] and "ragnarok validate" in blocks[-1]
    env = {**v21.env(), "RAGNAROK_DATA_DIR": str(tmp_path / "data")}
    out = run_block("\n".join(blocks), clone, env)
    assert "msmarco-v2.1-doc-segmented: already here" in out.stderr and "10 shards" not in out.stderr
    lines = [json.loads(line) for line in (clone / "runs" / "rag25.jsonl").read_text().splitlines()]
    assert len(lines) == 105 and all(line["metadata"]["team_id"] == "myteam" for line in lines)
    assert all(r.startswith("msmarco_v2.1_doc_") for line in lines for r in line["references"])
    assert "valid TREC RAG 2025 run" in out.stdout
