"""Arena benchmarks: ratings over many battles, and many voters on one SQLite vote log.

    python bench/bench_arena.py [--battles 100000] [--rounds 100] [--voters 20] [--votes 100]

(a) Bradley–Terry maximum likelihood plus ``--rounds`` bootstrap rounds over ``--battles`` synthetic battles
    (20 systems with known strengths; ties and both-bad votes included). Goal: <= 2 s. Also checks that the
    fitted order is the true order.
(b) ``--voters`` threads each cast ``--votes`` votes through :class:`ragnarok.arena.store.VoteStore` on a real
    SQLite file (WAL). Every battle is also raced by a second voter, so exactly one of two concurrent votes
    may win. Goal: exactly voters x votes rows, none lost, none duplicated, a second vote on a battle refused.
"""

from __future__ import annotations

import argparse
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
B = {
    "spec": "bm25+rm3@20 | extractive",
    "retriever": "bm25+rm3@20",
    "reranker": "none",
    "generator": "extractive",
}


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
                        store.vote(target, random.choice(("a", "b", "tie", "bothbad")), f"voter-{i}")
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
            store.vote(battles[0], "a", "late-voter")
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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--battles", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--voters", type=int, default=20)
    parser.add_argument("--votes", type=int, default=100)
    args = parser.parse_args()
    bench_ratings(args.battles, args.rounds)
    if not bench_votes(args.voters, args.votes):
        sys.exit(1)


if __name__ == "__main__":
    main()
