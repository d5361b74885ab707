"""``RocchioSearch`` (Rocchio with a first round of the feedback documents only) gives exactly Anserini's own
Rocchio hits and float scores, on the demo topics and odd queries, at depths below, at and above the feedback
documents' count (tests/test_cacm.py compares the CACM topics)."""

import threading

from test_lucene import TOPICS

from ragnarok.stages.retrieve.anserini import LuceneSearcher, RocchioSearch, search_hits

ODD = ["the of and", "zzzzqqq xxyyzzww", "python", "Python's `os.getenv` — returns None?"]
DEPTHS = (1, 3, 10, 11, 100, 1000)


def rocchio_searcher(index: str) -> LuceneSearcher:
    searcher = LuceneSearcher(index)
    searcher.set_bm25(0.9, 0.4)
    searcher.set_rocchio()
    assert isinstance(searcher.rocchio, RocchioSearch)  # a Lucene 9 index: the cheaper search is used
    return searcher


def same_as_anserini(searcher: LuceneSearcher, texts: list[str]) -> int:
    compared = 0
    for text in texts:
        for k in DEPTHS:
            assert searcher.hits(text, k) == search_hits(searcher.object, text, k), (text, k)
            compared += 1
    return compared


def test_demo_topics_get_anserinis_rocchio_hits(demo_settings):
    texts = [line.split("\t", 1)[1].strip() for line in TOPICS.read_text().splitlines() if "\t" in line]
    searcher = rocchio_searcher(str(demo_settings.data_dir / "indexes" / "demo"))
    assert same_as_anserini(searcher, texts + ODD) == (len(texts) + len(ODD)) * len(DEPTHS)
    assert searcher.hits("python", 100) != search_hits(_bm25(searcher), "python", 100)  # feedback did something


def _bm25(searcher: LuceneSearcher) -> object:
    plain = LuceneSearcher(searcher.index_dir)
    plain.set_bm25(0.9, 0.4)
    return plain.object


def test_concurrent_searches_get_the_same_hits(demo_settings):
    """Six threads searching at once (as the batcher's workers and in-process callers do): every answer is
    Anserini's for that query and depth (pyjnius has mixed up Java objects of one class across threads)."""
    texts = [line.split("\t", 1)[1].strip() for line in TOPICS.read_text().splitlines() if "\t" in line]
    searcher = rocchio_searcher(str(demo_settings.data_dir / "indexes" / "demo"))
    want = {(text, k): search_hits(searcher.object, text, k) for text in texts for k in (10, 100)}
    wrong: list[tuple[str, int]] = []

    def work(n: int) -> None:
        for i, text in enumerate(texts * 3):
            k = (10, 100)[(i + n) % 2]
            if searcher.hits(text, k) != want[(text, k)]:
                wrong.append((text, k))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
