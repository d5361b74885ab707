"""No request-named paths (part 4): a request names configured models only; a path gets one 404,
the same whether or not anything is there (the file system is not even looked at), unless
RAGNAROK_ALLOW_MODEL_PATHS=1, and then every spelling of a directory is one model (realpath) in an LRU bounded
by count and bytes; no request reaches a model hub unless RAGNAROK_ALLOW_DOWNLOADS=1 (a counting fake hub);
error bodies show no server path, internal URL or environment value (placeholders instead)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from servers import free_port, rerank_behind_a_counting_hub

from api.errors import scrub
from api.main import create_app
from ragnarok.core.model_paths import dir_bytes
from ragnarok.core.registry import ComponentArgumentError
from ragnarok.core.settings import Settings
from ragnarok.service.retrieval_service import RerankService
from ragnarok.stages.rerank.cross_encoder import CrossEncoderReranker
from ragnarok.stages.rerank.tiny import build_tiny_cross_encoder

REQUEST = {
    "query": {"text": "compress a file with gzip"},
    "candidates": [
        {"docid": "a", "score": 2, "doc": {"segment": "the gzip module can compress and decompress files"}},
        {"docid": "b", "score": 1, "doc": {"segment": "the capital of france is paris"}},
    ],
}
ROLES = {"crossencoder": "cross-encoder model", "monot5": "monoT5 model", "embedding": "embedding model"}


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """A tiny cross-encoder: a real Hugging Face model directory (config.json, weights, tokenizer)."""
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("models") / "ce")


@pytest.fixture(autouse=True)
def _offline(monkeypatch, tmp_path):
    """No model hub and an empty Hugging Face cache in this process (the hub test runs its own process)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))


def rerank(client: TestClient, reranker: str):
    return client.post("/v1/rerank", json={"request": REQUEST, "reranker": reranker, "k": 2})


def paths_of(tmp_path: Path, model: Path) -> list[str]:
    """Paths a request might name: a system directory, a model directory, a directory without config.json, a
    missing one, and the other spellings (home, relative, backslash, a hub-like name)."""
    (tmp_path / "empty").mkdir()
    return [
        "/etc",
        "/root",
        str(model),
        str(tmp_path / "empty"),
        str(tmp_path / "no" / "such" / "dir"),
        "~",
        "~/x",
        "./x",
        "../..",
        "a\\b",
        "made-up/model",
        "/etc/passwd",
    ]


# --- the default: no path is ever looked at ------------------------------------------------------------------


@pytest.mark.parametrize("kind", ROLES)
def test_every_path_is_the_same_404_and_never_looked_at(kind, model, tmp_path, monkeypatch):
    names = paths_of(tmp_path, model)
    looked: list[str] = []
    real_realpath, real_stat = os.path.realpath, os.stat

    def spy(fn):
        def wrapped(path, *args, **kwargs):
            looked.append(str(path))
            return fn(path, *args, **kwargs)

        return wrapped

    with TestClient(create_app(Settings(data_dir=tmp_path / "data"), arena=False)) as client:
        monkeypatch.setattr(os.path, "realpath", spy(real_realpath))
        monkeypatch.setattr(os, "stat", spy(real_stat))
        answers = [rerank(client, f"{kind}:{name}") for name in names]
        monkeypatch.setattr(os.path, "realpath", real_realpath)
        monkeypatch.setattr(os, "stat", real_stat)
    assert [a.status_code for a in answers] == [404] * len(names)
    first = answers[0].json()
    assert all(a.json() == first for a in answers), [a.text for a in answers]  # identical, byte for byte
    assert all(a.content == answers[0].content for a in answers)
    available = {
        "crossencoder": "minilm-l6, bge-base, bge-v2-m3",
        "monot5": "base, 3b",
        "embedding": "minilm, all-MiniLM-L6-v2, sentence-transformers/all-MiniLM-L6-v2, arctic-l, gte-l",
    }
    assert first == {"detail": f"unknown {ROLES[kind]} (a path, not echoed); available: {available[kind]}"}
    forbidden = {
        form for n in names for form in (n, os.path.expanduser(n), os.path.join(os.path.expanduser(n), "config.json"))
    }
    forbidden.discard(str(Path.home()))  # the error handler resolves the home directory (to hide it), not the request
    mine = (str(model), str(tmp_path / "empty"), str(tmp_path / "no"))
    assert not [p for p in looked if p in forbidden or p.startswith(mine)], looked
    # a plain unknown name is echoed as before, with the same choices
    with TestClient(create_app(Settings(data_dir=tmp_path / "data"), arena=False)) as client:
        assert rerank(client, f"{kind}:nope").json() == {
            "detail": f"unknown {ROLES[kind]} (the name is not echoed); available: {available[kind]}"
        }


def test_dense_paths_are_the_same_404(model, tmp_path):
    with TestClient(create_app(Settings(data_dir=tmp_path / "data"), arena=False)) as client:
        answers = [
            client.post("/v1/retrieve", json={"query": "gzip", "retriever": f"dense:{name}"})
            for name in ("/etc", str(model), str(tmp_path / "missing"), "~")
        ]
    assert [a.status_code for a in answers] == [404] * 4
    assert all(a.content == answers[0].content for a in answers), [a.text for a in answers]
    assert "(a path, not echoed)" in answers[0].json()["detail"]


# --- allow_model_paths: realpath, one instance per directory, a bounded LRU ------------------------------------


def test_with_paths_allowed_every_spelling_of_a_directory_is_one_model(model, tmp_path, monkeypatch):
    loads: list[str] = []
    load = CrossEncoderReranker.load
    monkeypatch.setattr(CrossEncoderReranker, "load", lambda self: loads.append(self.checkpoint) or load(self))
    link = tmp_path / "link"
    link.symlink_to(model)
    spellings = [str(model), f"{model}/", f"{model.parent}/./{model.name}", f"{model}/../{model.name}", str(link)]
    app = create_app(Settings(data_dir=tmp_path / "data", allow_model_paths=True), arena=False)
    with TestClient(app) as client:
        answers = [rerank(client, f"crossencoder:{s}") for s in spellings]
        assert [a.status_code for a in answers] == [200] * len(spellings), [a.text for a in answers]
        assert all(a.json() == answers[0].json() for a in answers)
        assert loads == [os.path.realpath(model)]  # one model loaded, by its realpath
        assert app.state.reranking.path_models() == [("crossencoder", os.path.realpath(model))]
        # what is not a model directory is still one 404, whether or not it exists
        (tmp_path / "empty").mkdir()
        missing = [
            rerank(client, f"crossencoder:{p}")
            for p in ("/etc", str(tmp_path / "empty"), str(tmp_path / "nope"), "/etc/passwd")
        ]
        assert [a.status_code for a in missing] == [404] * 4
        assert all(a.content == missing[0].content for a in missing), [a.text for a in missing]
        assert missing[0].json() == {
            "detail": "unknown cross-encoder model (a path, not echoed); available: "
            "minilm-l6, bge-base, bge-v2-m3, a local model directory"
        }
        assert app.state.reranking.path_models() == [("crossencoder", os.path.realpath(model))]


def copies(model: Path, root: Path, names: str, size: int | None = None) -> dict[str, str]:
    """Copies of ``model`` (each its own directory), padded to ``size`` bytes of files when given."""
    out = {}
    for name in names:
        shutil.copytree(model, root / name)
        if size is not None:
            (root / name / "padding.bin").write_bytes(b"\0" * (size - dir_bytes(str(root / name))))
        out[name] = str(root / name)
    return out


def test_request_named_models_are_an_lru_by_count(model, tmp_path):
    d = copies(model, tmp_path, "abc")
    service = RerankService(Settings(data_dir=tmp_path / "data", allow_model_paths=True, model_cache_max=2))
    a, b = service.get(f"crossencoder:{d['a']}"), service.get(f"crossencoder:{d['b']}")
    assert service.get(f"crossencoder:{d['a']}/.") is a  # a use: a is now the most recent
    c = service.get(f"crossencoder:{d['c']}")
    assert service.path_models() == [("crossencoder", d["a"]), ("crossencoder", d["c"])]  # b dropped
    assert service.get(f"crossencoder:{d['c']}") is c and service.get(f"crossencoder:{d['a']}") is a
    b2 = service.get(f"crossencoder:{d['b']}")  # loaded again, dropping c (least recently used)
    assert b2 is not b and service.path_models() == [("crossencoder", d["a"]), ("crossencoder", d["b"])]


def test_request_named_models_are_an_lru_by_bytes(model, tmp_path):
    d = copies(model, tmp_path, "abc", size=400_000)  # two fit in 1 MB, three do not
    big = copies(model, tmp_path / "big", "x", size=1_100_000)["x"]
    service = RerankService(
        Settings(data_dir=tmp_path / "data", allow_model_paths=True, model_cache_max=10, model_cache_max_mb=1)
    )
    for name in "ab":
        service.get(f"crossencoder:{d[name]}")
    assert service.path_models() == [("crossencoder", d["a"]), ("crossencoder", d["b"])]
    service.get(f"crossencoder:{d['c']}")
    assert service.path_models() == [("crossencoder", d["b"]), ("crossencoder", d["c"])]
    with pytest.raises(ComponentArgumentError, match="RAGNAROK_MODEL_CACHE_MAX_MB"):  # more than the bound alone
        service.get(f"crossencoder:{big}")
    assert service.path_models() == [("crossencoder", d["b"]), ("crossencoder", d["c"])]


# --- no request reaches a model hub unless downloads are allowed ----------------------------------------------


def test_no_request_reaches_a_model_hub_unless_downloads_are_allowed(tmp_path, monkeypatch):
    """A fresh process, online as far as it knows, whose model hub is a local server counting requests."""
    monkeypatch.delenv("RAGNAROK_ALLOW_DOWNLOADS", raising=False)
    monkeypatch.delenv("RAGNAROK_ALLOW_MODEL_PATHS", raising=False)
    names = [
        "monot5:3b",
        "monot5",
        "crossencoder:bge-base",
        "crossencoder",
        "embedding:arctic-l",
        "embedding:gte-l",
        "monot5:/etc",
        "crossencoder:~",
        "embedding:/root",
        "monot5:castorini/monot5-large",
    ]
    bodies: list[str] = []
    statuses, hits = rerank_behind_a_counting_hub(names, tmp_path / "off", timeout_s=180, bodies=bodies)
    assert hits == []
    assert statuses == [422] * 6 + [404] * 4, bodies
    assert all("RAGNAROK_ALLOW_DOWNLOADS=1" in b for b in bodies[:6]), bodies
    assert not [b for b in bodies if "http" in b or "127.0.0.1" in b], bodies  # no hub URL, no address
    # the same hub sees a request when downloads are allowed: the count above could have failed
    monkeypatch.setenv("RAGNAROK_ALLOW_DOWNLOADS", "1")
    bodies = []
    statuses, hits = rerank_behind_a_counting_hub(["monot5:3b"], tmp_path / "on", timeout_s=180, bodies=bodies)
    assert any("monot5-3b" in h for h in hits), hits
    assert statuses == [422] and "<model hub>" in bodies[0] and "127.0.0.1" not in bodies[0], bodies  # named only


# --- error bodies: placeholders, never the server's paths, URLs or environment values -------------------------


def test_dense_with_a_directory_answers_without_the_data_path(model, tmp_path):
    settings = Settings(data_dir=tmp_path / "data", allow_model_paths=True)
    with TestClient(create_app(settings, arena=False)) as client:
        r = client.post("/v1/retrieve", json={"query": "gzip", "retriever": f"dense:{model}"})
    assert r.status_code == 503, r.text
    assert str(tmp_path) not in r.text and str(Path.home()) not in r.text
    assert r.json()["detail"].startswith("no dense index for ") and "<index demo>.dense/" in r.text


def test_a_remote_index_failure_names_the_index_not_its_url(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/v1/msmarco"  # nothing listens there
    settings = Settings(data_dir=tmp_path / "data", indexes={"remote": url}, remote_timeout_s=2)
    with TestClient(create_app(settings, arena=False)) as client:
        r = client.post("/v1/retrieve", json={"query": "gzip", "index": "remote"})
    assert r.status_code == 502, r.text
    assert "<index remote>" in r.json()["detail"] and "127.0.0.1" not in r.text, r.text


def test_scrub_replaces_every_server_path_url_and_environment_value(tmp_path, monkeypatch):
    home = str(Path.home())
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.internal:8080")
    monkeypatch.setenv("MY_SECRET_PATH", "/srv/secret-place")
    models = tmp_path / "models"
    settings = Settings(
        data_dir=tmp_path / "data",
        indexes={"msmarco": str(tmp_path / "idx"), "far": "http://10.0.0.7:8081/v1/m"},
        monot5_model=str(models / "t5"),
        rerank_models={"mine": str(models / "mine")},
        encoder_cache_dir=tmp_path / "enc",
        retrieval_url="http://r.internal:8000",
        generation_url="http://ag.internal:8001",
        rankzephyr_url="http://vllm.internal:9000/v1",
        generators=[{"name": "local", "backend": "openai", "base_url": "http://gpu7:8000/v1", "model": "m"}],
    )
    message = (
        f"{tmp_path}/data/x {tmp_path}/data/indexes/demo.dense {tmp_path}/idx.dense {models}/t5 "
        f"{models}/mine {tmp_path}/enc/onnx http://10.0.0.7:8081/v1/m/search http://r.internal:8000/v1/rerank "
        f"ag.internal:8001 http://vllm.internal:9000/v1/chat gpu7:8000 http://hub.internal:8080/x/y "
        f"/srv/secret-place/a {home}/.cache"
    )
    assert scrub({"error": [message]}, settings) == {
        "error": [
            "<data dir>/x <index demo>.dense <index msmarco>.dense <monot5 model> <model mine> <encoder cache dir>/onnx "
            "<index far>/search <retrieval service>/v1/rerank <generation service> <rankzephyr endpoint>/chat "
            "<generator local's endpoint> <model hub>/x/y <env MY_SECRET_PATH>/a <home>/.cache"
        ]
    }
    assert (
        scrub("unknown index 'nope'; available: demo, far, msmarco", settings)
        == "unknown index 'nope'; available: demo, far, msmarco"
    )  # ordinary messages are left alone
