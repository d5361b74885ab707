"""Pointwise rerankers: each candidate scored on its own against the query by a local model.

What monoT5 and the CrossEncoder reranker share lives here: which checkpoint a name means (never a name a
request made up), what is missing when one cannot run, the architecture check, and the scoring loop, which
holds the model one batch at a time and checks the request's cancel token before each batch.

Design notes: docs/internals/stages.md.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ragnarok.core.model_paths import A_DIRECTORY, looks_like_path, model_dir
from ragnarok.core.registry import ComponentArgumentError, UnknownComponentError
from ragnarok.core.types import Request
from ragnarok.runtime import cancel
from ragnarok.runtime.cancel import FairLock
from ragnarok.runtime.quoting import quote
from ragnarok.stages.rerank.base import RerankError, RerankerUnavailable, reordered
from ragnarok.stages.rerank.embedding import candidate_texts

WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)


def on_disk(name: str) -> bool:
    """Whether ``name`` is an existing path (False for a name no file system takes: too long, a NUL byte)."""
    try:
        return Path(name).expanduser().exists()
    except (OSError, ValueError):
        return False


def resolve_checkpoint(kind: str, name: str, known: Mapping[str, str], allow_paths: bool = False) -> str:
    """What ``name`` loads: ``known[name]`` (an alias), a value of ``known`` itself (a configured directory or
    Hugging Face name), or, with ``allow_paths``, the realpath of a local directory holding ``config.json``.
    Anything else is an :class:`UnknownComponentError` (404) naming the choices; a path gets the same 404
    whether or not anything is there (:func:`ragnarok.core.model_paths.model_dir`)."""
    if name in known:
        return known[name]
    if name in known.values():
        return name
    if looks_like_path(name):
        return model_dir(f"{kind} model", name, list(known), allow_paths)
    raise UnknownComponentError(f"{kind} model", name, [*known, *([A_DIRECTORY] if allow_paths else [])])


def _hub_file(repo: str, filename: str) -> str | None:
    """``filename`` of ``repo`` in the local Hugging Face cache, or None."""
    try:
        from huggingface_hub import try_to_load_from_cache  # noqa: PLC0415

        found = try_to_load_from_cache(repo, filename)
    except Exception:  # noqa: BLE001 - a malformed name: simply not cached
        return None
    return found if isinstance(found, str) else None


def offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}


def missing(checkpoint: str, allow_downloads: bool = True) -> str | None:
    """Why ``checkpoint`` (a local directory or a Hugging Face name) cannot be loaded here, or None.
    ``allow_downloads`` False: a Hugging Face name must already be in the local cache."""
    path = Path(checkpoint).expanduser()
    if path.is_absolute() or on_disk(checkpoint):
        if not on_disk(checkpoint) or not path.is_dir():
            return f"no model directory at {quote(checkpoint, 120)}"
        if not (path / "config.json").is_file():
            return f"{quote(checkpoint, 120)} holds no config.json"
        if not any((path / f).is_file() for f in WEIGHT_FILES):
            return f"no weights in {quote(checkpoint, 120)} (none of {', '.join(WEIGHT_FILES)})"
        return None
    if _hub_file(checkpoint, "config.json") is not None:
        return None
    if not allow_downloads:
        return (
            f"the weights of {checkpoint} are not on this machine (not in the Hugging Face cache) and this "
            "server downloads no model (RAGNAROK_ALLOW_DOWNLOADS=1 lets it): download them where there is "
            f"network (`huggingface-cli download {checkpoint}`)"
        )
    if offline():
        return (
            f"the weights of {checkpoint} are not on this machine (not in the Hugging Face cache) and downloads "
            "are off (HF_HUB_OFFLINE=1): download them where there is network "
            f"(`huggingface-cli download {checkpoint}`) or name a local model directory"
        )
    return None  # a configured name, downloaded on first use


def model_config(checkpoint: str) -> dict[str, Any] | None:
    """``config.json`` of a local directory or of a cached Hugging Face checkpoint (None when not found)."""
    path = Path(checkpoint).expanduser() / "config.json"
    found = str(path) if on_disk(str(path)) else _hub_file(checkpoint, "config.json")
    if found is None:
        return None
    try:
        return json.loads(Path(found).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ComponentArgumentError(f"cannot read the config.json of {quote(checkpoint, 120)}: {exc}") from None


def device_auto(device: str | None) -> str:
    """``device``, or CUDA when torch sees a GPU, else the CPU."""
    if device:
        return device
    import torch  # noqa: PLC0415

    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class PointwiseReranker:
    """Scores every candidate (``title + "\\n" + segment``) against the query, ``batch_size`` at a time;
    candidates are sorted by score (ties keep the input order). Subclasses load the model and score a batch."""

    name: str
    checkpoint: str  # a local directory or a Hugging Face name (see resolve_checkpoint)
    batch_size: int = 16
    max_length: int = 512
    device: str | None = None  # None: CUDA when there is one
    allow_downloads: bool = True  # False: a Hugging Face name loads from the local cache only (a server's default)
    batches: int = field(default=0, init=False)  # batches scored so far (work done, for tests and stats)
    _model: Any = field(default=None, init=False, repr=False)
    _load_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    # the tokenizer and torch modules are not safe to call from several threads at once: one batch at a time,
    # granted in arrival order, so a small rerank waits for at most one batch of a large one
    _model_lock: FairLock = field(default_factory=FairLock, init=False, repr=False)

    kind: ClassVar[str] = "pointwise"

    def availability(self) -> str | None:
        return missing(self.checkpoint, self.allow_downloads)

    def local_only(self) -> bool:
        """Whether the loaders must not ask a model hub (a directory on disk, or downloads not allowed)."""
        return on_disk(self.checkpoint) or not self.allow_downloads

    def check_architecture(self, config: Mapping[str, Any]) -> str | None:
        """Why ``config`` is not a checkpoint this reranker runs, or None."""
        raise NotImplementedError

    def validate(self) -> None:
        """Refuse a checkpoint of another architecture (422), before anything loads."""
        config = model_config(self.checkpoint)
        if config is not None and (reason := self.check_architecture(config)):
            raise ComponentArgumentError(f"{quote(self.checkpoint, 120)} {reason}")

    def load(self) -> Any:
        """The model, loaded once (offline when the checkpoint is a local directory)."""
        raise NotImplementedError

    def score_batch(self, model: Any, query: str, docs: list[str]) -> np.ndarray:
        raise NotImplementedError

    def _loaded(self) -> Any:
        with self._load_lock:
            if self._model is None:
                if reason := self.availability():
                    raise RerankerUnavailable(f"reranker {self.name!r} is unavailable: {reason}")
                self.validate()
                local = self.local_only()
                if local:  # never ask a model hub about a model on disk (an explicit HF_HUB_OFFLINE=0 wins)
                    os.environ.setdefault("HF_HUB_OFFLINE", "1")
                try:
                    self._model = self.load()
                except (OSError, ValueError, KeyError, RuntimeError) as exc:  # missing files, no network, bad files
                    raise RerankerUnavailable(
                        f"reranker {self.name!r} cannot load {self.checkpoint}: {type(exc).__name__}: {str(exc)[:300]}"
                    ) from None
        return self._model

    def scores(self, query: str, docs: list[str]) -> np.ndarray:
        """One float per document, in input order; the documents are scored longest first, a batch at a time."""
        model = self._loaded()
        out = np.zeros(len(docs), dtype=np.float64)
        order = sorted(range(len(docs)), key=lambda i: -len(docs[i]))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            cancel.check()
            with self._model_lock.hold():
                try:
                    out[rows] = self.score_batch(model, query, [docs[i] for i in rows])
                except (RuntimeError, ValueError) as exc:  # e.g. out of memory: name the stage, not a 500
                    raise RerankError(self.name, f"{type(exc).__name__}: {str(exc)[:300]}") from None
                self.batches += 1
        if not np.all(np.isfinite(out)):
            raise RerankError(self.name, f"{self.checkpoint} gave a non-finite score")
        return out

    def rerank(self, request: Request, k: int) -> Request:
        if not request.candidates or k <= 0:
            return Request(query=request.query, candidates=[])
        scores = self.scores(request.query.text, candidate_texts(request))
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
        return reordered(request, order, k, [float(scores[i]) for i in order[:k]])
