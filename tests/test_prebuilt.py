"""pyserini's prebuilt indexes by their catalogue names: the catalogue read from Anserini's jar without a JVM,
copies found in RAGNAROK_PREBUILT_DIR and pyserini's cache under pyserini's own directory names, a missing one
refused at once with what to download (the library, HTTP and the CLI alike), and `ragnarok prebuilt fetch`
with its disk check, resume and checksum."""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import json
import os
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.main import create_app
from ragnarok.core.settings import Settings
from ragnarok.stages.retrieve import prebuilt

ROOT = Path(__file__).resolve().parent.parent
BM25 = "msmarco-v2.1-doc-segmented"
ARCTIC = "msmarco-v2.1-doc-segmented.arctic-embed-l"


def test_the_catalogue_is_anserinis_own_read_without_a_jvm():
    code = (
        "import sys, time; t = time.monotonic(); from ragnarok.stages.retrieve import prebuilt; "
        "c = prebuilt.catalogue(); s = prebuilt.sets(); "
        "print(json.dumps([len(c), 'jnius' in sys.modules, time.monotonic() - t, "
        f"c['{BM25}'].dir_name, [e.name for e in s['{ARCTIC}']]]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True, timeout=60, cwd=ROOT
    ).stdout
    count, jvm, seconds, dir_name, shards = json.loads(out)
    assert count > 200 and not jvm and seconds < 2
    assert dir_name == "lucene-inverted.msmarco-v2.1-doc-segmented.20240418.4f9675.6ec4cd595c9fe1ad91b43eabb39a637c"
    assert shards == [f"msmarco-v2.1-doc-segmented-shard{n:02d}.arctic-embed-l.hnsw-int8" for n in range(10)]
    entry = prebuilt.catalogue()[shards[0]]
    assert entry.dir_name.endswith(".arctic-embed-l.20250114.4884f5.aab3f8e9aa0563bd0f875584784a0845")
    assert entry.unpacked_bytes == 56 * 10**9 and entry.peak_bytes() == entry.compressed_bytes + 56 * 10**9


def test_names_resolve_to_pyserinis_directories_prebuilt_dir_first(v21, tmp_path, monkeypatch):
    monkeypatch.setenv("PYSERINI_CACHE", str(v21.cache.parent))
    assert prebuilt.locate(BM25, None) == v21.bm25 == prebuilt.resolve(BM25, tmp_path / "none")
    mine = tmp_path / "prebuilt"
    mine.mkdir()
    (mine / v21.bm25.name).symlink_to(v21.bm25, target_is_directory=True)
    assert prebuilt.locate(BM25, mine) == mine / v21.bm25.name  # RAGNAROK_PREBUILT_DIR is looked in first
    monkeypatch.setenv("PYSERINI_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("ANSERINI_INDEX_CACHE", str(v21.cache))  # Anserini's own cache setting, looked in too
    assert prebuilt.locate(BM25, None) == v21.bm25
    assert [p for _, p in prebuilt.resolve_set(ARCTIC, None)] == v21.shards


def test_a_missing_prebuilt_index_is_refused_at_once_with_what_to_download(tmp_path, monkeypatch):
    monkeypatch.setenv("PYSERINI_CACHE", str(tmp_path / "pyserini"))
    settings = Settings(data_dir=tmp_path / "data", indexes={"v21": f"prebuilt:{BM25}"}, default_index="v21")
    expected = (
        f"the prebuilt index {BM25} is not on this machine: {BM25} missing. Download it with "
        f"`ragnarok prebuilt fetch {BM25}` (or pyserini's own download), where there is network: 60 GB to "
        "download, 84 GB unpacked, 144 GB of free disk at the peak of each download"
    )
    with TestClient(create_app(settings, arena=False)) as client:
        start = time.monotonic()
        answer = client.post("/v1/retrieve", json={"query": "what is a segment", "index": "v21", "k": 5})
        assert time.monotonic() - start < 2
        assert answer.status_code == 503 and answer.json()["detail"].startswith(expected), answer.text
        assert str(tmp_path) not in answer.text and "build it with" not in answer.text
        rag = client.post("/rag", json={"topic": "what is a segment", "pipeline": "bm25@5 | extractive"})
        assert rag.status_code == 503 and expected in json.dumps(rag.json()), rag.text
        dense = client.post(
            "/v1/retrieve", json={"query": "x", "index": "v21", "retriever": f"dense:prebuilt:{ARCTIC}"}
        )
        assert dense.status_code == 503 and dense.json()["detail"].startswith(expected)  # its texts' index first
        listed = {r["name"]: r for r in client.get("/v1/retrievers").json() if r["index"] == "v21"}
        assert {"bm25", "bm25+rocchio", "bm25+rm3", f"dense:prebuilt:{ARCTIC}"} <= set(listed)
        assert all(r["status"] == "unavailable" and r["reason"].startswith(expected) for r in listed.values())
        for bad in ("../../etc", "/etc/passwd", "msmarco-v2.1-doc-segmented/../x", "no-such-index"):
            refused = client.post(
                "/v1/retrieve", json={"query": "x", "index": "v21", "retriever": f"dense:prebuilt:{bad}"}
            )
            assert refused.status_code == 404 and bad not in refused.text, refused.text
            assert refused.json()["detail"] == (
                "unknown prebuilt index (the name is not echoed); available: a name "
                "of pyserini's prebuilt catalogue (`ragnarok prebuilt list`)"
            )
    env = {**os.environ, "RAGNAROK_DATA_DIR": str(tmp_path / "data")}
    start = time.monotonic()
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragnarok.cli",
            "search",
            "--topics",
            "demo",
            "--index",
            f"prebuilt:{BM25}",
            "--output",
            str(tmp_path / "run.txt"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert out.returncode == 2 and len(errors) == 1 and expected in errors[0], out.stderr[-2000:]
    assert time.monotonic() - start < 60 and not (tmp_path / "run.txt").exists()


class _Tarballs(http.server.BaseHTTPRequestHandler):
    """Serves one file with range requests; the first request is cut off after ``cut`` bytes."""

    body = b""
    cut: int | None = None
    requests: list[str | None] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.requests.append(self.headers.get("Range"))
        start = int(self.headers["Range"].split("=")[1].rstrip("-")) if self.headers.get("Range") else 0
        part = self.body[start:]
        self.send_response(206 if start else 200)
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        if type(self).cut is not None:
            self.wfile.write(part[: type(self).cut])
            type(self).cut = None
            self.wfile.flush()
            self.connection.shutdown(2)  # the connection drops mid-download
            return
        self.wfile.write(part)

    def log_message(self, *args: object) -> None:
        pass


def test_fetch_checks_the_disk_resumes_a_broken_download_and_checks_the_md5(v21, tmp_path, monkeypatch):
    from ragnarok.collection import prebuilt_fetch

    entry = prebuilt.catalogue()[BM25]
    top = entry.filename.removesuffix(".tar.gz")  # the tarball holds one folder, as pyserini's do
    tarball = tmp_path / entry.filename
    with tarfile.open(tarball, "w:gz") as archive:
        archive.add(v21.bm25, arcname=top)
    body = tarball.read_bytes()
    stand_in = dataclasses.replace(entry, md5=hashlib.md5(body).hexdigest(), compressed_bytes=len(body))  # noqa: S324
    monkeypatch.setattr(prebuilt, "catalogue", lambda: {**{e.name: e for e in [stand_in]}})
    _Tarballs.body, _Tarballs.cut, _Tarballs.requests = body, len(body) // 3, []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Tarballs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    mirror = f"http://127.0.0.1:{server.server_address[1]}"
    dest, said = tmp_path / "prebuilt", []
    monkeypatch.setenv("PYSERINI_CACHE", str(tmp_path / "pyserini"))
    try:
        real_usage = prebuilt_fetch.shutil.disk_usage
        monkeypatch.setattr(prebuilt_fetch.shutil, "disk_usage", lambda p: real_usage(p)._replace(free=10**6))
        with pytest.raises(
            OSError,
            match=r"needs .* free in .* at its peak .* tarball and the 84 GB unpacked index "
            r"side by side\); 1.0 MB are free",
        ):
            prebuilt_fetch.fetch(BM25, dest, mirror, say=said.append)
        monkeypatch.setattr(prebuilt_fetch.shutil, "disk_usage", real_usage)
        monkeypatch.setattr(prebuilt, "UNPACKED_GB", {})  # the stand-in is small: 1.5 x its tarball, not 84 GB
        with pytest.raises(OSError, match="the download stopped .* run the same command again: it resumes there"):
            prebuilt_fetch.fetch(BM25, dest, mirror, say=said.append)
        kept = (dest / f"{entry.filename}.partial").stat().st_size
        assert 0 < kept < len(body)
        found = prebuilt_fetch.fetch(BM25, dest, mirror, say=said.append)
        assert _Tarballs.requests[-1] == f"bytes={kept}-"  # resumed where it stopped
        assert found == [dest / stand_in.dir_name] and prebuilt.locate(BM25, dest) == found[0]
        assert sorted(p.name for p in found[0].iterdir()) == sorted(p.name for p in v21.bm25.iterdir())
        assert not list(dest.glob("*.tar.gz*")) and not list(dest.glob(".*unpacking"))
        assert prebuilt_fetch.fetch(BM25, dest, mirror, say=said.append) == found and "already here" in said[-1]
        wrong = dataclasses.replace(stand_in, md5="0" * 32)
        monkeypatch.setattr(prebuilt, "catalogue", lambda: {BM25: wrong})
        with pytest.raises(OSError, match="does not match the catalogue's md5 .* it was deleted"):
            prebuilt_fetch.fetch(BM25, tmp_path / "other", mirror, say=said.append)
        assert not list((tmp_path / "other").iterdir())
    finally:
        server.shutdown()
