"""An in-process HTTP transport whose response bodies stream: :class:`StreamingASGITransport`.

``httpx.ASGITransport`` hands a response over only once the app has sent all of it, so a streamed answer read
through it would arrive in one piece at the end. This transport gives each body chunk as the app sends it,
runs the app through every middleware as a network request does, and tells the app when the reader goes away.

Design notes: docs/internals/webui.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx

#: How long closing a response waits for the app to wind up (settle its spend) before cancelling it.
CLOSE_WAIT_S = 10.0
_END = object()


class _LiveBody(httpx.AsyncByteStream):
    def __init__(self, queue: asyncio.Queue, task: asyncio.Future, gone: asyncio.Event):
        self.queue, self.task, self.gone = queue, task, gone

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            item = await self.queue.get()
            if item is _END:
                return
            yield item

    async def aclose(self) -> None:
        self.gone.set()
        if self.task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(self.task), CLOSE_WAIT_S)
        except asyncio.TimeoutError:
            self.task.cancel()
        except Exception:  # noqa: BLE001, S110 - the app's failure after its response started: the body ended
            pass


class StreamingASGITransport(httpx.ASGITransport):
    """``httpx.ASGITransport`` with streamed response bodies (see the module docstring)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for (k, v) in request.headers.raw],
            "scheme": request.url.scheme,
            "path": request.url.path,
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port),
            "client": self.client,
            "root_path": self.root_path,
        }
        chunks = request.stream.__aiter__()
        request_done = False
        started: asyncio.Future = asyncio.get_running_loop().create_future()
        queue: asyncio.Queue = asyncio.Queue()
        gone = asyncio.Event()

        async def receive() -> dict[str, Any]:
            nonlocal request_done
            if request_done:
                await gone.wait()
                return {"type": "http.disconnect"}
            try:
                body = await chunks.__anext__()
            except StopAsyncIteration:
                request_done = True
                return {"type": "http.request", "body": b"", "more_body": False}
            return {"type": "http.request", "body": body, "more_body": True}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                if not started.done():
                    started.set_result((message["status"], message.get("headers", [])))
            elif message["type"] == "http.response.body" and not gone.is_set():
                if (body := message.get("body", b"")) and request.method != "HEAD":
                    queue.put_nowait(body)
                if not message.get("more_body", False):
                    queue.put_nowait(_END)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            except Exception as exc:
                if not started.done() and self.raise_app_exceptions:
                    started.set_exception(exc)
                    return
                if not started.done():
                    started.set_result((500, []))
            finally:
                if not started.done():
                    started.set_exception(RuntimeError("the app sent no response"))
                queue.put_nowait(_END)

        task = asyncio.ensure_future(run())  # a copy of this context: the caller's principal
        try:
            status, headers = await asyncio.shield(started)
        except BaseException:
            gone.set()
            task.cancel()  # the caller went away (or the app failed) before the response started
            if not started.done():
                started.cancel()
            raise
        return httpx.Response(status, headers=headers, stream=_LiveBody(queue, task, gone))
