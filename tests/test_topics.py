"""Topic readers on the real TREC RAG files, exact topic text, and clear errors on bad files."""

from pathlib import Path

import pytest

from ragnarok.topics import TopicFormatError, load_topics, read_jsonl, read_trec, read_tsv

TOPICS = Path(__file__).resolve().parent.parent / "topics"


@pytest.mark.parametrize(("name", "count"), [
    ("topics.rag24.test.txt", 301), ("topics.rag24.raggy-dev.txt", 120),
    ("topics.rag24.researchy-dev.txt", 600), ("topics.rag25.test.jsonl", 105),
])
def test_real_track_files(shared_data, name, count):
    path = shared_data / "trec-rag" / name
    topics = load_topics(path)
    assert len(topics) == count and len({t.qid for t in topics}) == count
    first = path.read_text(encoding="utf-8").splitlines()[0]
    if name.endswith(".jsonl"):
        import json

        record = json.loads(first)
        assert (topics[0].qid, topics[0].text) == (record["id"], record["title"])
    else:
        assert f"{topics[0].qid}\t{topics[0].text}" == first  # text exactly as in the file


def test_rag24_ids(shared_data):
    topics = read_tsv(shared_data / "trec-rag" / "topics.rag24.test.txt")
    assert all(t.qid.startswith("2024-") for t in topics)


def test_cacm_sgml(shared_data):
    topics = read_trec(shared_data / "cacm" / "topics.cacm.txt")
    assert len(topics) == 64 and topics[0].qid == "1"
    assert topics[0].text.startswith("What articles exist which deal with TSS (Time Sharing System), an operating")
    assert "\n" not in topics[0].text


def test_named_sets_and_unknown_names(tmp_path):
    assert len(load_topics("demo", TOPICS)) >= 30
    with pytest.raises(FileNotFoundError, match="available: demo"):
        load_topics("rag99", TOPICS)


@pytest.mark.parametrize(("name", "content", "line"), [
    ("bad.tsv", "q1\tfine\nno tab here\n", 2),
    ("bad2.tsv", "q1\tok\n\nq2\t   \n", 3),
    ("bad.jsonl", '{"id": "1", "title": "t"}\n{"id": "2", "title": \n', 2),
    ("bad2.jsonl", '{"id": "1"}\n', 1),
])
def test_malformed_files_name_the_line(tmp_path, name, content, line):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(TopicFormatError, match=rf"{name}:{line}:"):
        load_topics(path)


def test_invalid_utf8_and_duplicates(tmp_path):
    (tmp_path / "u.tsv").write_bytes(b"q1\tok\nq2\tbad \xff byte\n")
    with pytest.raises(TopicFormatError, match=r"u.tsv:2: not valid UTF-8"):
        load_topics(tmp_path / "u.tsv")
    (tmp_path / "d.tsv").write_text("q1\ta\nq1\tb\n")
    with pytest.raises(TopicFormatError, match="appears twice"):
        load_topics(tmp_path / "d.tsv")
    assert read_jsonl  # the 2025 reader is exercised through load_topics above
