"""Which study a config's trials belong to: a fingerprint of everything that changes a trial's value, a short key
of it, and the study name that follows (a changed config resumes or starts ``NAME.KEY``, never mixes trials)."""

from __future__ import annotations

from pathlib import Path

import optuna

from ragnarok.optimize.config import NUGGET_METRICS, OptimizeConfig
from ragnarok.optimize.space import Space
from ragnarok.optimize.study import quiet


def fingerprint(config: OptimizeConfig, space: Space) -> dict[str, str]:
    """Everything that changes a trial's value, as readable strings (shown as a difference when it changed)."""
    split = config.split
    return {
        "space": "; ".join(f"{n.name}: " + ", ".join(c.label for c in n.candidates) for n in space.nodes),
        "objective": config.objective,
        "metrics": ", ".join(f"{n.name}={n.metric}" for n in space.nodes),
        "max_seconds": ", ".join(f"{n.name}={n.max_seconds:g}" for n in space.nodes if n.max_seconds) or "none",
        "split": (f"folds={split.folds}" if split.folds else f"test={split.test:g}") + f", seed={split.seed}",
        "judge": config.judge
        if config.objective in NUGGET_METRICS or any(n.metric in NUGGET_METRICS for n in space.nodes)
        else "-",
        "strategy": config.strategy,
        "seed": str(config.seed),
        "index": str(config.index),
        "topics": str(config.topics),
        "qrels": str(config.qrels),
        "nuggets": str(config.nuggets),
    }


def config_key(print_: dict[str, str]) -> str:
    import hashlib  # noqa: PLC0415
    import json  # noqa: PLC0415

    return hashlib.sha256(json.dumps(print_, sort_keys=True).encode()).hexdigest()[:8]


def difference(old: dict[str, str] | None, new: dict[str, str], width: int = 300) -> str:
    """``key: old -> new`` for each setting that changed, on one line."""
    if not old:
        return "its config is not recorded (made by an older ragnarok)"
    keys = ["objective", *(k for k in new if k != "objective"), *(k for k in old if k not in new)]
    parts = [f"{k}: {old.get(k, '-')} -> {new.get(k, '-')}" for k in keys if old.get(k) != new.get(k)]
    text = "; ".join(parts) or "nothing"
    return text if len(text) <= width else text[: width - 1].rsplit(" ", 1)[0] + " …"


class StudyConflict(ValueError):
    """A study of the same explicit name holds trials of another config."""


def study_name(url: str, base: str, print_: dict[str, str], explicit: bool) -> tuple[str, str | None]:
    """The study to use for this config and a one-line note when the config changed since ``base`` was made:
    ``base`` itself when it is new or holds this config; otherwise, with a name the user chose, a
    :class:`StudyConflict` naming the difference, and with the default name ``base.KEY`` (a new study)."""
    key = config_key(print_)
    summaries = {s.study_name: s for s in _summaries(url)}
    old = summaries.get(base)
    if (
        old is None
        or old.user_attrs.get("config_key") == key
        or ("config_key" not in old.user_attrs and not old.n_trials)
    ):
        return base, None
    diff = difference(old.user_attrs.get("fingerprint"), print_)
    if explicit:
        raise StudyConflict(
            f"study {base!r} holds trials of another config ({diff}): give another `study:` "
            "name (or --output / --storage for a new store), or change the config back"
        )
    name = f"{base}.{key}"
    return name, (
        f"the config changed since study {base!r} ({diff}): "
        + ("resuming" if name in summaries else "starting new")
        + f" study {name!r}"
    )


def mark(study: optuna.Study, print_: dict[str, str]) -> None:
    """Record the config a study's trials belong to (what :func:`study_name` compares)."""
    if study.user_attrs.get("config_key") != config_key(print_):
        study.set_user_attr("config_key", config_key(print_))
        study.set_user_attr("fingerprint", print_)


def _summaries(url: str) -> list[optuna.study.StudySummary]:
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///") :]).exists():
        return []
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    quiet()
    from sqlalchemy.exc import SQLAlchemyError  # noqa: PLC0415

    try:
        return optuna.get_all_study_summaries(storage=url, include_best_trial=False)
    except SQLAlchemyError:
        return []  # a new database: its tables come with the first study
