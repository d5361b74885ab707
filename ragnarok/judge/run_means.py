"""The nugget scores of one run of answers, as ``ragnarok eval-rag --nuggets`` gives them, for the Python API.

:func:`ragnarok.api.evaluate` with ``nuggets=`` hands its run here: answers in any form a notebook holds them
(``{qid: RagAnswer}``, a list, a run file) are judged with the same judge, cache and scores as the command,
and each nugget score's mean comes back.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ragnarok.core.settings import Settings
from ragnarok.core.topic_sets import nuggets_path
from ragnarok.core.types import RagAnswer
from ragnarok.judge.answers import answers_from, read_answers
from ragnarok.judge.evalrag import evaluate_run, metrics_of
from ragnarok.judge.nuggets import read_nuggets
from ragnarok.judge.service import make_judge


def nugget_means(run: Any, nuggets: Any, judge: str | None, settings: Settings) -> dict[str, float]:
    """``eval-rag --nuggets``'s means for one run (the same judge, cache and scores)."""
    if isinstance(run, (str, Path)):
        answers = read_answers(run)
    else:
        given = list(run.values()) if isinstance(run, Mapping) else list(run)
        answers = answers_from(
            (f"answer {n}", a.model_dump() if isinstance(a, RagAnswer) else a) for n, a in enumerate(given, 1)
        )
    topics = read_nuggets(nuggets_path(nuggets, settings)) if isinstance(nuggets, (str, Path)) else nuggets
    result = evaluate_run("run", answers, make_judge(settings, judge), nuggets=topics, progress=False)
    if not result.topics:
        raise ValueError(
            f"no answered topic has nuggets (answered: {', '.join(sorted(answers)[:5])}...): wrong nugget file?"
        )
    return {metric: interval.mean for metric, interval in result.means(metrics_of([result])).items()}
