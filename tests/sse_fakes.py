"""A local OpenAI-compatible server that streams (``stream: true``: chat completion chunks as Server-Sent
Events) from a script, and counts what it managed to send: for the streaming tests.

``app.state.script`` (a :class:`Script`) says what to send: the text in pieces, waits before the first and
between the others, a break after N pieces (the connection dropped) or garbage instead of a chunk. The
non-streamed answer (``stream`` absent) is the same text in one chat completion, so both paths can be compared.
An error object (``{"error": {...}}``, as OpenAI and vLLM send) can come mid-stream or as the 200 body.
``app.state.sent`` counts the pieces sent; the stream stops as soon as the client is gone.
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse


@dataclass
class Script:
    pieces: list[str] = field(
        default_factory=lambda: [
            "Use the argparse module",
            " to parse command line arguments [1].",
            " It builds",
            " help messages",
            " and usage text [2].",
            " The getopt module",
            " is the C-style alternative [2].",
        ]
    )
    first_wait_s: float = 0.0
    each_wait_s: float = 0.0
    break_after: int | None = None  # drop the connection after this many pieces
    garbage_after: int | None = None  # send a body that is no chunk after this many pieces
    stall_after: int | None = None  # go quiet for stall_s after this many pieces (the connection kept open)
    stall_s: float = 5.0
    error_after: int | None = None  # send an OpenAI-style error object after this many pieces (whole: at once)
    error_message: str = "The server had an error while processing your request."
    done_after_error: bool = True  # whether [DONE] follows the error object (else the connection just ends)
    end_after: int | None = None  # end the stream in good order after this many pieces: no finish, no [DONE]
    whole_wait_s: float = 0.0  # the answer without `stream` comes after this wait
    finish_reason: str = "stop"
    calls: int = 0

    @property
    def text(self) -> str:
        return "".join(self.pieces)


def _chunk(content: str | None, finish: str | None = None) -> str:
    delta = {"content": content} if content is not None else {}
    return (
        "data: "
        + json.dumps(
            {
                "id": "c1",
                "object": "chat.completion.chunk",
                "model": "fake",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )
        + "\n\n"
    )


def streaming_openai_app(script: Script | None = None) -> FastAPI:
    app = FastAPI()
    app.state.script = script or Script()
    app.state.sent = 0
    app.state.disconnected = threading.Event()  # set when a stream ended before its last piece

    @app.get("/healthz")
    def health() -> dict:
        return {"ok": True}

    @app.get("/v1/models")
    def models() -> dict:
        return {"data": [{"id": "fake"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):  # type: ignore[no-untyped-def]
        body = await request.json()
        s: Script = app.state.script
        s.calls += 1
        if not body.get("stream"):
            await asyncio.sleep(s.whole_wait_s)
            if s.error_after is not None:  # a 200 whose body is an error object
                return JSONResponse({"error": {"message": s.error_message, "type": "server_error"}})
            return JSONResponse(
                {
                    "choices": [
                        {"message": {"role": "assistant", "content": s.text}, "finish_reason": s.finish_reason}
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": len(s.pieces)},
                }
            )

        async def events():  # type: ignore[no-untyped-def]
            complete = False
            try:
                await asyncio.sleep(s.first_wait_s)
                for i, piece in enumerate(s.pieces):
                    if await request.is_disconnected():
                        return
                    if s.break_after is not None and i >= s.break_after:
                        raise RuntimeError("the fake backend drops the connection")
                    if s.garbage_after is not None and i >= s.garbage_after:
                        yield "data: {not json\n\n"
                        return
                    if s.end_after is not None and i >= s.end_after:
                        complete = True
                        return
                    if s.error_after is not None and i >= s.error_after:
                        yield (
                            "data: "
                            + json.dumps({"error": {"message": s.error_message, "type": "server_error"}})
                            + "\n\n"
                        )
                        if s.done_after_error:
                            yield "data: [DONE]\n\n"
                        return
                    if s.stall_after is not None and i == s.stall_after:
                        await asyncio.sleep(s.stall_s)
                    if i:
                        await asyncio.sleep(s.each_wait_s)
                    yield _chunk(piece)
                    app.state.sent += 1
                yield _chunk(None, s.finish_reason)
                yield (
                    "data: "
                    + json.dumps({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": len(s.pieces)}})
                    + "\n\n"
                )
                yield "data: [DONE]\n\n"
                complete = True
            finally:
                if not complete:  # cancelled, hung up on, or broken off by the script
                    app.state.disconnected.set()

        return StreamingResponse(events(), media_type="text/event-stream")

    return app
