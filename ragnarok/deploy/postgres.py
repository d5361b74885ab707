"""Debian's PostgreSQL programs (initdb, pg_ctl) driven for a local server: the cluster's database
(:mod:`ragnarok.deploy.cluster`) and the test session's (tests/pg.py).

PostgreSQL refuses to run as root, so as root its programs run as the ``postgres`` system user the package
creates (else ``nobody``), via ``runuser``; that user must be able to reach the data directory.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import quote

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


def run_as() -> tuple[list[str], str | None]:
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


def give_to(user: str | None, *paths: Path) -> None:
    """Make ``paths`` (directories) the PostgreSQL user's, when it runs as another user."""
    if user is None:
        return
    entry = pwd.getpwnam(user)
    for path in paths:
        os.chown(path, entry.pw_uid, entry.pw_gid)


class PgServer:
    """One PostgreSQL cluster in ``root`` (``data``, ``sock``, ``server.log``) listening on 127.0.0.1:``port``
    for :data:`SUPERUSER`: with ``password``, SCRAM authentication (socket and TCP alike), else trust (the
    test session's own server)."""

    def __init__(self, bin_dir: Path, root: Path, port: int, options: str = "", password: str | None = None):
        self.bin_dir, self.root, self.port, self.options = bin_dir, root, port, options
        self.data, self.sock, self.log = root / "data", root / "sock", root / "server.log"
        self.prefix, self.user = run_as()
        self.password = password

    def url(self, database: str = "postgres") -> str:
        secret = f":{quote(self.password, safe='')}" if self.password else ""
        return f"postgresql+psycopg://{SUPERUSER}{secret}@127.0.0.1:{self.port}/{database}"

    def reachable(self) -> None:
        """Raise when the user PostgreSQL runs as cannot reach ``root`` (as root: a directory above it closed
        to other users, such as /root)."""
        if (
            self.user is not None
            and subprocess.run([*self.prefix, "test", "-x", str(self.root)], capture_output=True, timeout=30).returncode
        ):
            raise RuntimeError(
                f"PostgreSQL runs as {self.user}, which cannot reach {self.root} (a directory "
                "above it is closed to other users): pass --data-dir under a directory it can "
                "reach (e.g. /var/lib/ragnarok/cluster, the default as root)"
            )

    def _run(self, *args: str, timeout: float = 120) -> None:
        env = {**os.environ, "PGPASSWORD": self.password} if self.password else None
        done = subprocess.run(
            [*self.prefix, *args], cwd=self.root, capture_output=True, text=True, timeout=timeout, env=env
        )
        if done.returncode:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{Path(args[0]).name} failed ({done.returncode}): {done.stderr[-2000:]}{tail}")

    def initdb(self) -> None:
        """A new cluster in ``data`` (``root`` and ``sock`` made and given to the PostgreSQL user); with a
        password, SCRAM only (the password passed in a file readable by that user alone, removed at once)."""
        self.sock.mkdir(parents=True, exist_ok=True)
        give_to(self.user, self.root, self.sock)
        self.reachable()
        auth = ["--auth=trust"]
        secret = self.root / ".pwfile"
        try:
            if self.password:
                secret.touch(0o600)
                secret.write_text(self.password + "\n")
                if self.user is not None:
                    entry = pwd.getpwnam(self.user)
                    os.chown(secret, entry.pw_uid, entry.pw_gid)
                auth = ["--auth=scram-sha-256", f"--pwfile={secret}"]
            self._run(
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                *auth,
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            )
        finally:
            secret.unlink(missing_ok=True)

    def start(self) -> None:
        """``pg_ctl start``, waiting until it accepts connections."""
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.sock} "
            f"-c max_connections=200 {self.options}"
        )
        self._run(
            str(self.bin_dir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def createdb(self, name: str) -> None:
        self._run(str(self.bin_dir / "createdb"), "-h", str(self.sock), "-p", str(self.port), "-U", SUPERUSER, name)

    def stop(self) -> None:
        """``pg_ctl stop -m fast`` (nothing when it does not run)."""
        subprocess.run(
            [*self.prefix, str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"],
            cwd=self.root,
            capture_output=True,
            timeout=60,
        )

    def pid(self) -> int | None:
        """The postmaster's PID (``data/postmaster.pid``'s first line), None when it is not running."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
            os.kill(pid, 0)
        except (OSError, ValueError, IndexError):
            return None
        return pid
