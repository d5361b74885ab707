"""An ASGI app that builds the Gradio UI on its first request (see :class:`LazyUI`)."""

import asyncio
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ragnarok.runtime.activity import REQUESTS

if TYPE_CHECKING:
    from fastapi import FastAPI


class LazyUI:
    """An ASGI app that builds the Gradio UI on its first request, then serves it.

    Importing Gradio and building the UI cost seconds; the API (and every batch run or test that creates it)
    should not pay that unless someone opens the arena. The UI is an inner FastAPI app with the Blocks mounted
    by ``gr.mount_gradio_app``; its lifespan (Gradio's queue) is entered on that first request and left when
    the outer app shuts down (:meth:`aclose`).
    """

    def __init__(self, factory: Callable[[], "FastAPI"]):
        self._factory = factory
        self._app: Any = None
        self._lifespan: Any = None
        self._lock = asyncio.Lock()
        self.build_at_start = False  # `ragnarok serve`: build in the background once the server has started
        self._warming: asyncio.Task | None = None
        #: Called once, on the first HTTP request to the arena (``ragnarok serve`` starts the arena's warm-up
        #: answers then: a server nobody visits never loads a model for them).
        self.on_first_visit: Callable[[], object] | None = None

    async def warm_when_quiet(self, quiet_s: float = 0.5, poll_s: float = 0.25) -> None:
        """Build the UI once the server has answered no request that is work for ``quiet_s`` (and has been up
        that long): Gradio's import and the build take seconds of CPU, which a burst of searches right after
        start-up should not share. A visit before that builds it at once, as without this."""
        await asyncio.sleep(quiet_s)
        while self._app is None and REQUESTS.quiet_s() < quiet_s:
            await asyncio.sleep(poll_s)
        await asyncio.wait([self.warm()])

    def warm(self) -> asyncio.Task:
        """Start building the UI now, in the background (the first visit then finds it built, or waits only
        for the rest); a failure is left for that visit to meet again."""
        if self._warming is None:
            self._warming = asyncio.ensure_future(self._ready())
            self._warming.add_done_callback(lambda t: t.cancelled() or t.exception())
        return self._warming

    async def _ready(self) -> "FastAPI":
        async with self._lock:
            if self._app is None:
                await asyncio.to_thread(importlib.import_module, "gradio")  # the slow part, off the event loop
                app = self._factory()
                lifespan = app.router.lifespan_context(app)
                await lifespan.__aenter__()
                self._app, self._lifespan = app, lifespan
            return self._app

    @property
    def built(self) -> bool:
        """Whether the UI is built (and its lifespan entered)."""
        return self._app is not None

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return
        if self.on_first_visit is not None:
            visit, self.on_first_visit = self.on_first_visit, None
            visit()
        app = await self._ready()
        await app(scope, receive, send)

    async def aclose(self) -> None:
        if self._warming is not None and not self._warming.done():
            self._warming.cancel()
        async with self._lock:
            if self._lifespan is not None:
                lifespan, self._lifespan, self._app = self._lifespan, None, None
                await lifespan.__aexit__(None, None, None)


#: How often Gradio's queue looks for work when it has none (seconds). Gradio polls every 1 ms (and its
#: progress loop every 10 ms) on Linux: ~1,100 wake-ups a second, 4-5 % of a core on an idle server. At 50 ms
#: (Gradio's own value on Windows) a battle starts at most 50 ms later and an idle server sleeps.
QUEUE_POLL_S = 0.05


def quiet_queue(blocks: Any) -> None:
    """Gradio's queue polls at :data:`QUEUE_POLL_S` (its progress loop at twice that) instead of 1 ms."""
    queue = blocks._queue  # noqa: SLF001 - Gradio has no setting for these; tests/test_arena_deploy.py checks them
    queue.sleep_when_free = QUEUE_POLL_S
    queue.progress_update_sleep_when_free = 2 * QUEUE_POLL_S
