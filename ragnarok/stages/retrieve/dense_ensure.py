"""A Lucene index's dense index kept up to date: built beside it when missing or stale, what a killed build left
removed. The CLI, the pipeline search and the R service's background builds (:mod:`ragnarok.stages.retrieve.building`)
all ask :func:`ensure_dense_index`; :mod:`ragnarok.collection.demo_index` re-exports it."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path


def ensure_dense_index(
    lucene_dir: Path,
    model: str,
    kind: str = "auto",
    force: bool = False,
    batch_size: int = 256,
    progress: Callable[[int, int], None] | None = None,
    sentence_store: bool | None = None,
    shards: int = 1,
) -> Path:
    """The dense index of ``model`` beside ``lucene_dir``, encoded from its stored segments when it is missing,
    stale (the Lucene index was rebuilt since, or it is of another kind: :func:`~ragnarok.stages.retrieve.dense.
    stale_reason`), or ``force``. ``kind``: :mod:`ragnarok.stages.retrieve.dense_kinds` (``auto``: by the number of
    segments); ``shards``: FAISS shards searched in parallel. ``progress(done, total)`` is called once the total
    is known (done 0, or what a resumed build had encoded), then after each ``batch_size`` segments.
    ``sentence_store``: with its sentence store (:mod:`ragnarok.stages.embed.vectors`; a dense index without one
    answers the same, encoding sentences as answers need them); None: when the collection has at most
    ``sentence_store_max_segments`` segments (:func:`store_by_default`, which says what it chose and why). A build interrupted or killed resumes from its
    last checkpoint (:mod:`ragnarok.stages.retrieve.dense_chunks`)."""
    from ragnarok.stages.retrieve.anserini import LuceneSearcher  # noqa: PLC0415
    from ragnarok.stages.retrieve.dense import dense_dir  # noqa: PLC0415
    from ragnarok.stages.retrieve.dense_build import build_dense_index, segments_from_lucene  # noqa: PLC0415
    from ragnarok.stages.retrieve.dense_kinds import check_kind  # noqa: PLC0415

    check_kind(kind)
    out = dense_dir(lucene_dir, model)
    reason = dense_build_reason(lucene_dir, model, kind, force)
    if reason is None and shards in (1, _shards(out)):
        return out
    if reason not in (None, "missing", "forced"):
        print(f"rebuilding the dense index at {out}: {reason}", file=sys.stderr, flush=True)
    remove_abandoned(out)
    searcher = LuceneSearcher(lucene_dir)
    total = searcher.num_docs
    searcher.close()
    if sentence_store is None:
        sentence_store = store_by_default(total)
    if progress is not None:
        progress(0, total)
    build_dense_index(
        segments_from_lucene(lucene_dir, with_segment=True),
        out,
        model,
        kind,  # type: ignore[arg-type]
        batch_size=batch_size,
        total=total,
        lucene_dir=lucene_dir,
        progress=None if progress is None else lambda done: progress(done, total),
        sentence_store=sentence_store,
        shards=shards,
    )
    return out


def store_by_default(segments: int) -> bool:
    """Whether a dense build of ``segments`` segments writes the sentence store when not told: up to the
    ``sentence_store_max_segments`` setting. Says on stderr what it chose and what the store costs."""
    from ragnarok.core.settings import get_settings  # noqa: PLC0415
    from ragnarok.stages.retrieve.dense_build import STORE_BYTES_PER_SEGMENT  # noqa: PLC0415

    limit = get_settings().sentence_store_max_segments
    size = segments * STORE_BYTES_PER_SEGMENT / 1e6
    cost = f"~{size:,.0f} MB" if size < 1000 else f"~{size / 1000:,.1f} GB"
    if segments <= limit:
        print(
            f"sentence store: on ({segments:,} segments, at most {limit:,}; {cost}, about 65 % more encoding; "
            "--no-sentence-store leaves it out)",
            file=sys.stderr,
            flush=True,
        )
        return True
    print(
        f"sentence store: off ({segments:,} segments, more than {limit:,}: it would take {cost} and about 65 % "
        "more encoding; answers encode their sentences instead; --sentence-store builds it)",
        file=sys.stderr,
        flush=True,
    )
    return False


def _shards(out: Path) -> int:
    import json  # noqa: PLC0415

    try:
        return max(1, len(json.loads((out / "meta.json").read_text(encoding="utf-8")).get("shards") or [1]))
    except (OSError, ValueError):
        return 1


def dense_build_reason(lucene_dir: Path, model: str, kind: str = "auto", force: bool = False) -> str | None:
    """Why the dense index of ``model`` beside ``lucene_dir`` must be (re)built ("missing", "forced", or why it
    is stale), or None when it is up to date. Reads two small files: no JVM, no model."""
    from ragnarok.stages.retrieve.dense import dense_dir, is_dense_index, stale_reason  # noqa: PLC0415

    out = dense_dir(lucene_dir, model)
    if not is_dense_index(out):
        return "missing"
    if force:
        return "forced"
    return stale_reason(out, lucene_dir, model, kind)


def remove_abandoned(out: Path) -> None:
    """Remove what builds of ``out`` killed mid-way left beside it (``.NAME.partial-PID``, ``.NAME.old-PID``
    of processes that no longer run). They never look like an index (only a finished build is renamed to
    ``out``); this frees their space. ``.NAME.partial`` (a resumable build's checkpoints) is kept."""
    from ragnarok.stages.retrieve.dense_chunks import pid_running  # noqa: PLC0415

    for leftover in out.parent.iterdir() if out.parent.is_dir() else ():
        stem, _, pid = leftover.name.rpartition("-")
        if stem in (f".{out.name}.partial", f".{out.name}.old") and pid.isdigit() and not pid_running(int(pid)):
            shutil.rmtree(leftover, ignore_errors=True)
