"""Lucene HNSW dense indexes through Anserini (pyserini's jar): the form of the track's prebuilt Arctic-embed
indexes (``msmarco-v2.1-doc-segmented-shardNN.arctic-embed-l.hnsw-int8``).

- :func:`write_lucene_hnsw` writes vectors as a ``JsonDenseVectorCollection`` (``{"docid", "vector"}`` lines) and
  indexes them with Anserini's ``IndexHnswDenseVectors`` (``DenseVectorDocumentGenerator``, M 16, efC 100).
- :class:`LuceneHnsw` searches one with Anserini's ``HnswDenseSearcher`` by query vector (encoded by our
  :class:`~ragnarok.stages.embed.encoder.Encoder`; Anserini's own ONNX encoders are not used).
- :func:`resolve_prebuilt` finds a prebuilt index by name in ``<prebuilt_dir>/NAME/`` (this machine may not
  download), with the query encoder it needs: ``ragnarok-prebuilt.json`` beside it (``{"encoder": MODEL}``)
  or the model its catalog name says (``arctic-embed-l``: ``arctic-l``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from ragnarok.stages.embed.errors import DenseIndexMismatchError, DenseIndexNotFoundError
from ragnarok.stages.retrieve.dense_kinds import params

PREBUILT_META = "ragnarok-prebuilt.json"
# a catalog name's model part -> our model name (the query encoder the prebuilt vectors need)
CATALOG_ENCODERS = {"arctic-embed-l": "arctic-l"}
WRITE_ROWS = 10_000  # vectors per JSON write while preparing the collection


def write_lucene_hnsw(vectors: np.ndarray, docids: list[str], index_dir: Path, threads: int = 2) -> None:
    """Index ``vectors`` (L2-normalised rows) under ``docids`` into a new Lucene HNSW index at ``index_dir``
    (which must not exist; the caller puts the finished index in place)."""
    from jnius import autoclass  # noqa: PLC0415

    from ragnarok.core.java import is_verbose, start_jvm  # noqa: PLC0415

    collection = index_dir.with_name(index_dir.name + ".jsonl")
    collection.mkdir(parents=True, exist_ok=True)
    try:
        with open(collection / "vectors.jsonl", "w", encoding="utf-8") as out:
            for start in range(0, len(docids), WRITE_ROWS):
                rows = np.asarray(vectors[start:start + WRITE_ROWS], dtype=np.float32)
                out.writelines(json.dumps({"docid": d, "vector": v}) + "\n"
                               for d, v in zip(docids[start:start + WRITE_ROWS], rows.tolist()))
        hnsw = params("lucene-hnsw")
        start_jvm()
        args = ["-collection", "JsonDenseVectorCollection", "-input", str(collection), "-index", str(index_dir),
                "-generator", "DenseVectorDocumentGenerator", "-threads", str(threads),
                "-M", str(hnsw["M"]), "-efC", str(hnsw["efConstruction"]), *(() if is_verbose() else ("-quiet",))]
        autoclass("io.anserini.index.IndexHnswDenseVectors").main(args)
    finally:
        shutil.rmtree(collection, ignore_errors=True)
    if not (index_dir / "segments_1").exists() and not list(index_dir.glob("segments_*")):
        raise RuntimeError(f"Anserini wrote no HNSW index to {index_dir}; run with --verbose to see its log")


class LuceneHnsw:
    """Anserini's ``HnswDenseSearcher`` over a Lucene HNSW index, searched by query vector."""

    def __init__(self, index_dir: Path, dim: int = 0):
        from ragnarok.core.java import start_jvm  # noqa: PLC0415

        if not list(Path(index_dir).glob("segments_*")):
            raise DenseIndexNotFoundError(f"no Lucene HNSW index at {index_dir}")
        start_jvm()
        from jnius import autoclass  # noqa: PLC0415

        args = autoclass("io.anserini.search.HnswDenseSearcher$Args")()
        args.index = str(index_dir)
        args.efSearch = int(params("lucene-hnsw")["efSearch"])
        try:
            self.object = autoclass("io.anserini.search.HnswDenseSearcher")(args)
        except Exception as exc:  # noqa: BLE001 - a JavaException: not an HNSW index
            raise DenseIndexMismatchError(f"{index_dir} is not a Lucene HNSW dense index: "
                                          f"{(str(exc).strip().splitlines() or [''])[0]}") from None
        self.index_dir, self.dim = Path(index_dir), dim

    def search(self, vector: np.ndarray, k: int, ef_search: int = 0) -> list[tuple[str, float]]:
        """``(docid, cosine)`` of the ``k`` nearest, best first. Lucene scores a dot product ``d`` as
        ``(1 + d) / 2``; it is turned back into ``d`` (as FAISS's inner product gives it)."""
        try:
            hits = self.object.search([float(x) for x in vector.tolist()], int(k))
        except Exception as exc:  # noqa: BLE001 - e.g. a vector of another dimension than the field's
            raise DenseIndexMismatchError(f"the Lucene HNSW index at {self.index_dir} refused a "
                                          f"{len(vector)}-dimensional query vector: "
                                          f"{(str(exc).strip().splitlines() or [''])[0]}") from None
        return [(str(hit.docid), 2.0 * float(hit.score) - 1.0) for hit in hits]


def resolve_prebuilt(name: str, prebuilt_dir: Path) -> dict[str, Any]:
    """The meta of the prebuilt Lucene HNSW index ``name``: ``{kind, dir, model, dim: 0}`` (its dimension is
    checked at search). ``<prebuilt_dir>/NAME/`` must hold it; when it does not, the error says what to
    download and where to unpack it."""
    where = Path(prebuilt_dir) / name
    if not list(where.glob("segments_*")):
        raise DenseIndexNotFoundError(
            f"the prebuilt index {name} is not on this machine: download it where there is network "
            f"({_catalog_url(name) or 'see pyserini prebuilt indexes'}) and unpack it so that its Lucene files "
            f"are in {where}/ (RAGNAROK_PREBUILT_DIR sets {prebuilt_dir})")
    model = None
    if (where / PREBUILT_META).is_file():
        model = json.loads((where / PREBUILT_META).read_text(encoding="utf-8")).get("encoder")
    model = model or next((ours for part, ours in CATALOG_ENCODERS.items() if f".{part}." in f".{name}."), None)
    if not model:
        raise DenseIndexMismatchError(
            f"the query encoder of the prebuilt index {name} is not known here: write "
            f'{{"encoder": "MODEL"}} into {where / PREBUILT_META}')
    return {"kind": "lucene-hnsw", "dir": str(where), "model": model, "dim": 0, "prebuilt": name}


def _catalog_url(name: str) -> str | None:
    """The download URL pyserini's catalog (Anserini's ``PrebuiltHnswIndex``) gives ``name``, if it knows it."""
    try:
        from jnius import autoclass  # noqa: PLC0415

        from ragnarok.core.java import start_jvm  # noqa: PLC0415

        start_jvm()
        entry = autoclass("io.anserini.index.prebuilt.PrebuiltHnswIndex").get(name)
        return str(entry.urls[0]) if entry is not None and entry.urls else None
    except Exception:  # noqa: BLE001 - no Java, or an older jar: the message goes without the URL
        return None
