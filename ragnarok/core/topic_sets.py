"""Topic sets and qrels by name, wherever a topics or qrels file is taken: ``demo``, ``rag24`` (= ``rag24.test``),
``rag25`` (= ``rag25.test``), ``rag24.raggy-dev``, ``rag24.researchy-dev``.

A name is looked up, in order, in the project's own topics (``ragnarok/data/topics``, shipped in the wheel;
``topics/`` in a checkout links to it), the track topics fetched into ``{data_dir}/topics`` (``ragnarok topics
fetch``), then ``RAGNAROK_TOPICS_DIR`` (by default the shared copies beside a checkout,
``../shared/data/trec-rag``). A path to a file is always taken as it is. An unknown name fails listing the names
there are, with "did you mean ...?".
"""

from __future__ import annotations

from pathlib import Path

from ragnarok.core.registry import suggest
from ragnarok.core.settings import Settings
from ragnarok.core.topics import Topic, available_sets, read_topics, topic_set_path

#: The project's own topic sets and judgments (the demo's), inside the package.
PACKAGE_TOPICS = Path(__file__).resolve().parents[1] / "data" / "topics"
#: The shared track data beside a checkout (``../shared/data/trec-rag``); absent in an installed package.
CHECKOUT_SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "trec-rag"
#: Short names of the track's test sets.
ALIASES = {"rag24": "rag24.test", "rag25": "rag25.test"}
#: Topic-set name -> file name at the source of ``ragnarok topics fetch``.
TRACK_TOPICS = {
    "rag24.test": "topics.rag24.test.txt",
    "rag24.raggy-dev": "topics.rag24.raggy-dev.txt",
    "rag24.researchy-dev": "topics.rag24.researchy-dev.txt",
    "rag25.test": "topics.rag25.test.jsonl",
}
QRELS_PATTERNS = ("qrels.{}.txt", "qrels.{}.tsv", "{}.qrels")


class UnknownTopicSetError(FileNotFoundError):
    """A topics or qrels argument that is neither a file nor a known set name; the message lists the names
    there are and, when one is close, asks "did you mean ...?"."""


def fetched_dir(settings: Settings) -> Path:
    """Where ``ragnarok topics fetch`` puts the track's topic files."""
    return settings.data_dir / "topics"


def topic_dirs(settings: Settings) -> list[Path]:
    """The folders a set name is looked up in, in order (those that exist)."""
    shared = settings.topics_dir if settings.topics_dir is not None else CHECKOUT_SHARED
    dirs = [PACKAGE_TOPICS, fetched_dir(settings), shared]
    return [Path(d) for d in dict.fromkeys(dirs) if d is not None and Path(d).is_dir()]


def set_names(settings: Settings) -> list[str]:
    """Every topic-set name available here (aliases included when what they stand for is)."""
    names = {name for d in topic_dirs(settings) for name in available_sets(d)}
    names |= {alias for alias, target in ALIASES.items() if target in names}
    return sorted(names)


def _unknown(kind: str, source: str, known: list[str], fetchable: bool) -> UnknownTopicSetError:
    close = suggest(source, known)
    hint = f"; did you mean {close!r}?" if close else ""
    if fetchable:
        hint += f"; fetch it with `ragnarok topics fetch {ALIASES.get(source, source)}`"
    return UnknownTopicSetError(f"unknown {kind} {source!r} (available: {', '.join(known) or 'none'}){hint}")


def topics_path(source: str | Path, settings: Settings) -> Path:
    """The topic file ``source`` names: a file path as it is, else a set name (see the module's docstring)."""
    if Path(source).is_file():
        return Path(source)
    name = ALIASES.get(str(source), str(source))
    for folder in topic_dirs(settings):
        if (found := topic_set_path(name, folder)) is not None:
            return found
    raise _unknown("topic set or file", str(source), set_names(settings), name in TRACK_TOPICS)


def is_track_set(source: str | Path) -> bool:
    """Whether ``source`` names the TREC RAG track's topics (``rag24``, ``rag25.test``, a ``topics.rag24.*`` file):
    answers to them cite MS MARCO V2.1 segments."""
    name = Path(str(source)).name.removeprefix("topics.")
    return ALIASES.get(name, name).startswith(("rag24", "rag25"))


def resolve_topics(source: str | Path, settings: Settings) -> list[Topic]:
    """The topics of a file, or of a set name (``demo``, ``rag24``, ``rag25.test``, ...)."""
    return read_topics(topics_path(source, settings))


def qrels_names(settings: Settings) -> list[str]:
    """The set names that have judgments here (``qrels.NAME.txt``), aliases included."""
    names = {
        p.name.removeprefix("qrels.").rsplit(".", 1)[0]
        for d in topic_dirs(settings)
        for p in d.glob("qrels.*")
        if p.is_file()
    }
    names |= {alias for alias, target in ALIASES.items() if target in names}
    return sorted(names)


def qrels_path(source: str | Path, settings: Settings) -> Path:
    """The qrels file ``source`` names: a file path as it is, else a set name (``demo`` ->
    ``qrels.demo.txt``, ``rag24`` -> ``qrels.rag24.test.txt``) looked up where topic sets are. A path with a
    folder in it is a file, however it fails to read."""
    if Path(source).is_file() or "/" in str(source) or "\\" in str(source):
        return Path(source)
    name = ALIASES.get(str(source), str(source))
    for folder in topic_dirs(settings):
        for pattern in QRELS_PATTERNS:
            if (folder / pattern.format(name)).is_file():
                return folder / pattern.format(name)
    raise _unknown("qrels set or file", str(source), qrels_names(settings), False)


def nuggets_path(source: str | Path, settings: Settings) -> Path:
    """The nugget file ``source`` names: a file path as it is, else a set name (``demo`` ->
    ``eval/demo.nuggets.jsonl``) looked up where topic sets are."""
    if Path(source).is_file() or "/" in str(source) or "\\" in str(source):
        return Path(source)
    name = ALIASES.get(str(source), str(source))
    for folder in topic_dirs(settings):
        for candidate in (folder / "eval" / f"{name}.nuggets.jsonl", folder / f"{name}.nuggets.jsonl"):
            if candidate.is_file():
                return candidate
    known = sorted(
        {
            p.name.removesuffix(".nuggets.jsonl")
            for d in topic_dirs(settings)
            for p in [*d.glob("*.nuggets.jsonl"), *d.glob("eval/*.nuggets.jsonl")]
        }
    )
    raise _unknown("nugget set or file", str(source), known, False)
