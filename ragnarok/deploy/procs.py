"""The cluster's processes: started detached with their output in a log file and their PID in a file, found
again and stopped by that PID alone (never by name), checked over HTTP."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import httpx


def spawn(argv: Sequence[str], log: Path, pid_file: Path, env: Mapping[str, str] | None = None) -> subprocess.Popen:
    """Start ``argv`` in its own session (a Ctrl-C at the terminal does not reach it), stdout and stderr
    appended to ``log``; its PID is written to ``pid_file``. While it starts, ask the ``Popen`` whether it
    exited (:func:`running` may not know it yet: until the program is exec'd its command line is this one's)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
    pid_file.write_text(f"{proc.pid}\n")
    return proc


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def running(pid_file: Path, marker: str) -> int | None:
    """The PID in ``pid_file`` if that process runs and its command line contains ``marker`` (a PID the
    system gave to another program since is not ours), else None."""
    try:
        pid = int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if alive(pid) and marker in _cmdline(pid) else None


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.1) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if condition():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval_s)


def stop(pid: int, sig: int = signal.SIGTERM, grace_s: float = 30) -> None:
    """Send ``sig``, wait up to ``grace_s`` for the process to end, then SIGKILL it."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    if not wait_until(lambda: not alive(pid), grace_s):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        wait_until(lambda: not alive(pid), 10)


def healthy(url: str, timeout_s: float = 2) -> bool:
    """Whether ``GET url`` answers 200."""
    try:
        return httpx.get(url, timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def tail(log: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of ``log`` (for a start-up failure's message)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(the log is empty)"
