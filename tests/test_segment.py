import pytest

from ragnarok.collection.segment import Segmenter


def _doc(n_sentences: int) -> dict:
    body = " ".join(f"Sentence number {i} is here." for i in range(n_sentences))
    return {"docid": "doc1", "url": "u", "title": "T", "headings": "H", "body": body}


@pytest.mark.parametrize(("n", "expected"), [(0, 0), (1, 1), (10, 1), (11, 2), (15, 2), (16, 3), (23, 4)])
def test_window_count(n, expected):
    assert len(list(Segmenter().segment(_doc(n)))) == expected


def test_segments_are_exact_spans_with_marco_ids():
    doc = _doc(23)
    segments = list(Segmenter().segment(doc))
    for n, seg in enumerate(segments):
        assert doc["body"][seg["start_char"] : seg["end_char"]] == seg["segment"]
        assert seg["docid"] == f"doc1#{n}_{seg['start_char']}"
        assert (seg["title"], seg["url"], seg["headings"]) == ("T", "u", "H")
    assert segments[0]["segment"].startswith("Sentence number 0 ")
    assert segments[0]["segment"].endswith("Sentence number 9 is here.")
    assert segments[1]["segment"].startswith("Sentence number 5 ")  # stride 5
    assert segments[-1]["segment"].endswith("Sentence number 22 is here.")


def test_offsets_are_characters_not_bytes():
    body = "Ünïcödé façade. " * 12 + "日本語の文です。 End."
    seg = list(Segmenter(window=3, stride=3).segment({"docid": "d", "body": body}))
    assert all(body[s["start_char"] : s["end_char"]] == s["segment"] for s in seg)


def test_invalid_window():
    with pytest.raises(ValueError):
        Segmenter(window=5, stride=6)
