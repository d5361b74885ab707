"""Cross-encoders through sentence-transformers' CrossEncoder (ms-marco-MiniLM, bge-reranker, any
``*ForSequenceClassification`` checkpoint with one output, or two: relevant vs not).

The score is the model's raw relevance logit (no sigmoid, which would tie confident candidates at 1.0); for a
two-label model, the logit of "relevant" minus that of "not relevant". Pairs are ``(query, title + "\\n" +
segment)``, truncated to ``max_length`` (512) tokens by the tokenizer (the document side first).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ragnarok.stages.rerank.pointwise import PointwiseReranker, device_auto

#: Checkpoints a request may name as ``crossencoder:NAME`` besides the configured ones.
KNOWN = {
    "minilm-l6": "cross-encoder/ms-marco-MiniLM-L-6-v2",
    "bge-base": "BAAI/bge-reranker-base",
    "bge-v2-m3": "BAAI/bge-reranker-v2-m3",
}


def _labels(config: Mapping[str, Any]) -> int:
    if "num_labels" in config:
        return int(config["num_labels"])
    return len(config.get("id2label") or {}) or 2  # transformers' default


@dataclass
class CrossEncoderReranker(PointwiseReranker):
    name: str = "crossencoder"
    checkpoint: str = KNOWN["minilm-l6"]

    kind: ClassVar[str] = "cross-encoder"

    def check_architecture(self, config: Mapping[str, Any]) -> str | None:
        architectures = config.get("architectures") or []
        if config.get("is_encoder_decoder") or (
            architectures and not any(a.endswith("ForSequenceClassification") for a in architectures)
        ):
            what = f"{config.get('model_type') or 'unknown'} model ({', '.join(architectures) or 'no architectures'})"
            return (
                f"holds a {what}; crossencoder needs a sequence-classification checkpoint (e.g. "
                "BertForSequenceClassification)"
            )
        if _labels(config) not in (1, 2):
            return f"has {_labels(config)} output labels; a cross-encoder reranker has 1 (a relevance logit) or 2"
        return None

    def load(self) -> Any:
        import torch  # noqa: PLC0415 - heavy, on first use
        from sentence_transformers import CrossEncoder  # noqa: PLC0415

        local = self.local_only()
        model = CrossEncoder(
            self.checkpoint,
            max_length=self.max_length,
            device=device_auto(self.device),
            local_files_only=local,
            activation_fn=torch.nn.Identity(),
        )
        return model

    def score_batch(self, model: Any, query: str, docs: list[str]) -> np.ndarray:
        import torch  # noqa: PLC0415

        logits = model.predict(
            [(query, d) for d in docs],
            batch_size=len(docs),
            show_progress_bar=False,
            activation_fn=torch.nn.Identity(),
            convert_to_numpy=True,
        )
        logits = np.asarray(logits, dtype=np.float64)
        if logits.ndim == 2:  # two labels: not relevant, relevant
            logits = logits[:, -1] - logits[:, 0]
        return logits
