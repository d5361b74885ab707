"""Faults on the cluster under load: one scripted scenario, one table.

    python bench/bench_faults.py [--clients 8] [--phase-s 10] [--data-dir DIR]

`deploy/cluster up --instances 3 --no-dense` with keys on a fresh directory under /tmp (the demo index in
``--data-dir``, default RAGNAROK_DATA_DIR), a paid generator on a local counting OpenAI-compatible fake
(tests/fakes.py, served in this process), three keys (a 60-call budget for the paid ``/rag``, 100,000 for the
rest). ``--clients`` clients send, in turn, keyed ``POST /v1/retrieve``, ``/rag`` (extractive) and paid ``/rag``
through nginx, without pause, while the script does, ``--phase-s`` apart:

1. ``kill -9`` of instance-1 (then: the seconds until it serves again, nobody acting);
2. PostgreSQL stopped ``--phase-s`` s (``pg_ctl stop -m fast``), then started;
3. PostgreSQL frozen 2 x ``--phase-s`` s (SIGSTOP of every PostgreSQL process), then SIGCONT;
4. Redis stopped ``--phase-s`` s (supervisord), then started;
5. PostgreSQL stopped, ``kill -9`` of instance-2 during the outage, PostgreSQL started;
6. SIGTERM of instance-3 with requests in flight (the seconds until it is gone; supervisord starts it again).

Then, once every reservation is settled: the fake's calls against the recorded spend, each key's spend against
its budget, the client-side statuses against the audit log's, the slowest answer during the freeze. Printed
with the load average: on a shared machine only this run's figures compare with each other.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import httpx  # noqa: E402
from fakes import flaky_openai_app  # noqa: E402
from servers import serve_app  # noqa: E402

from ragnarok.auth.store import AuthStore  # noqa: E402
from ragnarok.deploy import parts  # noqa: E402
from ragnarok.deploy.postgres import PgServer, pg_bin_dir  # noqa: E402
from ragnarok.deploy.procs import alive, healthy, wait_until  # noqa: E402
from ragnarok.runtime.netaddr import free_port  # noqa: E402

KEY_ENV, MODEL, BUDGET = "RAGNAROK_BENCH_PAID_KEY", "ok:faults", 60
TOPICS = ["compress a file with gzip", "parse json", "thread pool", "regular expression", "http server"]


class Clients:
    """``n`` clients sending keyed requests in turn until :meth:`stop`; every (key, status, sent, seconds)."""

    def __init__(self, url: str, secrets: dict[str, str], n: int):
        self.url, self.secrets, self.records, self._stop = url, secrets, [], threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,)) for i in range(n)]
        for t in self.threads:
            t.start()

    def _one(self, http: httpx.Client, i: int) -> tuple[str, int | str]:
        kind = ("retrieve", "rag", "paid")[i % 3]
        body = (
            {"query": TOPICS[i % 5], "k": 5}
            if kind == "retrieve"
            else {"topic": TOPICS[i % 5], "pipeline": "bm25@5 | " + ("paid" if kind == "paid" else "extractive")}
        )
        route = "/v1/retrieve" if kind == "retrieve" else "/rag"
        try:
            answer = http.post(
                self.url + route, json=body, timeout=120, headers={"Authorization": f"Bearer {self.secrets[kind]}"}
            )
        except httpx.HTTPError as exc:
            return kind, type(exc).__name__
        if answer.status_code == 503 and "no instance of the service" in answer.text:
            return kind, "503 (nginx)"  # its instance died with it in flight: no instance can audit it
        return kind, answer.status_code

    def _run(self, n: int) -> None:
        with httpx.Client() as http:
            i = n
            while not self._stop.is_set():
                sent = time.monotonic()
                kind, status = self._one(http, i)
                self.records.append((kind, status, sent, time.monotonic() - sent))
                i += len(self.threads)

    def stop(self) -> None:
        self._stop.set()
        for t in self.threads:
            t.join()


def _pg_processes(postmaster: int) -> list[int]:
    found = [postmaster]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                found.append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--phase-s", type=float, default=10.0)
    parser.add_argument("--data-dir", type=Path, default=None)
    args = parser.parse_args()
    phase = args.phase_s
    root = Path(tempfile.mkdtemp(prefix="ragnarok-bench-faults-", dir="/tmp"))
    root.chmod(0o755)
    data = root / "cluster"
    backend = flaky_openai_app()
    with serve_app(backend) as base:
        env = {
            **os.environ,
            "RAGNAROK_AUTH": "keys",
            "PYTHONPATH": str(ROOT),
            KEY_ENV: "sk-bench-faults",
            "RAGNAROK_SHUTDOWN_GRACE_S": "5",
            "RAGNAROK_GENERATORS": json.dumps(
                [
                    {
                        "name": "paid",
                        "backend": "openai",
                        "base_url": base + "/v1",
                        "model": MODEL,
                        "api_key_env": KEY_ENV,
                        "max_retries": 0,
                    }
                ]
            ),
        }
        env.pop("RAGNAROK_DATABASE_URL", None)
        if args.data_dir:
            env["RAGNAROK_DATA_DIR"] = str(args.data_dir)
        script = [str(ROOT / "deploy" / "cluster")]
        up = subprocess.run(
            [*script, "up", "--instances", "3", "--port", str(free_port()), "--data-dir", str(data), "--no-dense"],
            env=env,
            capture_output=True,
            text=True,
        )
        try:
            assert up.returncode == 0, up.stderr
            rows = scenario(data, args.clients, phase, backend)
        finally:
            subprocess.run([*script, "down", "--data-dir", str(data)], env=env, capture_output=True)
            shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()
    print(f"\nbench_faults: {args.clients} clients, phases of {phase:g} s, load {load[0]:.1f}/{load[1]:.1f}")
    width = max(len(k) for k, _ in rows)
    for name, value in rows:
        print(f"  {name:<{width}}  {value}")


def scenario(data: Path, clients: int, phase: float, backend) -> list[tuple[str, str]]:
    layout = parts.Layout(data)
    state, sup = json.loads(layout.state.read_text()), layout.supervisor
    urls = dict(line.split("=", 1) for line in layout.env.read_text().splitlines())
    store = AuthStore(urls["RAGNAROK_DATABASE_URL"])
    secrets = {
        "retrieve": store.create("f-retrieve", ["retrieve"], budget_calls=100_000)[1],
        "rag": store.create("f-rag", ["retrieve", "generate"], budget_calls=100_000)[1],
        "paid": store.create("f-paid", ["retrieve", "generate"], budget_calls=BUDGET)[1],
    }
    password = layout.passwords()["postgres"]
    pg = PgServer(
        pg_bin_dir(),
        layout.postgres,
        int(state["database_url"].rsplit(":", 1)[1].split("/")[0]),
        "-c shared_buffers=64MB",
        password,
    )
    port_of = {f"instance-{i + 1}": p for i, p in enumerate(state["ports"])}
    out: list[tuple[str, str]] = []
    load = Clients(state["url"], secrets, clients)
    try:
        time.sleep(phase)
        pid = sup.info()["instance-1"]["pid"]  # 1. kill -9
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        wait_until(
            lambda: (
                sup.info()["instance-1"]["pid"] not in (0, pid)
                and healthy(f"http://127.0.0.1:{port_of['instance-1']}/healthz", 1)
            ),
            60,
            0.1,
        )
        out.append(("kill -9: serving again after (s)", f"{time.monotonic() - killed:.1f}"))
        time.sleep(phase)
        pg.stop()  # 2. PostgreSQL stopped
        time.sleep(phase)
        pg.start()
        time.sleep(phase)
        frozen = _pg_processes(pg.pid())  # 3. frozen
        for p in frozen:
            os.kill(p, signal.SIGSTOP)
        froze = time.monotonic()
        time.sleep(2 * phase)
        for p in frozen:
            os.kill(p, signal.SIGCONT)
        thawed = time.monotonic()
        during = [s for k, st, sent, s in load.records if froze + 1 < sent and sent + s < thawed]
        out.append(("frozen PostgreSQL: slowest answer (s)", f"{max(during, default=0):.2f}"))
        time.sleep(phase)
        sup.stop("redis")  # 4. Redis stopped
        time.sleep(phase)
        sup.start("redis")
        time.sleep(phase)
        pg.stop()  # 5. kill -9 during an outage
        os.kill(sup.info()["instance-2"]["pid"], signal.SIGKILL)
        time.sleep(phase)
        pg.start()
        time.sleep(phase)
        pid = sup.info()["instance-3"]["pid"]  # 6. SIGTERM
        os.kill(pid, signal.SIGTERM)
        termed = time.monotonic()
        wait_until(lambda: not alive(pid), 60, 0.05)
        out.append(("SIGTERM: gone after (s), grace 5", f"{time.monotonic() - termed:.1f}"))
        time.sleep(phase)
    finally:
        load.stop()
    time.sleep(15)  # the sweep (every 10 s) settles the reservations of the killed instances
    exits = [line for line in layout.log("supervisord").read_text().splitlines() if "exited: instance-" in line]
    out.append(("instance exits (3 caused: 2 x kill -9, SIGTERM)", f"{len(exits)}"))
    return out + _accounts(store, load, backend.state.calls[MODEL])


def _accounts(store: AuthStore, load: Clients, backend_calls: int) -> list[tuple[str, str]]:
    statuses = Counter(str(st) for _, st, _, _ in load.records)
    owners = {k.name: f"key:{k.id}" for k in store.keys()}
    spent = {name: sum(u["calls"] for u in store.usage(owner)) for name, owner in owners.items()}
    audit = Counter(str(r["status"]) for r in store.audit_rows(limit=10_000_000))  # refusals' owners too
    client = Counter(str(st) for _, st, _, _ in load.records if isinstance(st, int))
    return [
        ("requests", str(len(load.records))),
        ("statuses seen by clients", ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items()))),
        ("500s / 502s", f"{statuses['500']} / {statuses['502']}"),
        ("backend calls / recorded spend", f"{backend_calls} / {sum(spent.values())}"),
        ("paid key: recorded spend / budget", f"{spent.get('f-paid', 0)} / {BUDGET}"),
        ("audit rows / the instances' answers", f"{sum(audit.values())} / {sum(client.values())}"),
        ("audit statuses", ", ".join(f"{k}: {v}" for k, v in sorted(audit.items()))),
    ]


if __name__ == "__main__":
    main()
