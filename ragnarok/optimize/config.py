"""The ``ragnarok optimize`` config file (YAML or TOML): topics and judgments, the search space as node lines in
pipeline order, the strategy, the budget, the split, the storage. Every problem is a :class:`ConfigError`
whose message starts with ``FILE:LINE:`` and names the offending key or value."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ragnarok.runtime.quoting import quote

STRATEGIES = ("greedy", "greedy-m", "greedy-r", "random", "tpe", "grid")
Strategy = Literal["greedy", "greedy-m", "greedy-r", "random", "tpe", "grid"]
NUGGET_METRICS = ("all", "vital", "strict_all", "strict_vital")


class ConfigError(ValueError):
    """A config that cannot be used; the message is one line starting with ``FILE:LINE:``."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Budget(_Strict):
    trials: int | None = Field(None, ge=0, description="Trials in all (over every worker).")
    seconds: float | None = Field(None, ge=0, description="Wall-clock seconds this process searches.")


class Split(_Strict):
    test: float | None = Field(None, gt=0, lt=1, description="Share of the judged topics held out.")
    folds: int | None = Field(None, ge=2, le=10, description="k folds: k searches, each held out once.")
    seed: int = 0

    @model_validator(mode="after")
    def _one(self) -> Split:
        if self.test is None and self.folds is None:
            self.test = 0.5
        if self.test is not None and self.folds is not None:
            raise ValueError("give split.test or split.folds, not both")
        return self


class Cache(_Strict):
    memory_mb: int = Field(1024, ge=0, description="Stage outputs kept in memory (0: no cache).")
    disk: str | None = Field(None, description="A SQLite file that keeps stage outputs across runs.")


class Node(BaseModel):
    """One node line: its kind, its modules (each a dict: ``module`` plus parameter lists), its metric and
    speed threshold (seconds per query; slower candidates are dropped)."""

    model_config = ConfigDict(extra="forbid")
    node: str
    modules: list[dict[str, Any]] = Field(min_length=1)
    metric: str | None = None
    max_seconds: float | None = Field(
        None, gt=0, description="Seconds per query on an idle machine (scaled by the load measured beside each trial)."
    )


class OptimizeConfig(_Strict):
    study: str | None = Field(None, description="Study name (default: the config file's stem).")
    storage: str | None = Field(
        None, description="sqlite:///FILE or postgresql://...; default a SQLite file beside the config's reports."
    )
    index: str = Field(description="Index name or Lucene index directory.")
    collection: str | None = Field(
        None,
        description="Documents (a directory or .tar.gz) to build `index` from on first use, in the data directory.",
    )
    collection_class: str = Field("JsonCollection", description="The Anserini collection class of `collection`.")
    topics: str = Field(description="Topic file or topic-set name.")
    qrels: str | None = None
    nuggets: str | None = None
    objective: str = Field(
        "nDCG@10",
        description="An ir-measures name on qrels, or a nugget score "
        "(all, vital, strict_all, strict_vital) on nuggets.",
    )
    strategy: Strategy = "greedy"
    seed: int = 0
    budget: Budget = Field(default_factory=Budget)
    split: Split = Field(default_factory=Split)
    cache: Cache = Field(default_factory=Cache)
    concurrency: int = Field(4, ge=1, le=32, description="Topics in flight in one trial.")
    judge: str = Field("proxy", description="The judge of nugget scores (proxy: offline).")
    output: str | None = Field(None, description="Report directory (default: DATA_DIR/optimize/<study>/).")
    preset: str | None = Field(
        None, description="The preset name the best pipeline is saved as (default: <study>-<strategy>)."
    )
    baselines: list[str] = Field(
        default_factory=list, description="Hand-made pipelines scored on the same held-out topics, for comparison."
    )
    nodes: list[Node] = Field(default_factory=list)


def _read(path: Path) -> tuple[dict[str, Any], Any]:
    """The data and, for YAML, its node tree (for line numbers)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".toml":
        try:
            return tomllib.loads(text), None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}:{getattr(exc, 'lineno', 1)}: not valid TOML: {exc}") from None
    if path.suffix not in (".yaml", ".yml"):
        raise ConfigError(f"{path}:1: a config is a .yaml, .yml or .toml file")
    import yaml  # noqa: PLC0415

    try:
        tree = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            f"{path}:{mark.line + 1 if mark else 1}: not valid YAML: {getattr(exc, 'problem', exc)}"
        ) from None
    return data, tree


class Located:
    """A loaded config with a way to say on which line a key path is."""

    def __init__(self, path: Path, data: dict[str, Any], tree: Any):
        self.path, self.data, self.tree = path, data, tree
        self.lines = path.read_text(encoding="utf-8").splitlines()

    def line(self, loc: tuple[Any, ...], value: bool = False) -> int:
        """1-based line of the key (or its value) at ``loc`` (YAML: exact; TOML: the last key named)."""
        if self.tree is not None:
            node, line = self.tree, 1
            for part in loc:
                if getattr(node, "id", "") == "mapping":
                    found = next(((k, v) for k, v in node.value if k.value == part), None)
                    if found is None:
                        break
                    node, line = found[1], found[0].start_mark.line + 1
                elif getattr(node, "id", "") == "sequence" and isinstance(part, int) and part < len(node.value):
                    node = node.value[part]
                    line = node.start_mark.line + 1
                else:
                    break
            return node.start_mark.line + 1 if value and hasattr(node, "start_mark") else line
        keys = [p for p in loc if isinstance(p, str)]
        for key in reversed(keys):
            for n, text in enumerate(self.lines, 1):
                stripped = text.strip()
                if (
                    stripped.startswith((f"{key} ", f"{key}=", f'"{key}"', f"[{key}]", f"[[{key}]]"))
                    or f"{key} =" in text
                    or f"{key}=" in text
                ):
                    return n
        return 1

    def error(self, loc: tuple[Any, ...], message: str, value: bool = False) -> ConfigError:
        return ConfigError(f"{self.path}:{self.line(loc, value)}: {message}")

    def resolve(self, value: str | None) -> str | None:
        """A path relative to the config file, when it names an existing file or directory there."""
        if value is None or "://" in value:
            return value
        candidate = self.path.parent / value
        return str(candidate.resolve()) if candidate.exists() else value


def _where(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc)


def one_line(error: BaseException) -> str:
    """An error's whole message on one line: a spec's parse error (``... at position 30:``, then the spec and a
    caret under the place, on lines of their own) as ``... at position 30: `bm25@10 | ,x` (here: `,x`)``."""
    lines = str(error).splitlines()
    if len(lines) == 3 and lines[0].endswith(":") and lines[2].strip() == "^":
        window, caret = lines[1][2:], len(lines[2]) - 3  # both indented by two spaces
        return f"{lines[0]} `{window}` (here: `{window[caret:].strip() or 'the end'}`)"
    return "; ".join(line.strip() for line in lines if line.strip())


def load_config(path: Path) -> tuple[OptimizeConfig, Located]:
    """The config at ``path``, checked; paths in it are taken relative to its directory."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}:1: no such config file")
    data, tree = _read(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: expected a mapping of settings (index, topics, nodes, ...)")
    located = Located(path, data, tree)
    try:
        config = OptimizeConfig.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        token = loc[-1] if first["type"] == "extra_forbidden" else first.get("input")
        what = (
            f"unknown key {quote(str(token), 60)}"
            if first["type"] == "extra_forbidden"
            else f"{_where(loc)}: {first['msg']} (got {quote(str(token), 60)})"
        )
        raise located.error(loc, what) from None
    for key in ("index", "topics", "qrels", "nuggets", "collection"):
        setattr(config, key, located.resolve(getattr(config, key)))
    for key in ("output", "storage"):
        value = getattr(config, key)
        if value and key == "output" and not Path(value).is_absolute():
            setattr(config, key, str((path.parent / value).resolve()))
    if config.cache.disk and not Path(config.cache.disk).is_absolute():
        config.cache.disk = str((path.parent / config.cache.disk).resolve())
    config.study = config.study or path.stem
    if not config.nodes:
        raise located.error(("nodes",), "the search space is empty: give at least one node line under `nodes`")
    if config.budget.trials == 0 or config.budget.seconds == 0:
        raise located.error(("budget",), "the budget is 0: give budget.trials (and/or budget.seconds) above 0")
    check_metric(located, ("objective",), config.objective)
    for i, node in enumerate(config.nodes):
        if node.metric is not None:
            check_metric(located, ("nodes", i, "metric"), node.metric)
    for i, spec in enumerate(config.baselines):
        _check_baseline(located, ("baselines", i), spec)
    if config.objective in NUGGET_METRICS and not config.nuggets:
        raise located.error(("objective",), f"objective {config.objective} is a nugget score: give `nuggets`")
    if config.objective not in NUGGET_METRICS and not config.qrels:
        raise located.error(("objective",), f"objective {config.objective} is a retrieval metric: give `qrels`")
    return config, located


#: What a mistyped metric is compared with (besides every ir-measures name with the same ``@cutoff``).
COMMON_METRICS = (
    "nDCG@10",
    "nDCG@20",
    "nDCG@100",
    "nDCG",
    "AP",
    "MAP",
    "P@5",
    "P@10",
    "P@20",
    "R@100",
    "R@1000",
    "Recall@100",
    "RR",
    "RR@10",
    "MRR",
    "Judged@10",
    *NUGGET_METRICS,
)


def suggest(word: str, choices: list[str] | tuple[str, ...]) -> str | None:
    """The closest of ``choices`` to ``word`` (case-insensitive), or None."""
    import difflib  # noqa: PLC0415

    by_lower = {c.lower(): c for c in reversed(choices)}
    found = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[found[0]] if found else None


def metric_error(name: str) -> str | None:
    """Why ``name`` is neither a nugget score nor an ir-measures measure (with a suggestion), or None."""
    if name in NUGGET_METRICS:
        return None
    import ir_measures  # noqa: PLC0415

    try:
        ir_measures.parse_measure(name)
        return None
    except Exception:  # noqa: BLE001 - ir-measures raises NameError, ValueError, SyntaxError, ...
        pass
    cutoff = name[name.index("@") :] if "@" in name else ""
    cutoff = cutoff if cutoff[1:].isdigit() else ""
    choices = list(COMMON_METRICS) + [m + cutoff for m in sorted(ir_measures.measures.registry)]
    close = suggest(name, [c for c in choices if c != name])
    hint = (
        f"; did you mean {quote(close, 40)}?"
        if close
        else f" (an ir-measures name such as nDCG@10, or a nugget score: {', '.join(NUGGET_METRICS)})"
    )
    return f"unknown metric {quote(name, 60)}{hint}"


def check_metric(located: Located, loc: tuple[Any, ...], name: str) -> None:
    if (why := metric_error(name)) is not None:
        raise located.error(loc, f"{_where(loc)}: {why}", True)


def _check_baseline(located: Located, loc: tuple[Any, ...], spec: str) -> None:
    from ragnarok.core.presets import resolve  # noqa: PLC0415
    from ragnarok.core.spec import SpecError, parse  # noqa: PLC0415

    try:
        parse(resolve(spec))
    except (SpecError, ValueError, LookupError) as exc:
        raise located.error(loc, f"{_where(loc)}: {one_line(exc)}", True) from None
