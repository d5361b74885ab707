"""AG costs, measured in one run:

1. post-processing + prompt building per answer (goal <= 2 ms): ``build_messages`` over 20 candidates of
   ~1,000 characters and ``postprocess`` of a ~300-word cited answer;
2. the embedded LLM through our generator (streamed, with its stop checks) vs a raw llama-cpp-python call:
   the same prompt, the same sampling, alternating, several rounds, each call with llama.cpp's prefix cache
   emptied first (so both evaluate the prompt: a whole call), and again with the prompt cached (decoding
   only); goal: within 10 %. Also the prompt evaluation speed (the smollm2 setting ``prompt_tokens_per_s``).

    python bench/bench_generate.py [--repeats 200] [--rounds 6]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from ragnarok.core.settings import Settings
from ragnarok.core.types import Candidate, Doc
from ragnarok.stages.generate.cite import postprocess
from ragnarok.stages.generate.llama_cpp import LlamaCppGenerator
from ragnarok.stages.generate.prompts import build_messages, get_template

SENTENCE = "The module provides functions to parse command-line options and arguments in scripts. "
CANDIDATES = [
    Candidate(docid=f"doc{i}#0_0", score=20.0 - i, doc=Doc(title=f"Title {i}", segment=SENTENCE * 11))
    for i in range(20)
]
ANSWER = " ".join(
    f"Sentence {i} explains how argparse reads options from sys.argv for scripts [{i % 20 + 1}]"
    f"{'[2, 3]' if i % 3 else ''}."
    for i in range(24)
)  # ~300 words


def postprocess_ms(repeats: int) -> list[float]:
    template = get_template("ragnarok")
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        build_messages(template, "how do I parse command-line arguments", CANDIDATES, 3000)
        postprocess(ANSWER, [c.docid for c in CANDIDATES])
        out.append((time.perf_counter() - t) * 1000)
    return out


def llm_ratio(rounds: int, max_tokens: int = 128) -> dict[str, float]:
    """Our generator's streamed call vs a raw llama-cpp-python call: the same prompt (the smollm2 generator's
    own, five contexts), the same sampling (its settings: greedy, its repetition penalty), no word cap and no
    repeat stop on our side (so both write the same tokens), alternating, ``rounds`` rounds. Each call first
    empties llama.cpp's prefix cache (``reset``), so both evaluate the whole prompt and then decode: the ratio is
    of whole calls. Also: the decode-only ratio with the prompt cached, and the prompt evaluation speed."""
    config = Settings().generator_configs()["smollm2"].model_copy(update={"max_tokens": max_tokens})
    gen = LlamaCppGenerator(config)
    template = get_template(config.template or "small")
    messages = build_messages(
        template,
        "how do I parse command-line arguments",
        CANDIDATES[: config.max_contexts],
        config.prompt_budget(),
        gen.count_tokens,
    )
    sampling = gen.sampling()

    def raw(reset: bool) -> tuple[int, str]:
        def call(llm) -> tuple[int, str]:  # in the model's owner thread, as every call into it
            if reset:
                llm.reset()
            out = llm.create_chat_completion(messages=messages, **sampling)
            return out["usage"]["completion_tokens"], out["choices"][0]["message"]["content"]

        return gen.owner.run(call)

    def ours(reset: bool) -> tuple[int, str]:
        if reset:
            gen.owner.run(lambda llm: llm.reset())
        text, notes = gen.stream(messages)
        return notes["completion_tokens"], text

    raw(True)  # warm-up
    times: dict[str, list[float]] = {"raw": [], "ours": [], "raw cached": [], "ours cached": []}
    tokens: dict[str, int] = {}
    texts: dict[str, str] = {}
    for r in range(rounds):
        order = (("raw", raw), ("ours", ours)) if r % 2 == 0 else (("ours", ours), ("raw", raw))
        for reset in (True, False):
            for name, fn in order:
                key = name if reset else f"{name} cached"
                t = time.perf_counter()
                tokens[key], texts[key] = fn(reset)
                times[key].append(time.perf_counter() - t)

    def prompt_speed(llm) -> tuple[int, float]:
        tokens = llm.create_chat_completion(messages=messages, max_tokens=1)["usage"]["prompt_tokens"]
        llm.reset()
        t = time.perf_counter()
        llm.create_chat_completion(messages=messages, max_tokens=1, temperature=0.0)
        return tokens, time.perf_counter() - t

    prompt_tokens, prompt_s = gen.owner.run(prompt_speed)
    median = {k: statistics.median(v) for k, v in times.items()}
    return {
        "rounds": rounds,
        "prompt_tokens": prompt_tokens,
        "prompt_tokens_per_s": prompt_tokens / prompt_s,
        "completion_tokens": tokens["raw"],
        "same_text": float(texts["raw"] == texts["ours"]),
        "raw_s": median["raw"],
        "ours_s": median["ours"],
        "ratio": median["raw"] / median["ours"],
        "raw_cached_s": median["raw cached"],
        "ours_cached_s": median["ours cached"],
        "ratio_cached": median["raw cached"] / median["ours cached"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=6, help="alternating rounds of raw and our calls")
    args = ap.parse_args()
    ms = postprocess_ms(args.repeats)
    p95 = statistics.quantiles(ms, n=20)[-1]
    print(
        f"prompt building + post-processing: mean {statistics.fmean(ms):.3f} ms, p95 {p95:.3f} ms per answer "
        f"(goal <= 2 ms: {'met' if p95 <= 2 else 'NOT met'})"
    )
    r = llm_ratio(args.rounds)
    print(
        f"embedded SmolLM2-135M, {r['rounds']:.0f} alternating rounds, prompt {r['prompt_tokens']:.0f} tokens, "
        f"{r['completion_tokens']:.0f} tokens written (same text both ways: {bool(r['same_text'])}); "
        f"load average {Path('/proc/loadavg').read_text().split()[0]}"
    )
    print(
        f"  whole call (prefix cache emptied): raw {r['raw_s']:.2f} s, ours {r['ours_s']:.2f} s, "
        f"ours/raw speed {r['ratio']:.3f} (goal >= 0.90: {'met' if r['ratio'] >= 0.9 else 'NOT met'})"
    )
    print(
        f"  prompt cached (decoding only): raw {r['raw_cached_s']:.2f} s, ours {r['ours_cached_s']:.2f} s, "
        f"ours/raw speed {r['ratio_cached']:.3f}"
    )
    print(f"  prompt evaluation: {r['prompt_tokens_per_s']:.0f} tokens/s (the smollm2 setting prompt_tokens_per_s)")


if __name__ == "__main__":
    main()
