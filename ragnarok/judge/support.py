"""Citation support (TREC 2024 RAG's support evaluation): each (answer sentence, cited segment) pair is
judged full / partial / no support, weighted 1 / 0.5 / 0.

* support precision: the mean weight over every citation of the answer (0 when it cites nothing);
* support recall: over the answer's sentences, the best weight among its citations (0 for a sentence that
  cites nothing), averaged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

WEIGHTS = {"full_support": 1.0, "partial_support": 0.5, "no_support": 0.0}


def support_scores(labels: Sequence[Sequence[str | None]]) -> dict[str, float]:
    """``labels[i][j]``: the label of sentence i's j-th citation (None: the judgment failed, weighs 0)."""
    weights = [[WEIGHTS.get(label or "", 0.0) for label in sentence] for sentence in labels]
    cited = [w for sentence in weights for w in sentence]
    return {
        "support_precision": sum(cited) / len(cited) if cited else 0.0,
        "support_recall": sum(max(s, default=0.0) for s in weights) / len(weights) if weights else 0.0,
    }


def weight_table(labels: Mapping[str, float] = WEIGHTS) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in labels.items())
