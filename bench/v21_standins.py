"""Stand-ins for the track's real prebuilt parts, small enough to build on 2 cores in a minute: a V2.1-shaped
segment collection, its BM25 index, and the 10 Arctic-embed-L HNSW-int8 shards, each built by the tool that built
the real one (``ragnarok index``, i.e. Anserini's ``IndexCollection``; Anserini's ``IndexHnswDenseVectors
-quantize.int8``) and put under pyserini's own directory names (``<tarball without .tar.gz>.<md5>``, from the
catalogue in Anserini's jar) in a cache directory, as pyserini unpacks them.

The shards' vectors are MiniLM's, encoded by Arctic-embed-L's recipe (CLS pooling, normalised; the query prefix
at query time): ``arctic_dir`` is all-MiniLM-L6-v2's files with its pooling set to CLS, which
``RAGNAROK_ARCTIC_MODEL`` points the ``arctic-l`` encoder at. Segments are cut to their first sentences so that
encoding them stays cheap; their docids, fields and offsets keep V2.1's shape.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_corpus  # noqa: E402

BM25 = "msmarco-v2.1-doc-segmented"
ARCTIC_SET = "msmarco-v2.1-doc-segmented.arctic-embed-l"
SEGMENT_CHARS = 320  # a stand-in segment's text: about its first two sentences


@dataclass
class StandIns:
    cache: Path  # pyserini's cache layout: every index under its catalogue directory name
    collection: Path  # the segments (JSONL, V2.1's fields)
    bm25: Path  # the BM25 index in the cache
    shards: list[Path]
    arctic: Path  # the query encoder's directory (RAGNAROK_ARCTIC_MODEL)
    docids: list[str]
    vectors: np.ndarray  # the segments' vectors, row i for docids[i] (exact search's reference)

    def env(self) -> dict[str, str]:
        """The environment that makes ``ragnarok`` find them: pyserini's cache and the Arctic encoder."""
        return {"PYSERINI_CACHE": str(self.cache.parent), "RAGNAROK_ARCTIC_MODEL": str(self.arctic)}


def arctic_dir(out: Path) -> Path:
    """all-MiniLM-L6-v2's files, pooling by CLS as Arctic-embed-L's card says (its weights, MiniLM's)."""
    from ragnarok.stages.embed.encoder import resolve_model  # noqa: PLC0415

    target = out / "arctic-standin"
    if not target.exists():
        shutil.copytree(resolve_model("minilm"), target)
        pooling = target / "1_Pooling" / "config.json"
        config = json.loads(pooling.read_text(encoding="utf-8"))
        config.update(pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
        pooling.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return target


def _short(record: dict) -> dict:
    text = record["segment"][:SEGMENT_CHARS].rsplit(" ", 1)[0]
    record.update(segment=text, end_char=record["start_char"] + len(text))
    record["contents"] = f"{record['title']}\n{record['headings']}\n{text}"
    return record


def write_collection(path: Path, size: int, seed: int = 0) -> list[dict]:
    full = path.with_suffix(".full.jsonl")
    scale_corpus.write_collection(full, size, seed)
    records = [_short(json.loads(line)) for line in full.read_text(encoding="utf-8").splitlines()]
    full.unlink()
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return records


def write_shards(
    cache: Path, docids: list[str], vectors: np.ndarray, int8: bool = True, shards: int = 10
) -> list[Path]:
    """The Arctic set's shards (the first ``shards`` of its 10) over ``vectors``, in ``cache`` under their
    catalogue directory names (those already there are kept)."""
    from ragnarok.stages.retrieve import prebuilt  # noqa: PLC0415
    from ragnarok.stages.retrieve.lucene_hnsw import write_lucene_hnsw  # noqa: PLC0415

    cache.mkdir(parents=True, exist_ok=True)
    entries = prebuilt.sets()[ARCTIC_SET]
    bounds = [len(docids) * i // len(entries) for i in range(len(entries) + 1)]
    dirs = []
    for n, entry in enumerate(entries[:shards]):
        shard = cache / entry.dir_name
        if not shard.exists():
            write_lucene_hnsw(vectors[bounds[n] : bounds[n + 1]], docids[bounds[n] : bounds[n + 1]], shard, int8=int8)
        dirs.append(shard)
    return dirs


def build(out: Path, size: int = 600, seed: int = 0) -> StandIns:
    """Build every stand-in under ``out`` (what is there already is kept): the collection, its BM25 index and
    the 10 HNSW-int8 shards in ``out/pyserini/indexes``."""
    from ragnarok.stages.embed.encoder import Encoder  # noqa: PLC0415
    from ragnarok.stages.retrieve import prebuilt  # noqa: PLC0415

    out.mkdir(parents=True, exist_ok=True)
    cache = out / "pyserini" / "indexes"
    cache.mkdir(parents=True, exist_ok=True)
    collection = out / "segments.jsonl"
    records = (
        write_collection(collection, size, seed)
        if not collection.exists()
        else [json.loads(line) for line in collection.read_text(encoding="utf-8").splitlines()]
    )
    docids = [r["docid"] for r in records]
    bm25 = cache / prebuilt.catalogue()[BM25].dir_name
    if not bm25.exists():
        subprocess.run(
            [sys.executable, "-m", "ragnarok.cli", "index", str(collection), str(bm25)],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
    arctic = arctic_dir(out)
    vectors_file = out / "vectors.npy"
    if not vectors_file.exists():
        encoder = Encoder(str(arctic), backend="torch")  # documents: no query prefix
        np.save(vectors_file, encoder.encode([r["segment"] for r in records]))
    vectors = np.load(vectors_file)
    return StandIns(cache, collection, bm25, write_shards(cache, docids, vectors), arctic, docids, vectors)
