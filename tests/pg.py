"""A real PostgreSQL server for the test session (Debian's ``postgresql`` package: initdb and pg_ctl).

``postgres_server`` starts one cluster on first use: ``initdb`` in a fresh temporary directory, ``pg_ctl`` on
a free 127.0.0.1 port with its unix socket in that directory, trust authentication for one superuser; at the
end of the session ``pg_ctl stop -m fast`` and the directory is removed. PostgreSQL refuses to run as root,
so as root the server runs as the ``postgres`` system user the package creates (else ``nobody``), via
``runuser``.
``postgres_url`` gives each test a fresh database on it (a SQLAlchemy URL) and drops it afterwards.
:func:`postgres_cluster` gives a test a cluster of its own, which it may stop and start again (:class:`Cluster`).

Without PostgreSQL the tests that need it skip, except in CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from servers import free_port

SUPERUSER = "ragnarok"


def pg_bin_dir() -> Path | None:
    """The newest ``/usr/lib/postgresql/N/bin`` holding initdb and pg_ctl, else their directory on PATH."""
    found = []
    for initdb in Path("/usr/lib/postgresql").glob("*/bin/initdb"):
        if re.fullmatch(r"\d+(\.\d+)?", initdb.parent.parent.name) and (initdb.parent / "pg_ctl").exists():
            found.append((float(initdb.parent.parent.name), initdb.parent))
    if found:
        return max(found)[1]
    on_path = shutil.which("pg_ctl")
    if on_path and (Path(on_path).parent / "initdb").exists():
        return Path(on_path).parent
    return None


def _run_as() -> tuple[list[str], str | None]:
    """The command prefix that runs PostgreSQL's programs unprivileged, and that user's name."""
    if os.geteuid() != 0:
        return [], None
    runuser = shutil.which("runuser")
    for user in ("postgres", "nobody"):
        try:
            pwd.getpwnam(user)
        except KeyError:
            continue
        if runuser:
            return [runuser, "-u", user, "--"], user
    raise RuntimeError("as root, PostgreSQL needs an unprivileged user (postgres or nobody) and runuser")


class Cluster:
    """A running cluster: ``url`` (its ``postgres`` database), :meth:`stop` and :meth:`start` with ``pg_ctl``,
    :meth:`postmaster` (the server's process id, to pause it with SIGSTOP: no new connection is answered)."""

    def __init__(self, url: str, pg_ctl: Callable[..., None], data: Path):
        self.url, self._pg_ctl, self._data = url, pg_ctl, data

    def postmaster(self) -> int:
        return int((self._data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        """``pg_ctl stop -m fast``: the sessions are ended, the server gone when it returns."""
        self._pg_ctl("-m", "fast", "-w", "stop")

    def start(self) -> None:
        """``pg_ctl start -w``: accepting connections when it returns."""
        self._pg_ctl("-w", "-t", "60", "start")


@contextmanager
def postgres_cluster(bin_dir: Path) -> Iterator[Cluster]:
    """A throwaway cluster (see :class:`Cluster`)."""
    prefix, user = _run_as()
    # as another user: under /tmp, which that user can traverse (TMPDIR may be inside root's home); short
    # paths also keep the unix socket's path under its 107-byte limit
    root = Path(tempfile.mkdtemp(prefix="ragnarok-pg-", dir="/tmp" if user else None))
    data, sock, log = root / "data", root / "sock", root / "server.log"
    sock.mkdir()
    if user is not None:
        entry = pwd.getpwnam(user)
        for path in (root, sock):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    port = free_port()

    def run(*args: str, timeout: float = 120) -> None:
        done = subprocess.run([*prefix, *args], cwd=root, capture_output=True, text=True, timeout=timeout)
        if done.returncode:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{Path(args[0]).name} failed ({done.returncode}): {done.stderr[-2000:]}{tail}")

    started = False
    try:
        run(str(bin_dir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
            "--locale=C", "--no-sync")
        options = (f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={sock} "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
                   "-c shared_buffers=32MB")
        started = True

        def pg_ctl(*args: str) -> None:
            run(str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", options, *args)

        pg_ctl("-w", "-t", "60", "start")
        yield Cluster(f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{port}/postgres", pg_ctl, data)
    finally:
        if started:
            subprocess.run([*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
                           cwd=root, capture_output=True, timeout=60)
        shutil.rmtree(root, ignore_errors=True)


def _bin_dir() -> Path:
    """PostgreSQL's programs; skips without them, fails in CI."""
    bin_dir = pg_bin_dir()
    if bin_dir is None:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail("PostgreSQL is missing: CI must run the vote store on it (make system-deps)")
        pytest.skip("PostgreSQL not installed (apt-get install postgresql; make system-deps)")
    return bin_dir


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The session's PostgreSQL server (its ``postgres`` database URL); skips without it, fails in CI."""
    with postgres_cluster(_bin_dir()) as cluster:
        yield cluster.url


@pytest.fixture
def own_postgres() -> Iterator[Cluster]:
    """A cluster of the test's own, which it may stop and start again (:class:`Cluster`)."""
    with postgres_cluster(_bin_dir()) as cluster:
        yield cluster


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh, empty database on the session's server, dropped after the test."""
    from sqlalchemy import create_engine, text

    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(postgres_server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
        yield postgres_server.rsplit("/", 1)[0] + f"/{name}"
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    finally:
        admin.dispose()
