"""Index lifecycle and the command line as a newcomer meets it: a dense index that no longer matches
its Lucene index is refused and rebuilt, `search --pipeline` uses the retrieval part, messages name the real
problem, the JVM and Anserini are quiet unless --verbose, BM25 search never imports torch, long jobs show a bar."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragnarok.collection.demo_index import ensure_dense_index
from ragnarok.collection.lucene_index import index_documents, index_identity
from ragnarok.core.types import Query
from ragnarok.stages.retrieve.dense import DenseRetriever, StaleDenseIndexError, dense_dir

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike november oscar".split()


def docs(n: int, prefix: str = "d") -> list[dict]:
    return [
        {
            "docid": f"{prefix}{i}",
            "title": f"Document {i}",
            "url": "",
            "headings": "",
            "body": f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]} is topic {i}.",
        }
        for i in range(n)
    ]


def ragnarok(*args: str, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The real CLI in a subprocess; prints whether torch was imported (on stdout, last line)."""
    code = (
        "import sys\nfrom ragnarok.cli.main import app\ntry:\n    app(sys.argv[1:], prog_name='ragnarok')\n"
        "except SystemExit as e:\n    code = e.code\nprint('torch imported:', 'torch' in sys.modules)\n"
        "sys.exit(code)"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


@pytest.fixture
def stale(tmp_path) -> Path:
    """A Lucene index of 12 documents with its MiniLM index, then the Lucene index rebuilt with 5 others."""
    lucene = tmp_path / "idx"
    index_documents(iter(docs(12)), lucene)
    ensure_dense_index(lucene, "minilm")
    before = json.loads((dense_dir(lucene, "minilm") / "meta.json").read_text())
    assert before["lucene"] == {**index_identity(lucene), "count": 12}
    index_documents(iter(docs(5, prefix="new")), lucene)
    assert index_identity(lucene) != {k: v for k, v in before["lucene"].items() if k != "count"}
    return lucene


def test_stale_dense_index_is_refused_then_rebuilt(stale):
    with pytest.raises(StaleDenseIndexError) as err:
        DenseRetriever("dense:minilm", str(stale), "minilm").search("alpha", 3)
    message = str(err.value)
    assert "is stale" in message and "rebuilt after it (12 segments encoded" in message
    assert f"`ragnarok index --dense minilm --from-lucene {stale}`" in message
    assert describe(stale) == (False, "stale")  # GET /v1/retrievers (and /rag's default pipeline) skip it

    ensure_dense_index(stale, "minilm")  # the build notices and rebuilds
    assert describe(stale) == (True, "")
    meta = json.loads((dense_dir(stale, "minilm") / "meta.json").read_text())
    assert meta["count"] == 5 and meta["lucene"] == {**index_identity(stale), "count": 5}
    hits = DenseRetriever("dense:minilm", str(stale), "minilm").retrieve(Query(text="alpha"), 10).candidates
    assert {c.docid for c in hits} <= {f"new{i}#0_0" for i in range(5)} and len(hits) == 5


def describe(lucene: Path) -> tuple[bool, str]:
    from ragnarok.core.settings import Settings
    from ragnarok.service.retrieval_service import RetrievalService

    info = next(
        i
        for i in RetrievalService(Settings(indexes={"x": str(lucene)})).describe()
        if i.index == "x" and i.name == "dense:minilm"
    )
    return info.available, info.reason.split(":")[0]


def test_up_to_date_index_is_kept_force_and_another_kind_rebuild(tmp_path):
    lucene = tmp_path / "idx"
    index_documents(iter(docs(4)), lucene)
    faiss_file = ensure_dense_index(lucene, "minilm") / "index.faiss"
    first = faiss_file.stat().st_ino
    assert ensure_dense_index(lucene, "minilm") / "index.faiss" == faiss_file
    assert faiss_file.stat().st_ino == first  # up to date: not rebuilt
    ensure_dense_index(lucene, "minilm", force=True)
    second = faiss_file.stat().st_ino
    assert second != first  # --force: rebuilt anyway
    ensure_dense_index(lucene, "minilm", kind="hnsw")  # the HNSW artefact is derived too: another kind rebuilds
    assert json.loads((faiss_file.parent / "meta.json").read_text())["kind"] == "hnsw"
    assert faiss_file.stat().st_ino != second


def test_index_without_a_record_of_its_source_is_stale(tmp_path):
    """A dense index built before indexes recorded their source cannot be trusted either."""
    lucene = tmp_path / "idx"
    index_documents(iter(docs(4)), lucene)
    meta_file = ensure_dense_index(lucene, "minilm") / "meta.json"
    meta = json.loads(meta_file.read_text())
    meta_file.write_text(json.dumps({k: v for k, v in meta.items() if k != "lucene"}))
    with pytest.raises(StaleDenseIndexError, match="does not record which Lucene index"):
        DenseRetriever("dense:minilm", str(lucene), "minilm").search("alpha", 1)


@pytest.mark.slow
def test_cli_stale_search_fails_naming_the_rebuild_then_index_rebuilds(stale, tmp_path):
    out = ragnarok(
        "search",
        "--topics",
        str(_topics(tmp_path)),
        "--index",
        str(stale),
        "--retriever",
        "dense:minilm",
        "--output",
        str(tmp_path / "run.txt"),
    )
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert out.returncode == 2 and len(errors) == 1, out.stderr[-2000:]
    assert "is stale" in errors[0] and f"ragnarok index --dense minilm --from-lucene {stale}`" in errors[0]
    assert not (tmp_path / "run.txt").exists()

    out = ragnarok("index", "--dense", "minilm", "--from-lucene", str(stale))
    assert out.returncode == 0, out.stderr[-2000:]
    assert "rebuilding the dense index" in out.stderr
    assert "encoding (minilm, flat): 100%" in out.stderr and "5/5" in out.stderr  # a bar with its total
    out = ragnarok(
        "search",
        "--topics",
        str(_topics(tmp_path)),
        "--index",
        str(stale),  # a pipeline with it
        "--pipeline",
        "rrf(bm25, dense:minilm)@10 | extractive",
        "--output",
        str(tmp_path / "run.txt"),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "using the retrieval part of the pipeline, rrf(bm25, dense:minilm)@10" in out.stderr
    assert {line.split()[2] for line in (tmp_path / "run.txt").read_text().splitlines()} <= {
        f"new{i}#0_0" for i in range(5)
    }


def test_reindexing_names_the_dense_index_it_made_stale(tmp_path):
    lucene = tmp_path / "idx"
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs(6)))
    index_documents(iter(docs(3)), lucene)
    ensure_dense_index(lucene, "minilm")
    out = ragnarok("index", str(tmp_path / "docs.jsonl"), str(lucene))
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"note: the dense index at {dense_dir(lucene, 'minilm')} is now stale" in out.stderr


def _topics(tmp_path: Path) -> Path:
    path = tmp_path / "topics.tsv"
    path.write_text("1\talpha\n2\tbravo charlie\n")
    return path


# --- search --pipeline, messages, quiet output, start-up, progress -------------------------------------------


@pytest.fixture
def demo_env(demo_settings) -> dict[str, str]:
    return {"RAGNAROK_DATA_DIR": str(demo_settings.data_dir)}


def test_search_pipeline_uses_its_retrieval_part_with_a_bar(demo_env, tmp_path):
    out = ragnarok(
        "search",
        "--topics",
        "demo",
        "--pipeline",
        "bm25-extractive",
        "--output",
        str(tmp_path / "run.txt"),
        env=demo_env,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "using the retrieval part of the pipeline, bm25@100" in out.stderr
    # not a terminal: progress as lines (a tenth of the topics each), no bar
    assert "running the pipeline: 50/50 topics" in out.stderr and "running the pipeline: 5/50 topics" in out.stderr
    assert "\r" not in out.stderr
    lines = (tmp_path / "run.txt").read_text().splitlines()
    assert len({line.split()[0] for line in lines}) == 50 and len(lines) > 50 * 50


def test_presets_are_resolved_before_deciding_about_the_dense_index():
    from ragnarok.cli.search import dense_models
    from ragnarok.core.presets import resolve
    from ragnarok.core.spec import parse

    def needs(spec: str) -> list[str]:
        return dense_models([s.name + (f":{s.arg}" if s.arg else "") for s in parse(resolve(spec)).sources()])

    assert needs("offline") == ["minilm"]  # the preset's name does not say "dense"; its spec does
    assert needs("rocchio-extractive") == [] and needs("1c") == ["arctic-l", "gte-l"]
    assert dense_models(["bm25"]) == [] and dense_models(["dense"]) == ["minilm"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["search", "--topics", "demo", "--output", "x.txt", "--index", "/tmp/nope-ragnarok"],
            "no index directory /tmp/nope-ragnarok",
        ),
        (
            ["search", "--topics", "demo", "--output", "x.txt", "--retriever", "nope"],
            "available: bm25, bm25+rm3, bm25+rocchio, dense:MODEL",
        ),
        (
            ["search", "--topics", "demo", "--output", "x.txt", "--pipeline", "bm25@10", "--k", "5"],
            "--k sets the hits of one --retriever; a --pipeline sets its own depths",
        ),
    ],
)
def test_messages_name_the_problem(args, message, demo_env, tmp_path):
    out = ragnarok(*args, env=demo_env, cwd=tmp_path)
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert out.returncode == 2 and len(errors) == 1 and message in errors[0], out.stderr[-2000:]
    assert not (tmp_path / "x.txt").exists()


def test_index_a_jsonl_file_as_an_anserini_collection(tmp_path):
    (tmp_path / "docs.jsonl").write_text(
        '{"id": "a", "contents": "gzip compresses files"}\n{"id": "b", "contents": "argparse parses arguments"}\n'
    )
    out = ragnarok("index", str(tmp_path / "docs.jsonl"), str(tmp_path / "idx"), "--collection", "JsonCollection")
    assert out.returncode == 0, out.stderr[-2000:]
    (tmp_path / "t.tsv").write_text("1\tgzip\n")
    out = ragnarok(
        "search",
        "--topics",
        str(tmp_path / "t.tsv"),
        "--index",
        str(tmp_path / "idx"),
        "--output",
        str(tmp_path / "run.txt"),
    )
    assert out.returncode == 0 and (tmp_path / "run.txt").read_text().split()[2] == "a"


def test_a_collection_rebuild_is_built_beside_and_swapped_in(tmp_path):
    """``--collection`` builds beside INDEX and swaps it in: rebuilt in place, nothing left beside it
    (no ``.partial``, no ``.old``), and no file of the old build left in it."""
    (tmp_path / "docs.jsonl").write_text('{"id": "a", "contents": "gzip compresses files"}\n')
    idx = tmp_path / "idx"
    out = ragnarok("index", str(tmp_path / "docs.jsonl"), str(idx), "--collection", "JsonCollection")
    assert out.returncode == 0, out.stderr[-2000:]
    (idx / "stale-file-of-the-old-build").write_text("x")
    out = ragnarok("index", str(tmp_path / "docs.jsonl"), str(idx), "--collection", "JsonCollection")
    assert out.returncode == 0, out.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs.jsonl", "idx"]
    assert not (idx / "stale-file-of-the-old-build").exists() and any(idx.glob("segments_*"))


def test_bm25_search_is_quiet_and_never_imports_torch(demo_env, tmp_path):
    out = ragnarok(
        "search", "--topics", "demo", "--retriever", "bm25", "--output", str(tmp_path / "run.txt"), env=demo_env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("torch imported: False")
    assert "WARNING" not in out.stderr and "MMapDirectory" not in out.stderr and "INFO" not in out.stdout
    verbose = ragnarok(
        "search",
        "--topics",
        "demo",
        "--retriever",
        "bm25",
        "--output",
        str(tmp_path / "v.txt"),
        "--verbose",
        env=demo_env,
    )
    assert verbose.returncode == 0 and "sun.misc.Unsafe" in verbose.stderr + verbose.stdout
    assert (tmp_path / "run.txt").read_text() == (tmp_path / "v.txt").read_text()


def test_index_is_quiet_unless_verbose(tmp_path):
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs(5)))
    quiet = ragnarok("index", str(tmp_path / "docs.jsonl"), str(tmp_path / "a"))
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    both = quiet.stdout + quiet.stderr
    assert "INFO" not in both and "WARNING" not in both and "SLF4J" not in both, both[-2000:]
    verbose = ragnarok("index", str(tmp_path / "docs.jsonl"), str(tmp_path / "b"), "--verbose")
    assert verbose.returncode == 0 and "IndexCollection" in verbose.stdout + verbose.stderr


def test_search_says_it_builds_the_demo_index_with_a_bar(tmp_path):
    out = ragnarok(
        "search",
        "--topics",
        "demo",
        "--output",
        str(tmp_path / "run.txt"),
        env={"RAGNAROK_DATA_DIR": str(tmp_path / "fresh")},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "building the demo index at" in out.stderr and "segmenting: 100%" in out.stderr
    assert "torch imported: False" in out.stdout
