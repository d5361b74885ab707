"""The cluster's parts (:mod:`ragnarok.deploy.cluster`): where each keeps its files, its secrets, and how each
is started and known to be up.

PostgreSQL runs on its own (``pg_ctl``); Redis, the instances and nginx are supervisord's programs
(:mod:`ragnarok.deploy.supervisor`). The passwords of PostgreSQL (SCRAM) and Redis (``requirepass``) are made
on first use into ``secrets.json`` (0600); the instances get them in their URLs, and ``cluster.env`` (0600)
holds those URLs for the operator's own commands (``env $(cat cluster.env) ragnarok keys create ...``).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import sys
from collections.abc import Callable
from pathlib import Path

from ragnarok.deploy import nginx
from ragnarok.deploy.postgres import PgServer, pg_bin_dir
from ragnarok.deploy.procs import healthy, tail, wait_until
from ragnarok.deploy.supervisor import Program, Supervisor
from ragnarok.runtime.netaddr import free_port, http_url

NGINX = "/usr/sbin/nginx"
#: The default cluster directory of root (PostgreSQL, run as the postgres user, cannot reach /root/.cache).
ROOT_DEFAULT = Path("/var/lib/ragnarok/cluster")


class StartError(RuntimeError):
    """A part that did not start: its name, why, and its log's last lines."""

    def __init__(self, part: str, why: str, log: Path | None = None):
        super().__init__(f"{part} failed to start: {why}" + (f"; the last lines of {log}:\n{tail(log)}" if log else ""))


class Layout:
    """Where each part keeps its files under the cluster's directory ``root``."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.run, self.logs, self.state = self.root / "run", self.root / "logs", self.root / "cluster.json"
        self.postgres, self.redis, self.nginx = self.root / "postgres", self.root / "redis", self.root / "nginx"
        self.secrets, self.env = self.root / "secrets.json", self.root / "cluster.env"
        self.supervisor = Supervisor(self.run)

    def log(self, part: str) -> Path:
        return self.logs / f"{part}.log"

    def passwords(self) -> dict[str, str]:
        """PostgreSQL's and Redis's passwords, made on first use (``secrets.json``, 0600)."""
        try:
            return json.loads(self.secrets.read_text())
        except (OSError, ValueError):
            pass
        made = {"postgres": secrets.token_urlsafe(24), "redis": secrets.token_urlsafe(24)}
        write_private(self.secrets, json.dumps(made))
        return made


def write_private(path: Path, text: str) -> None:
    """``text`` into ``path``, readable by its owner alone (0600 from the start, never wider)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    path.chmod(0o600)


def own_postgres(layout: Layout, password: str) -> PgServer:
    bin_dir = pg_bin_dir()
    if bin_dir is None:
        raise StartError(
            "postgresql",
            "initdb/pg_ctl not found (apt-get install postgresql; make system-deps), or set RAGNAROK_DATABASE_URL",
        )
    return PgServer(bin_dir, layout.postgres, free_port(), "-c shared_buffers=64MB", password)


def start_postgres(layout: Layout, password: str, started: list) -> str:
    """The database URL: ``RAGNAROK_DATABASE_URL``, else the cluster's own PostgreSQL (initdb'd on first use,
    with SCRAM and ``password``)."""
    if url := os.environ.get("RAGNAROK_DATABASE_URL"):
        return url
    server = own_postgres(layout, password)
    try:
        fresh = not (server.data / "PG_VERSION").exists()
        if fresh:
            layout.postgres.mkdir(parents=True, exist_ok=True)
            server.initdb()
        server.start()
        started.append(("postgresql", server.stop))
        if fresh:
            server.createdb("ragnarok")
    except (RuntimeError, OSError) as exc:
        raise StartError("postgresql", str(exc)) from None
    return server.url("ragnarok")


def pong(port: int, password: str) -> bool:
    """Whether Redis on 127.0.0.1:``port`` takes ``password`` and answers PING."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.settimeout(1)
            conn.sendall(f"AUTH {password}\r\nPING\r\n".encode())
            answer = b""
            while answer.count(b"\r\n") < 2:
                chunk = conn.recv(64)
                if not chunk:
                    break
                answer += chunk
            return answer == b"+OK\r\n+PONG\r\n"
    except OSError:
        return False


def redis_program(layout: Layout, port: int, password: str) -> Program:
    redis = shutil.which("redis-server")
    if redis is None:
        raise StartError("redis", "redis-server not found (apt-get install redis-server; make system-deps)")
    layout.redis.mkdir(parents=True, exist_ok=True)
    conf = layout.redis / "redis.conf"  # the password in a file of its own (0600), not on a command line
    write_private(
        conf,
        f"bind 127.0.0.1\nport {port}\ndir {layout.redis}\ndaemonize no\nsave 60 1000\n"
        f"appendonly no\nrequirepass {password}\n",
    )
    return Program("redis", [redis, str(conf)], priority=10)


def redis_url(port: int, password: str) -> str:
    return f"redis://:{password}@127.0.0.1:{port}"


def instance_program(number: int, port: int, dense: bool, grace_s: float) -> Program:
    argv = [
        sys.executable,
        "-m",
        "ragnarok.cli",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *([] if dense else ["--no-dense"]),
    ]
    return Program(f"instance-{number}", argv, stop_wait_s=grace_s + 5, priority=20)


def nginx_program(
    layout: Layout, listen_host: str, port: int, ports: list[int], max_body: int, gateway_timeout_s: float
) -> Program:
    if not os.access(NGINX, os.X_OK):
        raise StartError("nginx", f"{NGINX} not found (apt-get install nginx; make system-deps)")
    for path in nginx.temp_dirs(layout.nginx):
        path.mkdir(parents=True, exist_ok=True)
    user = None
    if os.geteuid() == 0:  # the workers write temporary files under the cluster's directory: its owner's
        import pwd  # noqa: PLC0415

        user = pwd.getpwuid(layout.root.stat().st_uid).pw_name
    conf = layout.nginx / "nginx.conf"
    conf.write_text(
        nginx.render(
            layout.nginx,
            layout.logs,
            http_url(listen_host, port).split("://")[1],
            ports,
            max_body,
            gateway_timeout_s,
            user,
        )
    )
    argv = [NGINX, "-p", str(layout.nginx), "-c", str(conf), "-e", str(layout.log("nginx")), "-g", "daemon off;"]
    return Program("nginx", argv, stop_signal="QUIT", stop_wait_s=10, priority=30)


def wait_started(sup: Supervisor, name: str, up: Callable[[], bool], timeout_s: float, log: Path) -> int:
    """Wait until ``up()`` holds for program ``name`` (started just before); its PID. A program that exits
    meanwhile (supervisord would start it again) is a :class:`StartError` naming it, with its log's end."""
    first: list[int] = []

    def done() -> bool:
        info = sup.info().get(name, {})
        state, pid = info.get("statename"), info.get("pid") or 0
        if pid and not first:
            first.append(pid)
        if state in ("BACKOFF", "EXITED", "FATAL") or (first and pid and pid != first[0]):
            raise StartError(name, "it exited", log)
        return state == "RUNNING" and up()

    if not wait_until(done, timeout_s, 0.25):
        raise StartError(name, f"it did not answer in {timeout_s:g} s", log)
    return first[0]


def instance_up(port: int) -> Callable[[], bool]:
    return lambda: healthy(http_url("127.0.0.1", port) + "/healthz")
