"""rank_llm's rerankers (monoT5, RankZephyr, LiT5, RankGPT) when the optional ``rank_llm`` package is there.

rank_llm >= 0.26 needs Python >= 3.12, and its local models (monoT5, RankZephyr, LiT5) need a CUDA GPU, so
on this project's default machine :meth:`RankLLMReranker.availability` says why it cannot run. Where it can,
our Request is rank_llm's: :func:`to_rank_llm` builds its ``rank_llm.data`` dataclasses field for field, and
:func:`from_rank_llm` reads its ``Result`` back, keeping each candidate's stored ``doc`` fields unchanged.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from ragnarok.core.types import Request
from ragnarok.stages.rerank.base import RerankError, RerankerUnavailable

MODELS = {
    "monot5": "castorini/monot5-3b-msmarco-10k",
    "rankzephyr": "castorini/rank_zephyr_7b_v1_full",
    "lit5": "castorini/LiT5-Distill-large",
    "rankgpt": "gpt-4o",
}
INSTALL = "pip install 'ragnarok-rag[rank-llm]' on Python ≥ 3.12 with a GPU"
API_MODELS = ("gpt",)  # rank_llm runs these through an API: no GPU needed, OPENAI_API_KEY instead


def rank_llm_missing() -> str | None:
    """Why rank_llm cannot be imported here, or None when it can."""
    if importlib.util.find_spec("rank_llm") is None:
        return f"rank_llm is not installed: {INSTALL}"
    if sys.version_info < (3, 12):
        return f"rank_llm needs Python ≥ 3.12 (this is {sys.version.split()[0]}): {INSTALL}"
    return None


def to_rank_llm(request: Request) -> Any:
    """Our Request as ``rank_llm.data.Request`` (the same fields; ``doc`` as a plain dict)."""
    from rank_llm.data import Candidate, Query  # noqa: PLC0415 - optional dependency
    from rank_llm.data import Request as RLRequest  # noqa: PLC0415

    data = request.model_dump(mode="json", exclude_none=True)
    return RLRequest(
        query=Query(text=data["query"]["text"], qid=data["query"].get("qid", "")),
        candidates=[Candidate(docid=c["docid"], score=c["score"], doc=c.get("doc", {})) for c in data["candidates"]],
    )


def from_rank_llm(result: Any, request: Request, k: int) -> Request:
    """rank_llm's ``Result`` (or Request) back as ours, top ``k``; docs come from the input request, so a
    reranker that rewrites or drops stored fields cannot change them."""
    by_id = {c.docid: c for c in request.candidates}
    out = []
    for c in result.candidates[: max(0, k)]:
        docid = str(c.docid)
        if docid not in by_id:
            raise ValueError(f"rank_llm returned a candidate that was not in the input: {docid!r}")
        out.append(by_id[docid].model_copy(update={"score": float(c.score)}))
    return Request(query=request.query, candidates=out)


@dataclass
class RankLLMReranker:
    """A rank_llm model coordinator (``Reranker.create_model_coordinator``) behind our Reranker protocol.

    ``window``/``stride`` apply to listwise models, ``passes`` repeats the rerank (RankZephyr-ρ), ``options``
    go to rank_llm as they are (``context_size``, ``batch_size``, ``num_gpus`` ...).
    """

    name: str
    model_path: str
    window: int = 20
    stride: int = 10
    passes: int = 1
    options: dict[str, Any] = field(default_factory=dict)
    _reranker: Any = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def needs_gpu(self) -> bool:
        return not any(tag in self.model_path.lower() for tag in API_MODELS)

    def availability(self) -> str | None:
        if reason := rank_llm_missing():
            return reason
        if not self.needs_gpu:
            return None if os.environ.get("OPENAI_API_KEY") else "OPENAI_API_KEY is not set"
        import torch  # noqa: PLC0415 - rank_llm depends on it; only looked at when rank_llm is there

        if not torch.cuda.is_available():
            return f"{self.model_path} runs on a CUDA GPU through rank_llm and none is visible here"
        return None

    def _load(self) -> Any:
        with self._lock:
            if self._reranker is None:
                if reason := self.availability():
                    raise RerankerUnavailable(f"reranker {self.name!r} is unavailable: {reason}")
                from rank_llm.rerank import Reranker  # noqa: PLC0415 - optional dependency

                create = getattr(Reranker, "create_model_coordinator", None) or Reranker.create_agent
                kwargs = {"window_size": self.window, **self.options}
                try:
                    coordinator = create(self.model_path, None, False, **kwargs)
                except Exception as exc:  # noqa: BLE001 - model loading fails in many ways (memory, download)
                    raise RerankError(self.name, f"cannot load {self.model_path}: {exc}") from None
                self._reranker = Reranker(coordinator)
        return self._reranker

    def rerank(self, request: Request, k: int) -> Request:
        reranker = self._load()
        n = len(request.candidates)
        if n == 0 or k <= 0:
            return Request(query=request.query, candidates=[])
        try:
            from rank_llm.data import Request as RLRequest  # noqa: PLC0415 - optional dependency

            current = to_rank_llm(request)
            for _ in range(self.passes):
                result = reranker.rerank(
                    current, rank_start=0, rank_end=n, window_size=min(self.window, n), stride=self.stride
                )
                current = RLRequest(query=result.query, candidates=list(result.candidates))
            return from_rank_llm(current, request, k)
        except Exception as exc:  # noqa: BLE001 - surface any model failure as a stage error naming it
            raise RerankError(self.name, f"{type(exc).__name__}: {exc}") from None
