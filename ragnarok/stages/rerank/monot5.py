"""monoT5 (Nogueira et al., 2020) with transformers, no rank_llm: the relevance of a document is the
probability of "true" against "false" as the first token T5 generates after ``Query: q Document: d Relevant:``.

The score is ``log P(true)`` over the two-way softmax of those tokens' logits at the first decoding step (what
pygaggle and rank_llm rank by). Inputs are at most ``max_length`` (512) tokens: the query is cut to a quarter
of that and the document to what is left, so ``Relevant:`` and the end of sequence are always there. Only the
first decoder step runs. On CUDA the model runs in bfloat16 (T5 was trained in it; float16 overflows).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ragnarok.stages.rerank.pointwise import PointwiseReranker, device_auto

#: Checkpoints a request may name as ``monot5:NAME`` besides the configured ones.
KNOWN = {"base": "castorini/monot5-base-msmarco-10k", "3b": "castorini/monot5-3b-msmarco-10k"}
T5_TYPES = ("t5", "mt5", "umt5")


@dataclass
class _Loaded:
    model: Any
    tokenizer: Any
    device: str
    true_id: int
    false_id: int
    suffix: list[int]
    eos: list[int]


def _single_token(tokenizer: Any, word: str) -> int:
    ids = tokenizer.encode(word, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"the tokenizer splits {word!r} into {len(ids)} tokens; monoT5 needs one")
    return int(ids[0])


@dataclass
class MonoT5Reranker(PointwiseReranker):
    name: str = "monot5"
    checkpoint: str = KNOWN["base"]

    kind: ClassVar[str] = "monoT5"

    def check_architecture(self, config: Mapping[str, Any]) -> str | None:
        model_type = config.get("model_type")
        architectures = config.get("architectures") or []
        if model_type in T5_TYPES and (
            not architectures or any(a.endswith("ForConditionalGeneration") for a in architectures)
        ):
            return None
        what = f"{model_type or 'unknown'} model ({', '.join(architectures) or 'no architectures listed'})"
        return f"holds a {what}; monot5 needs a T5 checkpoint (T5ForConditionalGeneration)"

    def load(self) -> _Loaded:
        import torch  # noqa: PLC0415 - heavy, on first use
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer  # noqa: PLC0415

        local = self.local_only()
        device = device_auto(self.device)
        dtype = torch.bfloat16 if device.startswith("cuda") and torch.cuda.is_bf16_supported() else torch.float32
        tokenizer = AutoTokenizer.from_pretrained(self.checkpoint, local_files_only=local)
        model = AutoModelForSeq2SeqLM.from_pretrained(self.checkpoint, local_files_only=local, dtype=dtype)
        model = model.to(device).eval()
        eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
        return _Loaded(
            model,
            tokenizer,
            device,
            _single_token(tokenizer, "true"),
            _single_token(tokenizer, "false"),
            tokenizer.encode("Relevant:", add_special_tokens=False),
            eos,
        )

    def input_ids(self, m: _Loaded, query: str, docs: list[str]) -> list[list[int]]:
        """``Query: q Document: d Relevant:</s>`` per document, query and document cut to fit ``max_length``."""
        encode = m.tokenizer
        head = encode(f"Query: {query}", add_special_tokens=False)["input_ids"][: self.max_length // 4]
        head += encode("Document:", add_special_tokens=False)["input_ids"]
        budget = max(0, self.max_length - len(head) - len(m.suffix) - len(m.eos))
        bodies = encode(docs, add_special_tokens=False, truncation=True, max_length=max(1, budget))["input_ids"]
        return [head + body[:budget] + m.suffix + m.eos for body in bodies]

    def score_batch(self, model: _Loaded, query: str, docs: list[str]) -> np.ndarray:
        import torch  # noqa: PLC0415

        rows = self.input_ids(model, query, docs)
        width = max(len(r) for r in rows)
        pad = model.tokenizer.pad_token_id or 0
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, : len(row)] = 1
        start = model.model.config.decoder_start_token_id or 0
        decoder = torch.full((len(rows), 1), start, dtype=torch.long)
        with torch.inference_mode():
            logits = model.model(
                input_ids=ids.to(model.device),
                attention_mask=mask.to(model.device),
                decoder_input_ids=decoder.to(model.device),
            ).logits[:, 0, :]
            pair = logits[:, [model.false_id, model.true_id]].float()
            return torch.log_softmax(pair, dim=-1)[:, 1].cpu().numpy().astype(np.float64)
