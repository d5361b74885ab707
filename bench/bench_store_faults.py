"""Recovery after the service's stores come back: PostgreSQL stopped and started, Redis stopped and
started, and what the keyed requests get while each is gone.

    python bench/bench_store_faults.py [--rounds 3] [--down-s 2]

One keyed app (``RAGNAROK_AUTH=keys``, a paid generator on a local OpenAI-compatible fake, a key with a budget
and a per-minute limit) served by uvicorn in this process, on a PostgreSQL cluster of its own (Debian's
``postgresql``: initdb and pg_ctl, as tests/pg.py) and a redis-server of its own. Each round: the store is
stopped, one client sends ``POST /v1/generate`` back to back for ``--down-s`` seconds (the statuses counted),
the store is started, and the client goes on until the first 200: the recovery time is measured from the moment
``pg_ctl start -w`` returned (PostgreSQL accepts connections) or redis-server answered its first PING. For
PostgreSQL an arena vote (``VoteLog.vote``) is timed the same way, and the spend is checked to equal the
backend calls at the end. Also printed: how long a keyed request takes to be refused by a paused Redis (SIGSTOP:
it accepts connections and never answers).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import httpx  # noqa: E402
from fakes import flaky_openai_app  # noqa: E402
from pg import pg_bin_dir, postgres_cluster  # noqa: E402
from servers import redis_server, serve_app  # noqa: E402

from api.main import create_app  # noqa: E402
from ragnarok.arena.pool import PipelineId  # noqa: E402
from ragnarok.arena.store import VoteStore  # noqa: E402
from ragnarok.auth.store import AuthStore  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.stages.generate.base import GeneratorConfig  # noqa: E402
from webui.votes import VoteLog  # noqa: E402

KEY_ENV = "RAGNAROK_BENCH_PAID_KEY"
MODEL = "ok:bench"
BODY = {
    "request": {
        "query": {"text": "gzip", "qid": "q1"},
        "candidates": [{"docid": "d1", "score": 1.0, "doc": {"segment": "gzip compresses files."}}],
    },
    "generator": "paid",
}


def ask(url: str, secret: str) -> int:
    return httpx.post(
        url + "/v1/generate", json=BODY, headers={"Authorization": f"Bearer {secret}"}, timeout=60
    ).status_code


def outage(url: str, secret: str, stop, start, down_s: float, vote=None) -> tuple[Counter, float, float | None]:
    """Statuses while the store is gone, then the seconds from its return to the first 200 (and vote)."""
    stop()
    statuses: Counter = Counter()
    until = time.monotonic() + down_s
    while time.monotonic() < until:
        statuses[ask(url, secret)] += 1
    start()
    up = time.monotonic()
    while ask(url, secret) != 200:
        pass
    keyed_s = time.monotonic() - up
    vote_s = None
    if vote is not None:
        while not vote():
            pass
        vote_s = time.monotonic() - up
    return statuses, keyed_s, vote_s


def main() -> None:
    logging.disable(logging.CRITICAL)  # the services log every refusal: the figures are printed below
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--down-s", type=float, default=2.0)
    args = parser.parse_args()
    bin_dir = pg_bin_dir()
    if bin_dir is None:
        sys.exit("error: PostgreSQL is not installed (apt-get install postgresql)")
    os.environ[KEY_ENV] = "sk-bench"
    backend = flaky_openai_app()
    with (
        tempfile.TemporaryDirectory() as tmp,
        postgres_cluster(bin_dir) as pg,
        redis_server(Path(tmp)) as redis,
        serve_app(backend) as base,
    ):
        paid = GeneratorConfig(
            name="paid", backend="openai", base_url=base + "/v1", model=MODEL, api_key_env=KEY_ENV, max_retries=0
        )
        settings = Settings(
            data_dir=Path(tmp) / "data",
            auth="keys",
            database_url=pg.url,
            rate_limit_storage=redis.url,
            generators=[paid],
        )
        store = AuthStore.for_settings(settings)
        _, secret = store.create("bench", ["generate"], rpm=1_000_000, budget_calls=1_000_000)
        pipelines = [PipelineId(f"bm25@5 | {g}", "bm25@5", "none", g).as_dict() for g in ("a", "b")]
        answer = {"text": "gzip.", "references": []}
        battles = iter(
            [
                VoteStore(pg.url).create_battle(
                    "blinded", "q1", "gzip", *pipelines, answer, answer, None, None, "bench"
                )
                for _ in range(args.rounds * 50)
            ]
        )
        votes = VoteLog(settings.model_copy(update={"arena_votes_per_minute": 1_000_000}))
        vote = lambda: votes.vote(next(battles), "a", "bench", "bench").voted  # noqa: E731
        with serve_app(create_app(settings, arena=False)) as url:
            assert ask(url, secret) == 200
            for name, stop, start, voting in (
                ("PostgreSQL", pg.stop, pg.start, vote),
                ("Redis", redis.stop, redis.start, None),
            ):
                keyed, voted, seen = [], [], Counter()
                for _ in range(args.rounds):
                    statuses, keyed_s, vote_s = outage(url, secret, stop, start, args.down_s, voting)
                    seen.update(statuses)
                    keyed.append(keyed_s)
                    if vote_s is not None:
                        voted.append(vote_s)
                total = sum(seen.values())
                print(
                    f"{name} gone {args.down_s:g} s x {args.rounds}: {total} keyed requests, "
                    + ", ".join(f"{n} x {s}" for s, n in sorted(seen.items()))
                    + f" ({100 * seen[503] / max(1, total):.0f} % 503)"
                )
                print(
                    f"  back: first keyed 200 after {statistics.median(keyed):.3f} s median "
                    f"(max {max(keyed):.3f} s)"
                    + (
                        f"; first vote recorded after {statistics.median(voted):.3f} s median (max {max(voted):.3f} s)"
                        if voted
                        else ""
                    )
                )
            redis.pause()
            started = time.monotonic()
            status = ask(url, secret)
            print(f"Redis paused (SIGSTOP): a keyed request answered {status} after {time.monotonic() - started:.2f} s")
            redis.resume()
        store.flush(10.0)
        owner = f"key:{store.find('bench').id}"
        spent = sum(u["calls"] for u in store.usage(owner))
        print(f"backend calls {backend.state.calls[MODEL]}, spend recorded {spent}")


if __name__ == "__main__":
    main()
