"""Pointwise rerankers (monoT5, cross-encoder): candidates per second, and the share of our code around the model.

    python bench/bench_pointwise.py [--models tiny-monot5,tiny-ce,...] [--candidates 100] [--words 200]
                                    [--batch 16] [--rounds 3] [--threads 2] [--device cpu]

Every model is built here, randomly initialised, and saved to a temporary directory (no download): the ``tiny``
ones are the tests' (2 layers, width 32), so their time is mostly our code's; the others have the layer
count, width and vocabulary of the real checkpoints they are named after, so they cost what those cost to
run (random weights change the scores, not the arithmetic). Each is loaded by path through the registry as a
user's would be, then timed, after a warm-up, on ``--candidates`` candidates of ``--words`` words (one token
each with the word-level test tokenizer: about what a 10-sentence MS MARCO V2.1 segment is in T5 tokens):

* ``rerank``: ``reranker.rerank(request, 20)``, all of it (tokenising, batching, scoring, sorting);
* ``model``: the library call alone on the same inputs (monoT5: the forward pass on pre-built tensors;
  cross-encoder: ``CrossEncoder.predict`` on the same pairs and batch size);
* ``ours``: ``1 - model / rerank``, the share of the time spent outside the library call.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ragnarok.core.settings import Settings  # noqa: E402
from ragnarok.core.types import Request  # noqa: E402
from ragnarok.service.retrieval_service import RerankService  # noqa: E402
from ragnarok.stages.rerank.embedding import candidate_texts  # noqa: E402
from ragnarok.stages.rerank.tiny import CORPUS, build_tiny_cross_encoder, build_tiny_monot5  # noqa: E402

# name -> (reranker, builder, builder arguments): sizes of the real checkpoints named
MODELS = {
    "tiny-monot5": ("monot5", build_tiny_monot5, {}),
    "tiny-ce": ("crossencoder", build_tiny_cross_encoder, {}),
    "minilm-l6-ce": (
        "crossencoder",
        build_tiny_cross_encoder,  # cross-encoder/ms-marco-MiniLM-L-6-v2
        {"layers": 6, "hidden": 384, "heads": 12, "vocab_size": 30522},
    ),
    "bert-base-ce": (
        "crossencoder",
        build_tiny_cross_encoder,  # BAAI/bge-reranker-base's encoder size
        {"layers": 12, "hidden": 768, "heads": 12, "vocab_size": 30522},
    ),
    "monot5-base": (
        "monot5",
        build_tiny_monot5,  # castorini/monot5-base-msmarco-10k (T5-base)
        {"layers": 12, "hidden": 768, "heads": 12, "vocab_size": 32128},
    ),
    "monot5-3b": (
        "monot5",
        build_tiny_monot5,  # castorini/monot5-3b-msmarco-10k (T5-3B): 11 GB in float32
        {"layers": 24, "hidden": 1024, "heads": 32, "head_dim": 128, "ffn": 16384, "vocab_size": 32128},
    ),
}
DEFAULT = "tiny-monot5,tiny-ce,minilm-l6-ce,bert-base-ce,monot5-base"


def request_of(n: int, words: int) -> Request:
    vocab = " ".join(CORPUS).split()
    texts = [" ".join(vocab[(i * 7 + j) % len(vocab)] for j in range(words)) for i in range(n)]
    return Request.model_validate(
        {
            "query": {"text": "how do i compress a file with gzip", "qid": "q"},
            "candidates": [
                {"docid": f"d{i}", "score": float(n - i), "doc": {"segment": t}} for i, t in enumerate(texts)
            ],
        }
    )


def model_only(reranker, request: Request) -> float:
    """Seconds the library call alone takes on the same inputs, batch by batch."""
    import torch  # noqa: PLC0415

    model = reranker._loaded()
    docs = candidate_texts(request)
    order = sorted(range(len(docs)), key=lambda i: -len(docs[i]))
    batches = [[docs[i] for i in order[s : s + reranker.batch_size]] for s in range(0, len(order), reranker.batch_size)]
    if reranker.kind == "monoT5":
        prepared = []
        for batch in batches:
            rows = reranker.input_ids(model, request.query.text, batch)
            width = max(map(len, rows))
            ids = torch.tensor([r + [0] * (width - len(r)) for r in rows]).to(model.device)
            mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows]).to(model.device)
            prepared.append((ids, mask, torch.zeros((len(rows), 1), dtype=torch.long).to(model.device)))
        start = time.perf_counter()
        with torch.inference_mode():
            for ids, mask, dec in prepared:
                model.model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits[:, 0, :].cpu()
        return time.perf_counter() - start
    pairs = [(request.query.text, d) for batch in batches for d in batch]
    start = time.perf_counter()
    model.predict(pairs, batch_size=reranker.batch_size, show_progress_bar=False, activation_fn=torch.nn.Identity())
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT, help=f"comma-separated, from {', '.join(MODELS)}")
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--words", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default=None, help="cpu, cuda (default: CUDA when there is one)")
    args = parser.parse_args()
    import torch  # noqa: PLC0415

    torch.set_num_threads(args.threads)
    request = request_of(args.candidates, args.words)
    print(
        f"{args.candidates} candidates of {args.words} words, batch {args.batch}, {args.threads} torch threads, "
        f"torch {torch.__version__}, device {args.device or ('cuda' if torch.cuda.is_available() else 'cpu')}"
    )
    print(f"{'model':<14} {'params':>8} {'load s':>7} {'rerank s':>9} {'cand/s':>8} {'model s':>8} {'ours':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            kind, build, kwargs = MODELS[name]
            path = build(Path(tmp) / name, **kwargs)
            settings = Settings(
                data_dir=Path(tmp) / "data",
                pointwise_batch_size=args.batch,
                pointwise_device=args.device,
                **{"monot5_model" if kind == "monot5" else "cross_encoder_model": str(path)},
            )
            reranker = RerankService(settings).get(kind)
            start = time.perf_counter()
            loaded = reranker._loaded()
            load_s = time.perf_counter() - start
            module = loaded.model if kind == "monot5" else loaded
            params = sum(p.numel() for p in module.parameters())
            reranker.rerank(request_of(args.batch, args.words), 20)  # warm-up
            rerank = functools.partial(reranker.rerank, request, 20)
            rerank_s = min(_timed(rerank) for _ in range(args.rounds))
            model_s = min(model_only(reranker, request) for _ in range(args.rounds))
            print(
                f"{name:<14} {params / 1e6:>7.1f}M {load_s:>7.2f} {rerank_s:>9.3f} "
                f"{args.candidates / rerank_s:>8.1f} {model_s:>8.3f} {1 - model_s / rerank_s:>6.1%}",
                flush=True,
            )


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


if __name__ == "__main__":
    main()
