"""An entailment (NLI) cross-encoder for the proxy judge, where the machine has one.

``RAGNAROK_JUDGE_NLI_MODEL`` (setting ``judge_nli_model``; default none) names a three-label
sentence-transformers ``CrossEncoder``, loaded offline once per process. With it, the proxy judge's nugget and
citation labels come from the model's entailment and contradiction probabilities instead of the word rules.
No NLI weights ship with ragnarok.

Design notes: docs/internals/judge.md.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np

from ragnarok.judge import support_rules
from ragnarok.judge import textrules as tr
from ragnarok.runtime import cancel

SETTING = "RAGNAROK_JUDGE_NLI_MODEL"
ENTAIL = 0.5  # p(entailment) for support / full
PARTIAL = 0.2  # p(entailment) for partial support
CONTRADICT = 0.5  # p(contradiction) that vetoes a nugget
BATCH = 32
TIMEOUT_S = 120.0  # one entails() call: its batches stop past this (NLITimeout)


class NLIUnavailable(ValueError):
    """The configured NLI model cannot be used here (the message names the setting)."""


class NLITimeout(RuntimeError):
    """The model's batches ran past their deadline."""


def label_indices(name: str, config: Mapping[str, Any]) -> tuple[int, int]:
    """(entailment, contradiction) output indices, from ``config``'s ``id2label``."""
    labels = {int(k): str(v).lower() for k, v in (config.get("id2label") or {}).items()}
    entail = [i for i, v in labels.items() if v.startswith("entail")]
    contradict = [i for i, v in labels.items() if v.startswith("contradict")]
    if len(entail) != 1 or len(contradict) != 1:
        raise NLIUnavailable(
            f"{SETTING}={name}: its config.json's id2label {labels or '(none)'} has no entailment "
            "and contradiction labels: name an NLI cross-encoder (3 labels)"
        )
    return entail[0], contradict[0]


@dataclass
class NLIModel:
    """A loaded NLI cross-encoder: :meth:`entails` and the judge's two labelings."""

    name: str
    model: Any
    entail: int
    contradict: int
    batch_size: int = BATCH
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def entails(
        self, premises: Sequence[str], hypotheses: Sequence[str], timeout_s: float = TIMEOUT_S
    ) -> tuple[np.ndarray, np.ndarray]:
        """(p_entail, p_contradict) of each (premise, hypothesis) pair, ``batch_size`` pairs per model call;
        :class:`NLITimeout` once ``timeout_s`` has passed between two batches."""
        import torch  # noqa: PLC0415 - loaded with the model already

        pairs = list(zip(premises, hypotheses, strict=True))
        probs = np.zeros((len(pairs), 2))
        deadline = time.monotonic() + timeout_s
        for start in range(0, len(pairs), self.batch_size):
            if time.monotonic() > deadline:
                raise NLITimeout(f"NLI model {self.name}: {len(pairs)} pairs took over {timeout_s:g} s")
            cancel.check()
            with self._lock:
                logits = self.model.predict(
                    pairs[start : start + self.batch_size],
                    show_progress_bar=False,
                    activation_fn=torch.nn.Identity(),
                    convert_to_numpy=True,
                )
            logits = np.atleast_2d(np.asarray(logits, dtype=np.float64))
            p = np.exp(logits - logits.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            probs[start : start + len(p)] = p[:, [self.entail, self.contradict]]
        return probs[:, 0], probs[:, 1]

    def nugget_levels(self, query: str, answer: str, nuggets: Sequence[str]) -> list[int]:
        """2 support / 1 partial / 0 none per nugget (the thresholds in the module's docstring)."""
        statements = list(dict.fromkeys(s for s in tr.split_sentences(answer) or [answer] if tr.is_statement(s)))
        if not nuggets or not statements:
            return [0] * len(nuggets)
        pairs = [(s, n) for n in nuggets for s in statements]
        entail, contradict = self.entails([s for s, _ in pairs], [n for _, n in pairs])
        entail = entail.reshape(len(nuggets), len(statements))
        contradict = contradict.reshape(len(nuggets), len(statements))
        return [0 if c.max() >= CONTRADICT else _level(float(e.max())) for e, c in zip(entail, contradict)]

    def support_level(self, sentence: str, passage: str) -> int:
        """2 full / 1 partial / 0 none: does the cited ``passage`` entail ``sentence``?"""
        if support_rules.states_nothing(sentence):
            return 0
        entail, _ = self.entails([passage], [sentence])
        return _level(float(entail[0]))


def _level(p_entail: float) -> int:
    return 2 if p_entail >= ENTAIL else 1 if p_entail >= PARTIAL else 0


@lru_cache(maxsize=4)
def load_nli(name: str) -> NLIModel:
    """The NLI model ``name`` (a local directory or a cached Hugging Face name), loaded once, offline;
    :class:`NLIUnavailable` naming the setting when it is not here or not an NLI model."""
    from ragnarok.stages.rerank.pointwise import device_auto, missing, model_config  # noqa: PLC0415

    reason = missing(name)
    config = None if reason else model_config(name)
    if not reason and config is None:
        reason = (
            f"{name} is not in the local Hugging Face cache (the judge loads it offline: download it where "
            "there is network, `huggingface-cli download NAME`, or name a model directory)"
        )
    if reason:
        raise NLIUnavailable(f"{SETTING}: {reason}")
    entail, contradict = label_indices(name, config or {})
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never ask a model hub (an explicit HF_HUB_OFFLINE=0 wins)
    import torch  # noqa: PLC0415 - heavy: only where a model is configured
    from sentence_transformers import CrossEncoder  # noqa: PLC0415

    try:
        model = CrossEncoder(name, device=device_auto(None), local_files_only=True, activation_fn=torch.nn.Identity())
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise NLIUnavailable(f"{SETTING}={name} cannot be loaded: {type(exc).__name__}: {str(exc)[:300]}") from None
    return NLIModel(name, model, entail, contradict)
