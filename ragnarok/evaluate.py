"""Retrieval evaluation with ir-measures: nDCG@10, MAP@100, Recall@100 and MAP, with the paper's MaxP step.

MaxP: when the qrels judge documents and the run ranks segments (ids ``{docid}#{n}_{offset}``), a document's
score is its best segment's. Averages follow trec_eval: over the topics that have judgments and a ranking.
"""

from __future__ import annotations

from pathlib import Path

import ir_measures

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]
DEFAULT_METRICS = {"nDCG@10": "nDCG@10", "MAP@100": "AP@100", "Recall@100": "R@100", "MAP": "AP"}


def read_qrels(path: Path) -> Qrels:
    qrels: Qrels = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read qrels {path}: {exc}") from None
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4 or not parts[3].lstrip("-").isdigit():
            raise ValueError(f"{path}:{n}: expected 'qid iteration docid grade', got {line[:80]!r}")
        qrels.setdefault(parts[0], {})[parts[2]] = int(parts[3])
    return qrels


def maxp(run: Run) -> Run:
    """Segment run -> document run: each document scored by its best segment."""
    out: Run = {}
    for qid, hits in run.items():
        docs = out.setdefault(qid, {})
        for segment, score in hits.items():
            doc = segment.split("#", 1)[0]
            if score > docs.get(doc, float("-inf")):
                docs[doc] = score
    return out


def needs_maxp(qrels: Qrels, run: Run) -> bool:
    judged_segments = any("#" in d for docs in qrels.values() for d in docs)
    ranked_segments = any("#" in d for hits in run.values() for d in hits)
    return ranked_segments and not judged_segments


def evaluate(qrels: Qrels, run: Run, metrics: dict[str, str] | None = None,
             maxp_: bool | None = None) -> dict[str, float]:
    """Mean of each metric (display name -> value); MaxP applied when asked, or when needed (None)."""
    metrics = metrics or DEFAULT_METRICS
    if maxp_ if maxp_ is not None else needs_maxp(qrels, run):
        run = maxp(run)
    parsed = {name: ir_measures.parse_measure(m) for name, m in metrics.items()}
    values = ir_measures.calc_aggregate(list(parsed.values()), qrels, run) if run else {}
    return {name: float(values.get(m, 0.0)) for name, m in parsed.items()}


def format_table(rows: dict[str, dict[str, float]]) -> str:
    """One row per run, one column per metric (like the paper's Table 3)."""
    if not rows:
        return ""
    metrics = list(next(iter(rows.values())))
    width = max(len("run"), *(len(r) for r in rows))
    lines = [f"{'run':<{width}}  " + "  ".join(f"{m:>10}" for m in metrics)]
    for name, values in rows.items():
        lines.append(f"{name:<{width}}  " + "  ".join(f"{values[m]:>10.4f}" for m in metrics))
    return "\n".join(lines)
