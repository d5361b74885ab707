"""The search space: node lines in pipeline order, each a list of candidates (a module with one value per
parameter), and the pipeline spec a choice of one candidate per node makes.

Nodes (query, lexical, semantic, retrieval, rerank, passage, generator) follow AutoRAG's; every combination of
a module's parameter values is one candidate, so a config lists values and the space enumerates them.

Design notes: docs/internals/optimize.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragnarok.core.settings import Settings
from ragnarok.core.spec import DEFAULT_DEPTH, FUSIONS, Pipeline, SpecError, parse
from ragnarok.optimize.config import NUGGET_METRICS, Located, OptimizeConfig, one_line
from ragnarok.runtime.quoting import quote
from ragnarok.stages.retrieve.bm25_args import format_args, keys_for

NODE_ORDER = ("query", "lexical", "semantic", "retrieval", "rerank", "passage", "generator")
RETRIEVAL_SIDE = ("query", "lexical", "semantic", "retrieval", "rerank")
NONE = "none"
_FEEDBACK = {"bm25": "none", "bm25+rocchio": "rocchio", "bm25+rm3": "rm3"}


def modules_of(node: str, settings: Settings) -> dict[str, tuple[str, ...]]:
    """Each module a node takes, with the parameters it takes."""
    from ragnarok.stages.components import PASSAGE_STAGES, QUERY_STAGES, RERANKERS  # noqa: PLC0415

    if node == "query":
        return {NONE: (), **{n: ("generator", "n", "fuse") for n in QUERY_STAGES.names()}}
    if node == "lexical":
        return {name: tuple(keys_for(fb)) for name, fb in _FEEDBACK.items()}
    if node == "semantic":
        return {"dense": ("model",)}
    if node == "retrieval":
        return {
            "lexical": ("depth",),
            "semantic": ("depth",),
            "rrf": ("depth",),
            "cc": ("depth", "weight"),
            "dbsf": ("depth", "weight"),
        }
    if node == "rerank":
        return {NONE: (), **{n: ("arg", "depth", "fuse") for n in RERANKERS.names()}}
    if node == "passage":
        return {NONE: (), **{n: ("arg", "depth") for n in PASSAGE_STAGES.names()}}
    if node == "generator":
        return {n: ("template", "k") for n in settings.generator_configs()}
    raise KeyError(node)


@dataclass(frozen=True)
class Candidate:
    node: str
    module: str
    params: tuple[tuple[str, Any], ...] = ()

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)

    @property
    def label(self) -> str:
        """A short readable name, unique within its node (the Optuna parameter's value)."""
        p = dict(self.params)
        if self.module == NONE:
            return NONE
        if self.node == "lexical":
            arg = format_args({k: v for k, v in p.items()})
            return self.module + (f":{arg}" if arg else "")
        if self.node == "semantic":
            return f"dense:{p.get('model', 'minilm')}"
        if self.node == "retrieval":
            weight = f"({p['weight']:g})" if "weight" in p else ""
            return f"{self.module}{weight}@{p.get('depth', DEFAULT_DEPTH)}"
        rest = ",".join(f"{k}={v}" for k, v in self.params)
        return f"{self.module}[{rest}]" if rest else self.module


@dataclass
class NodeSpace:
    name: str
    candidates: list[Candidate]
    metric: str | None = None
    max_seconds: float | None = None
    index: int = 0  # its position in the config's node list

    def by_label(self) -> dict[str, Candidate]:
        return {c.label: c for c in self.candidates}


@dataclass
class Space:
    nodes: list[NodeSpace] = field(default_factory=list)

    def node(self, name: str) -> NodeSpace | None:
        return next((n for n in self.nodes if n.name == name), None)

    def size(self) -> int:
        total = 1
        for n in self.nodes:
            total *= len(n.candidates)
        return total

    def default(self) -> dict[str, str]:
        """The first candidate of each node (a config lists its defaults first)."""
        return {n.name: n.candidates[0].label for n in self.nodes}

    def spec(self, labels: Mapping[str, str]) -> str:
        """The pipeline spec of one candidate per node (a node left out takes its first)."""
        chosen = {n.name: n.by_label()[labels.get(n.name, n.candidates[0].label)] for n in self.nodes}
        return build_spec(chosen)

    def pipeline(self, labels: Mapping[str, str]) -> Pipeline:
        return parse(self.spec(labels))


def _source(c: Candidate | None) -> str | None:
    return None if c is None else c.label


def build_spec(chosen: Mapping[str, Candidate]) -> str:
    lexical, semantic = _source(chosen.get("lexical")), _source(chosen.get("semantic"))
    retrieval = chosen.get("retrieval")
    depth = int(retrieval.get("depth", DEFAULT_DEPTH)) if retrieval else DEFAULT_DEPTH
    method = retrieval.module if retrieval else ("lexical" if lexical else "semantic")
    if method == "lexical":
        first = lexical or "bm25"
    elif method == "semantic":
        first = semantic or "dense:minilm"
    else:
        lex, sem = lexical or "bm25", semantic or "dense:minilm"
        weight = retrieval.get("weight") if retrieval else None
        if weight is not None:
            first = f"{method}({lex}={float(weight):g}, {sem}={1 - float(weight):g})"
        else:
            first = f"{method}({lex}, {sem})"
    text = ""
    query = chosen.get("query")
    if query is not None and query.module != NONE:
        text += f"{query.module}:{query.get('generator', 'smollm2')}"
        text += f":{query.get('n')}" if query.get("n") is not None else ""
        text += f"~{query.get('fuse')}" if query.get("fuse") else ""
        text += " > "
    stages = [f"{first}@{depth}"]
    last_depth = depth
    for node in ("rerank", "passage"):
        c = chosen.get(node)
        if c is None or c.module == NONE:
            continue
        d = int(c.get("depth", min(last_depth, DEFAULT_DEPTH)))
        gen = chosen.get("generator")
        if node == "passage" and gen is not None and gen.get("k") is not None:
            d = min(d, int(gen.get("k")))
        stage = c.module + (f":{c.get('arg')}" if c.get("arg") is not None else "") + f"@{d}"
        stage += f"~{c.get('fuse')}" if node == "rerank" and c.get("fuse") else ""
        stages.append(stage)
        last_depth = d
    gen = chosen.get("generator")
    if gen is not None:
        k = gen.get("k")
        if k is not None and int(k) < last_depth:
            stages.append(f"cutoff:0@{int(k)}")  # the candidates the generator reads: the top k, order kept
        stages.append(gen.module + (f":{gen.get('template')}" if gen.get("template") else ""))
    return text + " | ".join(stages)


def _values(located: Located, loc: tuple[Any, ...], value: Any) -> list[Any]:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise located.error(loc, f"{loc[-1]} has no values: give one value or a list of them")
    for v in values:
        if isinstance(v, (dict, list)):
            raise located.error(loc, f"{loc[-1]}: a value is a number or a word, got {quote(str(v), 60)}", True)
    return values


def build_space(config: OptimizeConfig, located: Located, settings: Settings) -> Space:
    """The config's node lines as a space; an unknown node, module or parameter is an error at its line."""
    space = Space()
    seen: list[str] = []
    for i, node in enumerate(config.nodes):
        loc = ("nodes", i)
        if node.node not in NODE_ORDER:
            raise located.error(
                (*loc, "node"), f"unknown node {quote(node.node, 40)} (nodes: {', '.join(NODE_ORDER)})", True
            )
        if node.node in seen:
            raise located.error((*loc, "node"), f"node {node.node} is given twice", True)
        if seen and NODE_ORDER.index(node.node) < NODE_ORDER.index(seen[-1]):
            raise located.error(
                (*loc, "node"),
                f"node {node.node} comes before {seen[-1]} (pipeline order: {', '.join(NODE_ORDER)})",
                True,
            )
        seen.append(node.node)
        modules = modules_of(node.node, settings)
        candidates: list[Candidate] = []
        for j, entry in enumerate(node.modules):
            mloc = (*loc, "modules", j)
            name = entry.get("module")
            if not isinstance(name, str) or name not in modules:
                raise located.error(
                    (*mloc, "module"),
                    f"unknown module {quote(str(name), 40)} for node {node.node} (modules: {', '.join(modules)})",
                    True,
                )
            grid: list[list[tuple[str, Any]]] = []
            for key, value in entry.items():
                if key == "module":
                    continue
                if key not in modules[name]:
                    raise located.error(
                        (*mloc, key),
                        f"unknown parameter {quote(str(key), 40)} of module {name} "
                        f"(parameters: {', '.join(modules[name]) or 'none'})",
                    )
                grid.append([(key, v) for v in _values(located, (*mloc, key), value)])
            for combo in itertools.product(*grid):
                candidate = Candidate(node.node, name, tuple(combo))
                _check(candidate, located, mloc)
                if candidate.label not in {c.label for c in candidates}:
                    candidates.append(candidate)
        metric = node.metric or (
            config.objective
            if node.node == "generator" or config.objective not in NUGGET_METRICS
            else ("nDCG@10" if config.qrels else config.objective)
        )
        space.nodes.append(NodeSpace(node.node, candidates, metric, node.max_seconds, i))
    names = [n.name for n in space.nodes]
    retrieval = space.node("retrieval")
    if retrieval is not None:
        for c in retrieval.candidates:
            needs = {"lexical": ["lexical"], "semantic": ["semantic"]}.get(c.module, ["lexical", "semantic"])
            missing = [n for n in needs if n not in names]
            if missing:
                raise located.error(
                    ("nodes", retrieval.index, "modules"),
                    f"retrieval module {c.module} needs the {' and '.join(missing)} node",
                )
    if "lexical" not in names and "semantic" not in names and retrieval is None:
        space.nodes.insert(0, NodeSpace("lexical", [Candidate("lexical", "bm25")], config.objective, None, -1))
    return space


def _check(candidate: Candidate, located: Located, loc: tuple[Any, ...]) -> None:
    """Each value of the candidate is one the module takes (the spec it makes parses)."""
    p = dict(candidate.params)
    try:
        if candidate.node == "lexical":
            from ragnarok.stages.retrieve.bm25_args import parse_args  # noqa: PLC0415

            parse_args(format_args(p), _FEEDBACK[candidate.module])
        if "depth" in p and (not isinstance(p["depth"], int) or p["depth"] < 1):
            raise ValueError(f"depth is a positive integer, got {quote(str(p['depth']), 40)}")
        if "k" in p and (not isinstance(p["k"], int) or p["k"] < 1):
            raise ValueError(f"k is a positive integer, got {quote(str(p['k']), 40)}")
        if "weight" in p and not (isinstance(p["weight"], (int, float)) and 0 <= p["weight"] <= 1):
            raise ValueError(f"weight is a number from 0 to 1, got {quote(str(p['weight']), 40)}")
        if "fuse" in p and p["fuse"] not in FUSIONS:
            raise ValueError(f"fuse is one of {', '.join(FUSIONS)}, got {quote(str(p['fuse']), 40)}")
        if candidate.node == "passage" and candidate.module != NONE:
            from ragnarok.stages.components import PASSAGE_STAGES  # noqa: PLC0415

            PASSAGE_STAGES.create(candidate.module, arg=None if p.get("arg") is None else str(p["arg"]))
        if candidate.node == "semantic":
            from ragnarok.stages.retrieve.dense import resolve_model  # noqa: PLC0415
            from ragnarok.stages.retrieve.prebuilt import check_name  # noqa: PLC0415

            model = str(p.get("model", "minilm"))
            if model.startswith("prebuilt:"):  # dense:prebuilt:NAME, a catalogue name (a shard set too)
                check_name(model.removeprefix("prebuilt:").split(":")[0])
            else:
                resolve_model(model)
        parse(
            build_spec({candidate.node: candidate})
            if candidate.node not in ("lexical", "semantic")
            else candidate.label + "@10"
        )
    except (ValueError, LookupError, SpecError) as exc:
        raise located.error(loc, f"module {candidate.module}: {one_line(exc)}") from None
