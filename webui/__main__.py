"""``python -m webui --rag-url http://host:8000``: the arena alone, talking to a gateway over HTTP (with the key
in ``RAGNAROK_ARENA_KEY``, the ``arena_api_key_env`` setting, when the gateway has keys)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ragnarok.core.settings import get_settings
from ragnarok.runtime.netaddr import bare_host, http_url
from webui.arena import DEFAULT_TOPICS


def main(argv: list[str] | None = None) -> None:
    settings = get_settings()
    parser = argparse.ArgumentParser(prog="python -m webui", description=__doc__)
    parser.add_argument(
        "--rag-url",
        default=http_url(settings.host, settings.port),
        help="Base URL of the gateway serving POST /rag and the R service (default: %(default)s, "
        "from RAGNAROK_HOST / RAGNAROK_PORT).",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument(
        "--pool",
        action="append",
        default=None,
        metavar="SPEC",
        help="A pipeline of the pool (repeat); default: RAGNAROK_ARENA_POOL, else every available "
        "retriever x generator that costs nothing the services report (a paid one only when listed).",
    )
    parser.add_argument(
        "--database-url",
        default=None,
        help="SQLAlchemy URL of the vote log "
        "(default: RAGNAROK_DATABASE_URL, else SQLite arena.db in the data directory).",
    )
    parser.add_argument("--topics", type=Path, default=DEFAULT_TOPICS, help="Topic file for random draws.")
    args = parser.parse_args(argv)
    updates = {k: v for k, v in (("arena_pool", args.pool), ("database_url", args.database_url)) if v}
    settings = settings.model_copy(update=updates)

    import uvicorn  # noqa: PLC0415

    from webui.app import standalone_app  # noqa: PLC0415

    print(f"arena on {http_url(args.host, args.port)}/ (gateway {args.rag_url})", flush=True)
    uvicorn.run(
        standalone_app(settings, args.rag_url, args.topics),
        host=bare_host(args.host),
        port=args.port,
        log_level="warning",
        proxy_headers=False,  # X-Forwarded-For: the app believes it from RAGNAROK_TRUSTED_PROXIES only
    )


if __name__ == "__main__":
    main()
