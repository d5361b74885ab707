"""The structured form of a pipeline: the same pipeline as a mapping (TOML, YAML, a JSON object in ``/rag``)
or a file, turned into the spec string and parsed by :func:`ragnarok.core.spec.parse`, so both forms mean the same
and obey the same bounds. Every key is typed; a malformed mapping is a :class:`~ragnarok.core.spec.SpecError`
naming the key."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ragnarok.core.spec import (
    DEFAULT_DEPTH,
    MAX_DEPTH,
    MAX_GENERATED,
    MAX_QUERY_STAGES,
    MAX_RERANKS,
    Generate,
    Pipeline,
    QueryStage,
    Rerank,
    SpecError,
    parse,
)
from ragnarok.runtime.quoting import quote


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RerankMapping(_Strict):
    name: str = Field(description="A reranker: embedding, mmr, listwise, rankgpt, rankzephyr, monot5, lit5.")
    depth: int = Field(ge=1, description="Candidates the reranker keeps.")
    arg: str | None = Field(None, description="The reranker's argument, e.g. 0.5 for mmr:0.5.")
    fuse: str | None = Field(None, description="rrf, cc or dbsf: fuse the output with the input.")


class QueryMapping(_Strict):
    name: str = Field(description="A query stage: hyde, multiquery, decompose, query2doc.")
    generator: str = Field(description="The generator that writes the queries (GET /v1/generators).")
    n: int | None = Field(None, ge=1, le=MAX_GENERATED, description="Queries to write (multiquery, decompose).")
    fuse: str | None = Field(None, description="rrf (default), cc or dbsf: how the queries' rankings are fused.")


class GenerateMapping(_Strict):
    name: str = Field(description="A generator (GET /v1/generators).")
    template: str | None = Field(None, description="A prompt template (GET /v1/templates).")


class PipelineMapping(_Strict):
    """The structured form of a pipeline: ``{pipeline: SPEC}`` alone, or ``retrieve`` with the other keys."""

    pipeline: str | None = Field(None, description="A whole spec; then no other key may be given.")
    query: list[QueryMapping] = Field(
        default_factory=list,
        max_length=MAX_QUERY_STAGES,
        description="Query stages, run before retrieval in this order.",
    )
    retrieve: str | None = Field(None, description="The first stage, e.g. `rrf(bm25, dense:minilm)`.")
    depth: int = Field(DEFAULT_DEPTH, ge=1, description="Candidates the first stage keeps.")
    rerank: list[RerankMapping] = Field(default_factory=list, max_length=MAX_RERANKS)
    generate: GenerateMapping | None = None


def _key(where: str, loc: tuple[Any, ...]) -> str:
    """``pipeline.rerank.0.depth``; a client's key that is long or not printable is quoted (escaped, cut)."""
    return ".".join(
        [
            where,
            *(str(p) if not isinstance(p, str) or (len(p) <= 40 and p.isprintable()) else quote(p, 40) for p in loc),
        ]
    )


_SHAPE = "{pipeline: SPEC} or {query?: [{name, generator, n?, fuse?}], retrieve, depth?, rerank?: [{name, depth, arg?, fuse?}], generate?: {name, template?}}"


def from_mapping(
    data: Mapping[str, Any] | PipelineMapping, where: str = "pipeline", max_depth: int = MAX_DEPTH
) -> Pipeline:
    """A pipeline from TOML/YAML/JSON data: either ``{pipeline = "spec"}`` or the structured form
    ``{retrieve = "rrf(bm25, dense:minilm)", depth = 1000, rerank = [{name, depth, arg?, fuse?}],
    generate = {name, template?}}``. Every key is typed; a malformed mapping is a :class:`SpecError`
    naming the key."""
    try:
        mapping = data if isinstance(data, PipelineMapping) else PipelineMapping.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{_key(where, e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        raise SpecError(None, 0, f"malformed pipeline: {problems}; expected {_SHAPE}") from None
    if mapping.pipeline is not None:
        if mapping.model_fields_set - {"pipeline"}:
            raise SpecError(None, 0, f"malformed pipeline: {where}.pipeline is a whole spec; give no other key")
        return parse(mapping.pipeline, max_depth)
    if mapping.retrieve is None:
        raise SpecError(None, 0, f"malformed pipeline: {where}.retrieve is missing; expected {_SHAPE}")
    depths = [(f"{where}.depth", mapping.depth)] + [
        (f"{where}.rerank.{i}.depth", r.depth) for i, r in enumerate(mapping.rerank)
    ]
    for key, depth in depths:
        if depth > max_depth:
            raise SpecError(None, 0, f"{key} must be at most {max_depth:,}")
    parts = [
        "".join(f"{QueryStage(q.name, q.generator, q.n, q.fuse)} > " for q in mapping.query)
        + f"{mapping.retrieve}@{mapping.depth}"
    ]
    parts += [str(Rerank(r.name, r.depth, r.arg, r.fuse)) for r in mapping.rerank]
    if mapping.generate is not None:
        parts.append(str(Generate(mapping.generate.name, mapping.generate.template)))
    return parse(" | ".join(parts), max_depth)


def load(path: Path) -> Pipeline:
    """A pipeline from a ``.toml``, ``.yaml`` or ``.yml`` file."""
    text = Path(path).read_text(encoding="utf-8")
    if path.suffix == ".toml":
        data = tomllib.loads(text)
    else:
        import yaml  # noqa: PLC0415

        data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a table/mapping")
    return from_mapping(data, str(path))
