"""The pipeline grammar: one line that says what a RAG pipeline does, parsed into a value.

    rrf(bm25+rocchio, dense:minilm)@3000 | monot5@100~rrf | rankzephyr@20 | gpt-4o:chatqa

Query stages, then a first-stage retriever (or a fusion of several), rerank and passage stages each with its
depth, and an optional generator. Parse errors name the offending token and point at it with a caret, and
bounds on length, depths, nesting and stage counts keep any spec from costing more than a reasonable pipeline.

Design notes: docs/internals/core.md.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Union

from ragnarok.core.fuse import MAX_WEIGHT
from ragnarok.runtime.quoting import QUOTE_CHARS, quote

FUSIONS = ("rrf", "cc", "dbsf")
DEFAULT_DEPTH = 100
MAX_DEPTH = 10_000  # the default of Settings.max_k
MAX_SPEC_CHARS = 2_000
MAX_NESTING = 4  # rrf(a, cc(b, dbsf(c, rrf(d, e)))) is 4 deep
MAX_SOURCES = 8  # first-stage retrievers in one pipeline, fused or not
MAX_RERANKS = 8
MAX_QUERY_STAGES = 2
MAX_GENERATED = 8  # queries one query stage writes (multiquery:GEN:N)
MAX_QUERIES = 16  # queries retrieved in all, the original included
# names and numbers in ASCII (Python's \d and \w match other scripts' digits, which int() reads)
_TOKEN = re.compile(
    r"\s*(?:(?P<num>[0-9]+(?:\.[0-9]+)?)(?![A-Za-z_])"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_.+\-]*|[0-9][A-Za-z0-9_.+\-]*)|(?P<sym>[()|,@:~=>]))"
)


class SpecError(ValueError):
    """A pipeline spec that does not parse; the message points at the offending token (``spec`` None: a
    pipeline given as a mapping, whose message names the key instead).

    ``echo`` is the part of the message that quotes the spec (``, found 'bm2'``): the message has it, with an
    excerpt of the spec and a caret; ``public`` (what the API answers) has neither: the problem, the kind of
    token found and the position, never the caller's text (an error body is no oracle)."""

    def __init__(self, spec: str | None, pos: int, message: str, echo: str = "", public: str | None = None):
        self.spec, self.pos = spec, pos
        self.public = public if public is not None else message if spec is None else f"{message} at position {pos + 1}"
        if spec is None:
            super().__init__(message + echo)
            return
        window, caret = _excerpt(spec, pos)
        super().__init__(f"{message}{echo} at position {pos + 1}:\n  {window}\n  {' ' * caret}^")


def _excerpt(spec: str, pos: int, width: int = QUOTE_CHARS) -> tuple[str, int]:
    """At most ``width`` characters of ``spec`` around ``pos`` (``…`` marks a cut; whitespace shown as spaces,
    so the caret lines up) and where ``pos`` falls in them."""
    start = max(0, min(pos - width // 2, len(spec) - width))
    window = re.sub(r"\s", " ", spec[start : start + width])
    caret = pos - start
    if start > 0:
        window, caret = "…" + window, caret + 1
    if start + width < len(spec):
        window += "…"
    return window, caret


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
        return (
            self.name + (f":{self.arg}" if self.arg else "") + f"@{self.depth}" + (f"~{self.fuse}" if self.fuse else "")
        )


@dataclass(frozen=True)
class QueryStage:
    """A query stage: the query in, one or more queries out (before retrieval), written by ``generator``."""

    name: str
    generator: str
    n: int | None = None
    fuse: str | None = None

    def __str__(self) -> str:
        return (
            f"{self.name}:{self.generator}"
            + (f":{self.n}" if self.n is not None else "")
            + (f"~{self.fuse}" if self.fuse else "")
        )


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
    query: tuple[QueryStage, ...] = field(default_factory=tuple)

    def __str__(self) -> str:
        stages = [f"{self.retrieve}@{self.depth}", *map(str, self.rerank)]
        text = " | ".join(stages + ([str(self.generate)] if self.generate else []))
        return "".join(f"{q} > " for q in self.query) + text

    def sources(self) -> list[Source]:
        """Every first-stage retriever, left to right."""

        def walk(node: Node) -> list[Source]:
            return [node] if isinstance(node, Source) else [s for n in node.sources for s in walk(n)]

        return walk(self.retrieve)


class _Parser:
    def __init__(self, spec: str, max_depth: int = MAX_DEPTH):
        self.spec, self.max_depth = spec, max_depth
        if len(spec) > MAX_SPEC_CHARS:
            raise SpecError(
                spec,
                MAX_SPEC_CHARS,
                f"a pipeline spec has at most {MAX_SPEC_CHARS:,} characters, this one {len(spec):,}",
            )
        self.sources = 0
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while pos < len(spec):
            if spec[pos:].strip() == "":
                break
            m = _TOKEN.match(spec, pos)
            if not m:
                bad = len(spec[pos:]) - len(spec[pos:].lstrip())
                char = spec[pos + bad]
                ascii_only = "" if char.isascii() else " (names and numbers are ASCII)"
                raise SpecError(
                    spec,
                    pos + bad,
                    "unexpected character",
                    f" {char!r}{ascii_only}",
                    f"unexpected character{ascii_only} at position {pos + bad + 1}",
                )
            kind = m.lastgroup or "sym"
            self.tokens.append((kind, m.group(kind), m.start(kind)))
            pos = m.end()
        self.i = 0

    def peek(self, value: str | None = None) -> bool:
        return self.i < len(self.tokens) and (value is None or self.tokens[self.i][1] == value)

    def fail(self, message: str, echo: str = "") -> SpecError:
        """The error at the current token: ``message`` says what is wrong without quoting the spec; ``echo``
        (quoting it) follows it in the message only, as does the token found (the public message names only
        its kind)."""
        if self.i < len(self.tokens):
            kind, value, pos = self.tokens[self.i]
            found = repr(value) if kind == "sym" else {"name": "a name", "num": "a number"}[kind]
            return SpecError(
                self.spec,
                pos,
                message,
                f"{echo}, found {quote(value, 40)}",
                f"{message}, found {found} at position {pos + 1}",
            )
        end = ", found the end of the spec"
        return SpecError(
            self.spec, len(self.spec), message, echo + end, f"{message}{end} at position {len(self.spec) + 1}"
        )

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
        digits = value.lstrip("0") or "0"
        if "." in value or digits == "0":
            self.i -= 1
            raise self.fail(f"expected {what} (a positive integer)")
        if len(digits) > len(str(self.max_depth)) or int(digits) > self.max_depth:
            self.i -= 1
            raise self.fail(f"a depth is at most {self.max_depth:,}")
        return int(digits)

    def source(self, nesting: int = 0) -> Node:
        name = self.take("name", "a retriever or fusion name")
        if self.peek("("):
            if name not in FUSIONS:
                self.i -= 1
                raise self.fail(f"unknown fusion (use {', '.join(FUSIONS)})")
            if nesting == MAX_NESTING:
                self.i -= 1
                raise self.fail(f"fusions nest at most {MAX_NESTING} deep")
            self.expect("(")
            sources = [self.source(nesting + 1)]
            while self.peek(","):
                self.expect(",")
                sources.append(self.source(nesting + 1))
            self.expect(")")
            if len(sources) < 2:
                self.i -= 1
                raise self.fail("a fusion needs at least two sources")
            return Fusion(name, tuple(sources))
        self.sources += 1
        if self.sources > MAX_SOURCES:
            self.i -= 1
            raise self.fail(f"a pipeline has at most {MAX_SOURCES} retrievers")
        arg = self._arg()
        while arg is not None and self.peek(":"):  # dense:prebuilt:NAME, one "a:b" argument as for reranks
            arg += ":" + (self._arg() or "")
        weight = None
        if self.peek("="):
            self.expect("=")
            weight = float(self.take("num", "a weight"))
            if not (math.isfinite(weight) and weight <= MAX_WEIGHT):
                self.i -= 1
                raise self.fail(f"a weight is a number from 0 to {MAX_WEIGHT:,.0f}")
        return Source(name, arg, weight)

    def _arg(self) -> str | None:
        if self.peek(":"):
            self.expect(":")
            return (
                self.take("name", "a name after ':'")
                if not self.peek() or self.tokens[self.i][0] == "name"
                else self.take("num", "a value after ':'")
            )
        return None

    def _is_query_stage(self) -> bool:
        """Whether the tokens from here, up to the first other symbol, end in ``>``: ``hyde:smollm2 >``."""
        j = self.i
        while j < len(self.tokens) and (self.tokens[j][0] in ("name", "num") or self.tokens[j][1] in ":~"):
            j += 1
        return j < len(self.tokens) and self.tokens[j][1] == ">"

    def query_stage(self, queries: int) -> tuple[QueryStage, int]:
        at = self.i
        name = self.take("name", "a query stage name")
        if not self.peek(":"):
            raise self.fail("a query stage names its generator", f": {name}:GENERATOR")
        self.expect(":")
        generator = self.take("name", "a generator name after ':'")
        n = None
        if self.peek(":"):
            self.expect(":")
            value = self.take("num", "a number of queries after ':'")
            if "." in value or not 1 <= int(value.lstrip("0") or "0") <= MAX_GENERATED:
                self.i -= 1
                raise self.fail(f"a query stage writes 1 to {MAX_GENERATED} queries")
            n = int(value)
        fuse = None
        if self.peek("~"):
            self.expect("~")
            fuse = self.take("name", "a fusion after '~'")
            if fuse not in FUSIONS:
                self.i -= 1
                raise self.fail(f"unknown fusion (use {', '.join(FUSIONS)})")
        # a stage that writes n queries keeps the original too (hyde and query2doc: one query, rewritten)
        queries *= 1 if name in ("hyde", "query2doc") else (n or 3) + 1
        if queries > MAX_QUERIES:
            self.i = at
            raise self.fail(f"the query stages would retrieve {queries} queries; at most {MAX_QUERIES}")
        self.expect(">")
        return QueryStage(name, generator, n, fuse), queries

    def parse(self) -> Pipeline:
        if not self.tokens:
            raise SpecError(self.spec, 0, "empty pipeline")
        query: list[QueryStage] = []
        queries = 1
        while self._is_query_stage():
            if len(query) == MAX_QUERY_STAGES:
                raise self.fail(f"a pipeline has at most {MAX_QUERY_STAGES} query stages")
            stage, queries = self.query_stage(queries)
            query.append(stage)
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
            at = self.i
            name = self.take("name", "a reranker or generator name")
            arg = self._arg()
            while arg is not None and self.peek(":"):
                arg += ":" + (self._arg() or "")
            if self.peek("@") and len(reranks) == MAX_RERANKS:
                self.i = at
                raise self.fail(f"a pipeline has at most {MAX_RERANKS} rerank stages")
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
                if arg is not None and ":" in arg:
                    self.i = at
                    raise self.fail(
                        "a generator stage takes one template (NAME:TEMPLATE); a rerank or passage "
                        "stage with several arguments needs its depth ('@k')"
                    )
                generate = Generate(name, arg)
        if self.peek(">"):
            raise self.fail(
                "a query stage comes before the retriever (`hyde:GENERATOR > bm25@100`); "
                "expected '|' or the end of the spec"
            )
        if self.i < len(self.tokens):
            raise self.fail("expected '|' or the end of the spec")
        return Pipeline(retrieve, depth, tuple(reranks), generate, tuple(query))


def parse(spec: str, max_depth: int = MAX_DEPTH) -> Pipeline:
    """Parse a pipeline spec string (see the module docstring); depths are at most ``max_depth``."""
    return _Parser(spec, max_depth).parse()
