"""Resolving ``(retriever, index)`` names to retriever instances, created once and reused."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from ragnarok.core.model_paths import ModelLRU
from ragnarok.core.protocols import Reranker, Retriever
from ragnarok.core.registry import Instances, UnknownComponentError
from ragnarok.core.settings import Settings
from ragnarok.runtime.index_files import is_lucene_index
from ragnarok.stages.components import RERANKERS, RETRIEVERS, request_model_path
from ragnarok.stages.retrieve import prebuilt
from ragnarok.stages.retrieve.building import DenseBuild, DenseBuilds, Progress
from ragnarok.stages.retrieve.dense import dense_dir, is_dense_index, rebuild_command, stale_reason

log = logging.getLogger(__name__)
RETIRE_AFTER_S = 30.0  # a dropped retriever's threads stop this long after (its searches in flight finish)
DEFAULT_DENSE = "minilm"  # the dense model every local index lists, built or not


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _identity(source: str) -> dict[str, str] | None:
    from ragnarok.runtime.index_files import index_identity  # noqa: PLC0415

    try:
        return index_identity(Path(source))
    except OSError:
        return None


@dataclass
class _Seen:
    """What the instances of one local index were created against: its directory's and its dense directory's
    inode and mtime (a cheap stat per request), and the Lucene index's identity (commit point and its hash)."""

    lucene: tuple[int, int] | None
    dense: tuple[int, int] | None
    identity: dict[str, str] | None


@dataclass(frozen=True)
class RetrieverInfo:
    name: str
    index: str
    source: str
    kind: str
    available: bool
    reason: str = ""
    progress: Progress | None = None  # a dense index being built in the background

    @property
    def status(self) -> str:
        """``available``, ``building`` (see ``progress``) or ``unavailable`` (see ``reason``)."""
        return "available" if self.available else "building" if self.progress is not None else "unavailable"


def source_kind(source: str) -> str:
    if source.startswith(("http://", "https://")):
        return "remote"
    return "prebuilt" if source.startswith("prebuilt:") else "local"


class RetrievalService:
    """The R service's model: which indexes and retrievers exist, and the instances serving them."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._instances: Instances[Retriever] = Instances()
        self.builds = DenseBuilds()  # dense indexes built in the background (``ragnarok serve``)
        self._seen: dict[str, _Seen] = {}  # local index name -> what its instances were created against
        self._seen_lock = threading.Lock()
        self.reopened = 0  # times a rebuilt index's instances were dropped (for tests and stats)
        self._builds_seen: dict[str, int] = {}  # local index name -> Lucene rebuilds noticed
        self._sources: dict[str, str] | None = None

    def generation(self, index: str) -> int:
        """How many rebuilds of ``index``'s Lucene index this service has noticed: what else holds something
        opened on it (the segment lookups of neighbours and automerge) keys it by this, to reopen it too."""
        return self._builds_seen.get(index, 0)

    def build_dense(self, lucene_dir: Path, model: str = "minilm") -> DenseBuild:
        """Build the dense index of ``model`` beside ``lucene_dir`` in the background once the app starts (its
        lifespan), unless it is up to date; until then its retriever answers 503 "building, N % done"."""
        return self.builds.add(
            DenseBuild(
                lucene_dir,
                model,
                batch_size=self.settings.dense_build_batch_size,
                pause_s=self.settings.dense_build_pause_s,
            )
        )

    def sources(self) -> dict[str, str]:
        """Every configured index (the settings do not change under a service: read once, not per request,
        where building the demo index's path was 6 % of a loaded server's GIL time)."""
        if self._sources is None:
            self._sources = self.settings.index_sources()
        return self._sources

    def get(self, retriever: str, index: str | None = None) -> Retriever:
        """``retriever`` is a registered name with an optional argument: ``bm25``, ``dense:minilm``."""
        index = index or self.settings.default_index
        base, _, arg = retriever.partition(":")
        entry = RETRIEVERS.get(base)
        sources = self.sources()
        if index not in sources:
            raise UnknownComponentError("index", index, sorted(sources))
        if (
            base == "dense"
            and arg
            and not arg.startswith("prebuilt:")
            and (real := request_model_path(base, arg, self.settings)) is not None
        ):
            arg, retriever = real, f"dense:{real}"  # every spelling of a model directory: one retriever
        if base == "dense" and (build := self.builds.get(sources[index], arg or "minilm")) is not None:
            build.check()  # 503 while it is being built
        if source_kind(sources[index]) == "local":
            self.refresh(index, sources[index])
        return self._instances.get(
            (retriever, index),
            lambda: entry.factory(name=retriever, source=sources[index], settings=self.settings, arg=arg or None),
        )

    def refresh(self, index: str, source: str) -> bool:
        """Notice a local index rebuilt since its retrievers were created (``ragnarok index`` under a running
        server) before the next search: its Lucene index's commit point changed, or a dense index beside it was
        rebuilt. Then the instances of that index are dropped, so the next request opens a new searcher over
        the new commit (the old one's per-segment JSON cache, keyed by Lucene docids of the old commit, goes
        with it) and loads the dense index afresh, which refuses a dense index derived from the old commit as
        stale (503 naming the command that rebuilds it). Costs two ``stat`` calls when nothing changed; returns
        whether anything was dropped."""
        lucene, dense = _stat(source), _stat(f"{source}.dense")
        with self._seen_lock:
            seen = self._seen.get(index)
            if seen is not None and seen.lucene == lucene and seen.dense == dense:
                return False
            identity = _identity(source)
            self._seen[index] = _Seen(lucene, dense, identity)
            if seen is None:
                return False
            rebuilt = identity != seen.identity or identity is None
            if not rebuilt and seen.dense == dense:
                return False  # the directory was touched (a lock file), the commit is the same
            if rebuilt:
                self._builds_seen[index] = self._builds_seen.get(index, 0) + 1
            dropped = self._instances.drop(
                lambda key: isinstance(key, tuple) and key[1] == index and (rebuilt or str(key[0]).startswith("dense"))
            )
        for instance in dropped:
            close = getattr(instance, "close", None)
            if close is not None:  # a Lucene retriever's batcher threads: stopped once a request that took the
                timer = threading.Timer(RETIRE_AFTER_S, close)  # old instance just before has submitted to it
                timer.daemon = True
                timer.start()
        if dropped:
            self.reopened += 1
            log.info(
                "index %s %s: its %d retriever(s) reopen on the next request",
                index,
                "was rebuilt" if rebuilt else "has a rebuilt dense index",
                len(dropped),
            )
        return bool(dropped)

    def text_dir(self, index: str) -> str | None:
        """The local directory of ``index``'s Lucene index (a prebuilt one resolved, or a
        :class:`~ragnarok.stages.retrieve.prebuilt.PrebuiltMissing`); None for a remote index."""
        source = self.sources()[index]
        kind = source_kind(source)
        if kind == "prebuilt":
            return str(prebuilt.resolve(source.removeprefix("prebuilt:"), self.settings.prebuilt_path))
        return None if kind == "remote" else source

    def _prebuilt_status(self, source: str) -> tuple[bool, str, prebuilt.PrebuiltEntry | None]:
        name = source.removeprefix("prebuilt:")
        entry = prebuilt.catalogue().get(name)
        if entry is None:
            return False, "not a name of pyserini's prebuilt catalogue (`ragnarok prebuilt list`)", None
        if prebuilt.locate(name, self.settings.prebuilt_path) is None:
            return False, str(prebuilt.missing([entry], name)), entry
        return True, "", entry

    def _prebuilt_sets(
        self, index: str, source: str, entry: prebuilt.PrebuiltEntry | None, reason: str
    ) -> list[RetrieverInfo]:
        """The catalogue's dense sets over the collection of a prebuilt BM25 index, and whether each is here."""
        infos = []
        for set_name, shards in prebuilt.sets().items():
            if entry is None or shards[0].corpus_index != entry.corpus_index:
                continue
            absent = [s for s in shards if prebuilt.locate(s.name, self.settings.prebuilt_path) is None]
            infos.append(
                RetrieverInfo(
                    f"dense:prebuilt:{set_name}",
                    index,
                    source,
                    "prebuilt",
                    not reason and not absent,
                    reason or (str(prebuilt.missing(absent, set_name)) if absent else ""),
                )
            )
        return infos

    def describe(self) -> list[RetrieverInfo]:
        infos = []
        for index, source in sorted(self.sources().items()):
            kind = source_kind(source)
            available, reason, entry = True, "", None
            if kind == "local" and not is_lucene_index(Path(source)):
                available, reason = False, f"no Lucene index at {source} yet"
            if kind == "prebuilt":
                available, reason, entry = self._prebuilt_status(source)
            for name in RETRIEVERS.names():
                if kind == "remote" and name != "bm25":
                    continue
                if kind == "prebuilt" and name == "dense":
                    infos += self._prebuilt_sets(index, source, entry, reason)
                    continue
                if name == "dense":
                    models = {*self._dense_models(source), *self.builds.models(source)}
                    if kind == "local" and DEFAULT_DENSE not in models:
                        infos.append(
                            RetrieverInfo(
                                f"dense:{DEFAULT_DENSE}",
                                index,
                                source,
                                kind,
                                False,
                                reason or (f"not built: build it with `{rebuild_command(source, DEFAULT_DENSE)}`"),
                            )
                        )
                    for model in sorted(models):
                        build = self.builds.get(source, model)
                        if build is not None and (build.building or not build.built_since()):
                            progress = build.progress() if build.building else None
                            infos.append(
                                RetrieverInfo(
                                    f"dense:{model}",
                                    index,
                                    source,
                                    kind,
                                    False,
                                    (progress.describe() if progress else f"the build {build.status}: {build.error}"),
                                    progress,
                                )
                            )
                            continue
                        stale = stale_reason(dense_dir(source, model), source) if available else reason
                        infos.append(
                            RetrieverInfo(
                                f"dense:{model}", index, source, kind, stale is None, f"stale: {stale}" if stale else ""
                            )
                        )
                    continue
                infos.append(RetrieverInfo(name, index, source, kind, available, reason))
        return infos

    @staticmethod
    def _dense_models(source: str) -> list[str]:
        """Models with a dense index built beside this Lucene index."""
        root = Path(f"{source}.dense")
        return (
            sorted(p.name for p in root.glob("*") if is_dense_index(p) and not p.name.startswith("."))
            if root.is_dir()
            else []
        )


class RerankService:
    """Rerankers by spec name (``mmr:0.5``, ``rankzephyr:rho``), created once and reused. A model directory a
    request names (``crossencoder:/models/x``, only with ``allow_model_paths``) is kept by its realpath, so every
    spelling of it is one instance, in an LRU bounded by ``model_cache_max`` instances and ``model_cache_max_mb``
    of model files (:class:`ragnarok.core.model_paths.ModelLRU`)."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._instances: Instances[Reranker] = Instances()
        self._paths: ModelLRU[Reranker] = ModelLRU(settings.model_cache_max, settings.model_cache_max_mb * 2**20)

    def get(self, spec: str) -> Reranker:
        base, _, arg = spec.partition(":")
        entry = RERANKERS.get(base)
        if arg and (real := request_model_path(base, arg, self.settings)) is not None:
            return self._paths.get((base, real), real, lambda: entry.factory(settings=self.settings, arg=real))
        return self._instances.get(spec, lambda: entry.factory(settings=self.settings, arg=arg or None))

    def path_models(self) -> list[tuple[str, str]]:
        """The request-named models held, ``(reranker, realpath)``, least recently used first."""
        return self._paths.keys()  # type: ignore[return-value]
