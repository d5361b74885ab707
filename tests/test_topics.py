"""Topic readers on the real TREC RAG and CACM files, exact topic text, and clear errors on bad files."""

import json
import os
from pathlib import Path

import pytest

from ragnarok.core.topics import Topic, TopicFormatError, load_topics, read_jsonl, read_topics, read_trec, read_tsv

TOPICS = Path(__file__).resolve().parent.parent / "topics"


@pytest.mark.parametrize(
    ("name", "count"),
    [("topics.rag24.test.txt", 301), ("topics.rag24.raggy-dev.txt", 120), ("topics.rag24.researchy-dev.txt", 600)],
)
def test_tsv_track_files_keep_the_exact_text(shared_data, name, count):
    path = shared_data / "trec-rag" / name
    topics = load_topics(path)
    assert len(topics) == count and len({t.qid for t in topics}) == count
    raw = path.read_bytes().decode("utf-8").split("\n")
    first = raw[0].removesuffix("\r")  # the 2024 test file has CRLF line endings
    assert f"{topics[0].qid}\t{topics[0].text}" == first
    assert all("\r" not in t.text and "\n" not in t.text for t in topics)
    assert [f"{t.qid}\t{t.text}" for t in topics] == [line.removesuffix("\r") for line in raw if line.strip()]


def test_rag24_test_first_topic(shared_data):
    topics = read_tsv(shared_data / "trec-rag" / "topics.rag24.test.txt")
    assert topics[0] == Topic("2024-145979", "what is vicarious trauma and how can it be coped with?")
    assert all(t.qid.startswith("2024-") for t in topics)


def test_rag25_ids_and_titles_exact(shared_data):
    path = shared_data / "trec-rag" / "topics.rag25.test.jsonl"
    topics = load_topics(path)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert len(topics) == 105
    assert [(t.qid, t.text) for t in topics] == [(r["id"], r["title"]) for r in records]
    assert topics[0].qid == "464"
    assert topics[0].text.startswith("I want a thorough understanding of what makes up")


def test_cacm_sgml(shared_data):
    topics = load_topics(shared_data / "cacm" / "topics.cacm.txt")
    assert len(topics) == 64 and [t.qid for t in topics] == [str(n) for n in range(1, 65)]
    assert topics[0].text == (
        "What articles exist which deal with TSS (Time Sharing System), an operating system for IBM computers?"
    )
    assert topics[1].text == ("I am interested in articles written either by Prieve or Udo Pooch Prieve, B. Pooch, U.")
    assert all(t.text == " ".join(t.text.split()) and t.text for t in topics)


def test_classic_trec_top_form(tmp_path):
    path = tmp_path / "topics.robust.txt"
    path.write_text(
        "<top>\n<num> Number: 301\n<title> International Organized Crime\n\n<desc> Description:\n"
        "Identify organizations.\n<narr> Narrative:\nA relevant document...\n</top>\n\n"
        "<top>\n<num> Number: 302 <title> Topic: Poliomyelitis and   Post-Polio\n"
        "</title>\n</top>\n"
    )
    assert read_trec(path) == [
        Topic("301", "International Organized Crime"),
        Topic("302", "Poliomyelitis and Post-Polio"),
    ]
    assert load_topics("robust", tmp_path) == read_trec(path)


def test_jsonl_accepts_qid_text_and_tsv_keeps_spaces(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"qid": 7, "text": "seven"}\n\n{"id": "8", "title": " eight "}\n')
    assert read_jsonl(tmp_path / "a.jsonl") == [Topic("7", "seven"), Topic("8", " eight ")]
    (tmp_path / "b.tsv").write_text("q1\t  padded\ttext  \r\n\nq2\tx\u2028y\n", newline="")
    assert read_tsv(tmp_path / "b.tsv") == [Topic("q1", "  padded\ttext  "), Topic("q2", "x\u2028y")]


def test_named_sets_and_resolution_order(tmp_path):
    assert len(load_topics("demo", TOPICS)) >= 30
    (tmp_path / "topics.dev.txt").write_text("d1\tfrom txt\n")
    (tmp_path / "dev.tsv").write_text("d1\tfrom tsv\n")
    (tmp_path / "topics.other.jsonl").write_text('{"id": "o1", "title": "other"}\n')
    assert load_topics("dev", tmp_path) == [Topic("d1", "from tsv")]
    assert load_topics("other", tmp_path) == [Topic("o1", "other")]
    (tmp_path / "dev.tsv").unlink()
    assert load_topics("dev", tmp_path) == [Topic("d1", "from txt")]


def test_unknown_name_lists_available_sets(tmp_path):
    with pytest.raises(FileNotFoundError, match="available: demo"):
        load_topics("rag99", TOPICS)
    (tmp_path / "a.tsv").write_text("1\tx\n")
    (tmp_path / "qrels.a.txt").write_text("1 0 d 1\n")
    with pytest.raises(FileNotFoundError, match=r"'nope'; available: a$"):
        load_topics("nope", tmp_path)
    with pytest.raises(FileNotFoundError, match="unknown topic set or file"):
        load_topics(tmp_path / "missing.tsv")


@pytest.mark.parametrize(
    ("name", "content", "line"),
    [
        ("bad.tsv", "q1\tfine\nno tab here\n", 2),
        ("bad2.tsv", "q1\tok\n\nq2\t   \n", 3),
        ("bad3.tsv", "\tno id\n", 1),
        ("bad.jsonl", '{"id": "1", "title": "t"}\n{"id": "2", "title": \n', 2),
        ("bad2.jsonl", '{"id": "1"}\n', 1),
        ("bad3.jsonl", '{"id": "1", "title": "a"}\n\n["not", "an", "object"]\n', 3),
        ("bad.txt", "<DOC>\n<DOCNO> 1 </DOCNO> one </DOC>\n<DOC>\n<DOCNO> 2 </DOCNO> never closed\n", 3),
        ("bad2.txt", "<top>\n<num> Number: 1\n<title> a\n</top>\n\n<top>\n<desc> no num\n</top>\n", 6),
        ("dup.tsv", "q1\ta\nq2\tb\nq1\tc\n", 3),
    ],
)
def test_malformed_files_name_the_line(tmp_path, name, content, line):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(TopicFormatError, match=rf"{name}:{line}: ") as info:
        load_topics(path)
    assert info.value.line == line and info.value.path == path and "\n" not in str(info.value)


def test_duplicates_invalid_utf8_and_empty(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"id": "1", "title": "a"}\n{"id": 1, "title": "b"}\n')
    with pytest.raises(TopicFormatError, match=r"d.jsonl:2: topic '1' appears twice \(first on line 1\)"):
        load_topics(tmp_path / "d.jsonl")
    (tmp_path / "u.tsv").write_bytes(b"q1\tok\nq2\tbad \xff byte\n")
    with pytest.raises(TopicFormatError, match=r"u.tsv:2: not valid UTF-8"):
        load_topics(tmp_path / "u.tsv")
    (tmp_path / "e.txt").write_text("just words without any tab\n")
    with pytest.raises(TopicFormatError, match=r"e.txt:1: expected 'qid<TAB>text'"):
        read_topics(tmp_path / "e.txt")


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file(tmp_path):
    path = tmp_path / "secret.tsv"
    path.write_text("q1\tx\n")
    path.chmod(0)
    with pytest.raises(TopicFormatError, match=r"secret.tsv: cannot read topic file: Permission denied"):
        load_topics(path)


def test_directory_is_not_readable_as_topics(tmp_path):
    (tmp_path / "dir.tsv").mkdir()
    with pytest.raises(TopicFormatError, match="cannot read topic file"):
        read_tsv(tmp_path / "dir.tsv")


def test_permission_error_is_a_one_line_topic_error(tmp_path, monkeypatch):
    path = tmp_path / "locked.tsv"
    path.write_text("q1\tx\n")

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(TopicFormatError, match=r"^.*locked.tsv: cannot read topic file: Permission denied$"):
        load_topics(path)
