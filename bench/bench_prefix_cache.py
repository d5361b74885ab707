"""The embedded model's first token against the prompt-evaluation floor of the tokens it did not have cached.

    python bench/bench_prefix_cache.py [--limit 10]

In one process, on the demo index: each demo topic's top 20 BM25 segments go to the ``smollm2`` generator
(streamed, as ``/rag`` streams it), which keeps the prompt's fixed prefix (system message and instructions)
evaluated between answers. For each answer it prints the first token's time (from the job's start, as the
generator's ``first_token_ms`` note counts it), and right after, on the same model, in the same run:

- the floor: the time to evaluate the prompt's tokens after the cached prefix, from that prefix;
- the whole prompt's evaluation from an empty context (what every answer cost before the prefix was kept).

The ratios first token / floor and whole / floor are printed as p50 over the topics, with the load average
before and after. Each topic is answered twice more with other prompts between, to check the answer is the
same every time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path.cwd() if (Path.cwd() / "ragnarok").is_dir() else Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from ragnarok.api import Pipeline  # noqa: E402
from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.topics import load_topics  # noqa: E402
from ragnarok.stages.generate.llama_cpp import LlamaCppGenerator  # noqa: E402
from ragnarok.stages.generate.prompts import build_messages, fixed_user_start, get_template  # noqa: E402


def floors(gen: LlamaCppGenerator, messages: list[dict[str, str]], fixed: str) -> tuple[float, float, int, int]:
    """Seconds to evaluate the prompt after its cached prefix, from that prefix, and the whole prompt from an
    empty context; the prompt's and the prefix's lengths in tokens. Run in the model's owner thread."""

    def measure(llm):  # type: ignore[no-untyped-def]
        cache = gen.prefix
        whole = cache._render(llm, messages)
        tokens = llm.tokenize(whole.encode("utf-8"), add_bos=False, special=True)
        cache.prepare(llm, messages, fixed)
        cached = len(cache.tokens)
        start = time.perf_counter()
        llm.eval(tokens[cached:])
        rest = time.perf_counter() - start
        cache.tokens = ()  # the context is emptied
        llm.reset()
        start = time.perf_counter()
        llm.eval(tokens)
        full = time.perf_counter() - start
        cache.prepare(llm, messages, fixed)  # the prefix evaluated again, as the next answer finds it
        return rest, full, len(tokens), cached

    return gen.owner.run(measure)


async def answer(gen: LlamaCppGenerator, topic, candidates, template) -> tuple[str, float]:  # type: ignore[no-untyped-def]
    async for event in gen.astream(topic, candidates, template):
        if event.event == "done":
            done = event.data
            return done.model_dump_json(include={"answer"}), done.notes["first_token_ms"] / 1000
    raise RuntimeError("the stream ended without an answer")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=10)
    args = ap.parse_args()
    data_dir = Path(os.environ.get("RAGNAROK_DATA_DIR", tempfile.mkdtemp(prefix="bench-prefix-")))
    settings = Settings(data_dir=data_dir)
    config = settings.generator_configs()["smollm2"].model_copy(update={"timeout_s": 600, "slot_wait_s": 600})
    gen = LlamaCppGenerator(config)
    template = get_template(config.template or "small")
    topics = load_topics("demo", ROOT / "topics")[: args.limit]
    with Pipeline("bm25@20", settings=settings) as pipeline:
        requests = [pipeline.retrieve(t.text, k=20) for t in topics]
    gen.load()
    asyncio.run(answer(gen, requests[-1].query, requests[-1].candidates, template))  # warm-up, not timed
    load_before = Path("/proc/loadavg").read_text().split()[0]
    rows, texts = [], {}
    for request in requests:
        candidates = request.candidates[: config.max_contexts]
        text, first = asyncio.run(answer(gen, request.query, candidates, template))
        messages = build_messages(template, request.query.text, candidates, config.prompt_budget(), gen.count_tokens)
        rest, full, n, cached = floors(gen, messages, fixed_user_start(template, len(candidates)))
        rows.append((first, rest, full, n, cached))
        texts[request.query.text] = text
        print(
            f"{request.query.text[:40]!r}: first {first:.3f} s, floor {rest:.3f} s ({n - cached} tokens), "
            f"whole prompt {full:.3f} s ({n} tokens)",
            file=sys.stderr,
            flush=True,
        )
    load_after = Path("/proc/loadavg").read_text().split()[0]
    same = 0
    for request in reversed(requests):  # other prompts came between: the same answers?
        candidates = request.candidates[: config.max_contexts]
        same += asyncio.run(answer(gen, request.query, candidates, template))[0] == texts[request.query.text]
    first, rest, full = (statistics.median(r[i] for r in rows) for i in range(3))
    print(f"topics={len(rows)}; 1-min load average before/after: {load_before}/{load_after}")
    print(f"prompt tokens p50 {statistics.median(r[3] for r in rows):.0f}, cached prefix {rows[0][4]} tokens")
    print(f"first token p50 {first:.3f} s; floor (tokens not cached) p50 {rest:.3f} s; whole prompt p50 {full:.3f} s")
    print(
        f"first token / floor: p50 {statistics.median(r[0] / r[1] for r in rows):.2f}x "
        f"(max {max(r[0] / r[1] for r in rows):.2f}x); whole prompt / floor p50 "
        f"{statistics.median(r[2] / r[1] for r in rows):.2f}x"
    )
    print(f"same answer when asked again after the other topics: {same}/{len(rows)}")


if __name__ == "__main__":
    main()
