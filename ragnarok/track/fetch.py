"""``ragnarok topics fetch NAME``: the track's public topic files, downloaded when the machine is online.

The files come from Anserini's tools (``settings.topics_source_url``) and land in ``{data_dir}/topics``,
where topic-set names resolve after the project's own ``topics/``. A download is parsed before it replaces
anything, so a failed or garbled fetch never clobbers a good file.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from ragnarok.core.settings import Settings
from ragnarok.core.topic_sets import ALIASES, TRACK_TOPICS, fetched_dir
from ragnarok.core.topics import Topic, read_topics
from ragnarok.track.output import atomic_write


def fetch_topics(name: str, settings: Settings, timeout: float = 60.0) -> tuple[Path, list[Topic]]:
    """Download topic set ``name`` into :func:`fetched_dir`; returns the file and its topics."""
    name = ALIASES.get(name, name)  # rag24: rag24.test
    if name not in TRACK_TOPICS:
        raise LookupError(f"unknown track topic set {name!r}; known: {', '.join(TRACK_TOPICS)}")
    filename = TRACK_TOPICS[name]
    url = f"{settings.topics_source_url.rstrip('/')}/{filename}"
    try:
        response = httpx.get(url, timeout=timeout, follow_redirects=True)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise OSError(f"cannot fetch {url}: {exc} (offline? give the topic file's path instead)") from None
    target_dir = fetched_dir(settings)
    target_dir.mkdir(parents=True, exist_ok=True)
    topics: list[Topic] = []

    def parse(tmp: Path) -> None:  # a garbled download fails here, before anything is replaced
        topics.extend(read_topics(tmp))

    atomic_write(target_dir / filename, response.content, check=parse)
    return target_dir / filename, topics
