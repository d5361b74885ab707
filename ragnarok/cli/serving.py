"""``ragnarok serve --workers N``: N uvicorn worker processes on one port (uvicorn's own supervisor).

Each worker is a fresh process (spawned) that builds its own app (:func:`worker_app`, uvicorn's factory): its
own JVM, searchers, caches and models; N workers hold N copies of them. The metrics are kept in
prometheus-client's multiprocess mode: the supervisor sets ``PROMETHEUS_MULTIPROC_DIR`` (a fresh temporary
directory, removed at exit, unless it is set already) before the workers start, and each worker's
``GET /metrics`` adds up every worker's counts. Workers do not build the demo's dense index in the background
(N builds would race for the same CPU): build it first (``ragnarok index --dense minilm --from-lucene DIR``),
meanwhile ``/rag`` falls back to BM25+Rocchio. Shutdown: the supervisor sends each worker SIGTERM; a worker
then does what ``ragnarok serve`` does: it cancels its work in flight, ends its streams with an ``error``
event, and finishes its other requests within ``RAGNAROK_SHUTDOWN_GRACE_S`` (then the JSON 503).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
from typing import Any

log = logging.getLogger(__name__)
#: After SIGTERM the process is gone within the grace plus this, whatever its threads or event loop are still
#: doing (a thread blocked in a backend or Java call, a loop slowed down by a busy machine).
EXIT_MARGIN_S = 0.9
_leaving = threading.Lock()


def leave_by(grace_s: float) -> None:
    """Exit the process ``grace_s + EXIT_MARGIN_S`` from now unless it has left by then (called once per
    signal; the first call counts). The requests cut at the grace's end have had their 503 and their audit
    rows by then (api/main.py's lifespan ends its steps before this)."""
    if not _leaving.acquire(blocking=False):
        return

    def leave() -> None:
        log.warning("still running %.1f s after the signal: leaving now", grace_s + EXIT_MARGIN_S)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    timer = threading.Timer(grace_s + EXIT_MARGIN_S, leave)
    timer.daemon = True  # it never holds the exit up
    timer.start()


def worker_app() -> Any:
    """The app of one worker (uvicorn calls it in the worker, after installing its signal handlers): logging
    as configured, the JVM started at once with uvicorn's SIGTERM/SIGINT handlers kept (the JVM sets its own
    when it starts, which would end the worker at once, mid-request)."""
    from ragnarok.core.settings import get_settings  # noqa: PLC0415
    from ragnarok.runtime import logs, quiet  # noqa: PLC0415

    quiet.no_telemetry()
    settings = get_settings()
    logs.configure(settings.log_format, settings.log_level)  # before the app's imports: their warnings too
    if settings.log_format == "json":
        logs.capture_std_streams()
        quiet.no_progress_bars()

    from api.main import create_app  # noqa: PLC0415
    from ragnarok.core.java import JavaNotFoundError, start_jvm  # noqa: PLC0415

    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        start_jvm()
    except JavaNotFoundError:
        pass  # remote indexes only
    finally:
        for sig, handler in kept.items():
            if handler is not None:
                signal.signal(sig, handler)
    app = create_app(settings)
    for sig, handler in kept.items():  # as `ragnarok serve`: the signal cancels the work in flight first
        if callable(handler):
            signal.signal(sig, _cancelling_first(app, handler))
    return app


def _cancelling_first(app: Any, handler: Any) -> Any:
    """``handler`` (uvicorn's), after the app's work in flight is cancelled (``InFlight.cancel_all``): CPU work
    answers 503, streams end with an ``error`` event, and requests cut off at the grace's end get the JSON 503."""

    def handle(sig: int, frame: Any) -> None:
        app.state.inflight.cancel_all()
        leave_by(app.state.settings.shutdown_grace_s)
        handler(sig, frame)

    return handle


def serve_workers(host: str, port: int, workers: int, grace_s: float) -> None:
    """Run ``workers`` processes of :func:`worker_app` on ``host:port`` until a signal."""
    import uvicorn  # noqa: PLC0415

    own = None
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        own = tempfile.mkdtemp(prefix="ragnarok-metrics-")
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = own  # inherited by the workers, before they import anything
    try:
        uvicorn.run(
            "ragnarok.cli.serving:worker_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            log_level="warning",
            log_config=None,
            access_log=False,
            proxy_headers=False,
            timeout_graceful_shutdown=grace_s,
            timeout_worker_healthcheck=30,
        )
    finally:
        if own is not None:
            shutil.rmtree(own, ignore_errors=True)
