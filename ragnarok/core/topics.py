"""Topic files: TREC RAG 2024 TSV, 2025 JSONL, TREC's SGML forms (CACM, classic ``<top>``), our demo set.

Topic text from TSV and JSONL files is kept exactly as in the file (only the line ending is removed): the
track requires answers to repeat it verbatim. SGML topics are whitespace-normalised. Every error names the
file and, where there is one, the 1-based line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

#: File names tried, in order, when a topic-set name is resolved in a topics folder.
NAME_PATTERNS = ("{}.tsv", "{}.jsonl", "topics.{}.txt", "topics.{}.jsonl", "{}.txt")


@dataclass(frozen=True)
class Topic:
    """One topic: its id and its query text."""

    qid: str
    text: str


class TopicFormatError(ValueError):
    """A topic file that cannot be read or parsed; the message is ``{path}:{line}: {reason}``."""

    def __init__(self, path: str | Path, line: int | None, reason: str) -> None:
        self.path = Path(path)
        self.line = line
        self.reason = reason
        where = f"{path}:{line}" if line is not None else f"{path}"
        super().__init__(f"{where}: {reason}")


def _read_text(path: Path) -> str:
    """The file decoded as UTF-8 (a leading BOM dropped); unreadable files become TopicFormatError."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise TopicFormatError(path, None, f"cannot read topic file: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TopicFormatError(path, line, "not valid UTF-8") from None


def _lines(path: Path) -> list[str]:
    """Lines split on ``\\n`` only (a trailing ``\\r`` removed), so text with other separators stays whole."""
    text = _read_text(path)
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _check_qid(path: Path, line: int | None, qid: str) -> str:
    if any(c.isspace() for c in qid):
        raise TopicFormatError(path, line, f"topic id {qid!r} contains whitespace")
    return qid


def _unique(path: Path, numbered: list[tuple[int | None, Topic]]) -> list[Topic]:
    """The topics, after checking that no id appears twice."""
    seen: dict[str, int | None] = {}
    for line, topic in numbered:
        if topic.qid in seen:
            first = f" (first on line {seen[topic.qid]})" if seen[topic.qid] is not None else ""
            raise TopicFormatError(path, line, f"topic {topic.qid!r} appears twice{first}")
        seen[topic.qid] = line
    return [topic for _, topic in numbered]


def read_tsv(path: str | Path) -> list[Topic]:
    """``qid<TAB>text`` per line (TREC RAG 2024, TREC DL, our demo set); blank lines are skipped."""
    path = Path(path)
    numbered: list[tuple[int | None, Topic]] = []
    for n, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        qid, tab, text = line.partition("\t")
        if not tab:
            raise TopicFormatError(path, n, f"expected 'qid<TAB>text', found no tab in {line[:60]!r}")
        if not qid.strip() or not text.strip():
            missing = "id" if not qid.strip() else "text"
            raise TopicFormatError(path, n, f"empty topic {missing} in {line[:60]!r}")
        numbered.append((n, Topic(_check_qid(path, n, qid.strip()), text)))
    return _unique(path, numbered)


def read_jsonl(path: str | Path) -> list[Topic]:
    """TREC RAG 2025 ``{"id", "title"}`` per line (``{"qid", "text"}`` also accepted)."""
    path = Path(path)
    numbered: list[tuple[int | None, Topic]] = []
    for n, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise TopicFormatError(path, n, f"malformed JSON ({exc})") from None
        if not isinstance(record, dict):
            raise TopicFormatError(path, n, f"expected a JSON object, got {type(record).__name__}")
        qid = record.get("id", record.get("qid"))
        text = record.get("title", record.get("text"))
        if isinstance(qid, bool) or not isinstance(qid, (str, int)) or not str(qid).strip():
            raise TopicFormatError(path, n, "missing or empty topic id (expected field 'id' or 'qid')")
        if not isinstance(text, str) or not text.strip():
            raise TopicFormatError(path, n, "missing or empty topic text (expected field 'title' or 'text')")
        numbered.append((n, Topic(_check_qid(path, n, str(qid).strip()), text)))
    return _unique(path, numbered)


_OPEN = re.compile(r"<(DOC|top)>", re.I)
_DOCNO = re.compile(r"^\s*<DOCNO>(.*?)</DOCNO>(.*)$", re.S | re.I)
_NUM = re.compile(r"<num>\s*(?:Number:)?\s*([^\s<]+)", re.I)
_TITLE = re.compile(r"<title>\s*(?:Topic:)?(.*?)(?=</title>|<desc>|<narr>|<num>|$)", re.S | re.I)


def read_trec(path: str | Path) -> list[Topic]:
    """TREC SGML topics: CACM's ``<DOC><DOCNO> n </DOCNO> text </DOC>`` or classic ``<top><num><title>``.

    The query is the text after ``</DOCNO>`` (or the ``<title>``), whitespace-normalised.
    """
    path = Path(path)
    raw = "\n".join(_lines(path))
    numbered: list[tuple[int | None, Topic]] = []
    pos = 0
    while match := _OPEN.search(raw, pos):
        tag, line = match.group(1), raw.count("\n", 0, match.start()) + 1
        close = re.compile(rf"</{tag}>", re.I).search(raw, match.end())
        if close is None:
            raise TopicFormatError(path, line, f"<{tag}> is never closed by </{tag}>")
        body, pos = raw[match.end() : close.start()], close.end()
        if tag.lower() == "doc":
            doc = _DOCNO.match(body)
            if doc is None or not doc.group(1).strip():
                raise TopicFormatError(path, line, "<DOC> without a <DOCNO> ... </DOCNO> topic id")
            qid, text = doc.group(1).strip(), doc.group(2)
        else:
            num, title = _NUM.search(body), _TITLE.search(body)
            if num is None or title is None:
                raise TopicFormatError(path, line, "<top> block without <num> or <title>")
            qid, text = num.group(1), title.group(1)
        text = " ".join(text.split())
        if not text:
            raise TopicFormatError(path, line, f"topic {qid!r} has no text")
        numbered.append((line, Topic(_check_qid(path, line, qid), text)))
    if not numbered:
        raise TopicFormatError(path, None, "no <DOC> or <top> topics found")
    return _unique(path, numbered)


def read_topics(path: str | Path) -> list[Topic]:
    """Any topic file, by extension (``.jsonl``/``.json``) or else by content (SGML tags, JSON lines, TSV).

    A file without a single topic (empty, or blank lines only) is a TopicFormatError: a run over it would
    do nothing and look like success."""
    path = Path(path)
    if path.suffix.lower() in {".jsonl", ".json"}:
        topics = read_jsonl(path)
    else:
        head = _read_text(path)[:4096]
        if _OPEN.search(head):
            topics = read_trec(path)
        else:
            topics = read_jsonl(path) if head.lstrip().startswith("{") else read_tsv(path)
    if not topics:
        raise TopicFormatError(path, None, "no topics in the file (it is empty)")
    return topics


def topic_set_path(name: str, topics_dir: str | Path) -> Path | None:
    """The file a topic-set name stands for in ``topics_dir`` (see NAME_PATTERNS), or None."""
    for pattern in NAME_PATTERNS:
        candidate = Path(topics_dir) / pattern.format(name)
        if candidate.is_file():
            return candidate
    return None


def available_sets(topics_dir: str | Path | None) -> list[str]:
    """The topic-set names found in ``topics_dir`` (qrels and READMEs excluded)."""
    if topics_dir is None or not Path(topics_dir).is_dir():
        return []
    names = set()
    for p in Path(topics_dir).iterdir():
        skipped = p.name.lower().startswith(("qrels", "readme"))
        if p.is_file() and p.suffix in {".tsv", ".jsonl", ".txt"} and not skipped:
            names.add(p.name.removeprefix("topics.").rsplit(".", 1)[0])
    return sorted(names)


def load_topics(source: str | Path, topics_dir: Path | None = None) -> list[Topic]:
    """Topics from a file path, or from a topic-set name resolved in ``topics_dir``.

    Raises FileNotFoundError (listing the available names) for an unknown name, and TopicFormatError for a
    file that cannot be read or parsed, or that repeats a topic id.
    """
    path = Path(source)
    if path.is_file():
        return read_topics(path)
    if topics_dir is not None and isinstance(source, str) and (found := topic_set_path(source, topics_dir)):
        return read_topics(found)
    names = available_sets(topics_dir)
    hint = (
        f"; available: {', '.join(names)}"
        if names
        else (f"; no topic sets in {topics_dir}" if topics_dir is not None else "")
    )
    raise FileNotFoundError(f"unknown topic set or file {str(source)!r}{hint}")
