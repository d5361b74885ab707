"""Embedding backends behind :class:`ragnarok.stages.embed.encoder.Encoder`: sentence-transformers on PyTorch, or the
same weights exported to ONNX and run with onnxruntime (CPU), chosen by the ``encoder_backend`` setting.

ONNX is faster on CPU and gives PyTorch's vectors within float32 rounding, so an index built by one backend is
searched with the other; ``onnx-int8`` is faster still but its vectors differ. ``auto`` picks ONNX where a
model can be exported. Nothing is loaded at import.

Design notes: docs/internals/stages.md.
"""

from __future__ import annotations

import ctypes.util
import hashlib
import json
import logging
import os
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np

from ragnarok.runtime import quiet

Backend = Literal["auto", "torch", "onnx", "onnx-int8"]
BACKENDS: tuple[str, ...] = ("auto", "torch", "onnx", "onnx-int8")
ONNX_OPSET = 17
EXPORT_TIMEOUT_S = 1800  # the export's child process: PyTorch's import and the trace take seconds
log = logging.getLogger(__name__)


class EncoderBackend(Protocol):
    name: str
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 rows, L2-normalised (one model call; the caller batches)."""
        ...


@dataclass
class TorchBackend:
    """sentence-transformers on PyTorch (CUDA when there is one and ``device`` is None)."""

    path: str
    device: str | None = None
    trust_remote_code: bool = False
    name: str = "torch"
    _st: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        # a hub model already in the local cache loads from it alone: no request to a model hub (a server only
        # reaches one for a model that is not here, and only with RAGNAROK_ALLOW_DOWNLOADS=1)
        cached = _in_hub_cache(self.path)
        local = Path(self.path).exists()
        if local:  # never ask a model hub for a model on disk (an explicit HF_HUB_OFFLINE=0 wins)
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
        local = local or cached
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415 - heavy, on first use

        self._st = SentenceTransformer(
            self.path, device=self.device, local_files_only=local, trust_remote_code=self.trust_remote_code
        )
        getter = getattr(self._st, "get_embedding_dimension", None) or self._st.get_sentence_embedding_dimension
        self.dim = int(getter())

    def encode(self, texts: list[str]) -> np.ndarray:
        return self._st.encode(
            texts, batch_size=len(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        ).astype(np.float32, copy=False)


def _in_hub_cache(name: str) -> bool:
    """Whether ``name`` (a Hugging Face model name) has its ``config.json`` in the local Hugging Face cache."""
    try:
        from huggingface_hub import try_to_load_from_cache  # noqa: PLC0415

        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # noqa: BLE001 - a path or a malformed name: not a cached hub model
        return False


class NotExportableError(ValueError):
    """A model the ONNX backend cannot run (not a local directory, or not transformer + mean/CLS pooling)."""


@dataclass(frozen=True)
class _Layout:
    """What the ONNX backend needs to know of a sentence-transformers model directory."""

    path: Path
    max_seq_length: int
    pooling: Literal["mean", "cls"]
    normalize: bool


def _layout(path: str | Path) -> _Layout:
    root = Path(path)
    if not (root / "config.json").is_file() or not (root / "tokenizer.json").is_file():
        raise NotExportableError(f"{path} is not a local model directory with a tokenizer.json")
    modules = json.loads((root / "modules.json").read_text()) if (root / "modules.json").is_file() else []
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    if kinds[:2] != ["Transformer", "Pooling"] or any(k != "Normalize" for k in kinds[2:]):
        raise NotExportableError(f"{path}: modules {kinds} are not Transformer, Pooling[, Normalize]")
    pooling_dir = root / modules[1].get("path", "1_Pooling")
    pooling = json.loads((pooling_dir / "config.json").read_text())
    mode = (
        "mean" if pooling.get("pooling_mode_mean_tokens") else "cls" if pooling.get("pooling_mode_cls_token") else None
    )
    others = [
        k
        for k, v in pooling.items()
        if k.startswith("pooling_mode") and v and k not in ("pooling_mode_mean_tokens", "pooling_mode_cls_token")
    ]
    if mode is None or others:
        raise NotExportableError(f"{path}: only mean or CLS pooling is exported, not {others or 'none'}")
    config = (
        json.loads((root / "sentence_bert_config.json").read_text())
        if (root / "sentence_bert_config.json").is_file()
        else {}
    )
    return _Layout(root, int(config.get("max_seq_length") or 512), mode, "Normalize" in kinds)


def weights_hash(path: Path) -> str:
    """SHA-256 (first 16 hex digits) of the weights and the config: an export is reused only for these."""
    digest = hashlib.sha256()
    for name in ("config.json", "model.safetensors", "pytorch_model.bin"):
        file = path / name
        if file.is_file():
            with open(file, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    digest.update(chunk)
    return digest.hexdigest()[:16]


_export_lock = threading.Lock()


def export_onnx(path: str | Path, cache_dir: Path) -> Path:
    """The ONNX export of the transformer at ``path`` (exported on first use, then reused): its file. The export
    runs in a child process: PyTorch, which it needs, would otherwise stay in this one (~180 MB resident for
    the life of a server that runs the model with onnxruntime)."""
    layout = _layout(path)
    out = Path(cache_dir) / "onnx" / f"{layout.path.name}-{weights_hash(layout.path)}" / "model.onnx"
    with _export_lock:
        if out.is_file():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".model.onnx.partial-{os.getpid()}")
        package_root = str(Path(__file__).resolve().parents[3])  # this ragnarok, installed or a checkout
        path_dirs = [package_root, os.environ.get("PYTHONPATH")]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, path_dirs))}
        code = (
            "import sys; from ragnarok.stages.embed.backends import export_here; export_here(sys.argv[1], sys.argv[2])"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(layout.path), str(tmp)],
            env=env,
            capture_output=True,
            text=True,
            timeout=EXPORT_TIMEOUT_S,
        )
        if done.returncode != 0 or not tmp.is_file():
            tmp.unlink(missing_ok=True)
            why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            raise RuntimeError(f"the ONNX export of {layout.path} failed: {why}")
        tmp.rename(out)
        log.info("exported %s to %s", layout.path, out)
    return out


def export_here(path: str, tmp: str) -> None:
    """The export itself, in this process (:func:`export_onnx` runs it in a child): ``path``'s transformer
    traced with PyTorch into the ONNX file ``tmp``."""
    import torch  # noqa: PLC0415 - the export only
    from transformers import AutoModel  # noqa: PLC0415

    class Transformer(torch.nn.Module):  # keyword inputs, one output: what the exporter traces
        def __init__(self) -> None:
            super().__init__()
            self.model = AutoModel.from_pretrained(path, local_files_only=True, attn_implementation="eager")

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    model = Transformer().eval()
    example = {name: torch.ones((2, 8), dtype=torch.long) for name in ("input_ids", "attention_mask", "token_type_ids")}
    dynamic = {name: {0: "batch", 1: "tokens"} for name in example}
    with torch.no_grad():
        torch.onnx.export(
            model,
            tuple(example.values()),
            tmp,
            input_names=list(example),
            output_names=["last_hidden_state"],
            dynamic_axes={**dynamic, "last_hidden_state": {0: "batch", 1: "tokens"}},
            opset_version=ONNX_OPSET,
            dynamo=False,
        )


def quantize_int8(model: Path) -> Path:
    """``model``'s int8 twin beside it (quantised on first use, then reused)."""
    out = model.with_name("model-int8.onnx")
    with _export_lock:
        if not out.is_file():
            quiet.no_telemetry()
            from onnxruntime.quantization import QuantType, quantize_dynamic  # noqa: PLC0415

            tmp = out.with_name(f".model-int8.onnx.partial-{os.getpid()}")
            quantize_dynamic(str(model), str(tmp), weight_type=QuantType.QInt8, per_channel=True, reduce_range=True)
            tmp.rename(out)
    return out


@dataclass
class OnnxBackend:
    """The model's transformer exported to ONNX, run by onnxruntime on CPU; tokenisation, pooling and
    normalisation as sentence-transformers does them."""

    path: str
    cache_dir: Path
    threads: int = 0  # onnxruntime's intra-op threads; 0: one per physical core
    int8: bool = False  # the int8-quantised export (see quantize_int8)
    name: str = "onnx"
    _session: Any = field(default=None, init=False, repr=False)
    _tokenizer: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        quiet.no_telemetry()  # before onnxruntime loads: it reads ORT_DISABLE_TELEMETRY then
        import onnxruntime as ort  # noqa: PLC0415
        from tokenizers import Tokenizer  # noqa: PLC0415

        self.layout = _layout(self.path)
        model = export_onnx(self.path, self.cache_dir)
        if self.int8:
            model, self.name = quantize_int8(model), "onnx-int8"
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = self.threads
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy-waiting threads
        self._session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        tokenizer = Tokenizer.from_file(str(self.layout.path / "tokenizer.json"))
        tokenizer.no_padding()  # the packaged tokenizer.json pads every text to 128 tokens
        tokenizer.no_truncation()
        tokenizer.enable_truncation(self.layout.max_seq_length)
        pad = tokenizer.padding or {}
        pad_token = "[PAD]" if tokenizer.token_to_id("[PAD]") is not None else pad.get("pad_token", "<pad>")
        tokenizer.enable_padding(pad_id=tokenizer.token_to_id(pad_token) or 0, pad_token=pad_token)
        self._tokenizer = tokenizer
        self.dim = int(self.encode(["dimension"]).shape[1])

    def encode(self, texts: list[str]) -> np.ndarray:
        batch = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in batch], dtype=np.int64)
        mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        if self.layout.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        if self.layout.normalize:
            pooled = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled.astype(np.float32, copy=False)


def _cuda() -> bool:
    """Whether PyTorch finds a GPU; PyTorch is imported to ask only where a GPU driver is present (or it is
    loaded already): importing it to learn there is none kept ~180 MB resident for the process's life."""
    if "torch" not in sys.modules and not gpu_driver():
        return False
    try:
        import torch  # noqa: PLC0415

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


@lru_cache(maxsize=1)
def gpu_driver() -> bool:
    """An NVIDIA or AMD (ROCm) driver, WSL's GPU device or a CUDA driver library is present (Windows: assumed)."""
    return (
        os.name == "nt"
        or any(Path(p).exists() for p in ("/proc/driver/nvidia", "/dev/kfd", "/dev/dxg"))
        or ctypes.util.find_library("cuda") is not None
    )


def load_backend(
    path: str, backend: str, cache_dir: Path, device: str | None = None, trust_remote_code: bool = False
) -> EncoderBackend:
    """The backend ``backend`` for the model at ``path``: ``auto`` is ONNX on CPU for a model it can export
    (a failed export falls back to PyTorch, logged), PyTorch on a GPU or for any other model."""
    if backend not in BACKENDS:
        raise ValueError(f"encoder backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    quiet.no_telemetry()  # before any of the model libraries loads
    on_cpu = device == "cpu" or (device is None and not _cuda())
    if backend in ("onnx", "onnx-int8") or (backend == "auto" and on_cpu and not trust_remote_code):
        try:
            return OnnxBackend(path, cache_dir, int8=backend == "onnx-int8")
        except NotExportableError:
            if backend != "auto":
                raise
        except Exception as exc:  # noqa: BLE001 - an export or runtime failure: PyTorch still works
            if backend != "auto":
                raise
            log.warning("ONNX backend unavailable for %s (%s); using PyTorch", path, str(exc)[:200])
    return TorchBackend(path, device=device, trust_remote_code=trust_remote_code)
