"""Arena benchmarks: ratings over many battles, and many voters on one SQLite vote log.

    python bench/bench_arena.py [--battles 100000] [--rounds 100] [--voters 20] [--votes 100]
                                [--log-sizes 10000,100000] [--database-url URL]

(a) Bradley–Terry maximum likelihood plus ``--rounds`` bootstrap rounds over ``--battles`` synthetic battles
    (20 systems with known strengths; ties and both-bad votes included). Goal: <= 2 s. Also checks that the
    fitted order is the true order.
(b) ``--voters`` threads each cast ``--votes`` votes through :class:`ragnarok.arena.store.VoteStore` on a real
    SQLite file (WAL). Every battle is also raced by a second voter, so exactly one of two concurrent votes
    may win. Goal: exactly voters x votes rows, none lost, none duplicated, a second vote on a battle refused.
(c) Sampling a blinded battle's pair on a vote log of each of ``--log-sizes`` votes (a fresh SQLite file,
    or the empty database at ``--database-url``, e.g. a PostgreSQL one): ``VoteStore.vote_counts()`` (reads
    ``pair_votes``, one row per pair, kept by a trigger on each vote) and ``pick_pair``, against what it
    replaced: one GROUP BY over the index on ``votes.pair_key`` (grows with the log) and, before that, reading
    the whole log and counting in Python (1.6-2.6 s per battle at 100,000 votes). Goal: the same per-battle
    time at every log size, and the same counts as the log.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sqlalchemy import text  # noqa: E402

from ragnarok.arena.migrations import pair_key  # noqa: E402
from ragnarok.arena.pool import default_specs, make_pool, pick_pair  # noqa: E402
from ragnarok.arena.ratings import Battle, bootstrap_bt, bradley_terry, leaderboard  # noqa: E402
from ragnarok.arena.store import VoteRefused, VoteStore  # noqa: E402


def synthetic_battles(n: int, systems: int = 20, seed: int = 0) -> tuple[list[Battle], list[str]]:
    """Battles between systems whose true strengths are evenly spaced (system 0 strongest)."""
    rng = random.Random(seed)
    names = [f"sys{i:02d}" for i in range(systems)]
    strength = {name: (systems - i) * 25.0 for i, name in enumerate(names)}  # Elo-scale points
    battles = []
    for _ in range(n):
        a, b = rng.sample(names, 2)
        p_a = 1 / (1 + 10 ** ((strength[b] - strength[a]) / 400))
        r = rng.random()
        if r < 0.1:
            winner = "tie" if r < 0.07 else "bothbad"
        else:
            winner = "a" if rng.random() < p_a else "b"
        battles.append(Battle(a, b, winner))
    return battles, names


def bench_ratings(n: int, rounds: int) -> None:
    battles, names = synthetic_battles(n)
    start = time.perf_counter()
    bt = bradley_terry(battles)
    fit = time.perf_counter() - start
    intervals = bootstrap_bt(battles, rounds=rounds)
    total = time.perf_counter() - start
    order = sorted(bt, key=lambda s: -bt[s])
    start = time.perf_counter()
    rows = leaderboard(battles, rounds=rounds)
    board = time.perf_counter() - start
    width = statistics.mean(hi - lo for lo, hi in intervals.values())
    print(
        f"(a) {n:,} battles, {len(names)} systems: BT fit {fit * 1000:.0f} ms; "
        f"BT + {rounds} bootstrap rounds {total:.2f} s (goal <= 2 s: {'met' if total <= 2 else 'NOT met'}); "
        f"full leaderboard() (BT, bootstrap, Elo, counts) {board:.2f} s"
    )
    print(
        f"    fitted order == true order: {order == names}; mean 95% interval width {width:.1f} points; "
        f"top row {rows[0].name} {rows[0].bt:.0f} [{rows[0].lower:.0f}, {rows[0].upper:.0f}]"
    )


A = {"spec": "bm25@20 | extractive", "retriever": "bm25@20", "reranker": "none", "generator": "extractive"}
B = {"spec": "bm25+rm3@20 | extractive", "retriever": "bm25+rm3@20", "reranker": "none", "generator": "extractive"}


def bench_votes(voters: int, votes: int) -> bool:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "arena.db"
        store = VoteStore(f"sqlite:///{path}", votes_per_minute=votes * 10)
        total = voters * votes
        battles = [
            store.create_battle(
                "blinded", f"t{i}", "topic", A, B, {"answer": []}, {"answer": []}, None, None, "creator"
            )
            for i in range(total)
        ]
        wins = [0] * voters
        refused = [0] * voters
        errors: list[str] = []
        latencies: list[float] = []
        lock = threading.Lock()
        barrier = threading.Barrier(voters)

        def voter(i: int) -> None:
            own = battles[i * votes : (i + 1) * votes]
            j = (i + 1) % voters  # voter i also votes on voter j's battles, racing voter j
            rival = battles[j * votes : (j + 1) * votes]
            mine: list[float] = []
            barrier.wait()
            for battle_id, raced in zip(own, rival):
                for target in (battle_id, raced):
                    t0 = time.perf_counter()
                    try:
                        store.vote(target, random.choice(("a", "b", "tie", "bothbad")), f"voter-{i}", f"voter-{i}")
                        wins[i] += 1
                    except VoteRefused as exc:
                        if exc.status != 409:
                            errors.append(f"voter {i}: {exc}")
                        refused[i] += 1
                    except Exception as exc:  # noqa: BLE001 - a lost vote is what this bench looks for
                        errors.append(f"voter {i}: {exc.__class__.__name__}: {exc}")
                    mine.append(time.perf_counter() - t0)
            with lock:
                latencies.extend(mine)

        threads = [threading.Thread(target=voter, args=(i,)) for i in range(voters)]
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start

        conn = sqlite3.connect(path)
        rows = conn.execute("SELECT COUNT(*), COUNT(DISTINCT battle_id) FROM votes").fetchone()
        unvoted = conn.execute("SELECT COUNT(*) FROM battle_log WHERE winner IS NULL").fetchone()[0]
        conn.close()
        try:
            store.vote(battles[0], "a", "late-voter", "late-voter")
            second = "ACCEPTED (bug)"
        except VoteRefused as exc:
            second = f"refused ({exc.status}: {exc})"
        attempts = len(latencies)
        lat = sorted(latencies)
        ok = (
            rows == (total, total)
            and unvoted == 0
            and sum(wins) == total
            and not errors
            and second.startswith("refused")
        )
        print(
            f"(b) {voters} voters x {votes} votes (+ each battle raced by a second voter) on SQLite WAL: "
            f"{attempts:,} attempts in {elapsed:.2f} s ({attempts / elapsed:,.0f}/s); "
            f"p50 {lat[len(lat) // 2] * 1000:.1f} ms, p95 {lat[int(len(lat) * 0.95)] * 1000:.1f} ms"
        )
        print(
            f"    rows {rows[0]:,} (distinct battles {rows[1]:,}; expected {total:,}); "
            f"accepted {sum(wins):,}, "
            f"refused as already voted {sum(refused):,}; unvoted battles {unvoted}; errors {len(errors)}; "
            f"second vote on a battle: {second}"
        )
        for line in errors[:5]:
            print("    error:", line)
        print(f"    {'OK' if ok else 'FAILED'}")
        return ok


def _fill(store: VoteStore, start: int, stop: int, pool: list, per_commit: int = 100) -> None:
    """Voted battles ``start``..``stop`` between random pool pairs, written in bulk (the schema's columns);
    votes are committed ``per_commit`` at a time, as many voters would (on PostgreSQL each vote updates its
    pair's ``pair_votes`` row: one transaction of 100,000 votes would leave that small table bloated with
    dead row versions until autovacuum; one vote a transaction keeps it one page, HOT-pruned)."""
    rng = random.Random(start)
    answer = json.dumps({"answer": [{"text": "x " * 60, "citations": [0, 1]}] * 4, "references": ["d"] * 20})
    battles, rows = [], []
    for i in range(start, stop):
        a, b = (p.as_dict() for p in rng.sample(pool, 2))
        key, battle_id = pair_key(a, b), f"{i:032d}"
        battles.append(
            {
                "id": battle_id,
                "t": "2026-01-01T00:00:00+00:00",
                "ans": answer,
                "pair": key,
                "pa": json.dumps(a, sort_keys=True),
                "pb": json.dumps(b, sort_keys=True),
            }
        )
        rows.append({"id": battle_id, "w": rng.choice(("a", "b", "tie", "bothbad")), "pair": key})
    with store.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO battles (id, created_at, mode, topic_id, topic, pipeline_a, "
                "pipeline_b, answer_a, answer_b, session_id, pair_key) VALUES (:id, :t, 'blinded', "
                "'t', 'a topic', :pa, :pb, :ans, :ans, 'bench', :pair)"
            ),
            battles,
        )
    for i in range(0, len(rows), per_commit):
        with store.engine.begin() as conn:
            conn.execute(
                text(
                    "INSERT INTO votes (battle_id, voted_at, winner, session_id, rate_key, "
                    "pair_key) VALUES (:id, '2026-01-01T00:00:01+00:00', :w, 'bench', 'bench', "
                    ":pair)"
                ),
                rows[i : i + per_commit],
            )


def _best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def bench_sampling(sizes: list[int], database_url: str | None) -> bool:
    pool = make_pool(
        default_specs(["bm25", "bm25+rocchio", "bm25+rm3", "dense:minilm"], ["extractive", "smollm2", "gpt-4o"])
    )  # 12 pipelines, 66 pairs
    where = "the given database" if database_url else "SQLite (WAL)"
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        done = 0
        url = database_url or f"sqlite:///{Path(tmp) / 'arena.db'}"
        store = VoteStore(url)
        for size in sorted(sizes):
            _fill(store, done, size, pool)
            done = size
            counts_s, counts = _best(store.vote_counts, 5)
            rng = random.Random(0)
            pick_s, _ = _best(lambda: pick_pair(pool, store.vote_counts(), rng), 5)

            def old_way() -> dict:
                out: dict = {}
                for a, b, _ in store.battles(include_unblinded=True):
                    key = tuple(sorted((a["spec"], b["spec"])))
                    out[key] = out.get(key, 0) + 1
                return out

            def group_by() -> dict:
                with store.engine.connect() as conn:
                    rows = conn.execute(
                        text("SELECT pair_key, COUNT(*) FROM votes WHERE pair_key IS NOT NULL GROUP BY pair_key")
                    ).all()
                return {tuple(json.loads(key)): n for key, n in rows}

            group_s, grouped = _best(group_by, 5)
            old_s, old = _best(old_way, 2)
            same = old == grouped == counts
            ok = ok and same and sum(counts.values()) == size  # type: ignore[union-attr]
            print(
                f"(c) {size:,} votes on {where}: vote_counts() (pair_votes) {counts_s * 1000:.2f} ms, one "
                f"battle's pair (vote_counts + pick_pair) {pick_s * 1000:.2f} ms; before: GROUP BY over "
                f"votes {group_s * 1000:.1f} ms, read the log and count in Python {old_s * 1000:.0f} ms; "
                f"same counts: {same}"
            )
        store.engine.dispose()
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--battles", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--voters", type=int, default=20)
    parser.add_argument("--votes", type=int, default=100)
    parser.add_argument("--log-sizes", default="10000,100000", help="vote log sizes for (c), comma-separated")
    parser.add_argument("--database-url", help="an empty database for (c) (default: a temporary SQLite file)")
    args = parser.parse_args()
    bench_ratings(args.battles, args.rounds)
    ok = bench_votes(args.voters, args.votes)
    ok = bench_sampling([int(n) for n in args.log_sizes.split(",")], args.database_url) and ok
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
