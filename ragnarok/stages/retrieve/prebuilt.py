"""pyserini's prebuilt indexes by their catalogue names, found on this machine without touching the network.

The catalogue is read from the fatjar pyserini ships, and a name is looked for under pyserini's and Anserini's
directory names in the known caches; one that is missing fails at once with :class:`PrebuiltMissing`, naming
the command that downloads it and the disk it needs. A set is a catalogue's sharded index seen as one.

Design notes: docs/internals/retrieve.md.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ragnarok.core.java import anserini_jar
from ragnarok.core.registry import UnknownComponentError

# Unpacked sizes in GB, from Anserini's docs (docs/experiments-msmarco-v2.1.md: `du` of each unpacked directory;
# the BM25 index "84 GB uncompressed"); the catalogue records only the tarballs' sizes.
UNPACKED_GB = {
    "msmarco-v2.1-doc-segmented": 84,
    **{
        f"msmarco-v2.1-doc-segmented-shard{n:02d}.arctic-embed-l.hnsw-int8": gb
        for n, gb in enumerate((56, 51, 64, 61, 58, 56, 54, 52, 58, 52))
    },
}
# unpacked / tarball where no size is recorded: at most the V2.1 indexes' (BM25 84 / 60 GB = 1.40; Arctic shards
# 558 / 534 GB = 1.05; stand-ins tarred here: 1.36 and 1.13-1.19), with room to spare
UNKNOWN_RATIO = 1.5
_SHARD = re.compile(r"^(?P<base>.+)-shard(?P<number>\d+)\.(?P<model>.+)\.(?P<kind>hnsw(?:-int8)?|flat(?:-int8)?)$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+\-]*$")


@dataclass(frozen=True)
class PrebuiltEntry:
    """One index of the catalogue, as Anserini's JSON describes it."""

    name: str
    type: str  # inverted, impact, hnsw or flat
    filename: str
    md5: str
    urls: tuple[str, ...]
    compressed_bytes: int
    corpus_index: str = ""  # the inverted index holding the texts (a dense index holds none)
    documents: int = 0

    @property
    def dir_name(self) -> str:
        """The directory pyserini and Anserini unpack it into."""
        return f"{self.filename.removesuffix('.tar.gz')}.{self.md5}"

    @property
    def unpacked_bytes(self) -> int | None:
        gb = UNPACKED_GB.get(self.name)
        return None if gb is None else gb * 10**9

    def unpacked_estimate(self) -> int:
        """The unpacked size, or ``UNKNOWN_RATIO`` times the tarball where none is recorded."""
        return self.unpacked_bytes or int(UNKNOWN_RATIO * self.compressed_bytes)

    def peak_bytes(self) -> int:
        """Disk a download needs at its peak: the tarball and the unpacked index side by side."""
        return self.compressed_bytes + self.unpacked_estimate()


class PrebuiltMissing(FileNotFoundError):
    """A catalogue index that is not unpacked on this machine (the API's 503, the CLI's `error:` line): the
    message says how to get it and names no path of this machine."""


def gb(size: int | None) -> str:
    return "unknown" if size is None else f"{size / 1e9:,.0f} GB" if size >= 10**9 else f"{size / 1e6:,.1f} MB"


@lru_cache(maxsize=1)
def catalogue() -> dict[str, PrebuiltEntry]:
    """Every prebuilt index Anserini's jar knows, by name (empty without pyserini)."""
    jar = anserini_jar()
    if jar is None:
        return {}
    entries: dict[str, PrebuiltEntry] = {}
    with zipfile.ZipFile(jar) as archive:
        for member in archive.namelist():
            if not (member.startswith("prebuilt-indexes/") and member.endswith(".json")):
                continue
            for item in json.loads(archive.read(member)):
                entries[item["name"]] = PrebuiltEntry(
                    name=item["name"],
                    type=item.get("type", ""),
                    filename=item["filename"],
                    md5=item["md5"],
                    urls=tuple(item.get("urls") or ()),
                    compressed_bytes=int(item.get("compressed_size") or 0),
                    corpus_index=item.get("corpus_index") or "",
                    documents=int(item.get("documents") or 0),
                )
    return entries


def sets() -> dict[str, list[PrebuiltEntry]]:
    """The catalogue's sharded indexes as sets, set name -> its shards in order."""
    found: dict[str, list[tuple[int, PrebuiltEntry]]] = {}
    for entry in catalogue().values():
        if match := _SHARD.match(entry.name):
            found.setdefault(f"{match['base']}.{match['model']}", []).append((int(match["number"]), entry))
    return {name: [entry for _, entry in sorted(shards)] for name, shards in sorted(found.items())}


def shard_label(name: str) -> str:
    """``shard03`` for a shard's catalogue name (the name itself for an index of no set)."""
    match = _SHARD.match(name)
    return f"shard{match['number']}" if match else name


def search_dirs(prebuilt_dir: Path | None) -> list[Path]:
    """Where unpacked prebuilt indexes are looked for, in order."""
    pyserini = os.environ.get("PYSERINI_CACHE") or str(Path.home() / ".cache" / "pyserini")
    dirs = [prebuilt_dir] if prebuilt_dir else []
    dirs.append(Path(pyserini) / "indexes")
    if anserini := os.environ.get("ANSERINI_INDEX_CACHE"):
        dirs.append(Path(anserini))
    return list(dict.fromkeys(Path(d).expanduser() for d in dirs))


def _unpacked(path: Path) -> bool:
    return path.is_dir() and any(path.glob("segments_*"))


def locate(name: str, prebuilt_dir: Path | None) -> Path | None:
    """The unpacked directory of catalogue index ``name``, or None. Under pyserini's own directory name; an
    older layout, ``<prebuilt_dir>/<name>/``, is found too."""
    entry = catalogue().get(name)
    for root in search_dirs(prebuilt_dir):
        for candidate in ([root / entry.dir_name] if entry else []) + ([root / name] if root == prebuilt_dir else []):
            if _unpacked(candidate):
                return candidate
    return None


def check_name(name: str) -> None:
    """A name from a request is a catalogue name, never a path: anything else is the one fixed 404, which echoes
    nothing."""
    if not _SAFE_NAME.match(name) or ".." in name or (name not in catalogue() and name not in sets()):
        raise UnknownComponentError(
            "prebuilt index", name[:200], ["a name of pyserini's prebuilt catalogue (`ragnarok prebuilt list`)"]
        )


def missing(entries: list[PrebuiltEntry], asked: str) -> PrebuiltMissing:
    """The error for prebuilt indexes ``entries`` (the ones of ``asked`` that are not here)."""
    unpacked = sum(e.unpacked_estimate() for e in entries)
    peak = max(e.peak_bytes() for e in entries)
    which = (
        entries[0].name
        if asked == entries[0].name
        else f"{len(entries)} of its shards ({', '.join(shard_label(e.name) for e in entries)})"
    )
    return PrebuiltMissing(
        f"the prebuilt index {asked} is not on this machine: {which} missing. Download it with "
        f"`ragnarok prebuilt fetch {asked}` (or pyserini's own download), where there is network: "
        f"{gb(sum(e.compressed_bytes for e in entries))} to download, {gb(unpacked)} unpacked, "
        f"{gb(peak)} of free disk at the peak of each download (tarball and index side by side). "
        "RAGNAROK_PREBUILT_DIR or pyserini's cache is where it is looked for"
    )


def resolve(name: str, prebuilt_dir: Path | None) -> Path:
    """The unpacked directory of catalogue index ``name``; :class:`PrebuiltMissing` at once when it is not here."""
    check_name(name)
    if (path := locate(name, prebuilt_dir)) is not None:
        return path
    entry = catalogue().get(name)
    if entry is None:  # a set's name where one index is wanted
        raise UnknownComponentError("prebuilt index", name, sorted(catalogue()))
    raise missing([entry], name)


def resolve_set(name: str, prebuilt_dir: Path | None) -> list[tuple[PrebuiltEntry, Path]]:
    """Every shard of set ``name`` with its unpacked directory; :class:`PrebuiltMissing` naming the shards that are
    not here."""
    check_name(name)
    shards = sets().get(name)
    if shards is None:
        raise UnknownComponentError("prebuilt index set", name, sorted(sets()))
    found = [(entry, locate(entry.name, prebuilt_dir)) for entry in shards]
    if absent := [entry for entry, path in found if path is None]:
        raise missing(absent, name)
    return [(entry, path) for entry, path in found if path is not None]


# a catalogue name's model part -> our name of the query encoder its vectors need
CATALOG_ENCODERS = {"arctic-embed-l": "arctic-l"}
PREBUILT_META = "ragnarok-prebuilt.json"  # beside an index: {"encoder": MODEL}, for a model not named above
EF_SEARCH = 1000  # Anserini's efSearch for the V2.1 Arctic shards (docs/experiments-msmarco-v2.1.md)


def dense_meta(name: str, prebuilt_dir: Path | None) -> dict[str, object]:
    """What ``dense:prebuilt:NAME`` searches: one catalogue HNSW index, or every shard of a set, with the query
    encoder its vectors need (``ragnarok-prebuilt.json`` beside it, or the model its name says)."""
    from ragnarok.stages.embed.errors import DenseIndexMismatchError  # noqa: PLC0415

    if name in sets():
        found = resolve_set(name, prebuilt_dir)
    else:
        found = [(catalogue().get(name), resolve(name, prebuilt_dir))]  # type: ignore[list-item]
    entry, first = found[0]
    if entry is not None and entry.type not in ("hnsw", ""):
        raise DenseIndexMismatchError(
            f"the prebuilt index {name} is a {entry.type} index, not a Lucene HNSW one: "
            "name it as a BM25 index (prebuilt:NAME) instead"
        )
    model = None
    if (first / PREBUILT_META).is_file():
        model = json.loads((first / PREBUILT_META).read_text(encoding="utf-8")).get("encoder")
    model = model or next((ours for part, ours in CATALOG_ENCODERS.items() if f".{part}." in f".{name}."), None)
    if not model:
        raise DenseIndexMismatchError(
            f"the query encoder of the prebuilt index {name} is not known here: write "
            f'{{"encoder": "MODEL"}} into {PREBUILT_META} beside its files'
        )
    labels = [shard_label(e.name) if len(found) > 1 else name for e, _ in found]
    return {
        "kind": "lucene-hnsw",
        "dirs": [str(path) for _, path in found],
        "labels": labels,
        "model": model,
        "dim": 0,
        "prebuilt": name,
        "ef_search": EF_SEARCH,
    }
