"""The kinds of dense index, chosen at build time and recorded in ``meta.json`` (``kind`` and ``params``).

- ``flat``: exact inner-product search (``IndexFlatIP``), read memory-mapped (``IO_FLAG_MMAP_IFC``): the
  service maps the file rather than holding it on its heap. Linear in the collection.
- ``hnsw``: FAISS HNSW over the float vectors (``IndexHNSWFlat``): sublinear, about 1.1x the vectors' size.
- ``hnsw-sq8``: FAISS HNSW over 8-bit scalar-quantised codes (``IndexHNSWSQ``): sublinear, about a third of
  ``hnsw``'s size (the codes are 4x smaller than float32; the graph's links are the rest).
- ``lucene-hnsw``: Anserini's HNSW dense-vector index (the form of the track's prebuilt Arctic-embed indexes),
  built and searched through pyserini's jar (:mod:`ragnarok.stages.retrieve.lucene_hnsw`).
- ``auto`` (the default): ``flat`` up to ``dense_exact_max_segments`` segments, ``hnsw-sq8`` past it.

Nothing is imported at module import beyond the standard library (FAISS loads on first use).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragnarok.stages.embed.errors import DenseIndexMismatchError

KINDS = ("flat", "hnsw", "hnsw-sq8", "lucene-hnsw")
CHOICES = (*KINDS, "auto")
FAISS_KINDS = ("flat", "hnsw", "hnsw-sq8")
# measured on MiniLM vectors of the demo's segments mixed with noise (docs/SCALE.md): M 32 / efConstruction 100
# / efSearch 256 keeps recall@100 at 0.99 against exact search at 100k for queries near their documents (0.98 at
# efSearch 128); queries far from every document (TREC topics over the demo) need more (0.70 at 256, 0.86 at 512)
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 100
HNSW_EF_SEARCH = 256
SQ8_TRAIN_ROWS = 20_000  # the scalar quantiser's per-dimension ranges (min, max) are learnt on this many rows
# the FAISS class each kind's file holds (what `faiss.read_index` returns)
FAISS_CLASSES = {"flat": "IndexFlatIP", "hnsw": "IndexHNSWFlat", "hnsw-sq8": "IndexHNSWSQ"}


def check_kind(kind: str) -> str:
    """``kind`` when it is one of :data:`CHOICES`; a :class:`ValueError` naming them otherwise."""
    if kind not in CHOICES:
        raise ValueError(f"unknown dense index kind {kind!r}: choose one of {', '.join(CHOICES)}")
    return kind


def resolve_kind(kind: str, count: int, exact_max: int | None = None) -> str:
    """The kind ``auto`` stands for with ``count`` segments: ``flat`` up to ``exact_max`` (the
    ``dense_exact_max_segments`` setting when None), else ``hnsw-sq8``; any other kind as it is."""
    check_kind(kind)
    if kind != "auto":
        return kind
    if exact_max is None:
        from ragnarok.core.settings import get_settings  # noqa: PLC0415

        exact_max = get_settings().dense_exact_max_segments
    return "flat" if count <= exact_max else "hnsw-sq8"


def params(kind: str) -> dict[str, Any]:
    """The build and search parameters recorded in meta.json for ``kind``."""
    if kind in ("hnsw", "hnsw-sq8"):
        return {
            "M": HNSW_M,
            "efConstruction": HNSW_EF_CONSTRUCTION,
            "efSearch": HNSW_EF_SEARCH,
            **({"quantizer": "QT_8bit"} if kind == "hnsw-sq8" else {}),
        }
    if kind == "lucene-hnsw":
        return {"M": 16, "efConstruction": 100, "efSearch": HNSW_EF_SEARCH}
    return {}


def new_index(kind: str, dim: int) -> Any:
    """An empty FAISS index of ``kind`` over inner product (``hnsw-sq8`` still needs training)."""
    import faiss  # noqa: PLC0415

    if kind == "flat":
        return faiss.IndexFlatIP(dim)
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    elif kind == "hnsw-sq8":
        index = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_8bit, HNSW_M, faiss.METRIC_INNER_PRODUCT)
    else:
        raise ValueError(f"{kind!r} is not a FAISS dense index kind ({', '.join(FAISS_KINDS)})")
    index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
    return index


def read_index(path: Path, kind: str, dim: int) -> Any:
    """The FAISS index in ``path`` (memory-mapped for ``flat``), checked to be of ``kind`` and ``dim``: a
    :class:`DenseIndexMismatchError` naming the difference otherwise (never a crash deep in FAISS)."""
    import faiss  # noqa: PLC0415

    if kind not in FAISS_CLASSES:
        raise DenseIndexMismatchError(
            f"the dense index at {path.parent} records the kind {kind!r}, which this "
            f"version does not know ({', '.join(KINDS)})"
        )
    try:
        index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC if kind == "flat" else 0)
    except RuntimeError as exc:
        raise DenseIndexMismatchError(
            f"unreadable dense index file {path}: {(str(exc).strip().splitlines() or [''])[-1]}"
        ) from None
    found = type(index).__name__  # read_index gives the concrete class
    if found != FAISS_CLASSES[kind]:
        raise DenseIndexMismatchError(
            f"the dense index at {path.parent} says it is {kind} (meta.json) but its "
            f"file holds a {found}, not a {FAISS_CLASSES[kind]}: rebuild it"
        )
    if index.d != dim:
        raise DenseIndexMismatchError(
            f"the dense index at {path.parent} holds {index.d}-dimensional vectors but "
            f"its meta.json says {dim}: rebuild it"
        )
    return index


def search_params(kind: str, k: int, ef_search: int) -> Any:
    """FAISS search parameters for ``kind`` (HNSW's breadth, at least ``k``), None for ``flat``."""
    if kind not in ("hnsw", "hnsw-sq8"):
        return None
    import faiss  # noqa: PLC0415

    return faiss.SearchParametersHNSW(efSearch=max(ef_search, k))


def size_estimate(kind: str, count: int, dim: int) -> int:
    """Bytes the index of ``kind`` takes for ``count`` vectors of ``dim`` (the disk check's estimate)."""
    links = count * HNSW_M * 2 * 4 * 1.1  # level 0 has 2M links of 4 bytes; upper levels add ~10 %
    per_kind = {
        "flat": count * dim * 4,
        "hnsw": count * dim * 4 + links,
        "hnsw-sq8": count * dim + links,
        "lucene-hnsw": count * dim * 4 * 2.2 + links,
    }  # JSON vectors written, then the index
    return int(per_kind.get(kind, count * dim * 4))
