"""Ragnarök's own ``serve`` API (castorini/ragnarok HEAD), so that a client written for it works here.

Its ``POST /v1/generate`` takes a *direct* body, ``{"query": "q" | {"text", "qid"}, "candidates": ["p" | {"text"} |
{"doc": "..."} | {"doc": {"segment" | "contents"}} ...], "overrides": {...}}``, or that record inside its
``castorini.cli.v1`` envelope; Anserini's REST answer piped in as it is (``curl .../search | curl .../v1/generate``)
is such a body. It answers with the envelope, the TREC RAG answer in ``artifacts[0].data[0]``. This module reads
the direct body into ours (:func:`from_direct`) and writes the answer back in its shape (:func:`envelope`).
Overrides map to what this server has: ``model`` a configured generator, ``prompt_mode`` a template, ``topk`` the
candidates the generator reads (its last number), ``run_id`` the record's; Ragnarök's others are accepted and
said to have no effect (``warnings``), any other key is refused, as Ragnarök refuses it.
"""

from __future__ import annotations

from typing import Any

from ragnarok.core.types import RagAnswer

SCHEMA = "castorini.cli.v1"
#: Ragnarök's overridable fields (its api/runtime.py, _OVERRIDABLE_FIELDS)
OVERRIDES = {
    "model",
    "prompt_mode",
    "use_azure_openai",
    "use_openrouter",
    "context_size",
    "topk",
    "num_gpus",
    "execution_mode",
    "max_concurrency",
    "shuffle_candidates",
    "print_prompts_responses",
    "num_few_shot_examples",
    "max_output_tokens",
    "run_id",
    "vllm_batched",
    "include_reasoning",
    "include_trace",
    "redact_prompts",
    "reasoning_effort",
}
APPLIED = {"model", "prompt_mode", "topk", "run_id"}
#: Ragnarök's prompt modes -> our templates (ragnarok/stages/generate/prompts/)
PROMPT_MODES = {
    "chatqa": "chatqa",
    "ragnarok_v2": "ragnarok",
    "ragnarok_v3": "ragnarok",
    "ragnarok_v4": "ragnarok",
    "ragnarok_v4_biogen": "biogen",
    "ragnarok_v5_biogen": "biogen",
}


def is_direct(data: Any) -> bool:
    """Whether a ``/v1/generate`` body is Ragnarök's direct form rather than ours (which has ``request``)."""
    return (
        isinstance(data, dict)
        and "request" not in data
        and ("candidates" in data or "query" in data or data.get("schema_version") == SCHEMA)
    )


def _unwrap(payload: dict[str, Any]) -> dict[str, Any]:
    if payload.get("schema_version") != SCHEMA or not isinstance(payload.get("artifacts"), list):
        return payload
    for artifact in payload["artifacts"]:
        data = artifact.get("data", artifact.get("value")) if isinstance(artifact, dict) else None
        if isinstance(data, list) and len(data) == 1:
            data = data[0]
        if isinstance(data, dict) and {"query", "candidates"} <= data.keys():
            return data
    raise ValueError(f"a {SCHEMA} envelope must hold one artifact record with query and candidates")


def _query(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        return {"text": value, "qid": "q0"}
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return {"text": value["text"], "qid": value.get("qid", "q0")}
    raise ValueError("query must be a string or an object with a text field")


def _candidate(value: Any, n: int) -> dict[str, Any]:
    if isinstance(value, str):
        return {"docid": f"d{n}", "score": 0.0, "doc": {"segment": value}}
    if isinstance(value, dict):
        head = {"docid": str(value.get("docid", f"d{n}")), "score": value.get("score", 0.0)}
        if isinstance(value.get("text"), str):
            return {**head, "doc": {"segment": value["text"]}}
        doc = value.get("doc")
        if isinstance(doc, str):
            return {**head, "doc": {"segment": doc}}
        if isinstance(doc, dict) and isinstance(doc.get("segment") or doc.get("contents"), str):
            fields = {k: doc[k] for k in ("title", "url", "headings") if isinstance(doc.get(k), str)}
            return {**head, "doc": {"segment": doc.get("segment") or doc["contents"], **fields}}
    raise ValueError(f"candidate {n} must be a string, {{text}}, {{doc: '...'}} or {{doc: {{segment|contents}}}}")


def from_direct(data: dict[str, Any]) -> dict[str, Any]:
    """Our ``/v1/generate`` body for Ragnarök's direct one (a :class:`ValueError` says what is wrong)."""
    record = _unwrap(data)
    overrides = (
        {**(data.get("overrides") or {}), **(record.get("overrides") or {})}
        if isinstance(data.get("overrides", {}), dict) and isinstance(record.get("overrides", {}), dict)
        else None
    )
    if overrides is None:
        raise ValueError("overrides must be an object when provided")
    if unknown := sorted(set(overrides) - OVERRIDES):
        raise ValueError(f"unsupported generate override field(s): {', '.join(unknown)}")
    candidates = record.get("candidates")
    if not isinstance(candidates, list):
        raise ValueError("candidates must be a list")
    topk = overrides.get("topk")
    if topk is not None and not (isinstance(topk, list) and topk and all(type(t) is int for t in topk)):
        raise ValueError("overrides.topk must be a non-empty list of integers")
    body: dict[str, Any] = {key: data[key] for key in ("generator", "template", "k", "stream", "notes") if key in data}
    body.update(
        request={
            "query": _query(record.get("query")),
            "candidates": [_candidate(c, n) for n, c in enumerate(candidates)],
        },
        envelope=True,
        run_id=str(overrides.get("run_id", "ragnarok")),
        ignored=sorted(set(overrides) - APPLIED),
    )
    if "model" in overrides:
        body["generator"] = str(overrides["model"])
    if "prompt_mode" in overrides:
        body["template"] = PROMPT_MODES.get(str(overrides["prompt_mode"]), str(overrides["prompt_mode"]))
    if topk:
        body["k"] = topk[-1]
    return body


def envelope(
    answer: RagAnswer, run_id: str, generator: str, template: str | None, ignored: list[str]
) -> dict[str, Any]:
    """The answer as Ragnarök's ``serve`` writes it: its envelope, the record in ``artifacts[0].data``."""
    record = {
        "run_id": run_id,
        **answer.model_dump(mode="json", include={"topic_id", "topic", "references", "response_length", "answer"}),
    }
    return {
        "schema_version": SCHEMA,
        "repo": "ragnarok",
        "command": "generate",
        "mode": "execute",
        "status": "success",
        "exit_code": 0,
        "inputs": {"source": "direct"},
        "resolved": {"input_mode": "direct", "execution_mode": "sync", "model": generator, "prompt_mode": template},
        "artifacts": [{"name": "generation-results", "kind": "data", "data": [record]}],
        "validation": {"valid": True, "record_count": 1},
        "metrics": {"generated_records": 1},
        "warnings": [f"override {key} has no effect on this server" for key in ignored],
        "errors": [],
    }
