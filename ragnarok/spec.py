"""The pipeline grammar: one line that says what a RAG pipeline does, parsed into a value.

    rrf(bm25+rocchio, dense:minilm)@3000 | monot5@100~rrf | rankzephyr@20 | gpt-4o:chatqa

Grammar (whitespace is free)::

    pipeline := retrieve ("|" rerank)* ("|" generate)?
    retrieve := source ("@" INT)?                    first stage; depth = candidates kept (default 100)
    source   := NAME (":" ARG)? ("=" NUMBER)?         a retriever; "=w" is its weight inside cc/dbsf
              | FUSION "(" source ("," source)+ ")"   FUSION is rrf, cc or dbsf
    rerank   := NAME (":" ARG)? "@" INT ("~" FUSION)? a reranker keeping INT candidates; "~rrf" fuses its
                                                      output with its input, as the paper does after monoT5
    generate := NAME (":" TEMPLATE)?                  the last stage, when it names a generator

A reranker always carries its depth (``@20``), so the last stage is the generator when it has none.
Parse errors name the offending token and point at it with a caret.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

FUSIONS = ("rrf", "cc", "dbsf")
DEFAULT_DEPTH = 100
_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d+)?)(?![A-Za-z_])|(?P<name>[A-Za-z_][\w.+\-]*|\d[\w.+\-]*)|(?P<sym>[()|,@:~=]))")


class SpecError(ValueError):
    """A pipeline spec that does not parse; the message points at the offending token."""

    def __init__(self, spec: str, pos: int, message: str):
        self.spec, self.pos = spec, pos
        super().__init__(f"{message} at position {pos + 1}:\n  {spec}\n  {' ' * pos}^")


@dataclass(frozen=True)
class Source:
    name: str
    arg: str | None = None
    weight: float | None = None

    def __str__(self) -> str:
        text = self.name + (f":{self.arg}" if self.arg else "")
        return text + (f"={self.weight:g}" if self.weight is not None else "")


@dataclass(frozen=True)
class Fusion:
    method: str
    sources: tuple["Node", ...]

    def __str__(self) -> str:
        return f"{self.method}({', '.join(map(str, self.sources))})"


Node = Union[Source, Fusion]


@dataclass(frozen=True)
class Rerank:
    name: str
    depth: int
    arg: str | None = None
    fuse: str | None = None

    def __str__(self) -> str:
        return self.name + (f":{self.arg}" if self.arg else "") + f"@{self.depth}" + (f"~{self.fuse}" if self.fuse else "")


@dataclass(frozen=True)
class Generate:
    name: str
    template: str | None = None

    def __str__(self) -> str:
        return self.name + (f":{self.template}" if self.template else "")


@dataclass(frozen=True)
class Pipeline:
    retrieve: Node
    depth: int = DEFAULT_DEPTH
    rerank: tuple[Rerank, ...] = field(default_factory=tuple)
    generate: Generate | None = None

    def __str__(self) -> str:
        stages = [f"{self.retrieve}@{self.depth}", *map(str, self.rerank)]
        return " | ".join(stages + ([str(self.generate)] if self.generate else []))

    def sources(self) -> list[Source]:
        """Every first-stage retriever, left to right."""
        def walk(node: Node) -> list[Source]:
            return [node] if isinstance(node, Source) else [s for n in node.sources for s in walk(n)]
        return walk(self.retrieve)


class _Parser:
    def __init__(self, spec: str):
        self.spec = spec
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(spec):
            if spec[pos:].strip() == "":
                break
            m = _TOKEN.match(spec, pos)
            if not m:
                bad = len(spec[pos:]) - len(spec[pos:].lstrip())
                raise SpecError(spec, pos + bad, f"unexpected character {spec[pos + bad]!r}")
            kind = m.lastgroup or "sym"
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0

    def peek(self, value: str | None = None) -> bool:
        return self.i < len(self.tokens) and (value is None or self.tokens[self.i][1] == value)

    def fail(self, message: str) -> SpecError:
        if self.i < len(self.tokens):
            kind, value, pos = self.tokens[self.i]
            return SpecError(self.spec, pos, f"{message}, found {value!r}")
        return SpecError(self.spec, len(self.spec), f"{message}, found the end of the spec")

    def take(self, kind: str, what: str) -> str:
        if self.i < len(self.tokens) and self.tokens[self.i][0] == kind:
            self.i += 1
            return self.tokens[self.i - 1][1]
        raise self.fail(f"expected {what}")

    def expect(self, symbol: str) -> None:
        if not self.peek(symbol):
            raise self.fail(f"expected {symbol!r}")
        self.i += 1

    def integer(self, what: str) -> int:
        value = self.take("num", what)
        if "." in value or int(value) < 1:
            self.i -= 1
            raise self.fail(f"expected {what} (a positive integer)")
        return int(value)

    def source(self) -> Node:
        name = self.take("name", "a retriever or fusion name")
        if self.peek("("):
            if name not in FUSIONS:
                self.i -= 1
                raise self.fail(f"unknown fusion (use {', '.join(FUSIONS)})")
            self.expect("(")
            sources = [self.source()]
            while self.peek(","):
                self.expect(",")
                sources.append(self.source())
            self.expect(")")
            if len(sources) < 2:
                self.i -= 1
                raise self.fail("a fusion needs at least two sources")
            return Fusion(name, tuple(sources))
        arg = self._arg()
        weight = None
        if self.peek("="):
            self.expect("=")
            weight = float(self.take("num", "a weight"))
        return Source(name, arg, weight)

    def _arg(self) -> str | None:
        if self.peek(":"):
            self.expect(":")
            return self.take("name", "a name after ':'") if not self.peek() or self.tokens[self.i][0] == "name" \
                else self.take("num", "a value after ':'")
        return None

    def parse(self) -> Pipeline:
        if not self.tokens:
            raise SpecError(self.spec, 0, "empty pipeline")
        retrieve = self.source()
        depth = DEFAULT_DEPTH
        if self.peek("@"):
            self.expect("@")
            depth = self.integer("a depth after '@'")
        reranks: list[Rerank] = []
        generate = None
        while self.peek("|"):
            self.expect("|")
            if generate is not None:
                self.i -= 1
                raise self.fail("nothing may follow the generator stage")
            name = self.take("name", "a reranker or generator name")
            arg = self._arg()
            if self.peek("@"):
                self.expect("@")
                rr_depth = self.integer("a depth after '@'")
                fuse = None
                if self.peek("~"):
                    self.expect("~")
                    fuse = self.take("name", "a fusion after '~'")
                    if fuse not in FUSIONS:
                        self.i -= 1
                        raise self.fail(f"unknown fusion (use {', '.join(FUSIONS)})")
                reranks.append(Rerank(name, rr_depth, arg, fuse))
            else:
                generate = Generate(name, arg)
        if self.i < len(self.tokens):
            raise self.fail("expected '|' or the end of the spec")
        return Pipeline(retrieve, depth, tuple(reranks), generate)


def parse(spec: str) -> Pipeline:
    """Parse a pipeline spec string (see the module docstring)."""
    return _Parser(spec).parse()


def from_mapping(data: dict[str, Any], where: str = "pipeline") -> Pipeline:
    """A pipeline from TOML/YAML data: either ``{pipeline = "spec"}`` or the structured form
    ``{retrieve = "rrf(bm25, dense:minilm)", depth = 1000, rerank = [{name, depth, arg?, fuse?}],
    generate = {name, template?}}``."""
    if "pipeline" in data:
        return parse(str(data["pipeline"]))
    try:
        parts = [f"{data['retrieve']}@{int(data.get('depth', DEFAULT_DEPTH))}"]
        for r in data.get("rerank", []):
            parts.append(str(Rerank(r["name"], int(r["depth"]), r.get("arg"), r.get("fuse"))))
        if gen := data.get("generate"):
            parts.append(str(Generate(gen["name"], gen.get("template"))))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: malformed pipeline ({exc!r}); see `ragnarok pipelines --help`") from None
    return parse(" | ".join(parts))


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
