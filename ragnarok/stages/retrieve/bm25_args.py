"""BM25 and feedback parameters in a retriever's argument, so a tuned retriever is still one spec token:

    bm25:k1_1.2-b_0.75            bm25+rocchio:terms_20-docs_5-beta_0.5        bm25+rm3:terms_20-weight_0.6

``KEY_VALUE`` pairs joined by ``-``; keys: ``k1``, ``b`` (all three), ``terms``, ``docs`` (feedback terms and
documents), ``weight`` (RM3's original-query weight), ``alpha``, ``beta`` (Rocchio). Unset keys keep
Anserini's defaults (:class:`BM25Params`); :func:`format_args` writes the canonical form (non-defaults only, in
the order above), so equal settings give equal specs."""

from __future__ import annotations

import dataclasses
import math

from ragnarok.core.registry import ComponentArgumentError
from ragnarok.runtime.quoting import quote
from ragnarok.stages.retrieve.lucene import BM25Params

#: key -> (BM25Params field, type, low, high, feedback models that take it)
KEYS: dict[str, tuple[str, type, float, float, tuple[str, ...]]] = {
    "k1": ("k1", float, 0.0, 10.0, ("none", "rocchio", "rm3")),
    "b": ("b", float, 0.0, 1.0, ("none", "rocchio", "rm3")),
    "terms": ("fb_terms", int, 1, 1000, ("rocchio", "rm3")),
    "docs": ("fb_docs", int, 1, 1000, ("rocchio", "rm3")),
    "weight": ("rm3_original_query_weight", float, 0.0, 1.0, ("rm3",)),
    "alpha": ("rocchio_alpha", float, 0.0, 10.0, ("rocchio",)),
    "beta": ("rocchio_beta", float, 0.0, 10.0, ("rocchio",)),
}


def keys_for(feedback: str) -> list[str]:
    """The argument keys a retriever with this feedback model takes."""
    return [key for key, spec in KEYS.items() if feedback in spec[4]]


def parse_args(arg: str | None, feedback: str = "none") -> BM25Params:
    """``k1_1.2-b_0.75`` -> BM25Params; an unknown key, a bad value or a repeated key is a
    :class:`ComponentArgumentError` naming it."""
    params = BM25Params()
    if not arg:
        return params
    seen: set[str] = set()
    changes: dict[str, float | int] = {}
    for pair in arg.split("-"):
        key, sep, raw = pair.partition("_")
        allowed = keys_for(feedback)
        if not sep or key not in allowed:
            raise ComponentArgumentError(
                f"unknown BM25 parameter {quote(key, 40)} in {quote(arg, 80)}; "
                f"use KEY_VALUE pairs joined by hyphens with keys {', '.join(allowed)}"
            )
        if key in seen:
            raise ComponentArgumentError(f"BM25 parameter {key} is given twice in {quote(arg, 80)}")
        seen.add(key)
        name, kind, low, high, _ = KEYS[key]
        try:  # ASCII only: int() and float() also read other scripts' digits ("１０", "١٠")
            value = kind(raw) if raw.isascii() else math.nan
        except ValueError:
            value = math.nan
        if not (isinstance(value, (int, float)) and low <= value <= high):  # NaN fails too
            raise ComponentArgumentError(
                f"BM25 parameter {key} takes a{'n integer' if kind is int else ' number'} "
                f"from {low:g} to {high:g}, got {quote(raw, 40)}"
            )
        changes[name] = value
    return dataclasses.replace(params, **changes)


def format_args(values: dict[str, float | int]) -> str | None:
    """The canonical argument for ``{key: value}`` (keys as in :data:`KEYS`): defaults left out, fixed order;
    None when every value is a default."""
    defaults = BM25Params()
    parts = []
    for key, (name, kind, _, _, _) in KEYS.items():
        if key in values and kind(values[key]) != getattr(defaults, name):
            parts.append(f"{key}_{_number(float(values[key]))}" if kind is float else f"{key}_{int(values[key])}")
    return "-".join(parts) or None


def _number(value: float) -> str:
    """``1.2``, ``0.75``, ``1``: no exponent (its ``-`` would split the pairs)."""
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"
