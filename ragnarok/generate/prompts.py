"""Prompt templates are data: one YAML file per template in ``ragnarok/generate/prompts/`` (or an extra
directory). Adding a template needs no code.

A template has ``name``, ``description``, ``system``, ``user`` (``str.format`` placeholders ``{topic}``,
``{contexts}``, ``{n}``, ``{max_words}``), ``context_format`` (default ``[{i}] {title}: {text}``, contexts
numbered from 1) and ``max_words``. Square brackets inside segment text become parentheses, so nothing in a
segment can be mistaken for a citation. When the prompt would exceed the token budget, every segment is cut
to the same share of what is left (at a word boundary, with "…"): all contexts stay.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from ragnarok.registry import UnknownComponentError
from ragnarok.types import Candidate

PACKAGED = Path(__file__).parent / "prompts"


class PromptTemplate(BaseModel):
    name: str
    description: str = ""
    system: str
    user: str
    context_format: str = "[{i}] {title}: {text}"
    max_words: int = 400


def approx_tokens(text: str) -> int:
    """A cheap token estimate for budgeting when no tokenizer is at hand: ~4 characters per token."""
    return (len(text) + 3) // 4


def _load_dir(directory: Path) -> dict[str, PromptTemplate]:
    templates = {}
    for path in sorted(Path(directory).glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
            template = PromptTemplate.model_validate(data)
        except (yaml.YAMLError, ValidationError, TypeError) as exc:
            raise ValueError(f"prompt template {path}: {str(exc).splitlines()[0]}") from None
        templates[template.name] = template
    return templates


@lru_cache(maxsize=1)
def _packaged() -> dict[str, PromptTemplate]:
    return _load_dir(PACKAGED)


def load_templates(extra_dir: Path | None = None) -> dict[str, PromptTemplate]:
    """Packaged templates (read once), overridden or extended by those in ``extra_dir`` (read each time)."""
    templates = dict(_packaged())
    if extra_dir:
        templates.update(_load_dir(Path(extra_dir)))
    return templates


def get_template(name: str, extra_dir: Path | None = None) -> PromptTemplate:
    templates = load_templates(extra_dir)
    if name not in templates:
        raise UnknownComponentError("prompt template", name, sorted(templates))
    return templates[name]


def _sanitize(text: str) -> str:
    return " ".join(text.replace("[", "(").replace("]", ")").replace("【", "(").replace("】", ")").split())


def _cut(text: str, budget_tokens: int, count: Callable[[str], int]) -> str:
    if count(text) <= budget_tokens:
        return text
    words = text.split()
    low, high = 0, len(words)
    while low < high:  # the longest prefix that fits
        mid = (low + high + 1) // 2
        if count(" ".join(words[:mid]) + " …") <= budget_tokens:
            low = mid
        else:
            high = mid - 1
    return " ".join(words[:low]) + " …"


def build_messages(template: PromptTemplate, topic: str, candidates: list[Candidate], max_prompt_tokens: int = 3000,
                   count_tokens: Callable[[str], int] | None = None) -> list[dict[str, str]]:
    """OpenAI chat messages for ``topic`` over ``candidates`` (numbered from 1, in order)."""
    count = count_tokens or approx_tokens
    texts = [_sanitize(c.doc.segment or "") for c in candidates]
    titles = [_sanitize(c.doc.title or "") for c in candidates]

    def render(segment_texts: list[str]) -> list[dict[str, str]]:
        contexts = "\n".join(template.context_format.format(i=i, title=t, text=s)
                             for i, (t, s) in enumerate(zip(titles, segment_texts), start=1))
        user = template.user.format(topic=topic, contexts=contexts, n=len(candidates), max_words=template.max_words)
        return [{"role": "system", "content": template.system}, {"role": "user", "content": user}]

    def size(messages: list[dict[str, str]]) -> int:
        return sum(count(m["content"]) for m in messages)

    messages = render(texts)
    if size(messages) <= max_prompt_tokens or not texts:
        return messages
    overhead = size(render([""] * len(texts)))
    share = max(0, (max_prompt_tokens - overhead) // len(texts))
    return render([_cut(t, share, count) if share else "" for t in texts])
