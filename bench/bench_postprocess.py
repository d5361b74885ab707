"""Cost of the AG service's own work per answer (goal <= 2 ms): ``build_messages`` over 20 candidates of
~1,000 characters (the ragnarok template, a 3,000-token budget, so segments are truncated evenly) and
``postprocess`` of a ~300-word answer with mixed citation markers, a ``<think>`` block and a references
section. Inputs are generated from a fixed seed; the LLM call itself is not timed.

    python bench/bench_postprocess.py [--repeats 500] [--budget 3000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

from ragnarok.core.types import Candidate, Doc, word_count
from ragnarok.stages.generate.cite import postprocess
from ragnarok.stages.generate.prompts import approx_tokens, build_messages, get_template

TOPIC = "how does gzip compress files and how does it differ from zip"
VOCAB = (
    "gzip deflate compression file archive algorithm huffman coding lz77 window dictionary stream "
    "header checksum crc32 zlib format unix tool data bytes block ratio speed level decompress zip "
    "entries directory the a of to in and is for with that on by as it"
).split()


def _sentence(rng: random.Random, words: int) -> str:
    text = " ".join(rng.choice(VOCAB) for _ in range(words))
    return text[0].upper() + text[1:]


def candidates(rng: random.Random, n: int = 20, chars: int = 1000) -> list[Candidate]:
    out = []
    for i in range(n):
        text = ""
        while len(text) < chars:
            text += _sentence(rng, rng.randint(8, 25)) + (" [7]" if rng.random() < 0.1 else "") + ". "
        out.append(
            Candidate(
                docid=f"msmarco_v2.1_doc_{i:02d}#{i}_{i * 1000}",
                score=20.0 - i,
                doc=Doc(title=f"Gzip article {i}", segment=text[:chars].strip(), url=f"u{i}"),
            )
        )
    return out


def answer(rng: random.Random, words: int = 300) -> str:
    markers = ["[{a}]", "[{a}, {b}]", "[{a}][{b}]", "[{a}-{c}]", "[Doc {a}]"]
    parts = ["<think>The user asks about gzip. Contexts 1 and 4 look relevant [1].</think>", "## Answer"]
    total = 0
    while total < words:
        n = rng.randint(10, 22)
        a = rng.randint(1, 20)
        marker = rng.choice(markers).format(a=a, b=rng.randint(1, 20), c=min(20, a + 2))
        parts.append(f"{'- ' if rng.random() < 0.1 else ''}{_sentence(rng, n)} {marker}.")
        total += n
    parts.append("\nReferences:\n[1] Gzip article 0\n[2] Gzip article 1")
    return "\n".join(parts)


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()  # warm-up (template loading, regex compilation)
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def report(label: str, ms: list[float]) -> str:
    p95 = statistics.quantiles(ms, n=20)[-1]
    return f"{label:<34} mean {statistics.fmean(ms):6.3f} ms   p95 {p95:6.3f} ms"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=500)
    ap.add_argument("--budget", type=int, default=3000, help="max_prompt_tokens for build_messages")
    args = ap.parse_args()
    rng = random.Random(0)
    cands, text = candidates(rng), answer(rng)
    template, docids = get_template("ragnarok"), [c.docid for c in cands]
    messages = build_messages(template, TOPIC, cands, args.budget)
    refs, sentences = postprocess(text, docids)
    print(
        f"inputs: {len(cands)} candidates of {min(len(c.doc.segment) for c in cands)}-"
        f"{max(len(c.doc.segment) for c in cands)} chars; answer of {word_count(text)} words -> "
        f"{len(sentences)} sentences, {sum(word_count(s.text) for s in sentences)} words, "
        f"{len(refs)} references; "
        f"prompt {sum(approx_tokens(m['content']) for m in messages)} / {args.budget} approx. tokens"
    )

    build = timed(lambda: build_messages(template, TOPIC, cands, args.budget), args.repeats)
    fits = timed(lambda: build_messages(template, TOPIC, cands, 100_000), args.repeats)
    post = timed(lambda: postprocess(text, docids), args.repeats)
    both = timed(lambda: (build_messages(template, TOPIC, cands, args.budget), postprocess(text, docids)), args.repeats)
    print(report("build_messages (truncating)", build))
    print(report("build_messages (fits, no cut)", fits))
    print(report("postprocess", post))
    print(report("build_messages + postprocess", both))
    p95 = statistics.quantiles(both, n=20)[-1]
    print(
        f"per answer: mean {statistics.fmean(both):.3f} ms, p95 {p95:.3f} ms "
        f"(goal <= 2 ms: {'met' if p95 <= 2 else 'NOT met'}; {args.repeats} repeats)"
    )


if __name__ == "__main__":
    main()
