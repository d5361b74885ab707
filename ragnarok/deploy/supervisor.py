"""The cluster's long-running parts under supervisord: Redis, the instances and nginx as its programs.

supervisord (the ``supervisor`` package) runs as a daemon with its configuration, socket, PID file and log
under the cluster's directory (``run/supervisord.conf``, ``run/supervisor.sock``, ``logs/supervisord.log``).
Every program is started by ``deploy/cluster`` in order (Redis, the first instance, the others, nginx), never by
supervisord at its own start, and restarted by supervisord when it dies (``autorestart``): a killed instance
serves again on its own port within seconds, nobody acting. The programs inherit supervisord's environment,
so the database and Redis URLs (their passwords in them) are never written into its configuration. It is
driven over its XML-RPC interface on the unix socket (0700), every call within :data:`CALL_TIMEOUT_S`.
"""

from __future__ import annotations

import http.client
import os
import pwd
import socket
import subprocess
import sys
import xmlrpc.client
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragnarok.deploy.procs import wait_until

#: The most one call to supervisord may take (a start or stop waits for nothing: the cluster polls).
CALL_TIMEOUT_S = 10.0
#: An instance that stays up this long after a start counts as started (else supervisord tries again).
START_SECS = 1


@dataclass(frozen=True)
class Program:
    """One program: its command line, the signal that stops it and how long it may take to stop."""

    name: str
    argv: Sequence[str]
    stop_signal: str = "TERM"
    stop_wait_s: float = 30
    priority: int = 100  # supervisord stops the highest first (at shutdown: nginx, the instances, Redis)


def _quote(arg: str) -> str:
    """One argument of a supervisord ``command`` line (shlex-split by supervisord; ``%`` is expanded)."""
    arg = arg.replace("%", "%%")
    return "'" + arg.replace("'", "'\"'\"'") + "'" if not arg or any(c in arg for c in " \t\"'\\;#") else arg


def render(run: Path, logs: Path, programs: Sequence[Program]) -> str:
    """supervisord's configuration: the unix socket in ``run`` (0700), its log in ``logs``, ``programs``
    started only when asked, each restarted whenever it exits, its output in ``logs/NAME.log``."""
    parts = [
        f"""\
; Written by `deploy/cluster up` (ragnarok/deploy/supervisor.py); rewritten on every `up`.
[unix_http_server]
file={run}/supervisor.sock
chmod=0700

[supervisord]
logfile={logs}/supervisord.log
pidfile={run}/supervisord.pid
childlogdir={logs}
user={_user()}

[rpcinterface:supervisor]
supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface

[supervisorctl]
serverurl=unix://{run}/supervisor.sock
"""
    ]
    for p in programs:
        parts.append(f"""
[program:{p.name}]
command={" ".join(_quote(a) for a in p.argv)}
autostart=false
autorestart=true
startsecs={START_SECS}
startretries=1000
stopsignal={p.stop_signal}
stopwaitsecs={int(p.stop_wait_s)}
stopasgroup=true
killasgroup=true
priority={p.priority}
redirect_stderr=true
stdout_logfile={logs}/{p.name}.log
stdout_logfile_maxbytes=50MB
stdout_logfile_backups=2
""")
    return "".join(parts)


def _user() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


class _UnixTransport(xmlrpc.client.Transport):
    """XML-RPC over supervisord's unix socket, every connect and read within :data:`CALL_TIMEOUT_S`."""

    def __init__(self, path: Path):
        super().__init__()
        self.path = str(path)

    def make_connection(self, host: Any) -> http.client.HTTPConnection:
        return _UnixConnection(self.path, CALL_TIMEOUT_S)


class Supervisor:
    """The cluster's supervisord: its configuration ``conf`` and socket ``sock`` (both under ``run``)."""

    def __init__(self, run: Path):
        self.conf, self.sock, self.pid_file = run / "supervisord.conf", run / "supervisor.sock", run / "supervisord.pid"

    def _rpc(self) -> Any:
        return xmlrpc.client.ServerProxy("http://localhost", transport=_UnixTransport(self.sock)).supervisor

    def running(self) -> bool:
        """Whether supervisord answers on its socket."""
        try:
            return self._rpc().getState()["statename"] == "RUNNING"
        except (OSError, xmlrpc.client.Error):
            return False

    def start_daemon(self, text: str, env: Mapping[str, str], log: Path) -> None:
        """Write the configuration (0600) and start supervisord with ``env`` (its programs' environment)."""
        self.conf.write_text(text)
        self.conf.chmod(0o600)
        with open(log, "ab") as out:
            done = subprocess.run(
                [sys.executable, "-m", "supervisor.supervisord", "-c", str(self.conf)],
                env=dict(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=60,
            )
        if done.returncode or not wait_until(self.running, 30):
            raise RuntimeError(f"supervisord did not start (exit {done.returncode})")

    def start(self, name: str) -> None:
        """Ask supervisord to start ``name`` without waiting (the cluster waits for its own signs of life)."""
        self._rpc().startProcess(name, False)

    def stop(self, name: str) -> None:
        self._rpc().stopProcess(name, False)

    def info(self) -> dict[str, dict]:
        """Each program's state (``statename``: RUNNING, STARTING, BACKOFF, EXITED, FATAL, STOPPED ...) and
        ``pid``, by name; empty when supervisord does not answer."""
        try:
            return {p["name"]: p for p in self._rpc().getAllProcessInfo()}
        except (OSError, xmlrpc.client.Error):
            return {}

    def shutdown(self, timeout_s: float) -> bool:
        """Stop every program (nginx first, Redis last) and supervisord; True once it is gone."""
        try:
            self._rpc().shutdown()
        except (OSError, xmlrpc.client.Error):
            pass
        return wait_until(lambda: not self.running() and not self.sock.exists(), timeout_s, 0.2)
