"""Tiny, randomly initialised monoT5 and cross-encoder checkpoints, built offline, for tests and benchmarks.

Each is a real Hugging Face model directory (``config.json``, ``model.safetensors``, a fast tokenizer trained
here with the ``tokenizers`` library on a few sentences), so it is loaded by exactly the code that loads a real
checkpoint by path. Scores are meaningless; shapes, batching, truncation and the plumbing around them are real.
``layers``/``hidden`` also build full-size architectures with random weights, which cost what the real
checkpoints cost to run (what ``bench/bench_pointwise.py`` uses to give the figure per model size).
"""

from __future__ import annotations

from pathlib import Path

# Words the tokenizers learn (any others map to the unknown token): monoT5's prompt and its answer words,
# and the vocabulary of the tests' candidates.
CORPUS = [
    "Query: Document: Relevant: true false",
    "how do i compress a file with gzip and decompress it again",
    "the gzip module provides a simple interface to compress and decompress files like gnu gzip",
    "parse command line arguments with argparse options flags and positional arguments",
    "the capital of france is paris a city on the river seine",
    "sqlite3 database connection cursor execute query rows tables",
    "json encoder decoder dumps loads strings numbers lists objects",
    "threads processes locks queues asyncio event loop tasks futures",
    "what is the title segment text of this candidate number one two three",
]


def _word_tokenizer(special: list[str], unk: str, lowercase: bool):
    from tokenizers import Tokenizer, normalizers, pre_tokenizers  # noqa: PLC0415
    from tokenizers.models import WordLevel  # noqa: PLC0415
    from tokenizers.trainers import WordLevelTrainer  # noqa: PLC0415

    tok = Tokenizer(WordLevel(unk_token=unk))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), *([normalizers.Lowercase()] if lowercase else [])])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(CORPUS, WordLevelTrainer(special_tokens=special, min_frequency=1))
    return tok


def build_tiny_monot5(
    out: Path,
    layers: int = 2,
    hidden: int = 32,
    heads: int = 2,
    seed: int = 0,
    ffn: int | None = None,
    head_dim: int | None = None,
    vocab_size: int | None = None,
) -> Path:
    """A T5ForConditionalGeneration with a word-level tokenizer (``</s>`` appended, like T5's) in ``out``
    (``ffn`` defaults to 4 × ``hidden``, ``head_dim`` to ``hidden // heads``; ``vocab_size`` to the
    tokenizer's, or more: a real model's embedding and output sizes)."""
    import torch  # noqa: PLC0415
    from tokenizers.processors import TemplateProcessing  # noqa: PLC0415
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration  # noqa: PLC0415

    tok = _word_tokenizer(["<pad>", "</s>", "<unk>"], "<unk>", lowercase=False)
    tok.post_processor = TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", tok.token_to_id("</s>"))]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", model_max_length=512
    )
    torch.manual_seed(seed)
    config = T5Config(
        vocab_size=max(tok.get_vocab_size(), vocab_size or 0),
        d_model=hidden,
        d_kv=head_dim or hidden // heads,
        d_ff=ffn or hidden * 4,
        num_layers=layers,
        num_decoder_layers=layers,
        num_heads=heads,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    model = T5ForConditionalGeneration(config).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_tiny_cross_encoder(
    out: Path,
    layers: int = 2,
    hidden: int = 32,
    heads: int = 2,
    seed: int = 0,
    vocab_size: int | None = None,
    id2label: dict[int, str] | None = None,
) -> Path:
    """A BertForSequenceClassification (one label; ``id2label``: one per entry, e.g. an NLI model's three)
    with a word-level ``[CLS] a [SEP] b [SEP]`` tokenizer."""
    import torch  # noqa: PLC0415
    from tokenizers.processors import TemplateProcessing  # noqa: PLC0415
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast  # noqa: PLC0415

    tok = _word_tokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], "[UNK]", lowercase=True)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=512,
    )
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=max(tok.get_vocab_size(), vocab_size or 0),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=hidden * 4,
        max_position_embeddings=512,
        num_labels=len(id2label) if id2label else 1,
        **({"id2label": id2label, "label2id": {v: k for k, v in id2label.items()}} if id2label else {}),
    )
    model = BertForSequenceClassification(config).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
