"""``deploy/cluster up|status|restart|down``: N ``ragnarok serve`` instances on one PostgreSQL and one Redis
behind nginx, supervised.

Everything lives under the cluster's directory (databases, configuration, logs, secrets), and supervisord
restarts any part that dies. The first instance builds the demo indexes; the others start once it answers and
serve what it builds. ``down`` stops everything and keeps the data.

Design notes: docs/internals/deploy.md.
"""

from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, Optional

import typer

from ragnarok.core.settings import Settings
from ragnarok.deploy import parts
from ragnarok.deploy.parts import Layout
from ragnarok.deploy.procs import healthy, wait_until
from ragnarok.runtime.cli_errors import fails_cleanly
from ragnarok.runtime.netaddr import bind_error, free_port, http_url, is_loopback

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Several `ragnarok serve` instances on one PostgreSQL and one Redis behind nginx.",
)

DataDir = Annotated[
    Optional[Path],
    typer.Option(
        help="The cluster's directory (default: RAGNAROK_DATA_DIR/cluster; as root /var/lib/ragnarok/cluster)."
    ),
]


def _root(settings: Settings, data_dir: Path | None) -> Layout:
    if data_dir is not None:
        return Layout(data_dir)
    if os.geteuid() == 0 and "RAGNAROK_DATA_DIR" not in os.environ:
        return Layout(parts.ROOT_DEFAULT)
    return Layout(settings.data_dir / "cluster")


def _load(layout: Layout) -> dict:
    try:
        return json.loads(layout.state.read_text())
    except (OSError, ValueError):
        return {}


def _print(state: dict, layout: Layout) -> None:
    from ragnarok.arena.db import safe_url  # noqa: PLC0415 - SQLAlchemy only when printing a URL

    typer.echo(f"URL={state['url']}")
    typer.echo(f"DATABASE_URL={safe_url(state['database_url'])}")
    typer.echo(f"REDIS_URL={safe_url(state['redis_url'])}")
    typer.echo(f"PIDS={','.join(str(p) for p in state['pids'])}")
    typer.echo(f"ENV={layout.env}")


def _running_shape(layout: Layout, state: dict, shape: dict) -> None:
    """Return when the running cluster has ``shape`` and every part runs ("already up"); else raise saying
    what differs or what is down."""
    differs = [f"{key} {state.get(key)!r} (asked {value!r})" for key, value in shape.items() if state.get(key) != value]
    if differs:
        raise ValueError(
            f"the cluster in {layout.root} runs with another shape: {', '.join(differs)}; "
            "`deploy/cluster down` first to change it"
        )
    down = [name for name, info in layout.supervisor.info().items() if info["statename"] != "RUNNING"]
    if down:
        raise RuntimeError(
            f"the cluster in {layout.root} is up but {', '.join(sorted(down))} is not running "
            "(supervisord starts it again; see `deploy/cluster status`, or `deploy/cluster "
            "restart NAME`)"
        )


@app.command()
@fails_cleanly
def up(
    instances: Annotated[int, typer.Option(min=1, max=64, help="`ragnarok serve` instances.")] = 3,
    port: Annotated[int, typer.Option(min=1, max=65535, help="nginx's port.")] = 8080,
    host: Annotated[str, typer.Option(help="nginx's address (not loopback: needs RAGNAROK_AUTH=keys).")] = "127.0.0.1",
    data_dir: DataDir = None,
    no_dense: Annotated[bool, typer.Option("--no-dense", help="No background dense index build.")] = False,
    timeout: Annotated[
        float,
        typer.Option(
            min=1, help="Seconds each instance may take to answer /healthz (the first builds the demo index)."
        ),
    ] = 600,
) -> None:
    """Start PostgreSQL, then under supervisord Redis, the instances and nginx; print URL=, DATABASE_URL=,
    REDIS_URL= (passwords masked), PIDS= and ENV= (the file with the URLs) once every instance answers behind
    the proxy. Already up with this shape: says so and prints them again; with another: refuses."""
    settings = Settings()
    if settings.auth != "keys" and not is_loopback(host):
        raise ValueError(
            f"refusing to serve on {host} without API keys: set RAGNAROK_AUTH=keys (docs/"
            "deploying.md) or keep the default 127.0.0.1"
        )
    layout = _root(settings, data_dir)
    state, sup = _load(layout), layout.supervisor
    if sup.running():
        _running_shape(layout, state, {"instances": instances, "host": host, "port": port})
        typer.echo(f"already up ({instances} instances behind {state['url']}; deploy/cluster down stops it)", err=True)
        info = sup.info()  # supervisord may have started some again since
        _print({**state, "pids": [info[f"instance-{i}"]["pid"] for i in range(1, instances + 1)]}, layout)
        return
    if (why := bind_error(host, port)) is not None:
        raise OSError(why)
    for path in (layout.run, layout.logs):
        path.mkdir(parents=True, exist_ok=True)
    passwords = layout.passwords()
    started: list = []
    try:
        database_url = parts.start_postgres(layout, passwords["postgres"], started)
        redis_port, ports = free_port(), [free_port() for _ in range(instances)]
        redis_url = parts.redis_url(redis_port, passwords["redis"])
        env = {
            **os.environ,
            "RAGNAROK_DATABASE_URL": database_url,
            "RAGNAROK_RATE_LIMIT_STORAGE": redis_url,
            "RAGNAROK_TRUSTED_PROXIES": "127.0.0.1",
        }
        parts.write_private(
            layout.env, f"RAGNAROK_DATABASE_URL={database_url}\nRAGNAROK_RATE_LIMIT_STORAGE={redis_url}\n"
        )
        programs = [
            parts.redis_program(layout, redis_port, passwords["redis"]),
            *(
                parts.instance_program(i + 1, p, not no_dense and i == 0, settings.shutdown_grace_s)
                for i, p in enumerate(ports)
            ),
            parts.nginx_program(layout, host, port, ports, settings.max_body_bytes, settings.gateway_timeout_s),
        ]
        from ragnarok.deploy.supervisor import render  # noqa: PLC0415

        sup.start_daemon(render(layout.run, layout.logs, programs), env, layout.log("supervisord"))
        started.append(("supervisord", lambda: sup.shutdown(120)))
        pids = _start_all(layout, instances, ports, redis_port, passwords["redis"], host, port, timeout)
    except BaseException:
        for _, stopper in reversed(started):
            stopper()
        raise
    state = {
        "url": http_url(host, port),
        "host": host,
        "port": port,
        "database_url": database_url,
        "redis_url": redis_url,
        "instances": instances,
        "ports": ports,
        "pids": pids,
        "own_postgres": "RAGNAROK_DATABASE_URL" not in os.environ,
    }
    parts.write_private(layout.state, json.dumps(state, indent=1))
    _print(state, layout)


def _start_all(
    layout: Layout,
    instances: int,
    ports: list[int],
    redis_port: int,
    redis_password: str,
    host: str,
    port: int,
    timeout: float,
) -> list[int]:
    """Redis, the first instance (it builds the demo index), the others at once, nginx: each waited for."""
    sup = layout.supervisor

    def start(name: str, is_up, timeout_s: float) -> int:
        sup.start(name)
        return parts.wait_started(sup, name, is_up, timeout_s, layout.log(name))

    start("redis", lambda: parts.pong(redis_port, redis_password), 30)
    pids = [start("instance-1", parts.instance_up(ports[0]), timeout)]
    with ThreadPoolExecutor(max_workers=max(1, instances - 1)) as pool:
        rest = [
            pool.submit(start, f"instance-{i + 1}", parts.instance_up(ports[i]), timeout) for i in range(1, instances)
        ]
        pids += [f.result() for f in rest]
    url = http_url(host if not host.startswith("0.") else "127.0.0.1", port)
    start("nginx", lambda: healthy(url + "/healthz"), 30)
    return pids


def _part_names(state: dict) -> list[str]:
    return ["redis", *(f"instance-{i}" for i in range(1, state.get("instances", 0) + 1)), "nginx"]


@app.command()
@fails_cleanly
def status(data_dir: DataDir = None) -> None:
    """One line per part: its state, PID, uptime and, for an instance, whether it is ready (GET /readyz).
    Exit 0 when every part runs, 3 when one does not or nothing does."""
    layout = _root(Settings(), data_dir)
    state, info = _load(layout), layout.supervisor.info()
    if not info:
        typer.echo(f"nothing is running in {layout.root}")
        raise typer.Exit(3)
    ok = True
    if state.get("own_postgres"):
        server = parts.own_postgres(layout, "")
        pid = server.pid()
        ok = ok and pid is not None
        typer.echo(f"{'postgresql':<12} {'RUNNING' if pid else 'STOPPED':<9} pid {pid or '-'}")
    for name in _part_names(state):
        part = info.get(name, {})
        running = part.get("statename") == "RUNNING"
        ok = ok and running
        line = f"{name:<12} {part.get('statename', 'UNKNOWN'):<9} pid {part.get('pid') or '-'}"
        if running:
            line += f" up {max(0, part['now'] - part['start'])} s"
        if name.startswith("instance-") and running:
            port = state["ports"][int(name.split("-")[1]) - 1]
            line += " ready" if healthy(http_url("127.0.0.1", port) + "/readyz") else " not ready"
        typer.echo(line)
    if not ok:
        raise typer.Exit(3)


@app.command()
@fails_cleanly
def restart(
    name: Annotated[str, typer.Argument(help="The part: instance-N, nginx or redis.")],
    data_dir: DataDir = None,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds it may take to answer again.")] = 120,
) -> None:
    """Stop one part (gracefully: an instance finishes its requests within its grace) and start it again; the
    others go on serving."""
    layout = _root(Settings(), data_dir)
    state, sup = _load(layout), layout.supervisor
    if not sup.running():
        raise RuntimeError(f"nothing is running in {layout.root}: `deploy/cluster up` starts it")
    if name not in _part_names(state):
        raise ValueError(f"no part {name!r}; the parts: {', '.join(_part_names(state))}")
    if name.startswith("instance-"):
        is_up = parts.instance_up(state["ports"][int(name.split("-")[1]) - 1])
    elif name == "redis":
        redis_port = int(state["redis_url"].rsplit(":", 1)[1])
        is_up = lambda: parts.pong(redis_port, layout.passwords()["redis"])  # noqa: E731
    else:
        is_up = lambda: healthy(state["url"].replace("://0.0.0.0", "://127.0.0.1") + "/healthz")  # noqa: E731
    if sup.info().get(name, {}).get("statename") in ("RUNNING", "STARTING", "BACKOFF"):
        sup.stop(name)
        if not wait_until(
            lambda: sup.info().get(name, {}).get("statename") in ("STOPPED", "EXITED", "FATAL"),
            Settings().shutdown_grace_s + 15,
            0.2,
        ):
            raise RuntimeError(f"{name} did not stop")
    sup.start(name)
    pid = parts.wait_started(sup, name, is_up, timeout, layout.log(name))
    typer.echo(f"restarted {name} (pid {pid})")


@app.command()
@fails_cleanly
def down(data_dir: DataDir = None) -> None:
    """Stop everything `up` started (supervisord's parts, then PostgreSQL), keeping the data."""
    layout = _root(Settings(), data_dir)
    state, sup = _load(layout), layout.supervisor
    stopped = [name for name, info in sup.info().items() if info["statename"] in ("RUNNING", "STARTING")]
    stopped.sort(key=lambda n: (n != "nginx", n == "redis", n))
    if sup.running() and not sup.shutdown(Settings().shutdown_grace_s + 60):
        raise RuntimeError(f"supervisord in {layout.run} did not stop; see {layout.log('supervisord')}")
    if state.get("own_postgres"):
        server = parts.own_postgres(layout, "")
        if server.pid():
            server.stop()
            stopped.append("postgresql")
    typer.echo(
        f"stopped {', '.join(stopped)}; the data stays in {layout.root}"
        if stopped
        else f"nothing was running in {layout.root}"
    )


if __name__ == "__main__":
    app()
