"""SIGINT (Ctrl-C) and SIGTERM stop a long command within seconds: finished work kept, work in flight dropped,
one line on stderr saying how to resume, exit code 130 (SIGINT) or 143 (SIGTERM).

    with stop_on_signals(lambda: f"{n} of {total} topics written; run the same command again to resume") as stop:
        ...  # finished work is written as it goes (a whole line, a committed row)

A watcher thread runs the stop callbacks, waits for a write in progress, flushes and leaves with ``os._exit``,
because tearing down the JVM and PyTorch while their threads are busy crashed or hung.

Design notes: docs/internals/runtime.md.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
SIGNALS = (signal.SIGINT, signal.SIGTERM)
CALLBACKS_S = 1.0  # the on_stop callbacks, together
WRITE_S = 1.0  # a write in progress
FLUSH_S = 0.3  # the stdout and stderr buffers
RESUME_S = 1.0  # counting what was kept, for the line

_write_lock = threading.RLock()
_writes = threading.local()  # depth of writing() in this thread
_active: "Stop | None" = None


@contextmanager
def writing() -> Iterator[None]:
    """A write that must not be cut in half (a run file's line, an index put in place): an interrupted command
    leaves only once it is done (waiting at most :data:`WRITE_S`)."""
    with _write_lock:
        _writes.depth = getattr(_writes, "depth", 0) + 1
        try:
            yield
        finally:
            _writes.depth -= 1
    stop = _active
    if stop is not None and stop.requested and _writes.depth == 0 and _in_main_thread():
        stop._park()


def wait_for_writes(seconds: float) -> bool:
    """For an ``on_stop`` callback: wait (at most ``seconds``) until no :func:`writing` block is in progress, so
    that what such a block records (an Optuna trial just asked for) is there for the callback to see."""
    if _write_lock.acquire(timeout=seconds):
        _write_lock.release()
        return True
    return False


@contextmanager
def on_stop(callback: Callable[[], object]) -> Iterator[None]:
    """Run ``callback`` (bounded, in another thread) if the command is interrupted while inside this block."""
    stop = _active
    if stop is None:
        yield
        return
    stop.callbacks.append(callback)
    try:
        yield
    finally:
        if callback in stop.callbacks:
            stop.callbacks.remove(callback)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class _Helper:
    """A thread started in advance that runs one job when asked, waited for at most a given time. Started in
    advance because the main thread, parked in the signal handler, may hold a lock that starting a thread
    needs (``threading._active_limbo_lock``, when the signal came during ``Thread.start``)."""

    def __init__(self, name: str):
        self._job: Callable[[], object] | None = None
        self._asked, self._done = threading.Event(), threading.Event()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    def _serve(self) -> None:
        self._asked.wait()
        if self._job is not None:
            _quietly(self._job)
        self._done.set()

    def run(self, job: Callable[[], object], seconds: float) -> bool:
        """Run ``job``; True when it ended within ``seconds``."""
        self._job = job
        self._asked.set()
        return self._done.wait(seconds)

    def close(self) -> None:
        self._asked.set()


class Stop:
    """What a command under :func:`stop_on_signals` sees: ``requested`` once a signal came."""

    def __init__(self, resume: str | Callable[[], str]):
        self.resume = resume
        self.requested = False
        self.signum: int | None = None
        self.callbacks: list[Callable[[], object]] = []
        self._handled = 0  # signals the Python-level handler saw (plain attributes: it takes no lock)
        self._said = threading.Lock()
        self._go = threading.Event()
        self._closed = False
        self._helpers: dict[str, _Helper] = {}

    @property
    def code(self) -> int:
        """The exit code: 128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + (self.signum or 0)

    def _arm(self) -> None:
        self._helpers = {name: _Helper(f"ragnarok-stop-{name}") for name in ("callbacks", "flush", "resume")}
        threading.Thread(target=self._stop, name="ragnarok-stop", daemon=True).start()

    def _disarm(self) -> None:
        self._closed = True
        self._go.set()
        for helper in self._helpers.values():
            helper.close()

    # --- the signal arrives --------------------------------------------------------------------------------

    def _handler(self, signum: int, _frame: Any) -> None:
        """The Python-level handler (main thread, between two bytecodes): it only records the signal (no lock: it
        may run inside any code of this thread, itself included) and parks the thread, which so takes no new
        work and prints nothing more; the watcher thread does the rest."""
        if self.signum is None:
            self.signum = signum
        self.requested = True
        self._handled += 1
        if getattr(_writes, "depth", 0) == 0:
            self._park()

    def _park(self) -> None:
        while True:  # the stop thread ends the process
            time.sleep(60)

    # --- leaving -------------------------------------------------------------------------------------------

    def _stop(self) -> None:
        self._go.wait()
        if self._closed:
            return
        callbacks = list(self.callbacks)
        if callbacks:
            self._helpers["callbacks"].run(lambda: [_quietly(c) for c in callbacks], CALLBACKS_S)
        _stop_children()
        self._leave(WRITE_S)

    def _leave(self, write_s: float, now: bool = False) -> None:
        _write_lock.acquire(timeout=write_s)  # then no new write starts; leave anyway when one hangs
        if not now:
            self._helpers["flush"].run(_flush, FLUSH_S)
        if self._said.acquire(blocking=not now):
            _say(f"interrupted: {' '.join(self._resume_text(now).split())}\n")
            os._exit(self.code)
        if now:  # the first stop is saying the line: let it, briefly
            time.sleep(0.5)
        os._exit(self.code)

    def _resume_text(self, now: bool = False) -> str:
        """``resume`` (called in another thread, at most :data:`RESUME_S`: it may count in a database)."""
        if not callable(self.resume):
            return str(self.resume)
        said: list[str] = []
        if not now:
            self._helpers["resume"].run(lambda: said.append(str(self.resume())), RESUME_S)  # type: ignore[operator]
        return said[0] if said else "run the same command again (what was kept could not be counted in time)"


def _quietly(callback: Callable[[], object]) -> None:
    try:
        callback()
    except BaseException:  # noqa: BLE001 - a failing callback must not print a traceback
        pass


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass


def _say(line: str) -> None:
    data = (("\n" if _partial_line() else "") + line).encode("utf-8", "replace")
    try:
        while data:
            data = data[os.write(2, data) :]
    except OSError:
        pass


def _partial_line() -> bool:
    """Whether stderr's last line may be unfinished, so the resume line must start on a new one: a terminal,
    or a tqdm bar still open (it redraws its line with a carriage return, in a log file too, and ends it only
    when it closes)."""
    if _isatty(2):
        return True
    tqdm = getattr(sys.modules.get("tqdm"), "tqdm", None)  # imported by the command, if at all: not here
    try:
        return any(not getattr(bar, "disable", True) for bar in list(getattr(tqdm, "_instances", ())))
    except RuntimeError:  # the set changed while read (a bar opened or closed in another thread)
        return True


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _stop_children() -> None:
    """multiprocessing workers (segmenting) end with us instead of finishing their batch."""
    try:
        import multiprocessing  # noqa: PLC0415

        for child in multiprocessing.active_children():
            child.terminate()
    except Exception:  # noqa: BLE001
        pass


def _watch(stop: Stop, read_fd: int) -> None:
    """Reads the signal numbers that Python's C-level handler writes to the wakeup fd, from any thread, at once
    (and, every 0.1 s, what the Python-level handler recorded: in case another library took the wakeup fd)."""
    import select  # noqa: PLC0415

    seen = 0
    while True:
        try:
            ready = select.select([read_fd], [], [], 0.1)[0]
            data = os.read(read_fd, 64) if ready else b""
        except InterruptedError:
            continue
        except OSError:
            return
        for signum in data:
            if signum == 0:  # the command finished: stop watching
                return
            if signum in SIGNALS:
                seen += 1
                if stop.signum is None:
                    stop.signum = signum
        if max(seen, stop._handled) >= 1 and not stop._go.is_set():
            stop.requested = True
            stop._go.set()
        if max(seen, stop._handled) >= 2:  # a second signal: leave at once
            stop._leave(0.1, now=True)


@contextmanager
def stop_on_signals(resume: str | Callable[[], str]) -> Iterator[Stop]:
    """SIGINT and SIGTERM end the block's work as the module says; ``resume`` (a text, or a function called
    at that moment) is what follows ``interrupted:`` on stderr: what was kept and how to resume. Outside the
    main thread, or nested in another such block, signals are left as they are."""
    global _active
    stop = Stop(resume)
    if not _in_main_thread() or _active is not None:
        yield stop
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    stop._arm()
    before = {sig: signal.getsignal(sig) for sig in SIGNALS}
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    for sig in SIGNALS:
        signal.signal(sig, stop._handler)
    watcher = threading.Thread(target=_watch, args=(stop, read_fd), name="ragnarok-signals", daemon=True)
    watcher.start()
    _active = stop
    try:
        yield stop
    except BaseException:
        if not stop.requested:
            raise
    finally:
        if stop.requested:  # whatever the block did since: the stop thread ends the process
            stop._park()
        _active = None
        signal.set_wakeup_fd(previous_fd)
        for sig, handler in before.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        stop._disarm()
        try:
            os.write(write_fd, b"\0")
        except OSError:
            pass
        watcher.join(1)
        os.close(write_fd)
        if not watcher.is_alive():
            os.close(read_fd)


def stops_on_signals(resume: str | Callable[[], str]) -> Callable[[F], F]:
    """:func:`stop_on_signals` around a whole command function."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with stop_on_signals(resume):
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


def resume_with(resume: str | Callable[[], str]) -> None:
    """Say this (a text, or a function called when the signal comes) after ``interrupted:`` from now on."""
    if _active is not None:
        _active.resume = resume


def reassert() -> None:
    """Take SIGINT and SIGTERM back after a library set its own handlers (a JVM started without ``-Xrs``)."""
    stop = _active
    if stop is not None and _in_main_thread():
        for sig in SIGNALS:
            signal.signal(sig, stop._handler)


def _after_fork_in_child() -> None:
    """A forked child neither wakes our watcher nor stops as we do: default SIGTERM, SIGINT ignored (the
    parent decides and ends its children)."""
    global _active
    if _active is None:
        return
    _active = None
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except (ValueError, OSError):
        pass


os.register_at_fork(after_in_child=_after_fork_in_child)
