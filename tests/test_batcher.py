"""Concurrent searches batched into Anserini's batch_search: the batcher itself, and on the real demo
index the same hits, scores and bytes as one search at a time."""

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from test_lucene import TOPICS

from ragnarok.core.types import Query
from ragnarok.stages.retrieve import anserini
from ragnarok.stages.retrieve.anserini import batch_search_hits, search_hits
from ragnarok.stages.retrieve.batcher import SearchBatcher
from ragnarok.stages.retrieve.lucene import LuceneRetriever


class Gate:
    """A fake searcher whose first search waits until the test has queued more jobs."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.calls: list[tuple[str, list[str], int]] = []

    def one(self, text: str, k: int) -> list[str]:
        self.calls.append(("one", [text], k))
        self.open.wait(10)
        if text == "boom":
            raise OSError("the index is gone")
        return [f"{text}-{n}" for n in range(k)]

    def many(self, texts: list[str], k: int) -> list[list[str]]:
        self.calls.append(("many", texts, k))
        if "boom" in texts:
            raise OSError("the index is gone")
        return [[f"{text}-{n}" for n in range(k)] for text in texts]


def test_queries_that_arrive_during_a_search_go_together_grouped_by_k():
    gate = Gate()
    batcher = SearchBatcher(gate.one, gate.many, workers=1, max_batch=3)
    first = batcher.submit("a", 2, list)
    while not gate.calls:  # the worker is inside the first search
        threading.Event().wait(0.01)
    later = {
        text: batcher.submit(text, k, lambda hits: len(hits)) for text, k in (("b", 2), ("c", 5), ("d", 2), ("e", 2))
    }
    gate.open.set()
    assert first.result(10) == ["a-0", "a-1"]
    assert {text: f.result(10) for text, f in later.items()} == {"b": 2, "c": 5, "d": 2, "e": 2}
    # b, c, d were queued together (max_batch 3): b and d in one batch_search, c (another k) alone; then e alone
    assert gate.calls[1:] == [("many", ["b", "d"], 2), ("one", ["c"], 5), ("one", ["e"], 2)]
    assert (batcher.stats.batches, batcher.stats.queries, batcher.stats.largest) == (4, 5, 2)
    batcher.close()
    with pytest.raises(RuntimeError, match="closed"):
        batcher.submit("f", 1, list)


def test_a_failing_search_fails_its_batch_and_a_failing_finish_only_its_job():
    gate = Gate()
    gate.open.set()
    batcher = SearchBatcher(gate.one, gate.many, workers=2)
    with pytest.raises(OSError, match="gone"):
        batcher.submit("boom", 1, list).result(10)

    def finish(hits: list[str]) -> str:
        if hits[0].startswith("bad"):
            raise ValueError("cannot serialise")
        return hits[0]

    futures = [batcher.submit(text, 1, finish) for text in ("ok", "bad", "fine")]
    assert futures[0].result(10) == "ok-0" and futures[2].result(10) == "fine-0"
    with pytest.raises(ValueError, match="serialise"):
        futures[1].result(10)
    assert batcher.submit("after", 1, finish).result(10) == "after-0"  # the workers are still alive
    batcher.close()


def _texts() -> list[str]:
    return [line.split("\t", 1)[1].strip() for line in TOPICS.read_text().splitlines() if "\t" in line]


@pytest.mark.parametrize("feedback", ["none", "rocchio", "rm3"])
@pytest.mark.parametrize("jackson", [True, False])
def test_batch_search_hits_equal_one_search_at_a_time(demo_settings, feedback, jackson, monkeypatch):
    """Anserini's batch_search read through Jackson (or hit by hit without it) gives exactly the hits and float
    scores of one search at a time, with and without pseudo-relevance feedback."""
    retriever = LuceneRetriever("bm25", str(demo_settings.data_dir / "indexes" / "demo"), feedback)
    java = retriever._load().object  # noqa: SLF001
    if not jackson:
        monkeypatch.setattr(anserini, "_mapper", False)
    texts = _texts()
    assert batch_search_hits(java, texts, 100, 2) == [search_hits(java, text, 100) for text in texts]
    assert batch_search_hits(java, ["zzzzqqq xxyyzzww", texts[0]], 5, 2)[0] == []


def test_concurrent_submissions_are_batched_and_byte_identical(demo_settings):
    """32 threads submitting at once: every answer is the bytes the pydantic models write for that query and k,
    and the batcher sent more than one query to a Java call."""
    retriever = LuceneRetriever("bm25+rocchio", str(demo_settings.data_dir / "indexes" / "demo"), "rocchio")
    texts = _texts()

    def query(n: int) -> Query:
        q = Query(text=texts[n % len(texts)])
        q.qid = f"q{n}"
        return q

    def one(n: int) -> bytes:
        return retriever.submit_json(query(n), 20 if n % 3 else 100).result(60)

    with ThreadPoolExecutor(32) as pool:
        got = list(pool.map(one, range(200)))
    for n in range(200):
        assert got[n] == retriever.retrieve(query(n), 20 if n % 3 else 100).model_dump_json(exclude_unset=True).encode()
    assert retriever._batch.stats.queries == 200  # noqa: SLF001
    assert retriever._batch.stats.largest > 1  # noqa: SLF001
    retriever.close()
