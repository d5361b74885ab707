"""Our R service against Anserini's own REST server on the same index, as clients meet them; and Anserini's server
as our remote index over every TREC RAG 2024 topic.

    python bench/bench_anserini_rest.py [--index DIR] [--seconds 10] [--clients 1,8,32] [--rounds 2] [--k 100]

1. Throughput: ``ragnarok serve --no-dense`` (started as docs/index.md starts it, the index configured with
   RAGNAROK_INDEXES) and ``java -cp FATJAR io.anserini.api.RestServer`` (Anserini 1.7.1, as pyserini 1.6 ships
   it), both on ``--index`` (default: the demo index, built if missing). For each number of keep-alive clients
   (threads of this process, ``http.client``), interleaved, ``--rounds`` times: BM25 top ``--k`` of the demo
   topics for ``--seconds`` after a 3 s warm-up, ours as ``POST /v1/retrieve`` and theirs as ``GET
   /v1/{index}/search?query=&hits=``. Queries/s, p50, and our ratio (goal: >= 1.5x at 1, 8 and 32 clients); the
   top-10 docids of both compared on 20 topics.
2. Anserini's server as our remote index (``RAGNAROK_INDEXES={"anz": "http://127.0.0.1:P/v1/<index path>"}``):
   the 301 rag24 topics through our ``POST /v1/retrieve``, failures counted (goal: 0), top 10 compared with ours.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
from pathlib import Path
from urllib.parse import quote, urlencode

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_throughput import load_with, retrieve_sender, start_server  # noqa: E402
from servers import anserini_rest_server, free_port  # noqa: E402

from ragnarok.collection.demo_index import ensure_demo_index  # noqa: E402
from ragnarok.core.settings import get_settings  # noqa: E402
from ragnarok.core.topics import read_topics  # noqa: E402


def theirs(index: str, k: int):
    path = f"/v1/{quote(index, safe='')}/search"

    def send(conn: http.client.HTTPConnection, query: str) -> tuple[int, bytes]:
        conn.request("GET", f"{path}?{urlencode({'query': query, 'hits': k})}")
        response = conn.getresponse()
        return response.status, response.read()

    return send


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--clients", default="1,8,32")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--k", type=int, default=100)
    args = ap.parse_args()
    settings = get_settings()
    index = args.index or ensure_demo_index(settings)
    queries = [t.text for t in read_topics(ROOT / "topics" / "demo.tsv")]
    rag24 = read_topics(ROOT.parent / "shared" / "data" / "trec-rag" / "topics.rag24.test.txt")
    port = free_port()
    env = {**os.environ, "RAGNAROK_INDEXES": json.dumps({"bench": str(index)})}
    print(f"# {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; index {index}; k {args.k}")
    with anserini_rest_server() as rest:
        rest_port = int(rest.rsplit(":", 1)[1])
        env["RAGNAROK_INDEXES"] = json.dumps({"bench": str(index), "anz": f"{rest}/v1/{quote(str(index), safe='')}"})
        server, _ = start_server(env, port)
        try:
            same = 0
            for q in queries[:20]:
                a = httpx.post(f"http://127.0.0.1:{port}/v1/retrieve", json={"query": q, "k": 10, "index": "bench"})
                b = httpx.get(f"{rest}/v1/{quote(str(index), safe='')}/search", params={"query": q, "hits": 10})
                same += [c["docid"] for c in a.json()["candidates"]] == [c["docid"] for c in b.json()["candidates"]]
            print(f"top-10 docids identical on {same}/20 topics")
            rows: dict[tuple[str, int], list[float]] = {}
            for _ in range(args.rounds):
                for clients in map(int, args.clients.split(",")):
                    for label, p, send in (
                        ("ours", port, retrieve_sender(args.k, "bench")),
                        ("anserini", rest_port, theirs(str(index), args.k)),
                    ):
                        load_with(p, send, queries, clients, 3)
                        lat = load_with(p, send, queries, clients, args.seconds)
                        rows.setdefault((label, clients), []).append(len(lat) / args.seconds)
                        print(
                            f"{label:8} {clients:3} clients  {len(lat) / args.seconds:7.1f} q/s  p50 "
                            f"{statistics.median(lat):6.1f} ms  load {os.getloadavg()[0]:.1f}",
                            flush=True,
                        )
            for clients in map(int, args.clients.split(",")):
                a, b = statistics.mean(rows[("ours", clients)]), statistics.mean(rows[("anserini", clients)])
                print(
                    f"{clients:3} clients: ours {a:7.1f} q/s, Anserini's RestServer {b:7.1f} q/s: {a / b:.2f}x "
                    "(goal >= 1.5x)"
                )
            failures, same = 0, 0
            for topic in rag24:
                remote = httpx.post(
                    f"http://127.0.0.1:{port}/v1/retrieve",
                    timeout=60,
                    json={"query": topic.text, "k": 10, "index": "anz"},
                )
                local = httpx.post(
                    f"http://127.0.0.1:{port}/v1/retrieve",
                    timeout=60,
                    json={"query": topic.text, "k": 10, "index": "bench"},
                )
                if remote.status_code != 200:
                    failures += 1
                    continue
                same += [c["docid"] for c in remote.json()["candidates"]] == [
                    c["docid"] for c in local.json()["candidates"]
                ]
            print(
                f"Anserini's RestServer as a remote index: {len(rag24)} rag24 topics, {failures} failures "
                f"(goal 0); top 10 as our local index's on {same}/{len(rag24) - failures}"
            )
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
