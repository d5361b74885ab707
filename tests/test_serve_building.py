"""`ragnarok serve` is up at once: BM25 answers as soon as the Lucene demo index exists while
the dense index builds in the background; GET /v1/retrievers shows the build's progress, dense pipelines answer
503 "building, N % done" with Retry-After, /rag's default falls back and says so; shutdown stops the build
promptly and a killed build never leaves an index that looks complete. Real servers in their own processes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from servers import ragnarok_serve

from ragnarok.collection.demo_index import remove_abandoned
from ragnarok.collection.lucene_index import index_documents
from ragnarok.core.settings import Settings
from ragnarok.core.types import Query
from ragnarok.service.retrieval_service import RetrievalService
from ragnarok.stages.retrieve.dense import dense_dir

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike november oscar".split()
BUILDING = re.compile(r"building, (\d+) % done \(([\d,]+) of ([\d,]+) segments")


def small_demo(data_dir: Path, n: int) -> Path:
    """A Lucene index of ``n`` one-segment documents where the demo index lives (so serve does not build it)."""
    return small_index(Settings(data_dir=data_dir).demo_index_dir, n)


def small_index(lucene: Path, n: int) -> Path:
    """A Lucene index of ``n`` one-segment documents at ``lucene``."""
    index_documents(
        iter(
            [
                {
                    "docid": f"d{i}",
                    "title": f"Document {i}",
                    "url": "",
                    "headings": "",
                    "body": f"{WORDS[i % 15]} {WORDS[(i * 7) % 15]} is topic {i}.",
                }
                for i in range(n)
            ]
        ),
        lucene,
    )
    return lucene


def env_for(data_dir: Path, **settings: str) -> dict[str, str]:
    return {
        **os.environ,
        "RAGNAROK_DATA_DIR": str(data_dir),
        "HF_HUB_OFFLINE": "1",
        **{f"RAGNAROK_{k.upper()}": v for k, v in settings.items()},
    }


def dense_info(base: str) -> dict:
    listed = httpx.get(f"{base}/v1/retrievers", timeout=30).json()
    return next(r for r in listed if r["name"] == "dense:minilm" and r["index"] == "demo")


def retrieve(base: str, retriever: str) -> httpx.Response:
    return httpx.post(f"{base}/v1/retrieve", json={"query": "alpha bravo", "retriever": retriever, "k": 5}, timeout=60)


def wait_for(predicate, timeout_s: float, what: str, poll_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(poll_s)
    raise AssertionError(f"not within {timeout_s:g} s: {what}")


def test_bm25_answers_while_the_dense_index_builds_then_dense_answers(tmp_path):
    n = 60
    lucene = small_demo(tmp_path / "data", n)
    env = env_for(tmp_path / "data", dense_build_batch_size="10", dense_build_pause_s="1")
    with ragnarok_serve(env, output=tmp_path / "serve.log", dense=True) as base:
        info = dense_info(base)  # the build started with the server: building, its total counted or not yet
        assert info["status"] == "building" and not info["available"], info
        assert info["progress"]["total"] in (None, n), info
        assert (
            BUILDING.match(info["reason"])
            if info["progress"]["total"]
            else info["reason"].startswith("building, 0 % done (counting segments)")
        ), info
        info = wait_for(lambda: (i := dense_info(base))["progress"]["total"] and i, 120, "the segments counted")
        assert BUILDING.match(info["reason"]) and info["progress"]["total"] == n, info

        bm25 = retrieve(base, "bm25")  # BM25 answers at once
        assert bm25.status_code == 200 and len(bm25.json()["candidates"]) == 5

        dense = retrieve(base, "dense:minilm")  # the dense retriever: 503 with the percentage and Retry-After
        assert dense.status_code == 503, dense.text
        assert BUILDING.search(dense.json()["detail"]) and "BM25 retrievers answer now" in dense.json()["detail"]
        assert 1 <= int(dense.headers["retry-after"]) <= 60

        rag = httpx.post(f"{base}/rag", json={"topic": "alpha bravo"}, timeout=120)  # the default falls back
        assert rag.status_code == 200 and rag.json()["answer"], rag.text
        assert rag.headers["ragnarok-pipeline"] == "bm25+rocchio@100 | extractive"
        assert rag.headers["ragnarok-pipeline-fallback"].startswith("offline needs dense:minilm: building, ")

        fused = httpx.post(
            f"{base}/rag", json={"topic": "alpha", "pipeline": "rrf(bm25, dense:minilm)@10 | extractive"}, timeout=120
        )  # a pipeline that needs it: 503
        assert fused.status_code == 503 and fused.json()["detail"]["stage"] == "retrieve dense:minilm", fused.text
        assert BUILDING.search(fused.json()["detail"]["error"]) and "retry-after" in fused.headers

        seen: list[tuple[int, int]] = []

        def available() -> bool:
            info = dense_info(base)
            if info["status"] == "building" and info["progress"]["total"]:
                seen.append((info["progress"]["done"], int(info["progress"]["percent"])))
            return info["available"]

        wait_for(available, 180, "the dense index is available")
        assert seen == sorted(seen) and any(0 < percent < 100 for _, percent in seen), seen  # progress moved
        assert dense_info(base)["status"] == "available" and dense_info(base)["progress"] is None

        dense = retrieve(base, "dense:minilm")
        assert dense.status_code == 200 and len(dense.json()["candidates"]) == 5, dense.text
        rag = httpx.post(f"{base}/rag", json={"topic": "alpha bravo"}, timeout=120)
        assert rag.status_code == 200 and rag.headers["ragnarok-pipeline"].startswith("rrf(bm25+rocchio, dense:minilm)")
        assert "ragnarok-pipeline-fallback" not in rag.headers
    log = (tmp_path / "serve.log").read_text(errors="replace")
    assert "building the dense index of minilm" in log and f"{n}/{n}" in log  # tqdm's bar, with its total
    assert "encoding (minilm, flat): 100%" in log and "the dense index of minilm is ready" in log
    assert (dense_dir(lucene, "minilm") / "index.faiss").exists()


def test_serve_builds_no_demo_index_when_demo_names_another_index(tmp_path):
    """RAGNAROK_INDEXES pointing `demo` at another Lucene index: serve (its background dense build allowed)
    builds neither the demo's Lucene index nor its dense one, and `demo` answers from the other index."""
    other = small_index(tmp_path / "other", 20)
    data_dir = tmp_path / "data"
    env = env_for(data_dir, indexes=json.dumps({"demo": str(other)}))
    with ragnarok_serve(env, output=tmp_path / "serve.log", dense=True) as base:
        found = httpx.post(
            f"{base}/v1/retrieve",
            json={"query": "alpha bravo", "retriever": "bm25", "index": "demo", "k": 5},
            timeout=60,
        )
        assert found.status_code == 200, found.text
        docids = [c["docid"] for c in found.json()["candidates"]]
        assert docids and all(re.fullmatch(r"d\d+#0_0", d) for d in docids), docids  # the other index's documents
    assert not Settings(data_dir=data_dir).demo_index_dir.exists()
    log = (tmp_path / "serve.log").read_text(errors="replace")
    assert "building the demo index" not in log and "building the dense index" not in log, log


def test_only_the_embedded_demo_is_built_on_first_use(tmp_path):
    """`demo` is the embedded demo collection's index unless RAGNAROK_INDEXES points it elsewhere (its own
    path, spelt another way, is still the demo's); the other first-use builders leave it alone then too."""
    from ragnarok.core.spec import parse
    from ragnarok.judge.cli_common import index_dir
    from ragnarok.track.run import prepare_demo_index

    settings = Settings(data_dir=tmp_path / "data")
    assert settings.demo_is_embedded()
    same = str(settings.demo_index_dir) + "/"
    assert Settings(data_dir=tmp_path / "data", indexes={"demo": same}).demo_is_embedded()
    other = Settings(data_dir=tmp_path / "data", indexes={"demo": str(tmp_path / "other")})
    assert not other.demo_is_embedded()
    prepare_demo_index(parse("bm25@10 | extractive"), other, None)
    assert index_dir(other, "demo") == str(tmp_path / "other")
    assert not other.demo_index_dir.exists()


@pytest.mark.slow
def test_from_an_empty_data_dir_killed_and_stopped_builds_leave_no_index(tmp_path):
    """The real demo: BM25 answers once the Lucene index is built while dense builds; a SIGKILLed build leaves
    only its checkpoints (``.minilm.partial``), never taken for an index, from which the next build resumes;
    SIGTERM stops the server promptly mid-build and leaves no index (its checkpoints stay, to resume)."""
    data = tmp_path / "data"
    out = dense_dir(Settings(data_dir=data).demo_index_dir, "minilm")
    # a long grace, so the process waits for the build to clean up: what is timed is how soon the build stops
    # (within one encoder batch; with the default 5 s grace the process leaves by then anyway)
    env = env_for(data, dense_build_batch_size="16", shutdown_grace_s="30")
    first: list[subprocess.Popen] = []
    with ragnarok_serve(env, output=tmp_path / "first.log", dense=True, started=first, start_timeout_s=300) as base:
        assert retrieve(base, "bm25").status_code == 200
        wait_for(lambda: dense_info(base)["progress"]["total"], 120, "the segments counted")
        dense = retrieve(base, "dense:minilm")
        assert dense.status_code == 503 and BUILDING.search(dense.json()["detail"]), dense.text
        total = int(BUILDING.search(dense.json()["detail"]).group(3).replace(",", ""))
        assert total > 5000  # the whole demo, counted before encoding starts
        partial = out.with_name(".minilm.partial")
        wait_for(lambda: (partial / "chunk-00000").is_dir(), 240, "a first checkpoint written")
        assert (partial / "lock").read_text() == str(first[0].pid) and not out.exists()
        first[0].send_signal(signal.SIGKILL)  # killed mid-build
        first[0].wait(timeout=30)
    assert partial.is_dir() and not out.exists()  # what it left does not look like an index

    second: list[subprocess.Popen] = []
    with ragnarok_serve(env, output=tmp_path / "second.log", dense=True, started=second) as base:
        info = dense_info(base)
        assert info["status"] == "building", info  # built on, not taken for an index
        names = [r["name"] for r in httpx.get(f"{base}/v1/retrievers", timeout=30).json()]
        assert not [name for name in names if "partial" in name], names
        wait_for(
            lambda: (partial / "lock").is_file() and (partial / "lock").read_text() == str(second[0].pid),
            60,
            "the killed build's lock taken over",
        )
        wait_for(lambda: dense_info(base)["progress"]["done"] >= 160, 240, "resumed after the first checkpoint")
        server = second[0]
        start = time.monotonic()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        stopped_s = time.monotonic() - start
    assert stopped_s < 20, f"SIGTERM mid-build took {stopped_s:.1f} s"
    assert not out.exists() and [p.name for p in out.parent.iterdir()] == [".minilm.partial"]  # no index
    assert "resuming the dense build" in (tmp_path / "second.log").read_text(errors="replace")
    assert "the dense index build of minilm stopped" in (tmp_path / "second.log").read_text(errors="replace")


def test_leftovers_of_dead_builds_are_removed_and_never_listed(tmp_path):
    lucene = tmp_path / "idx"
    out = dense_dir(lucene, "minilm")
    child = subprocess.Popen(["true"])  # its pid, once reaped, is one that no longer runs
    child.wait()
    dead = child.pid
    for name in (f".minilm.partial-{dead}", f".minilm.old-{dead}", f".minilm.partial-{os.getpid()}", "other"):
        (out.parent / name).mkdir(parents=True)
        (out.parent / name / "index.faiss").write_bytes(b"")
    remove_abandoned(out)
    assert sorted(p.name for p in out.parent.iterdir()) == [f".minilm.partial-{os.getpid()}", "other"]
    assert RetrievalService._dense_models(str(lucene)) == ["other"]  # a build in progress is never a model


def test_progress_reads_as_the_503_says():
    from ragnarok.stages.retrieve.building import Progress

    assert (
        Progress(2650, 6281, 70.0, 95.0).describe() == "building, 42 % done (2,650 of 6,281 segments, about 2 min left)"
    )
    assert Progress(0, None, 1.0, None).describe() == "building, 0 % done (counting segments)"
    assert Progress(10, 60, 3.0, 12.4).percent == 16.7


def test_a_failed_build_is_reported_until_the_index_is_built(tmp_path):
    from ragnarok.collection.demo_index import ensure_dense_index
    from ragnarok.stages.retrieve.building import DenseBuild
    from ragnarok.stages.retrieve.dense import DenseIndexNotFoundError

    lucene = tmp_path / "idx"
    service = RetrievalService(Settings(data_dir=tmp_path / "data", indexes={"x": str(lucene)}))
    build = service.builds.add(DenseBuild(lucene, "minilm"))
    assert build.start() and build.wait(60)  # no Lucene index to read: the build fails
    assert build.status == "failed"
    index_documents(iter([{"docid": "a", "title": "A", "url": "", "headings": "", "body": "gzip files."}]), lucene)
    info = next(i for i in service.describe() if i.index == "x" and i.name == "dense:minilm")
    assert (info.available, info.status) == (False, "unavailable") and info.reason.startswith("the build failed")
    with pytest.raises(DenseIndexNotFoundError, match="failed: .*ragnarok index --dense minilm --from-lucene"):
        service.get("dense:minilm", "x")
    ensure_dense_index(lucene, "minilm")  # built by hand (`ragnarok index --dense`): the failure is over
    info = next(i for i in service.describe() if i.index == "x" and i.name == "dense:minilm")
    assert (info.available, info.status) == (True, "available") and build.status == "done"
    assert service.get("dense:minilm", "x").retrieve(Query(text="gzip"), 1).candidates[0].docid == "a#0_0"
