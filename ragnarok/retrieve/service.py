"""Resolving ``(retriever, index)`` names to retriever instances, created once and reused."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ragnarok.collection.lucene_index import is_lucene_index
from ragnarok.components import RERANKERS, RETRIEVERS, request_model_path
from ragnarok.model_paths import ModelLRU
from ragnarok.protocols import Reranker, Retriever
from ragnarok.registry import Instances, UnknownComponentError
from ragnarok.retrieve.building import DenseBuild, DenseBuilds, Progress
from ragnarok.retrieve.dense import dense_dir, stale_reason
from ragnarok.settings import Settings


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

    def build_dense(self, lucene_dir: Path, model: str = "minilm") -> DenseBuild:
        """Build the dense index of ``model`` beside ``lucene_dir`` in the background once the app starts (its
        lifespan), unless it is up to date; until then its retriever answers 503 "building, N % done"."""
        return self.builds.add(DenseBuild(lucene_dir, model, batch_size=self.settings.dense_build_batch_size,
                                          pause_s=self.settings.dense_build_pause_s))

    def sources(self) -> dict[str, str]:
        return self.settings.index_sources()

    def get(self, retriever: str, index: str | None = None) -> Retriever:
        """``retriever`` is a registered name with an optional argument: ``bm25``, ``dense:minilm``."""
        index = index or self.settings.default_index
        base, _, arg = retriever.partition(":")
        entry = RETRIEVERS.get(base)
        sources = self.sources()
        if index not in sources:
            raise UnknownComponentError("index", index, sorted(sources))
        if base == "dense" and arg and (real := request_model_path(base, arg, self.settings)) is not None:
            arg, retriever = real, f"dense:{real}"  # every spelling of a model directory: one retriever
        if base == "dense" and (build := self.builds.get(sources[index], arg or "minilm")) is not None:
            build.check()  # 503 while it is being built
        return self._instances.get((retriever, index), lambda: entry.factory(
            name=retriever, source=sources[index], settings=self.settings, arg=arg or None))

    def describe(self) -> list[RetrieverInfo]:
        infos = []
        for index, source in sorted(self.sources().items()):
            kind = source_kind(source)
            available, reason = True, ""
            if kind == "local" and not is_lucene_index(Path(source)):
                available, reason = False, f"no Lucene index at {source} yet"
            for name in RETRIEVERS.names():
                if kind == "remote" and name != "bm25":
                    continue
                if name == "dense":
                    for model in sorted({*self._dense_models(source), *self.builds.models(source)}):
                        build = self.builds.get(source, model)
                        if build is not None and (build.building or not build.built_since()):
                            progress = build.progress() if build.building else None
                            infos.append(RetrieverInfo(f"dense:{model}", index, source, kind, False, (
                                progress.describe() if progress else f"the build {build.status}: {build.error}"),
                                progress))
                            continue
                        stale = stale_reason(dense_dir(source, model), source) if available else reason
                        infos.append(RetrieverInfo(f"dense:{model}", index, source, kind, stale is None,
                                                   f"stale: {stale}" if stale else ""))
                    continue
                infos.append(RetrieverInfo(name, index, source, kind, available, reason))
        return infos

    @staticmethod
    def _dense_models(source: str) -> list[str]:
        """Models with a dense index built beside this Lucene index."""
        root = Path(f"{source}.dense")
        return sorted(p.name for p in root.glob("*") if (p / "index.faiss").exists() and not p.name.startswith(".")) \
            if root.is_dir() else []


class RerankService:
    """Rerankers by spec name (``mmr:0.5``, ``rankzephyr:rho``), created once and reused. A model directory a
    request names (``crossencoder:/models/x``, only with ``allow_model_paths``) is kept by its realpath, so every
    spelling of it is one instance, in an LRU bounded by ``model_cache_max`` instances and ``model_cache_max_mb``
    of model files (:class:`ragnarok.model_paths.ModelLRU`)."""

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
