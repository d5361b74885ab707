"""Named pipelines. The paper-style rows are modeled on the Ragnarök paper's baselines (BM25, BM25+Rocchio,
fusion with Arctic-Embed-L and GTE-L, monoT5 and RankZephyr rerankers fused with their input, GPT-4o and
Command R+ answering); they need GPU models or API keys. ``offline`` is the best pipeline measured on this
machine with nothing but CPU models (docs/BENCHMARKS.md)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from ragnarok.core.spec import parse

FIRST_STAGE = "rrf(bm25+rocchio, dense:arctic-l, dense:gte-l)@3000"

PRESETS: dict[str, str] = {
    # retrieval rows
    "1a": "bm25@100",
    "1b": "bm25+rocchio@100",
    "1c": "rrf(bm25+rocchio, dense:arctic-l, dense:gte-l)@100",
    "1d": f"{FIRST_STAGE} | monot5@100~rrf",
    "1e": f"{FIRST_STAGE} | monot5@100~rrf | rankzephyr@20~rrf",
    "1f": f"{FIRST_STAGE} | monot5@100~rrf | rankzephyr:rho@20~rrf",
    # generation rows, over the paper's BM25 + RankZephyr retrieval
    "2a": "bm25@100 | rankzephyr@20 | gpt-4o:chatqa",
    "2b": "bm25@100 | rankzephyr@20 | command-r-plus:chatqa",
    "2c": "bm25@100 | rankzephyr@20 | llama-3.1-70b:chatqa",
    # runs on any fresh machine, offline
    "offline": "rrf(bm25+rocchio, dense:minilm)@100 | extractive",
    "offline-llm": "rrf(bm25+rocchio, dense:minilm)@100 | smollm2:ragnarok",
    "bm25-extractive": "bm25@100 | extractive",
    "rocchio-extractive": "bm25+rocchio@100 | extractive",
}

#: What ``POST /rag`` runs when no pipeline is given: the first of these whose retrievers the R service has
#: (``offline`` needs the dense MiniLM index, which ``ragnarok serve --no-dense`` does not build; an Anserini
#: REST index offers BM25 only).
DEFAULT_PIPELINES = ("offline", "rocchio-extractive", "bm25-extractive")


def resolve(spec_or_preset: str, data_dir: Path | None = None) -> str:
    """A preset's spec (built in, else saved by ``ragnarok optimize`` in ``data_dir``, default the settings'),
    or the argument itself when it names no preset."""
    name = spec_or_preset.strip()
    return PRESETS.get(name) or saved_presets(data_dir).get(name, spec_or_preset)


def presets_file(data_dir: Path | None = None) -> Path:
    """Where saved presets live: ``presets.yaml`` in the data directory (``name: spec`` lines)."""
    if data_dir is None:
        from ragnarok.core.settings import get_settings  # noqa: PLC0415

        data_dir = get_settings().data_dir
    return Path(data_dir) / "presets.yaml"


def saved_presets(data_dir: Path | None = None) -> dict[str, str]:
    """The presets ``ragnarok optimize`` saved (read on each call: a new one is seen at once); an unreadable
    file counts as none."""
    path = presets_file(data_dir)
    if not path.is_file():
        return {}
    import yaml  # noqa: PLC0415

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def save_preset(name: str, spec: str, data_dir: Path | None = None) -> Path:
    """Save ``spec`` (checked) under ``name``; a built-in preset's name is refused."""
    import yaml  # noqa: PLC0415

    if name in PRESETS:
        raise ValueError(f"{name!r} is a built-in preset: choose another name")
    if not name or not name.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise ValueError(f"a preset name is letters, digits, '-', '_' and '.', got {name!r}")
    parse(spec)
    path = presets_file(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = {**saved_presets(data_dir), name: spec}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(yaml.safe_dump(saved, sort_keys=True, allow_unicode=True), encoding="utf-8")
    tmp.replace(path)
    return path


def default_pipeline(available: Collection[str] | None) -> str:
    """The preset name of the first default pipeline whose retrievers are all ``available`` (names such as
    ``bm25+rocchio`` or ``dense:minilm``); the first when nothing is known, the last when none can run."""
    if available is None:
        return DEFAULT_PIPELINES[0]
    for name in DEFAULT_PIPELINES:
        if all(retriever in available for retriever in retrievers(name)):
            return name
    return DEFAULT_PIPELINES[-1]


def retrievers(preset: str) -> list[str]:
    """The retrievers a preset's first stage runs, by name (``bm25+rocchio``, ``dense:minilm``)."""
    return [s.name + (f":{s.arg}" if s.arg else "") for s in parse(PRESETS[preset]).sources()]
