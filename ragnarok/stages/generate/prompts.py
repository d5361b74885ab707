"""Prompt templates are data: one YAML file per template in ``ragnarok/stages/generate/prompts/`` (or an extra
directory, whose templates add to the packaged ones and override those of the same name). Adding a template
needs no code.

Placeholders are checked when a file is loaded; square brackets in segments become parentheses so nothing is
mistaken for a citation; and a prompt over ``max_prompt_tokens`` has its segments shortened evenly.

Design notes: docs/internals/generate.md.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import ValidationError

from ragnarok.core.registry import UnknownComponentError
from ragnarok.core.types import Candidate, PromptTemplate  # noqa: F401 - re-exported (its old home)

PACKAGED = Path(__file__).parent / "prompts"
USER_FIELDS = {"topic": "q", "contexts": "[1] t: x", "n": 1, "max_words": 1}
CONTEXT_FIELDS = {"i": 1, "title": "t", "text": "x", "docid": "d"}
Messages = list[dict[str, str]]


def approx_tokens(text: str) -> int:
    """A cheap token estimate when no tokenizer is at hand: ``ceil(len(text) / 4)``, about 4 characters per
    token for English with BPE tokenizers (it overestimates slightly, which keeps prompts safely short)."""
    return (len(text) + 3) // 4


def _check(template: PromptTemplate) -> None:
    for field, text, allowed, required in (
        ("user", template.user, USER_FIELDS, ("topic", "contexts")),
        ("context_format", template.context_format, CONTEXT_FIELDS, ()),
    ):
        try:
            names = {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
            text.format(**allowed)
        except (ValueError, IndexError, KeyError) as exc:
            raise ValueError(f"{field}: bad placeholder ({exc!r}); allowed: {', '.join(allowed)}") from None
        if missing := [name for name in required if name not in names]:
            raise ValueError(f"{field}: missing placeholder(s) {', '.join('{' + m + '}' for m in missing)}")


def _load_file(path: Path) -> PromptTemplate:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError(f"expected a mapping of fields, got {type(data).__name__}")
        template = PromptTemplate.model_validate({"name": path.stem, **data})
        _check(template)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValidationError, ValueError) as exc:
        raise ValueError(f"prompt template {path}: {' '.join(str(exc).split())}") from None
    return template


def _load_dir(directory: Path) -> dict[str, PromptTemplate]:
    templates: dict[str, PromptTemplate] = {}
    files: dict[str, Path] = {}
    for path in sorted(Path(directory).glob("*.yaml")) + sorted(Path(directory).glob("*.yml")):
        template = _load_file(path)
        if template.name in files:
            raise ValueError(f"prompt template {path}: name {template.name!r} is also used by {files[template.name]}")
        templates[template.name], files[template.name] = template, path
    return templates


@lru_cache(maxsize=1)
def _packaged() -> dict[str, PromptTemplate]:
    return _load_dir(PACKAGED)


def load_templates(extra_dir: Path | None = None) -> dict[str, PromptTemplate]:
    """Packaged templates (read once), extended or overridden by those in ``extra_dir`` (read each time)."""
    templates = dict(_packaged())
    if extra_dir:
        if not Path(extra_dir).is_dir():
            raise ValueError(f"prompt template directory {extra_dir} does not exist")
        templates.update(_load_dir(Path(extra_dir)))
    return dict(sorted(templates.items()))


def get_template(name: str, extra_dir: Path | None = None) -> PromptTemplate:
    """The template called ``name``; ``UnknownComponentError`` (listing the available ones) if none is."""
    templates = load_templates(extra_dir)
    if name not in templates:
        raise UnknownComponentError("prompt template", name, sorted(templates))
    return templates[name]


def _sanitize(text: str) -> str:
    """Brackets become parentheses (no segment text can pose as a citation); whitespace is collapsed."""
    return " ".join(text.translate(str.maketrans("[]【】", "()()")).split())


def _cut(text: str, budget: int, count: Callable[[str], int]) -> str:
    """The longest word prefix of ``text`` that, with " …", fits ``budget`` tokens ("" if none does)."""
    if count(text) <= budget:
        return text
    words = text.split()
    low, high = 0, len(words) - 1
    while low < high:
        mid = (low + high + 1) // 2
        if count(" ".join(words[:mid]) + " …") <= budget:
            low = mid
        else:
            high = mid - 1
    return " ".join(words[:low]) + " …" if low else ""


def _share(costs: list[int], available: int) -> int:
    """The largest per-segment budget ``s`` with ``sum(min(cost, s)) <= available`` (water-filling)."""
    remaining, left = available, len(costs)
    for cost in sorted(costs):
        if cost * left > remaining:
            return remaining // left
        remaining -= cost
        left -= 1
    return max(costs, default=0)


def fixed_user_start(template: PromptTemplate, n: int) -> str:
    """The start of the user message that every prompt of ``template`` over ``n`` segments shares: its text
    before the first topic- or segment-dependent part."""
    cut = "\x00"
    return template.user.format(topic=cut, contexts=cut, n=n, max_words=template.max_words).split(cut, 1)[0]


def build_messages(
    template: PromptTemplate,
    topic: str,
    candidates: list[Candidate],
    max_prompt_tokens: int = 3000,
    count_tokens: Callable[[str], int] | None = None,
) -> Messages:
    """OpenAI chat messages (system, user) for ``topic`` over ``candidates``, numbered from 1 in order, within
    ``max_prompt_tokens`` as counted by ``count_tokens`` (default ``approx_tokens``)."""
    count = count_tokens or approx_tokens
    texts = [_sanitize(c.doc.segment or "") for c in candidates]
    titles = [_sanitize(c.doc.title or "") for c in candidates]

    def render(segment_texts: list[str]) -> Messages:
        contexts = "\n".join(
            template.format_context(i, title, text, c.docid)
            for i, (title, text, c) in enumerate(zip(titles, segment_texts, candidates), start=1)
        )
        user = template.user.format(topic=topic, contexts=contexts, n=len(candidates), max_words=template.max_words)
        return [{"role": "system", "content": template.system}, {"role": "user", "content": user}]

    def size(messages: Messages) -> int:
        return sum(count(m["content"]) for m in messages)

    messages = render(texts)
    if size(messages) <= max_prompt_tokens or not texts:
        return messages
    empty = render([""] * len(texts))
    available = max_prompt_tokens - size(empty)
    costs = [count(t) for t in texts]
    for _ in range(20):  # a real tokenizer is not exactly additive: shrink by the excess until it fits
        if available <= 0:
            break
        share = _share(costs, available)
        messages = render([_cut(t, share, count) for t in texts])
        excess = size(messages) - max_prompt_tokens
        if excess <= 0:
            return messages
        available -= excess
    return empty
