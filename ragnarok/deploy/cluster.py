"""``deploy/cluster up|down``: N ``ragnarok serve`` instances on one PostgreSQL and one Redis behind nginx.

Everything lives under the cluster's directory (``--data-dir``, default ``DATA_DIR/cluster``): PostgreSQL's
cluster (``postgres/``, initdb'd on first use unless ``RAGNAROK_DATABASE_URL`` is set), Redis's (``redis/``),
nginx's configuration and temporary files (``nginx/``), each part's log (``logs/``) and PID file (``run/``),
and ``cluster.json`` (the ports of the last ``up``). ``down`` stops what ``up`` started, by those PID files,
and keeps the data. The instances share the caller's environment (``RAGNAROK_DATA_DIR``, ``RAGNAROK_AUTH``,
generators ...) with the database, ``RAGNAROK_RATE_LIMIT_STORAGE=redis://...`` and
``RAGNAROK_TRUSTED_PROXIES=127.0.0.1`` added. The first instance builds the demo index (and, unless
``--no-dense``, the dense one in the background); the others start once it answers, with ``--no-dense``: they
serve the dense index the first one builds as soon as it is on disk.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Optional

import typer

from ragnarok.core.settings import Settings
from ragnarok.deploy import nginx
from ragnarok.deploy.postgres import PgServer, pg_bin_dir
from ragnarok.deploy.procs import healthy, running, spawn, stop, tail, wait_until
from ragnarok.runtime.cli_errors import fails_cleanly
from ragnarok.runtime.netaddr import bind_error, free_port, http_url, is_loopback

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Several `ragnarok serve` instances on one PostgreSQL and one Redis behind nginx.")

NGINX = "/usr/sbin/nginx"
DataDir = Annotated[Optional[Path], typer.Option(help="The cluster's directory (default: RAGNAROK_DATA_DIR/"
                                                      "cluster): databases, logs, PID files.")]


class StartError(RuntimeError):
    """A part that did not start: its name, why, and its log's last lines."""

    def __init__(self, part: str, why: str, log: Path | None = None):
        super().__init__(f"{part} failed to start: {why}" + (f"; the last lines of {log}:\n{tail(log)}"
                                                             if log else ""))


class Layout:
    """Where each part keeps its files under the cluster's directory ``root``."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.run, self.logs, self.state = self.root / "run", self.root / "logs", self.root / "cluster.json"
        self.postgres, self.redis, self.nginx = self.root / "postgres", self.root / "redis", self.root / "nginx"

    def pid(self, part: str) -> Path:
        return self.run / f"{part}.pid"

    def log(self, part: str) -> Path:
        return self.logs / f"{part}.log"

    def processes(self, instances: int) -> dict[str, str]:
        """The parts started by PID (name -> a word of its command line), in the order they stop."""
        return {"nginx": "nginx", **{f"instance-{i}": "ragnarok.cli" for i in range(1, instances + 1)},
                "redis": "redis-server"}


def _root(settings: Settings, data_dir: Path | None) -> Layout:
    return Layout(data_dir or settings.data_dir / "cluster")


def _load(layout: Layout) -> dict:
    try:
        return json.loads(layout.state.read_text())
    except (OSError, ValueError):
        return {}


def _alive(layout: Layout, state: dict) -> dict[str, int]:
    found = {name: running(layout.pid(name), marker)
             for name, marker in layout.processes(state.get("instances", 0)).items()}
    return {name: pid for name, pid in found.items() if pid}


def _postgres(layout: Layout, started: list) -> str:
    """The database URL: ``RAGNAROK_DATABASE_URL``, else the cluster's own PostgreSQL (initdb'd on first use)."""
    if url := os.environ.get("RAGNAROK_DATABASE_URL"):
        return url
    bin_dir = pg_bin_dir()
    if bin_dir is None:
        raise StartError("postgresql", "initdb/pg_ctl not found (apt-get install postgresql; make system-deps), "
                                       "or set RAGNAROK_DATABASE_URL")
    server = PgServer(bin_dir, layout.postgres, free_port(), "-c shared_buffers=64MB")
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


def _pong(port: int) -> bool:
    """Whether Redis on 127.0.0.1:``port`` answers PING."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _redis(layout: Layout, started: list) -> str:
    redis = shutil.which("redis-server")
    if redis is None:
        raise StartError("redis", "redis-server not found (apt-get install redis-server; make system-deps)")
    layout.redis.mkdir(parents=True, exist_ok=True)
    port = free_port()
    proc = spawn([redis, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(layout.redis),
                  "--daemonize", "no", "--save", "60 1000", "--appendonly", "no"],
                 layout.log("redis"), layout.pid("redis"))
    started.append(("redis", lambda: stop(proc.pid)))
    if not wait_until(lambda: _pong(port) or proc.poll() is not None, 30) or proc.poll() is not None:
        raise StartError("redis", "it exited or did not answer PING in 30 s", layout.log("redis"))
    return f"redis://127.0.0.1:{port}"


def _instance(layout: Layout, number: int, port: int, env: dict[str, str], dense: bool, timeout_s: float,
              started: list) -> int:
    name = f"instance-{number}"
    argv = [sys.executable, "-m", "ragnarok.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
            *([] if dense else ["--no-dense"])]
    proc = spawn(argv, layout.log(name), layout.pid(name), env)
    started.append((name, lambda: stop(proc.pid)))
    base = http_url("127.0.0.1", port)
    up = wait_until(lambda: healthy(base + "/healthz") or proc.poll() is not None, timeout_s, 0.25)
    if proc.poll() is not None:
        raise StartError(name, "it exited", layout.log(name))
    if not up:
        raise StartError(name, f"/healthz did not answer in {timeout_s:g} s", layout.log(name))
    return proc.pid


def _nginx(layout: Layout, host: str, port: int, ports: list[int], settings: Settings, started: list) -> None:
    if not os.access(NGINX, os.X_OK):
        raise StartError("nginx", f"{NGINX} not found (apt-get install nginx; make system-deps)")
    for path in nginx.temp_dirs(layout.nginx):
        path.mkdir(parents=True, exist_ok=True)
    user = None
    if os.geteuid() == 0:  # the workers write temporary files under the cluster's directory: its owner's
        import pwd  # noqa: PLC0415

        user = pwd.getpwuid(layout.root.stat().st_uid).pw_name
    conf = layout.nginx / "nginx.conf"
    conf.write_text(nginx.render(layout.nginx, layout.logs, f"{http_url(host, port).split('://')[1]}", ports,
                                 settings.max_body_bytes, settings.gateway_timeout_s, user))
    proc = spawn([NGINX, "-p", str(layout.nginx), "-c", str(conf), "-e", str(layout.log("nginx")),
                  "-g", "daemon off;"], layout.log("nginx"), layout.pid("nginx"))
    started.append(("nginx", lambda: stop(proc.pid, signal.SIGQUIT, 10)))
    url = http_url(host if not host.startswith("0.") else "127.0.0.1", port)
    up = wait_until(lambda: healthy(url + "/healthz") or proc.poll() is not None, 30)
    if proc.poll() is not None:
        raise StartError("nginx", "it exited", layout.log("nginx"))
    if not up:
        raise StartError("nginx", "the proxy did not answer /healthz in 30 s", layout.log("nginx"))


def _print(state: dict) -> None:
    from ragnarok.arena.db import safe_url  # noqa: PLC0415 - SQLAlchemy only when printing a URL

    typer.echo(f"URL={state['url']}")
    typer.echo(f"DATABASE_URL={safe_url(state['database_url'])}")
    typer.echo(f"REDIS_URL={state['redis_url']}")
    typer.echo(f"PIDS={','.join(str(p) for p in state['pids'])}")


@app.command()
@fails_cleanly
def up(
    instances: Annotated[int, typer.Option(min=1, max=64, help="`ragnarok serve` instances.")] = 3,
    port: Annotated[int, typer.Option(min=1, max=65535, help="nginx's port.")] = 8080,
    host: Annotated[str, typer.Option(help="nginx's address (not loopback: needs RAGNAROK_AUTH=keys).")] = "127.0.0.1",
    data_dir: DataDir = None,
    no_dense: Annotated[bool, typer.Option("--no-dense", help="No background dense index build.")] = False,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds each instance may take to answer /healthz "
                                                      "(the first builds the demo index).")] = 600,
) -> None:
    """Start PostgreSQL, Redis, the instances and nginx; print URL=, DATABASE_URL=, REDIS_URL=, PIDS= lines
    once every instance answers behind the proxy. Already up: says so and prints them again."""
    settings = Settings()
    if settings.auth != "keys" and not is_loopback(host):
        raise ValueError(f"refusing to serve on {host} without API keys: set RAGNAROK_AUTH=keys (README: "
                         "Deploying) or keep the default 127.0.0.1")
    layout = _root(settings, data_dir)
    state = _load(layout)
    alive = _alive(layout, state)
    if alive and len(alive) == len(layout.processes(state.get("instances", 0))):
        typer.echo(f"already up ({len(alive) - 2} instances behind {state['url']}; deploy/cluster down stops it)",
                   err=True)
        _print(state)
        return
    if alive:
        raise RuntimeError(f"the cluster in {layout.root} is partly running ({', '.join(alive)}): run "
                           "`deploy/cluster down` first")
    if (why := bind_error(host, port)) is not None:
        raise OSError(why)
    for path in (layout.run, layout.logs):
        path.mkdir(parents=True, exist_ok=True)
    started: list = []
    try:
        database_url = _postgres(layout, started)
        redis_url = _redis(layout, started)
        env = {**os.environ, "RAGNAROK_DATABASE_URL": database_url, "RAGNAROK_RATE_LIMIT_STORAGE": redis_url,
               "RAGNAROK_TRUSTED_PROXIES": "127.0.0.1"}
        ports = [free_port() for _ in range(instances)]
        # the first one builds the demo index; then the others, at once, find it built
        pids = [_instance(layout, 1, ports[0], env, not no_dense, timeout, started)]
        with ThreadPoolExecutor(max_workers=max(1, instances - 1)) as pool:
            rest = [pool.submit(_instance, layout, i + 1, ports[i], env, False, timeout, started)
                    for i in range(1, instances)]
            pids += [f.result() for f in rest]
        _nginx(layout, host, port, ports, settings, started)
    except BaseException:
        for name, stopper in reversed(started):
            stopper()
        raise
    state = {"url": http_url(host, port), "database_url": database_url, "redis_url": redis_url,
             "instances": instances, "ports": ports, "pids": pids,
             "own_postgres": "RAGNAROK_DATABASE_URL" not in os.environ}
    layout.state.write_text(json.dumps(state, indent=1))
    _print(state)


@app.command()
@fails_cleanly
def down(data_dir: DataDir = None) -> None:
    """Stop what `up` started (by its PID files), keeping the data."""
    layout = _root(Settings(), data_dir)
    state = _load(layout)
    stopped = []
    for name, pid in _alive(layout, state).items():
        stop(pid, signal.SIGQUIT if name == "nginx" else signal.SIGTERM)
        stopped.append(name)
    bin_dir = pg_bin_dir()
    if state.get("own_postgres") and bin_dir and (server := PgServer(bin_dir, layout.postgres, 0)).pid():
        server.stop()
        stopped.append("postgresql")
    for name in layout.processes(state.get("instances", 0)):
        layout.pid(name).unlink(missing_ok=True)
    typer.echo(f"stopped {', '.join(stopped)}; the data stays in {layout.root}" if stopped
               else f"nothing was running in {layout.root}")


if __name__ == "__main__":
    app()
