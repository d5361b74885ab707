"""AG costs, measured in one run:

1. post-processing + prompt building per answer (goal <= 2 ms): ``build_messages`` over 20 candidates of
   ~1,000 characters and ``postprocess`` of a ~300-word cited answer;
2. the embedded LLM's tokens/s through our generator vs a raw llama-cpp-python call on the same prompt with
   the same settings (goal: within 10 %).

    python bench/bench_generate.py [--repeats 200] [--llm-runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from ragnarok.generate.base import GeneratorConfig
from ragnarok.generate.cite import postprocess
from ragnarok.generate.llama_cpp import LlamaCppGenerator
from ragnarok.generate.prompts import build_messages, get_template
from ragnarok.types import Candidate, Doc

SENTENCE = "The module provides functions to parse command-line options and arguments in scripts. "
CANDIDATES = [Candidate(docid=f"doc{i}#0_0", score=20.0 - i, doc=Doc(title=f"Title {i}", segment=SENTENCE * 11))
              for i in range(20)]
ANSWER = " ".join(f"Sentence {i} explains how argparse reads options from sys.argv for scripts [{i % 20 + 1}]"
                  f"{'[2, 3]' if i % 3 else ''}." for i in range(24))  # ~300 words


def postprocess_ms(repeats: int) -> list[float]:
    template = get_template("ragnarok")
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        build_messages(template, "how do I parse command-line arguments", CANDIDATES, 3000)
        postprocess(ANSWER, [c.docid for c in CANDIDATES])
        out.append((time.perf_counter() - t) * 1000)
    return out


def llm_tokens_per_s(runs: int, max_tokens: int = 128) -> tuple[float, float]:
    gen = LlamaCppGenerator(GeneratorConfig(name="smollm2", backend="llama-cpp", max_tokens=max_tokens,
                                            context_tokens=4096))
    messages = build_messages(get_template("ragnarok"), "how do I parse command-line arguments", CANDIDATES[:5],
                              3000, gen.count_tokens)
    llm = gen.llm()

    def raw() -> int:
        out = llm.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=0.0, seed=0)
        return out["usage"]["completion_tokens"]

    def ours() -> int:
        return len(llm.tokenize(gen.complete(messages).encode(), add_bos=False))

    rates: dict[str, list[float]] = {"raw": [], "ours": []}
    raw()  # warm-up
    for _ in range(runs):  # interleaved, same prompt, same settings
        for name, fn in (("raw", raw), ("ours", ours)):
            t = time.perf_counter()
            tokens = fn()
            rates[name].append(tokens / (time.perf_counter() - t))
    return statistics.median(rates["raw"]), statistics.median(rates["ours"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--llm-runs", type=int, default=3)
    args = ap.parse_args()
    ms = postprocess_ms(args.repeats)
    p95 = statistics.quantiles(ms, n=20)[-1]
    print(f"prompt building + post-processing: mean {statistics.fmean(ms):.3f} ms, p95 {p95:.3f} ms per answer "
          f"(goal <= 2 ms: {'met' if p95 <= 2 else 'NOT met'})")
    raw, ours = llm_tokens_per_s(args.llm_runs)
    print(f"embedded SmolLM2-135M: raw llama-cpp {raw:.1f} tokens/s, through our generator {ours:.1f} tokens/s, "
          f"ratio {ours / raw:.3f} (goal >= 0.90: {'met' if ours / raw >= 0.9 else 'NOT met'})")


if __name__ == "__main__":
    main()
