"""``ragnarok prebuilt fetch NAME``: download and unpack a prebuilt index of pyserini's catalogue (or each shard
of a set) where pyserini would put it, under its own directory name, with what pyserini's download lacks:

- the free disk checked first, for the download's peak (tarball and unpacked index side by side), the error
  naming both figures;
- progress on stderr (a bar on a terminal, lines otherwise);
- resume: the tarball grows in ``<filename>.partial`` and an interrupted download continues from its last byte
  (an HTTP range request); a server that ignores ranges starts it again;
- the md5 the catalogue records checked before unpacking, and the archive unpacked with tarfile's ``data``
  filter (no path outside the target, no links out of it), aside, then renamed into place whole.

``mirror`` replaces the catalogue URL's directory (``MIRROR/<filename>``), for a local copy of the tarballs.
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
import time
from pathlib import Path

import httpx

from ragnarok.runtime.progress import progress
from ragnarok.stages.retrieve import prebuilt

CHUNK = 1 << 20
READ_TIMEOUT_S = 60.0  # no byte for this long: the download stops (run the command again to resume)


def entries(name: str) -> list[prebuilt.PrebuiltEntry]:
    """The catalogue entries ``name`` stands for: one index, or every shard of a set."""
    if name in prebuilt.sets():
        return prebuilt.sets()[name]
    if name in prebuilt.catalogue():
        return [prebuilt.catalogue()[name]]
    prebuilt.check_name(name)  # the one error for a name of no catalogue
    raise AssertionError("unreachable")


def _md5(path: Path) -> hashlib._Hash:
    digest = hashlib.md5()  # noqa: S324 - the catalogue's checksum, not a security measure
    with open(path, "rb") as file:
        while block := file.read(CHUNK):
            digest.update(block)
    return digest


def _download(entry: prebuilt.PrebuiltEntry, url: str, tarball: Path) -> None:
    partial = tarball.with_name(tarball.name + ".partial")
    have = partial.stat().st_size if partial.exists() else 0
    digest = _md5(partial) if have else hashlib.md5()  # noqa: S324
    headers = {"Range": f"bytes={have}-"} if have else {}
    timeout = httpx.Timeout(30.0, read=READ_TIMEOUT_S)
    with httpx.stream("GET", url, headers=headers, timeout=timeout, follow_redirects=True) as response:
        if response.status_code == 416 and have >= entry.compressed_bytes:  # complete already
            pass
        elif response.status_code not in (200, 206):
            raise OSError(f"{url} answered {response.status_code}")
        else:
            if response.status_code == 200 and have:  # the server ignores ranges: from the start
                have, digest = 0, hashlib.md5()  # noqa: S324
            total = int(response.headers.get("content-length", 0)) + have or entry.compressed_bytes
            with (
                open(partial, "ab" if have else "wb", buffering=CHUNK) as out,
                progress(total, f"downloading {entry.filename}", unit="byte", initial=have) as bar,
            ):
                for block in response.iter_bytes():  # as it arrives: a broken download keeps what came
                    out.write(block)
                    digest.update(block)
                    bar.update(len(block))
    if entry.md5 and digest.hexdigest() != entry.md5:
        partial.unlink(missing_ok=True)
        raise OSError(
            f"{entry.filename} does not match the catalogue's md5 ({digest.hexdigest()} != {entry.md5}): "
            "it was deleted; run the command again"
        )
    partial.rename(tarball)


def _unpack(entry: prebuilt.PrebuiltEntry, tarball: Path, dest: Path) -> Path:
    aside = dest / f".{entry.dir_name}.unpacking"
    shutil.rmtree(aside, ignore_errors=True)
    aside.mkdir()
    with tarfile.open(tarball) as archive:
        archive.extractall(aside, filter="data")
    tops = [p for p in aside.iterdir()]
    root = tops[0] if len(tops) == 1 and tops[0].is_dir() else aside  # the tarball's one folder, or its files
    target = dest / entry.dir_name
    root.rename(target)
    shutil.rmtree(aside, ignore_errors=True)
    tarball.unlink()
    return target


def fetch(name: str, dest: Path, mirror: str | None = None, say=print) -> list[Path]:  # noqa: ANN001
    """Every index ``name`` stands for, unpacked under ``dest`` (those already here, in ``dest`` or pyserini's
    cache, are left as they are); returns their directories."""
    dest.mkdir(parents=True, exist_ok=True)
    done = []
    for entry in entries(name):
        if (found := prebuilt.locate(entry.name, dest)) is not None:
            say(f"{entry.name}: already here ({found})")
            done.append(found)
            continue
        tarball = dest / entry.filename
        partial = tarball.with_name(tarball.name + ".partial")
        have = tarball.stat().st_size if tarball.exists() else partial.stat().st_size if partial.exists() else 0
        need = max(entry.compressed_bytes - have, 0) + entry.unpacked_estimate()
        free = shutil.disk_usage(dest).free
        if free < need:
            raise OSError(
                f"{entry.name} needs {prebuilt.gb(need)} free in {dest} at its peak (the rest of the "
                f"{prebuilt.gb(entry.compressed_bytes)} tarball and the {prebuilt.gb(entry.unpacked_estimate())} "
                f"unpacked index side by side); {prebuilt.gb(free)} are free"
            )
        url = f"{mirror.rstrip('/')}/{entry.filename}" if mirror else entry.urls[0]
        start = time.monotonic()
        if not tarball.exists():
            say(
                f"{entry.name}: downloading {prebuilt.gb(entry.compressed_bytes)} from {url}"
                + (f" (resuming at {prebuilt.gb(have)})" if have else "")
            )
            try:
                _download(entry, url, tarball)
            except httpx.HTTPError as exc:
                kept = partial.stat().st_size if partial.exists() else 0
                raise OSError(
                    f"{entry.name}: the download stopped ({type(exc).__name__}: {str(exc)[:200]}) after "
                    f"{prebuilt.gb(kept)}; run the same command again: it resumes there"
                ) from None
        say(f"{entry.name}: unpacking")
        done.append(_unpack(entry, tarball, dest))
        say(f"{entry.name}: ready in {done[-1]} ({time.monotonic() - start:.0f} s)")
    return done
