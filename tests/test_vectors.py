"""Text vectors computed once: the sentence store written with the dense index, the bounded cache,
and the extractive generator reading them instead of encoding per request. Real MiniLM, a real FAISS build."""

from __future__ import annotations

import numpy as np
import pytest

from ragnarok.core.types import Candidate, Doc, Query
from ragnarok.stages.embed.vectors import STORE_DIR, TextVectors, open_store, text_keys
from ragnarok.stages.generate.extractive import ExtractiveGenerator, prose_sentences
from ragnarok.stages.generate.prompts import get_template
from ragnarok.stages.retrieve.dense import shared_encoder
from ragnarok.stages.retrieve.dense_build import build_dense_index

SEGMENTS = {
    "gzip#0": (
        "gzip",
        "The gzip module compresses and decompresses files in the GNU zip format. Its open() "
        "function returns a file object in binary or text mode. Use it to read .gz files.",
    ),
    "bz2#0": (
        "bz2",
        "The bz2 module compresses data with the bzip2 algorithm. It is slower than gzip but "
        "usually makes smaller files. Its open() function also works in text mode.",
    ),
    "tar#0": (
        "tarfile",
        "The tarfile module reads and writes tar archives. An archive may be compressed with "
        "gzip, bz2 or lzma. Members are extracted one by one or all at once.",
    ),
}


def indexed(docid: str) -> str:
    title, segment = SEGMENTS[docid]
    return f"{title}\n{segment}"


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("vectors") / "dense"
    triples = [(docid, indexed(docid), SEGMENTS[docid][1]) for docid in SEGMENTS]
    assert build_dense_index(iter(triples), out, "minilm", batch_size=2) == len(SEGMENTS)
    return out / STORE_DIR


def counting(calls: list[list[str]]):
    encoder = shared_encoder("minilm")
    return lambda texts, query: calls.append(list(texts)) or encoder.encode(texts, query=query)


def test_the_store_holds_each_segment_and_its_prose_sentences_as_the_model_encodes_them(store_dir):
    store = open_store(store_dir)
    assert store is not None and store.model == "minilm"
    texts = [t for docid in SEGMENTS for t in (indexed(docid), *prose_sentences(SEGMENTS[docid][1]))]
    assert len(store) == len(set(texts)) == len(texts) > 2 * len(SEGMENTS)
    found, rows = store.lookup(text_keys(texts))
    assert found.all()
    want = shared_encoder("minilm").encode(texts)
    assert np.abs(np.asarray(store.vectors[rows]) - want).max() < 1e-5
    found, _ = store.lookup(text_keys(["a sentence that no segment holds."]))
    assert not found.any()


def test_store_hits_encode_nothing_misses_are_encoded_once_and_the_cache_is_bounded(store_dir):
    calls: list[list[str]] = []
    vectors = TextVectors("minilm", counting(calls), cache_entries=2)
    assert vectors.add_store(store_dir) and vectors.add_store(store_dir) and len(vectors.stores) == 1
    sentences = prose_sentences(SEGMENTS["gzip#0"][1])
    got = vectors.encode(sentences)
    assert calls == [] and vectors.stats["store"] == len(sentences) and got.shape == (len(sentences), 384)
    vectors.encode(["first new text.", "second new text.", "first new text."])
    assert calls == [["first new text.", "second new text."]]  # misses in one batch, each once
    vectors.encode(["second new text."])
    assert len(calls) == 1 and vectors.stats["cache"] >= 1
    vectors.encode(["third new text."])  # evicts the least recently used ("first new text.")
    vectors.encode(["first new text."])
    assert calls[-1] == ["first new text."] and len(calls) == 3


def test_a_store_of_another_model_or_none_at_all_is_not_read(store_dir, tmp_path):
    assert not TextVectors("arctic-l", counting([])).add_store(store_dir)
    assert not TextVectors("minilm", counting([])).add_store(tmp_path)  # no store there


def test_query_vectors_are_keyed_with_their_prefix():
    calls: list[list[str]] = []
    vectors = TextVectors("minilm", counting(calls), query_prefix="query: ")
    vectors.encode(["gzip"], query=True)
    vectors.encode(["gzip"])  # the document text "gzip" is another text for the model
    assert len(calls) == 2
    plain = TextVectors("minilm", counting(calls))  # no prefix: a query is the same text as a document's
    plain.encode(["gzip"], query=True)
    plain.encode(["gzip"])
    assert len(calls) == 3


def test_the_extractive_answer_is_the_same_with_the_store_and_reads_no_sentence_from_the_model(store_dir, monkeypatch):
    import ragnarok.stages.embed.vectors as module

    candidates = [
        Candidate(docid=d, score=1.0 / (i + 1), doc=Doc(title=t, segment=s))
        for i, (d, (t, s)) in enumerate(SEGMENTS.items())
    ]
    topic = Query(text="how do I open a gzip file in text mode", qid="1")
    template = get_template("ragnarok")
    generator = ExtractiveGenerator()

    calls: list[list[str]] = []
    without = TextVectors("minilm", counting(calls))
    monkeypatch.setattr(module, "text_vectors", lambda model="minilm": without)
    want = generator.generate(topic, candidates, template)
    assert len(calls) == 1 and len(calls[0]) > 5  # the query and every sentence, encoded for this answer

    calls.clear()
    with_store = TextVectors("minilm", counting(calls))
    with_store.add_store(store_dir)
    monkeypatch.setattr(module, "text_vectors", lambda model="minilm": with_store)
    got = generator.generate(topic, candidates, template)
    assert got.model_dump() == want.model_dump()
    assert calls == [[topic.text]]  # only the query: every sentence came from the store
