"""Topic files: the TREC RAG 2024 TSV, the 2025 JSONL, TREC's SGML forms (CACM), and our demo set.

Topic text is kept exactly as in the file (only the line ending is removed): the track requires answers to
repeat it verbatim. Errors name the file and the 1-based line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Topic:
    qid: str
    text: str


class TopicFormatError(ValueError):
    pass


def _lines(path: Path) -> list[str]:
    try:
        return Path(path).read_bytes().decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        line = Path(path).read_bytes()[: exc.start].count(b"\n") + 1
        raise TopicFormatError(f"{path}:{line}: not valid UTF-8") from None
    except OSError as exc:
        raise TopicFormatError(f"cannot read topic file {path}: {exc.strerror or exc}") from None


def read_tsv(path: Path) -> list[Topic]:
    """``qid<TAB>text`` per line (TREC RAG 2024, TREC DL, our demo set)."""
    topics = []
    for n, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        qid, tab, text = line.partition("\t")
        if not tab or not qid.strip() or not text.strip():
            raise TopicFormatError(f"{path}:{n}: expected 'qid<TAB>text', got {line[:60]!r}")
        topics.append(Topic(qid.strip(), text))
    return topics


def read_jsonl(path: Path) -> list[Topic]:
    """TREC RAG 2025 ``{"id", "title"}`` per line (``{"qid", "text"}`` also accepted)."""
    topics = []
    for n, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise TopicFormatError(f"{path}:{n}: malformed JSON ({exc})") from None
        if not isinstance(record, dict):
            raise TopicFormatError(f"{path}:{n}: expected a JSON object")
        qid, text = record.get("id", record.get("qid")), record.get("title", record.get("text"))
        if qid in (None, "") or not isinstance(text, str) or not text.strip():
            raise TopicFormatError(f"{path}:{n}: expected fields 'id' and 'title'")
        topics.append(Topic(str(qid), text))
    return topics


_DOC = re.compile(r"<DOC>\s*<DOCNO>(.*?)</DOCNO>(.*?)</DOC>", re.S | re.I)
_TOP = re.compile(r"<top>(.*?)</top>", re.S | re.I)
_NUM = re.compile(r"<num>\s*(?:Number:)?\s*(\S+)", re.I)
_TITLE = re.compile(r"<title>\s*(?:Topic:)?(.*?)(?=<desc>|<narr>|</top>|$)", re.S | re.I)


def read_trec(path: Path) -> list[Topic]:
    """TREC SGML topics: CACM's ``<DOC><DOCNO> n </DOCNO> text </DOC>`` or classic ``<top><num><title>``.
    The query is the text (or title) with whitespace normalised."""
    raw = "\n".join(_lines(path))
    topics = [Topic(m.group(1).strip(), " ".join(m.group(2).split())) for m in _DOC.finditer(raw)]
    for block in _TOP.findall(raw):
        num, title = _NUM.search(block), _TITLE.search(block)
        if not num or not title:
            raise TopicFormatError(f"{path}: a <top> block without <num> or <title>")
        topics.append(Topic(num.group(1), " ".join(title.group(1).split())))
    if not topics:
        raise TopicFormatError(f"{path}: no <DOC> or <top> topics found")
    return topics


def read_topics(path: Path) -> list[Topic]:
    """Any topic file, by extension and content; duplicate qids are an error."""
    path = Path(path)
    if path.suffix == ".jsonl":
        topics = read_jsonl(path)
    else:
        head = "\n".join(_lines(path)[:50])
        topics = read_trec(path) if re.search(r"<(DOC|top)>", head, re.I) else read_tsv(path)
    seen: set[str] = set()
    for topic in topics:
        if topic.qid in seen:
            raise TopicFormatError(f"{path}: topic {topic.qid!r} appears twice")
        seen.add(topic.qid)
    return topics


def topic_set_path(name: str, topics_dir: Path) -> Path | None:
    for pattern in ("{}.tsv", "{}.jsonl", "topics.{}.txt", "topics.{}.tsv", "topics.{}.jsonl", "{}.txt"):
        candidate = Path(topics_dir) / pattern.format(name)
        if candidate.is_file():
            return candidate
    return None


def available_sets(topics_dir: Path) -> list[str]:
    names = set()
    for p in Path(topics_dir).glob("*"):
        if p.suffix in {".tsv", ".jsonl", ".txt"} and not p.name.startswith(("qrels", "README")):
            names.add(p.name.removeprefix("topics.").rsplit(".", 1)[0])
    return sorted(names)


def load_topics(source: str | Path, topics_dir: Path | None = None) -> list[Topic]:
    """A topic file path, or a topic-set name resolved in ``topics_dir``."""
    path = Path(source)
    if path.is_file():
        return read_topics(path)
    if topics_dir is not None and (found := topic_set_path(str(source), topics_dir)):
        return read_topics(found)
    names = ", ".join(available_sets(topics_dir)) if topics_dir else ""
    raise FileNotFoundError(f"unknown topic set or file {str(source)!r}" + (f"; available: {names}" if names else ""))
