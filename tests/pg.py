"""A real PostgreSQL server for the test session (Debian's ``postgresql`` package: initdb and pg_ctl).

``postgres_server`` starts one cluster on first use: ``initdb`` in a fresh temporary directory, ``pg_ctl`` on
a free 127.0.0.1 port with its unix socket in that directory, trust authentication for one superuser; at the
end of the session ``pg_ctl stop -m fast`` and the directory is removed. PostgreSQL refuses to run as root,
so as root the server runs as the ``postgres`` system user the package creates (else ``nobody``), via
``runuser``.
``postgres_url`` gives each test a fresh database on it (a SQLAlchemy URL) and drops it afterwards.

Without PostgreSQL the tests that need it skip, except in CI (``CI=true``), where they fail.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from servers import free_port

from ragnarok.deploy.postgres import PgServer, pg_bin_dir, run_as


class Cluster:
    """A running throwaway cluster: ``url`` (its ``postgres`` database), :meth:`stop` and :meth:`start` with
    ``pg_ctl``, :meth:`postmaster` (the server's process id, to pause it with SIGSTOP: no new connection is
    answered)."""

    def __init__(self, server: PgServer):
        self.server, self.url = server, server.url()

    def postmaster(self) -> int:
        pid = self.server.pid()
        if pid is None:
            raise RuntimeError("the PostgreSQL server is not running")
        return pid

    def stop(self) -> None:
        """``pg_ctl stop -m fast``: the sessions are ended, the server gone when it returns."""
        self.server.stop()

    def start(self) -> None:
        """``pg_ctl start -w``: accepting connections when it returns."""
        self.server.start()


@contextmanager
def postgres_cluster(bin_dir: Path) -> Iterator[Cluster]:
    """A throwaway cluster (see :class:`Cluster`)."""
    _, user = run_as()
    # as another user: under /tmp, which that user can traverse (TMPDIR may be inside root's home); short
    # paths also keep the unix socket's path under its 107-byte limit
    root = Path(tempfile.mkdtemp(prefix="ragnarok-pg-", dir="/tmp" if user else None))
    server = PgServer(
        bin_dir,
        root,
        free_port(),
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=32MB",
    )
    started = False
    try:
        server.initdb()
        started = True
        server.start()
        yield Cluster(server)
    finally:
        if started:
            server.stop()
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
