"""Dense retrieval (MiniLM + FAISS), CPU rerankers, listwise reranking against the real llama.cpp server."""

import pytest

from ragnarok.collection.lucene_index import index_documents
from ragnarok.generate.base import GeneratorConfig
from ragnarok.generate.openai_compat import OpenAIChatGenerator
from ragnarok.rerank.base import RerankError
from ragnarok.rerank.embedding import EmbeddingReranker, MMRReranker
from ragnarok.rerank.listwise import ListwiseReranker, parse_permutation, sweep, window_bounds
from ragnarok.rerank.rank_llm_adapter import RankLLMReranker
from ragnarok.retrieve.dense import DenseRetriever, build_dense_index, dense_dir, segments_from_lucene
from ragnarok.types import Candidate, Doc, Query, Request
from test_generate_backends import llama_server  # noqa: F401 - the session's real llama.cpp server

DOCS = [
    ("cooking", "How to bake bread", "Mix flour, water, yeast and salt, knead the dough and bake it in a hot oven."),
    ("astronomy", "Planets", "Jupiter is the largest planet of the solar system, a gas giant with many moons."),
    ("python", "argparse", "The argparse module makes it easy to write user-friendly command-line interfaces."),
    ("sport", "Football", "A football match has two teams of eleven players who try to score goals."),
    ("music", "Violin", "The violin is a bowed string instrument with four strings tuned in perfect fifths."),
    ("health", "Sleep", "Adults need seven to nine hours of sleep each night to stay healthy and alert."),
]


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    root = tmp_path_factory.mktemp("dense")
    docs = [{"docid": d, "title": t, "body": b, "url": "", "headings": ""} for d, t, b in DOCS]
    index_documents(iter(docs), root / "idx")
    assert build_dense_index(segments_from_lucene(root / "idx"), dense_dir(root / "idx", "minilm"), "minilm") == 6
    build_dense_index(segments_from_lucene(root / "idx"), dense_dir(root / "idx", "hnsw-test"), "minilm", "hnsw")
    return root / "idx"


@pytest.mark.parametrize(("query", "expected"), [
    ("which planet is the biggest", "astronomy#0_0"),
    ("how many hours should I rest at night", "health#0_0"),
    ("parse options given on the terminal in Python", "python#0_0"),
])
def test_dense_finds_paraphrases(small, query, expected):
    request = DenseRetriever("dense:minilm", str(small)).retrieve(Query(text=query), 3)
    assert request.candidates[0].docid == expected
    assert request.candidates[0].doc.title and request.candidates[0].doc.segment


def test_meta_and_hnsw(small):
    import json

    meta = json.loads((dense_dir(small, "minilm") / "meta.json").read_text())
    assert meta == {"model": "minilm", "dim": 384, "kind": "flat", "count": 6}
    assert json.loads((dense_dir(small, "hnsw-test") / "meta.json").read_text())["kind"] == "hnsw"


def _request(query: str) -> Request:
    cands = [Candidate(docid=f"{d}#0_0", score=float(10 - i), doc=Doc(title=t, segment=b))
             for i, (d, t, b) in enumerate(DOCS)]
    return Request(query=Query(text=query, qid="q"), candidates=cands)


def test_embedding_reranker_moves_the_relevant_passage_up():
    out = EmbeddingReranker().rerank(_request("tuning a string instrument"), 3)
    assert out.candidates[0].docid == "music#0_0" and len(out.candidates) == 3
    assert out.query.qid == "q"


def test_mmr_lambda_one_is_the_embedding_order_and_low_lambda_demotes_duplicates():
    request = _request("bread baking recipe")
    assert [c.docid for c in MMRReranker(lambda_=1.0).rerank(request, 6).candidates] == \
        [c.docid for c in EmbeddingReranker().rerank(request, 6).candidates]
    dup = Candidate(docid="cooking#1_5", score=1.0, doc=Doc(title="How to bake bread", segment=DOCS[0][2]))
    request.candidates.insert(1, dup)
    relevance_only = [c.docid for c in MMRReranker(lambda_=1.0).rerank(request, 3).candidates]
    diverse = [c.docid for c in MMRReranker(lambda_=0.3).rerank(request, 3).candidates]
    assert set(relevance_only[:2]) == {"cooking#0_0", "cooking#1_5"}
    assert diverse[0] in {"cooking#0_0", "cooking#1_5"} and diverse[1] not in {"cooking#0_0", "cooking#1_5"}
    with pytest.raises(ValueError):
        MMRReranker(lambda_=1.5)


@pytest.mark.parametrize(("text", "n", "expected"), [
    ("[3] > [1] > [2]", 3, [2, 0, 1]),
    ("[2] > [2] > [1]", 3, [1, 0, 2]),           # repeats dropped, missing appended
    ("[9] > [1] > [0]", 3, [0, 1, 2]),           # invented ids dropped
    ("I think passage 3 is best", 4, [2, 0, 1, 3]),
    ("no idea", 3, [0, 1, 2]),
    ("", 0, []),
])
def test_parse_permutation(text, n, expected):
    assert parse_permutation(text, n) == expected


def test_sliding_windows_go_bottom_up():
    assert window_bounds(50, 20, 10) == [(30, 50), (20, 40), (10, 30), (0, 20)]
    assert window_bounds(15, 20, 10) == [(0, 15)]
    seen = []

    def best_first(chunk):  # a perfect ranker: larger item ids are more relevant
        seen.append(list(chunk))
        return sorted(range(len(chunk)), key=lambda i: -chunk[i])

    # the best items at the bottom bubble up through the overlapping windows
    order = sweep(list(range(30)), best_first, window=20, stride=10)
    assert order[:10] == list(range(29, 19, -1)) and sorted(order) == list(range(30))
    assert seen[0] == list(range(10, 30)) and len(seen) == 2


def test_listwise_against_the_real_llama_cpp_server(llama_server):  # noqa: F811
    chat = OpenAIChatGenerator(GeneratorConfig(name="smollm2-server", backend="openai", base_url=llama_server,
                                               model="smollm2", max_tokens=60))
    request = _request("which planet is the largest")
    request.candidates = request.candidates * 4  # 24 candidates: two overlapping windows
    request.candidates = [Candidate(docid=f"{c.docid}-{i}", score=c.score, doc=c.doc)
                          for i, c in enumerate(request.candidates)]
    for passes in (1, 3):
        out = ListwiseReranker("listwise:smollm2", chat, window=20, stride=10, passes=passes).rerank(request, 24)
        assert sorted(c.docid for c in out.candidates) == sorted(c.docid for c in request.candidates)
    assert len(ListwiseReranker("l", chat).rerank(request, 5).candidates) == 5


def test_listwise_failure_names_the_reranker():
    chat = OpenAIChatGenerator(GeneratorConfig(name="down", backend="openai", base_url="http://127.0.0.1:9/v1",
                                               model="x", max_retries=0, timeout_s=2))
    with pytest.raises(RerankError, match="reranker 'rankzephyr' failed: cannot reach"):
        ListwiseReranker("rankzephyr", chat).rerank(_request("q"), 3)


def test_rank_llm_says_why_it_cannot_run():
    assert "rank_llm is not installed" in RankLLMReranker("monot5", "castorini/monot5-3b-msmarco-10k").availability()
