"""`POST /rag` with no pipeline runs one that can run: `offline` needs the dense MiniLM
index; without it (`ragnarok serve --no-dense`) the default falls back to BM25+Rocchio, says so in a header,
and a pipeline that asks for the missing dense index by name gets a 503 naming it and the command to build it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from api.main import create_app
from api.routes.rag import PIPELINE_HEADER
from ragnarok.cli.main import app as cli
from ragnarok.collection.lucene_index import index_documents
from ragnarok.core.presets import DEFAULT_PIPELINES, PRESETS, default_pipeline
from ragnarok.core.settings import Settings
from ragnarok.stages.retrieve.dense import dense_dir
from ragnarok.stages.retrieve.dense_build import build_dense_index, segments_from_lucene

DOCS = [
    ("gzip", "gzip", "The gzip module compresses and decompresses files in the GNU zip format."),
    ("argparse", "argparse", "The argparse module makes it easy to write user-friendly command-line interfaces."),
    ("json", "json", "The json module encodes Python objects as JSON text and decodes JSON text."),
    ("sqlite3", "sqlite3", "The sqlite3 module is an interface to SQLite, a disk-based database."),
    ("zipfile", "zipfile", "The zipfile module reads and writes ZIP archives, compressed with deflate."),
]
OFFLINE = "rrf(bm25+rocchio, dense:minilm)@100 | extractive"
FALLBACK = "bm25+rocchio@100 | extractive"


def lucene_index(root: Path) -> Path:
    docs = [{"docid": d, "title": t, "body": b, "url": f"https://example.org/{d}", "headings": ""} for d, t, b in DOCS]
    assert index_documents(iter(docs), root) == len(DOCS)
    return root


@pytest.fixture(scope="module")
def indexes(tmp_path_factory) -> dict[str, Path]:
    """Two tiny real Lucene indexes: `dense` with its MiniLM index beside it, `sparse` without one."""
    root = tmp_path_factory.mktemp("fallback")
    with_dense = lucene_index(root / "dense")
    build_dense_index(
        segments_from_lucene(with_dense), dense_dir(with_dense, "minilm"), "minilm", lucene_dir=with_dense
    )
    return {"dense": with_dense, "sparse": lucene_index(root / "sparse")}


def settings_for(tmp_path: Path, indexes: dict[str, Path], default: str) -> Settings:
    return Settings(data_dir=tmp_path, indexes={k: str(v) for k, v in indexes.items()}, default_index=default)


def test_default_pipeline_choice():
    assert DEFAULT_PIPELINES[0] == "offline" and PRESETS["offline"] == OFFLINE
    assert default_pipeline({"bm25", "bm25+rocchio", "bm25+rm3", "dense:minilm"}) == "offline"
    assert PRESETS[default_pipeline({"bm25", "bm25+rocchio", "bm25+rm3"})] == FALLBACK
    assert default_pipeline({"bm25"}) == "bm25-extractive"  # an Anserini REST index: BM25 only
    assert default_pipeline(None) == "offline"  # nothing known: the stages will say what is missing


def test_plain_rag_falls_back_without_the_dense_index(tmp_path, indexes):
    with TestClient(create_app(settings_for(tmp_path, indexes, "sparse"), arena=False)) as client:
        r = client.post("/rag", json={"topic": "compress a file with gzip", "trace": True})
        assert r.status_code == 200, r.text
        assert r.headers[PIPELINE_HEADER] == FALLBACK
        assert [t["stage"] for t in r.json()["trace"]] == ["bm25+rocchio", "extractive"]
        assert "gzip#0_0" in r.json()["references"]
        # the same server, asked about the index that has its dense index, runs `offline`
        r = client.post("/rag", json={"topic": "compress a file with gzip", "index": "dense", "trace": True})
        assert r.status_code == 200, r.text
        assert r.headers[PIPELINE_HEADER] == OFFLINE
        assert r.json()["trace"][0]["stage"] == "rrf(bm25+rocchio, dense:minilm)"
        # an explicit pipeline is named too
        r = client.post("/rag", json={"topic": "gzip", "pipeline": "bm25-extractive"})
        assert r.status_code == 200 and r.headers[PIPELINE_HEADER] == "bm25@100 | extractive"


def test_asking_for_the_missing_dense_index_is_a_503_with_the_command(tmp_path, indexes):
    sparse = tmp_path / "sparse"
    lucene_index(sparse)  # a fresh copy: this test builds its dense index
    settings = settings_for(tmp_path, {"sparse": sparse}, "sparse")
    with TestClient(create_app(settings, arena=False)) as client:
        r = client.post("/rag", json={"topic": "compress a file with gzip", "pipeline": "offline"})
        assert r.status_code == 503, r.text
        detail = r.json()["detail"]
        assert detail["stage"] == "retrieve dense:minilm"
        command = f"ragnarok index --dense minilm --from-lucene {sparse}"
        # the server's paths are named by placeholders in error bodies: the index, not its directory
        assert f"{dense_dir(sparse, 'minilm')}" not in r.text and str(tmp_path) not in r.text
        assert "no dense index for minilm at <index sparse>.dense/minilm" in detail["error"]
        assert command.replace(str(sparse), "<index sparse>") in detail["error"]

        result = CliRunner().invoke(cli, command.split()[1:])  # the command it names works
        assert result.exit_code == 0, result.output

        r = client.post("/rag", json={"topic": "compress a file with gzip", "pipeline": "offline"})
        assert r.status_code == 200, r.text
        r = client.post("/rag", json={"topic": "compress a file with gzip"})  # and the default uses it now
        assert r.status_code == 200 and r.headers[PIPELINE_HEADER] == OFFLINE
