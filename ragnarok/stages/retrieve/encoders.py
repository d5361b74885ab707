"""Moved below the stages to :mod:`ragnarok.stages.embed.backends` (the shared encoder's backends); the old import path
still works."""

from ragnarok.stages.embed.backends import (  # noqa: F401 - re-exported
    ONNX_OPSET,
    EncoderBackend,
    NotExportableError,
    OnnxBackend,
    TorchBackend,
    export_onnx,
    load_backend,
    quantize_int8,
    weights_hash,
)
