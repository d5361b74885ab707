"""``ragnarok schema [NAME]``: JSON Schemas of what the services and files exchange, generated from the pydantic
models the API validates with (so they are what ``/openapi.json`` says for the same bodies), the track's run
lines (:mod:`ragnarok.track.lines`) and the events of a streamed ``/rag`` answer."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal, Optional

import typer
from pydantic import BaseModel, Field, TypeAdapter

from ragnarok.core.registry import UnknownComponentError
from ragnarok.runtime import cli_output
from ragnarok.runtime.cli_errors import fails_cleanly
from ragnarok.runtime.cli_output import Format, OutputOpt


def _request() -> Any:
    from ragnarok.core.types import Request  # noqa: PLC0415

    return Request


def _candidates() -> Any:
    from ragnarok.core.types import Candidate  # noqa: PLC0415

    return list[Candidate]


def _answer() -> Any:
    from ragnarok.core.types import RagAnswer  # noqa: PLC0415

    return RagAnswer


def _run_line(year: int) -> Callable[[], Any]:
    def model() -> Any:
        from ragnarok.track import lines  # noqa: PLC0415

        return lines.RunLine2024 if year == 2024 else lines.RunLine2025

    return model


def _rag_body() -> Any:
    from api.routes.rag import RagBody  # noqa: PLC0415 - the API's own model (FastAPI loads only here)

    return RagBody


def _stream_events() -> Any:
    """One event of a streamed answer (``POST /rag`` or ``/v1/generate`` with ``"stream": true``): its SSE
    ``event`` name and its ``data`` (JSON), as the API writes them."""
    from api.routes.rag import RagOut  # noqa: PLC0415

    class StageData(BaseModel):
        stage: str
        latency_ms: float
        k_in: int
        k_out: int

    class ReferencesData(BaseModel):
        docids: list[str]

    class DeltaData(BaseModel):
        text: str

    class SentenceData(BaseModel):
        index: int
        text: str
        citations: list[int]
        docids: list[str]

    class ErrorData(BaseModel):
        stage: str
        status: int
        detail: str
        deadline: str | None = None

    def event(name: str, data: Any) -> Any:
        return type(
            f"{name.capitalize()}Event", (BaseModel,), {"__annotations__": {"event": Literal[name], "data": data}}
        )  # type: ignore[valid-type]

    events = [
        event("stage", StageData),
        event("references", ReferencesData),
        event("delta", DeltaData),
        event("sentence", SentenceData),
        event("done", RagOut),
        event("error", ErrorData),
    ]
    from typing import Union  # noqa: PLC0415

    return Annotated[Union[tuple(events)], Field(discriminator="event")]  # type: ignore[return-value]  # noqa: UP007


#: name -> (what it describes, the model)
SCHEMAS: dict[str, tuple[str, Callable[[], Any]]] = {
    "request": (
        "a query and its ranked candidates (rank_llm Request): what POST /v1/retrieve and /v1/rerank "
        "answer, /v1/generate reads as `request`, and one line of run --task r's .requests.jsonl",
        _request,
    ),
    "candidates": ("a ranking's candidates, best first: a request's `candidates`", _candidates),
    "answer": (
        "the standardized answer (TREC RAG 2024 shape): POST /v1/generate's answer without its notes, "
        "and /rag's without its trace",
        _answer,
    ),
    "run-line-2024": ("one line of a TREC RAG 2024 submission (JSONL)", _run_line(2024)),
    "run-line-2025": ("one line of a TREC RAG 2025 submission (JSONL)", _run_line(2025)),
    "rag-body": ("the body of POST /rag", _rag_body),
    "stream-events": (
        "one Server-Sent Event of a streamed answer: its `event` name and its JSON `data`",
        _stream_events,
    ),
}


def json_schema(name: str) -> dict[str, Any]:
    """The JSON Schema called ``name`` (:data:`SCHEMAS`); an unknown name: did you mean."""
    if name not in SCHEMAS:
        raise UnknownComponentError("schema", name, list(SCHEMAS))
    described, model = SCHEMAS[name]
    schema = TypeAdapter(model()).json_schema()
    head = {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": f"ragnarok:{name}"}
    return {**head, "description": described, **schema} if "description" not in schema else {**head, **schema}


def listing() -> list[dict[str, str]]:
    """Every schema's name and what it describes: :data:`SCHEMAS`, the envelope, each command's result."""
    from ragnarok.runtime.cli_schemas import RESULTS  # noqa: PLC0415

    return (
        [{"name": key, "description": described} for key, (described, _) in SCHEMAS.items()]
        + [{"name": "envelope", "description": "what every command's --output json writes on stdout"}]
        + [
            {"name": f"result {command}", "description": f"the `result` of `ragnarok {command} --output json`"}
            for command in RESULTS
        ]
    )


def named_schema(name: str, command: list[str] | None) -> dict[str, Any]:
    """``envelope``, ``result COMMAND...`` or a name of :data:`SCHEMAS`."""
    from ragnarok.runtime import cli_schemas  # noqa: PLC0415

    if name == "result":
        if not command:
            raise ValueError(
                f"give the command: ragnarok schema result COMMAND (one of {', '.join(cli_schemas.RESULTS)})"
            )
        name = " ".join(command)
        if name not in cli_schemas.RESULTS:
            raise UnknownComponentError("command with --output json", name, sorted(cli_schemas.RESULTS))
        return cli_schemas.result_schema(name)
    if command:
        raise ValueError(f"only `result` takes a command; {name} takes none")
    return cli_schemas.envelope_schema() if name == "envelope" else json_schema(name)


@fails_cleanly
def schema(
    name: Annotated[
        Optional[str],
        typer.Argument(help=f"One of {', '.join(SCHEMAS)}, envelope, or result COMMAND (none: list them)."),
    ] = None,
    command: Annotated[
        Optional[list[str]], typer.Argument(metavar="[COMMAND]", help="With result: the command, e.g. keys list.")
    ] = None,
    output_format: OutputOpt = Format.text,
) -> None:
    """Print the JSON Schema of what the services and files exchange (the models the API validates with), of
    the --output json envelope, or of a command's result (`ragnarok schema result search`); with no NAME, the
    names and what each describes."""
    if name is None:
        rows = listing()
        cli_output.result(rows)
        width = max(len(row["name"]) for row in rows)
        for row in rows:
            typer.echo(f"{row['name'].ljust(width)}  {row['description']}")
        return
    found = named_schema(name, command)
    cli_output.result(found)
    if output_format != Format.json:  # the envelope's result is the schema
        typer.echo(json.dumps(found, indent=2, ensure_ascii=False))
