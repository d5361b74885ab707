"""datasketch's ``MinHashLSH`` as dedup's bucket store (``--storage memory``, or Redis with ``--redis-url``):
its storage configuration, fast band inserts, and the scan of buckets holding two or more documents."""

from __future__ import annotations

import pickle
import secrets
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlparse

import numpy as np
from datasketch import MinHashLSH

from ragnarok.collection.bands import Groups
from ragnarok.collection.minhash import lean_minhash

# ----------------------------------------------------------------------------------------------- LSH storage


def redis_storage(url: str) -> dict[str, Any]:
    """datasketch's ``storage_config`` for a ``redis://host:port/db`` URL (a unique basename per run)."""
    parsed = urlparse(url if "://" in url else f"redis://{url}")
    if parsed.scheme not in {"redis", ""}:
        raise ValueError(f"--redis-url must look like redis://host:port/db, got {url!r}")
    config: dict[str, Any] = {"host": parsed.hostname or "localhost", "port": parsed.port or 6379}
    if parsed.path.strip("/"):
        config["db"] = int(parsed.path.strip("/"))
    if parsed.password:
        config["password"] = parsed.password
    return {"type": "redis", "redis": config, "basename": b"ragnarok-dedup-" + secrets.token_hex(6).encode()}


def datasketch_lsh(
    threshold: float, num_perm: int, weights: tuple[float, float], redis_url: str | None = None
) -> tuple[MinHashLSH, bytes | None]:
    """datasketch's LSH for (threshold, num_perm): its (bands, rows) for every storage, its buckets for the
    in-memory and Redis ones. Returns it and the Redis key prefix of this run (None: in memory)."""
    config = redis_storage(redis_url) if redis_url else None
    try:
        lsh = MinHashLSH(threshold=threshold, num_perm=num_perm, weights=weights, storage_config=config)
    except ImportError as exc:
        raise RuntimeError(f"--redis-url needs the redis package: {exc}") from None
    if config is None:
        return lsh, None
    try:
        lsh.keys._redis.ping()
    except Exception as exc:  # noqa: BLE001 - redis' own exception classes
        raise RuntimeError(f"cannot reach Redis at {redis_url}: {exc}") from None
    return lsh, config["basename"]


def multi_member_buckets(table: Any, prepickle: bool) -> Iterator[list[int]]:
    """The members of every bucket of one LSH band table that holds two or more documents."""
    inner = getattr(table, "_dict", None)
    if inner is not None:  # datasketch's DictSetStorage: a defaultdict(set); read it without copying
        for members in inner.values():
            if len(members) > 1:
                yield [pickle.loads(m) for m in members] if prepickle else list(members)
        return
    # datasketch's RedisSetStorage: a hash {bucket -> redis key of its set}; scan it in pages (flat memory)
    r, name = table._redis, table._name
    page: list[bytes] = []

    def flush() -> Iterator[list[int]]:
        pipe = r.pipeline(transaction=False)
        for key in page:
            pipe.scard(key)
        multi = [key for key, n in zip(page, pipe.execute()) if n > 1]
        pipe = r.pipeline(transaction=False)
        for key in multi:
            pipe.smembers(key)
        for members in pipe.execute():
            yield [pickle.loads(m) for m in members]

    for _, redis_key in r.hscan_iter(name, count=10_000):
        page.append(redis_key)
        if len(page) >= 10_000:
            yield from flush()
            page = []
    if page:
        yield from flush()


def drop_redis_keys(lsh: MinHashLSH, basename: bytes) -> None:
    r = lsh.keys._redis
    batch = []
    for key in r.scan_iter(match=basename + b"*", count=10_000):
        batch.append(key)
        if len(batch) >= 10_000:
            r.unlink(*batch)
            batch = []
    if batch:
        r.unlink(*batch)


def band_inserter(lsh: MinHashLSH) -> Callable[[int, tuple[bytes, ...]], None]:
    """``insert(key, band_keys)``: what ``MinHashLSH._insert(key, minhash, check_duplication=False,
    buffer=True)`` writes, given the band keys the worker already computed (``_H`` of each band).

    For datasketch's in-memory storage (``DictListStorage``/``DictSetStorage``, a ``defaultdict`` inside)
    the writes go straight to the dicts, skipping 10 wrapper calls per document (a third of the parent's
    time); tests check the result equals ``MinHashLSH.insert``'s.
    """
    tables = [getattr(t, "_dict", None) for t in lsh.hashtables]
    key_dict = getattr(lsh.keys, "_dict", None)
    if key_dict is not None and all(t is not None for t in tables) and not lsh.prepickle:
        pairs = tables

        def insert(key: int, keys: tuple[bytes, ...]) -> None:
            key_dict[key].extend(keys)
            for H, table in zip(keys, pairs):
                table[H].add(key)

        return insert

    def insert_generic(key: int, keys: tuple[bytes, ...]) -> None:
        stored: Any = pickle.dumps(key) if lsh.prepickle else key
        lsh.keys.insert(stored, *keys, buffer=True)
        for H, table in zip(keys, lsh.hashtables):
            table.insert(H, stored, buffer=True)

    return insert_generic


class DatasketchBuckets:
    """The bucket store of :mod:`ragnarok.collection.dedup` backed by a ``MinHashLSH`` (in memory or Redis).

    Documents go in through an insertion session (Redis: pipelined); the first through the public
    ``insert`` (it records the MinHash scheme in the index), the rest through :func:`band_inserter`.
    """

    wants_keys = True  # the workers compute datasketch's band keys (bytes) for it

    def __init__(self, lsh: MinHashLSH, seed: int, redis_basename: bytes | None = None) -> None:
        self.lsh, self.seed, self._basename = lsh, seed, redis_basename
        self.storage = "redis" if redis_basename is not None else "in-memory"
        self._session = lsh.insertion_session(buffer_size=50_000)
        self._insert = band_inserter(lsh)
        self._first = True

    def add(self, first_line: int, compared: np.ndarray, batch: Any) -> None:
        """Insert the lines of a batch (first line ``first_line``) where ``compared`` is set."""
        for pos in np.flatnonzero(compared).tolist():
            if self._first:
                self._session.insert(
                    first_line + pos, lean_minhash(batch.signatures[pos], self.seed), check_duplication=False
                )
                self._first = False
            else:
                self._insert(first_line + pos, batch.band_keys[pos])

    def groups(self, compared: np.ndarray) -> Groups:  # noqa: ARG002 - only compared lines were inserted
        self._session.close()
        return Groups.from_lists(
            [members for table in self.lsh.hashtables for members in multi_member_buckets(table, self.lsh.prepickle)]
        )

    def close(self) -> None:
        """With Redis, delete this run's keys (in memory, nothing to release)."""
        if self._basename is not None:
            drop_redis_keys(self.lsh, self._basename)
