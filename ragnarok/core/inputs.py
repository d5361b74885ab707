"""What the Python API accepts, turned into values: pipelines, topics and qrels in the forms a notebook gives.

A pipeline is a preset, a spec or a TOML/YAML file, parsed as ``/rag`` and ``ragnarok search`` parse them;
topics are a set name, a file, ``{qid: text}`` or a list; qrels are a set name, a file or a mapping. One place
for these conversions, so that every function of :mod:`ragnarok.api` reads its inputs the same way.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ragnarok.core.results import Qrels, Topics
from ragnarok.core.settings import Settings, get_settings
from ragnarok.core.topics import Topic
from ragnarok.core.types import Query


def parse_pipeline(spec: str, settings: Settings) -> Any:
    """A preset, a spec or a TOML/YAML pipeline file, parsed as ``/rag`` and ``ragnarok search`` parse them."""
    from ragnarok.core.presets import resolve  # noqa: PLC0415
    from ragnarok.core.spec import parse  # noqa: PLC0415
    from ragnarok.core.spec_mapping import load  # noqa: PLC0415

    if Path(spec).suffix in {".toml", ".yaml", ".yml"} and Path(spec).is_file():
        return load(Path(spec))
    return parse(resolve(spec, settings.data_dir), settings.max_k)


def as_query(topic: str | Topic, topic_id: str) -> Query:
    """A topic (a non-empty string, or a :class:`Topic` with its own id) as the query a pipeline runs."""
    if isinstance(topic, Topic):
        return Query(text=topic.text, qid=topic.qid)
    if not isinstance(topic, str) or not topic.strip():
        raise ValueError(f"a topic is a non-empty string or a Topic, got {topic!r:.80}")
    return Query(text=topic, qid=topic_id)


def load_topics(
    topics: str | Path | Iterable[str | Topic] | Mapping[str, str], settings: Settings | None = None
) -> Topics:
    """Topics from a set name or file (:func:`ragnarok.core.topic_sets.resolve_topics`), ``{qid: text}``, or a list of
    Topic or strings (numbered ``q1``, ``q2``, ...); ``.to_pandas()`` gives qid, text."""
    from ragnarok.core.topic_sets import resolve_topics  # noqa: PLC0415

    if isinstance(topics, (str, Path)):
        return Topics(resolve_topics(topics, settings or get_settings()))
    if isinstance(topics, Mapping):
        return Topics(Topic(str(qid), text) for qid, text in topics.items())
    loaded = Topics(
        t if isinstance(t, Topic) else Topic(f"q{n}", as_query(t, "").text) for n, t in enumerate(topics, 1)
    )
    if not loaded:
        raise ValueError("no topics given")
    return loaded


def load_qrels(qrels: str | Path | Mapping[str, Mapping[str, int]], settings: Settings | None = None) -> Qrels:
    """Judgments ``{qid: {docid: grade}}`` from a set name (``demo``, ``rag24``, ...), a qrels file, or a mapping;
    ``.to_pandas()`` gives qid, docid, grade."""
    from ragnarok.core.evaluation import read_qrels  # noqa: PLC0415
    from ragnarok.core.topic_sets import qrels_path  # noqa: PLC0415

    if isinstance(qrels, Mapping):
        return Qrels({str(q): {str(d): int(g) for d, g in docs.items()} for q, docs in qrels.items()})
    return Qrels(read_qrels(qrels_path(qrels, settings or get_settings())))
