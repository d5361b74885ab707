"""JSON Schemas of ``--output json``: the envelope every command writes, and each command's ``result``
(:data:`RESULTS`, keyed by the command as typed after ``ragnarok``). One module, so that a field shared by
several commands (``failed``, ``output``, ``topics``, ...) is written once, and its type agrees everywhere;
``ragnarok schema result COMMAND`` prints them, and the suite checks every command's output against them."""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

STR: Schema = {"type": "string"}
INT: Schema = {"type": "integer"}
NUM: Schema = {"type": "number"}
BOOL: Schema = {"type": "boolean"}
ANY_OBJECT: Schema = {"type": "object"}


def nullable(schema: Schema) -> Schema:
    return {"anyOf": [schema, {"type": "null"}]}


def array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


def obj(required: dict[str, Schema], optional: dict[str, Schema] | None = None, more: bool = False) -> Schema:
    """An object with these fields (``optional`` may be absent; ``more``: other fields allowed too)."""
    return {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": list(required),
        "additionalProperties": more,
    }


def mapping(values: Schema) -> Schema:
    """An object of any keys (run names, metrics, docids) whose values are ``values``."""
    return {"type": "object", "additionalProperties": values}


QIDS = array(STR)  # topic ids: `failed` is the topics that failed, in every command that has it
OUTPUT = STR  # the file a command wrote
METRIC_MEAN = obj({"mean": nullable(NUM), "low": nullable(NUM), "high": nullable(NUM), "n": INT})  # NaN: null
PAIRED_TEST = obj(
    {
        "run_a": STR,
        "run_b": STR,
        "n": INT,
        "mean_difference": nullable(NUM),
        "t": nullable(NUM),
        "p_value": nullable(NUM),
    }
)

ENVELOPE: Schema = obj({"command": STR, "ok": BOOL, "result": {}, "errors": array(STR), "warnings": array(STR)})

_OPTION = obj(
    {
        "name": STR,
        "kind": {"enum": ["option", "argument"]},
        "flags": array(STR),
        "type": STR,
        "default": {},
        "required": BOOL,
        "multiple": BOOL,
        "help": STR,
    }
)
_KEY = obj(
    {
        "id": INT,
        "name": STR,
        "prefix": STR,
        "scopes": array(STR),
        "generators": nullable(array(STR)),
        "rpm": nullable(INT),
        "parallel": nullable(INT),
        "budget_calls": nullable(INT),
        "budget_tokens": nullable(INT),
        "period_s": nullable(INT),
        "created_at": nullable(STR),
        "expires_at": nullable(STR),
        "status": STR,
    },
    {"problems": array(STR)},
)
_PROBLEM = obj({"level": STR, "message": STR, "line": nullable(INT), "topic_id": nullable(STR)})
_VALIDATION = {
    "path": STR,
    "ok": BOOL,
    "year": nullable(INT),
    "lines": INT,
    "errors": INT,
    "warnings": INT,
    "problems": array(_PROBLEM),
}
_NUGGET = obj({"text": STR, "importance": STR, "assignment": nullable(STR)})
_ANSWER = obj(
    {
        "sentences": array(obj({"text": STR, "citations": array(INT)})),
        "references": array(STR),
        "nuggets": nullable(array(_NUGGET)),
        "scores": nullable(mapping(NUM)),
    }
)
_VIEW = obj(
    {
        "runs": array(obj({"name": STR, "path": STR, "year": INT, "run_id": STR, "topics": INT})),
        "topic_answers": array(obj({"qid": STR, "query": STR, "differs": STR, "answers": array(nullable(_ANSWER))})),
        "segment_texts": mapping(nullable(STR)),
        "html": nullable(STR),
    }
)
_EXPERIMENT = obj(
    {"experiment": STR, "metric": STR, "per_topic": array(obj({"qid": STR, "name": STR, "value": nullable(NUM)}))}
)
_WINS = obj({"a": INT, "b": INT, "tie": INT})
_INPUT_REPORT = obj(
    {
        "lines": INT,
        "documents": INT,
        "empty_documents": INT,
        "skipped": INT,
        "bad": mapping(INT),
        "bad_examples": array(STR),
    }
)

#: command (as typed after ``ragnarok``) -> the JSON Schema of its envelope's ``result`` (when it succeeds)
RESULTS: dict[str, Schema] = {
    "doctor": obj(
        {
            "ok": BOOL,
            "missing": array(STR),
            "checks": array(
                obj({"section": STR, "name": STR, "status": STR, "detail": ANY_OBJECT, "problem": STR, "fix": STR})
            ),
        }
    ),
    "index": obj({"lucene": nullable(STR), "dense": nullable(STR)}),
    "search": obj({"output": OUTPUT, "run_id": STR, "topics": INT, "lines": INT, "failed": QIDS}),
    "eval": obj(
        {
            "qrels": STR,
            "topics": INT,
            "runs": array(obj({"name": STR, "topics": INT, "scores": mapping(nullable(NUM))})),
        }
    ),
    "eval-rag": obj(
        {
            "judge": nullable(STR),
            "proxy": BOOL,
            "runs": array(obj({"name": STR, "topics": INT, "failed_judgments": INT, "means": mapping(METRIC_MEAN)})),
            "paired_tests": array(PAIRED_TEST),
        }
    ),
    "compare": array(obj({"name": STR}, more=True)),
    "optimize": obj(
        {
            "study": STR,
            "strategy": STR,
            "objective": STR,
            "worker": BOOL,
            "folds": array(
                obj(
                    {
                        "study": STR,
                        "best_spec": nullable(STR),
                        "train_value": nullable(NUM),
                        "held_out": mapping(NUM),
                        "topics": INT,
                    }
                )
            ),
            "best_spec": nullable(STR),
            "preset": nullable(STR),
            "report": nullable(STR),
            "report_html": nullable(STR),
            "pooled": mapping(NUM),
        }
    ),
    "run": obj({"output": OUTPUT, "topics": INT, "written": INT, "skipped": INT, "failed": QIDS}),
    "validate": obj(_VALIDATION, {"fixed": obj({**_VALIDATION, "changes": mapping(INT)})}),
    "view": {"anyOf": [_VIEW, _EXPERIMENT]},
    "prompt": obj(
        {
            "generator": STR,
            "template": STR,
            "pipeline": STR,
            "contexts": array(STR),
            "messages": array(obj({"role": STR, "content": STR}, more=True)),
        },
        {"sent_documents": array(ANY_OBJECT)},
    ),
    "schema": {"anyOf": [array(obj({"name": STR, "description": STR})), ANY_OBJECT]},
    "describe": array(
        obj({"command": STR, "help": STR, "options": array(_OPTION), "examples": array(STR), "output_json": BOOL})
    ),
    "topics list": array(obj({"name": STR, "available": BOOL, "aliases": array(STR)})),
    "topics fetch": obj({"name": STR, "path": STR, "topics": INT}),
    "convert trec25-format": obj({"output": OUTPUT, "lines": INT, "prompts": INT, "citations_dropped": INT}),
    "keys create": obj(
        {"id": INT, "name": STR, "prefix": STR, "scopes": array(STR), "expires_at": nullable(STR), "secret": STR}
    ),
    "keys list": array(_KEY),
    "keys revoke": obj({"id": INT, "name": STR, "revoked_at": nullable(STR)}),
    "keys usage": array(obj({"owner": STR, "name": STR, "period_start": STR, "calls": INT, "tokens": INT})),
    "judge nuggets": obj({"output": OUTPUT, "topics": INT, "nugget_count": INT}),
    "judge relevance": obj({"output": OUTPUT, "labelled": INT, "not_labelled": INT, "judgments": INT}),
    "judge pairwise": {
        "anyOf": [
            obj({"run_a": STR, "run_b": STR, "wins": _WINS, "verdicts": array(obj({"qid": STR, "winner": STR}))}),
            obj({"voter": STR, "judged": INT, "wins": _WINS, "failed": array(STR)}),
        ]
    },
    "collection dedup": obj(
        {"output": OUTPUT, "documents_in": INT, "documents_out": INT, "removed": INT, "input": _INPUT_REPORT}, more=True
    ),
    "collection segment": obj(
        {"output": OUTPUT, "documents": INT, "segments": INT, "bytes_in": INT, "bytes_out": INT, "input": _INPUT_REPORT}
    ),
    "prebuilt list": array(obj({"name": STR, "kind": STR, "bytes": INT, "status": STR})),
    "prebuilt fetch": obj({"name": STR, "paths": array(STR)}),
}


def result_schema(command: str) -> Schema:
    """The JSON Schema of ``command``'s result (``keys list``), with its ``$id``; KeyError for a command without one (the caller names the choices)."""
    if command not in RESULTS:
        raise KeyError(command)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"ragnarok:result:{command.replace(' ', ':')}",
        "description": f"the `result` of `ragnarok {command} --output json`",
        **RESULTS[command],
    }


def envelope_schema() -> Schema:
    """The JSON Schema of the envelope every ``--output json`` writes (its ``result``: :func:`result_schema`)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "ragnarok:envelope",
        "description": "what `--output json` writes on stdout: one object, the human text going to stderr",
        **ENVELOPE,
    }
