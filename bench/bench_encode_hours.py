"""How long encoding MS MARCO V2.1 (113,520,750 segments) takes, on this machine's CPU or GPU: segments/s per model.

    python bench/bench_encode_hours.py [--device cpu|cuda] [--models minilm,arctic-l] [--seconds 20] --json OUT

The cost of a transformer encoder depends on its shape and the number of tokens, not on its weights, so each
model is built from its architecture alone (a BERT config with random weights, no download, no model files):

* ``minilm``: all-MiniLM-L6-v2 (6 layers, 384 wide), inputs of 256 tokens, its maximum: V2.1 segments average
  about 1,500 characters (~350 word pieces), so nearly all are truncated to 256;
* ``arctic-l``: Snowflake Arctic-Embed-L, the track's dense model (BERT-large: 24 layers, 1024 wide), inputs of
  512 tokens, its maximum, as the prebuilt V2.1 Arctic-embed indexes were encoded.

Batches of ``--batch`` full-length inputs run forward (mean pooling, as both models pool) for ``--seconds``
after a warm-up; float16 on a GPU (as encoding at scale runs there), float32 on a CPU. Tokenisation is not
timed (a fast tokenizer does tens of thousands of segments/s per core, off the GPU). Prints one JSON object:
segments/s per model and the hours 113.5 M segments take at that rate, on one device, and the p50 latency of
encoding one 32-token query (what a service pays per request).

Needs only torch and transformers (it runs on a bare GPU machine without this project installed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

V21_SEGMENTS = 113_520_750
QUERY_TOKENS = 32
SHAPES = {  # BERT shapes: (layers, hidden, heads, intermediate, tokens)
    "minilm": (6, 384, 12, 1536, 256),
    "arctic-l": (24, 1024, 16, 4096, 512),
}


def measure(name: str, device: str, batch: int, seconds: float) -> dict[str, float | int | str]:
    import torch  # noqa: PLC0415
    from transformers import BertConfig, BertModel  # noqa: PLC0415

    layers, hidden, heads, inter, tokens = SHAPES[name]
    config = BertConfig(
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=inter,
        max_position_embeddings=512,
        vocab_size=30522,
    )
    dtype = torch.float16 if device == "cuda" else torch.float32
    model = BertModel(config).to(device=device, dtype=dtype).eval()
    ids = torch.randint(1000, 30000, (batch, tokens), device=device)
    mask = torch.ones_like(ids)

    def step() -> None:
        with torch.inference_mode():
            out = model(input_ids=ids, attention_mask=mask).last_hidden_state
            pooled = (out * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
            torch.nn.functional.normalize(pooled.float(), dim=-1).cpu()  # the vectors leave the device

    for _ in range(3):
        step()
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        step()
        done += batch
    rate = done / (time.perf_counter() - start)
    ids, mask = ids[:1, :QUERY_TOKENS], mask[:1, :QUERY_TOKENS]  # one query of 32 tokens, as a service encodes
    latencies = []
    for _ in range(23):
        start = time.perf_counter()
        step()
        latencies.append((time.perf_counter() - start) * 1000)
    return {
        "model": name,
        "tokens": tokens,
        "batch": batch,
        "dtype": str(dtype).removeprefix("torch."),
        "segments_per_s": round(rate, 1),
        "v21_hours": round(V21_SEGMENTS / rate / 3600, 2),
        "query_p50_ms": round(sorted(latencies[3:])[10], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--models", default="minilm,arctic-l")
    parser.add_argument("--batch", type=int, default=0, help="inputs per batch (0: 256 on cuda, 16 on cpu)")
    parser.add_argument("--seconds", type=float, default=20.0, help="timed seconds per model")
    parser.add_argument("--json", default=None, help="also write the result here")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads torch uses (0: its default)")
    args = parser.parse_args()
    import torch  # noqa: PLC0415

    if args.threads:
        torch.set_num_threads(args.threads)

    batch = args.batch or (256 if args.device == "cuda" else 16)
    machine = {
        "cpu_cores": os.cpu_count(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    if args.device == "cuda":
        machine["gpu"] = torch.cuda.get_device_name(0)
    rows = [measure(name, args.device, batch, args.seconds) for name in args.models.split(",")]
    result = {"device": args.device, "machine": machine, "models": rows}
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
