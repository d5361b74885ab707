"""MinHash signatures of documents' word shingles, vectorised per batch, bit for bit datasketch's.

Words are the runs of ASCII letters and digits and of non-ASCII characters, ASCII-lowercased; a document's
shingles are its 9-grams of words (all its words when it has fewer). Shingle hashes go through datasketch's
affine32 permutations as one ``(num_perm x shingles)`` array: what ``MinHash(hashfunc=...).update_batch``
computes, for a whole batch of documents at once. ``band_keys`` are the LSH bucket keys datasketch's
``MinHashLSH._H`` would make of them; ``band_hashes`` the 64-bit hashes of the same bands that the on-disk
bucket tables sort (:mod:`ragnarok.collection.bands`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from datasketch import LeanMinHash

DEFAULT_NUM_PERM = 128
SHINGLE_WORDS = 9
SEED = 1
SCHEME = "affine32"

# ----------------------------------------------------------------------------------------------- shingling

_WORD_BYTES = bytes(c if (48 <= c <= 57 or 97 <= c <= 122 or c >= 128) else 32 for c in range(256))
_MASKS = np.array([(1 << (8 * n)) - 1 for n in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_rng = np.random.RandomState(20240909)
_K = _rng.randint(0, 1 << 62, size=4, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
_GRAM = _rng.randint(0, 1 << 62, size=64, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
_U = np.uint64


def _fmix64(x: np.ndarray) -> np.ndarray:
    x ^= x >> _U(33)
    x *= _U(0xFF51AFD7ED558CCD)
    x ^= x >> _U(33)
    x *= _U(0xC4CEB9FE1A85EC53)
    x ^= x >> _U(33)
    return x


def _fmix32(x: np.ndarray) -> np.ndarray:
    """datasketch's pre-mix of the affine32 scheme (MurmurHash3's 32-bit finalizer)."""
    x = x ^ (x >> np.uint32(16))
    x *= np.uint32(0x85EBCA6B)
    x ^= x >> np.uint32(13)
    x *= np.uint32(0xC2B2AE35)
    x ^= x >> np.uint32(16)
    return x


def document_text(document: dict[str, Any]) -> str:
    return document.get("body") or document.get("title") or ""


def words(text: str) -> list[str]:
    """The words shingles are made of (the reference tokenizer; :func:`shingle_hashes` is its fast twin)."""
    return text.encode("utf-8", "surrogatepass").lower().translate(_WORD_BYTES).decode("utf-8", "replace").split()


def _word_hashes(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """64-bit hashes of the words of ``texts`` (concatenated) and the number of words of each text.

    A word hashes its length, its first 8 and its last 8 bytes (words of more than 16 bytes that differ only
    in the middle collide, harmlessly for near-duplicate detection).
    """
    buf = b"\n".join(t.encode("utf-8", "surrogatepass").lower().translate(_WORD_BYTES) for t in texts)
    b = np.frombuffer(buf + b"\0" * 16, dtype=np.uint8)
    is_word = b > 32
    edge = np.flatnonzero(is_word[1:] != is_word[:-1]) + 1
    if is_word[0]:
        edge = np.concatenate(([0], edge))
    starts, ends = edge[0::2], edge[1::2]
    n_docs = len(texts)
    if len(starts) == 0:
        return np.empty(0, np.uint64), np.zeros(n_docs, np.int64)
    seps = np.flatnonzero(b == 10)
    doc_of = np.searchsorted(seps, starts)
    counts = np.bincount(doc_of, minlength=n_docs).astype(np.int64)
    length = (ends - starts).astype(np.uint64)
    windows = np.lib.stride_tricks.sliding_window_view(b, 8)
    first = np.ascontiguousarray(windows[starts]).view("<u8").ravel() & _MASKS[np.minimum(ends - starts, 8)]
    last = np.ascontiguousarray(windows[ends - 8]).view("<u8").ravel()  # (ends - 8 may wrap: masked below)
    last *= (length > 8).astype(np.uint64)
    h = first * _K[0]
    h += last * _K[1]
    h += length * _K[2]
    return _fmix64(h), counts


def shingle_hashes(texts: list[str], n: int = SHINGLE_WORDS) -> tuple[np.ndarray, np.ndarray]:
    """32-bit hashes of the n-gram word shingles of each text, concatenated, and the count per text.

    A text with 1..n-1 words has one shingle (all its words); one with none has no shingle.
    """
    if not 1 <= n <= len(_GRAM):
        raise ValueError(f"shingle size must be 1..{len(_GRAM)}, got {n}")
    wh, counts = _word_hashes(texts)
    n_docs = len(texts)
    if len(wh) == 0:
        return np.empty(0, np.uint32), np.zeros(n_docs, np.int64)
    pad = n - 1
    doc_of = np.repeat(np.arange(n_docs), counts)
    padded = np.zeros(len(wh) + pad * n_docs + pad, dtype=np.uint64)
    padded[np.arange(len(wh)) + pad * doc_of] = wh
    m = len(padded) - pad
    grams = padded[:m] * _GRAM[0]
    for j in range(1, n):
        grams += padded[j : m + j] * _GRAM[j]
    n_grams = np.where(counts > 0, np.maximum(counts - pad, 1), 0)
    doc_start = np.concatenate(([0], np.cumsum(counts + pad)[:-1]))
    gram_start = np.concatenate(([0], np.cumsum(n_grams)[:-1]))
    index = np.repeat(doc_start - gram_start, n_grams) + np.arange(int(n_grams.sum()))
    grams = _fmix64(grams[index])
    return (grams >> _U(32)).astype(np.uint32), n_grams


def permutations(num_perm: int = DEFAULT_NUM_PERM, seed: int = SEED) -> np.ndarray:
    """datasketch's permutation parameters ``(a, b)`` for ``num_perm`` and ``seed`` (scheme affine32)."""
    from datasketch import MinHash  # noqa: PLC0415 - datasketch imports scipy.integrate (0.6 s): not in workers

    return MinHash(num_perm=num_perm, seed=seed, scheme=SCHEME).permutations


def signatures(hashes: np.ndarray, counts: np.ndarray, perms: np.ndarray, chunk: int = 16384) -> np.ndarray:
    """MinHash signatures ``(documents, num_perm)`` of shingle hashes grouped by ``counts``.

    Row i equals ``MinHash(num_perm, seed, hashfunc=int, scheme="affine32")`` updated with text i's shingle
    hashes (a text without shingles gets datasketch's empty signature, all 2^32-1).
    """
    a, b = perms
    num_perm = len(a)
    out = np.full((len(counts), num_perm), np.iinfo(np.uint32).max, dtype=np.uint32)
    hv = _fmix32(hashes.astype(np.uint32, copy=False))
    cum = np.concatenate(([0], np.cumsum(counts)))
    nonempty = np.flatnonzero(counts > 0)
    i = 0
    while i < len(nonempty):
        # as many whole documents as fit in ``chunk`` shingles (at least one)
        j = max(i + 1, int(np.searchsorted(cum[nonempty + 1], cum[nonempty[i]] + chunk, "right")))
        docs = nonempty[i:j]
        s, e = cum[docs[0]], cum[docs[-1] + 1]
        block = np.multiply(a[:, None], hv[None, s:e])  # (num_perm, shingles), uint32 wrap = mod 2^32
        block += b[:, None]
        # the documents in docs are contiguous in hv except for empty ones, which contribute no columns
        out[docs] = np.minimum.reduceat(block, cum[docs] - s, axis=1).T
        i = j
    return out


def minhash_documents(
    texts: list[str], num_perm: int = DEFAULT_NUM_PERM, seed: int = SEED, n: int = SHINGLE_WORDS
) -> np.ndarray:
    hashes, counts = shingle_hashes(texts, n)
    return signatures(hashes, counts, permutations(num_perm, seed))


def lean_minhash(signature: np.ndarray, seed: int = SEED) -> LeanMinHash:
    from datasketch import LeanMinHash  # noqa: PLC0415

    return LeanMinHash(seed=seed, hashvalues=signature, scheme=SCHEME)


def band_keys(sigs: np.ndarray, hashranges: list[tuple[int, int]]) -> list[tuple[bytes, ...]]:
    """Per signature, the bucket key of each LSH band, exactly as ``MinHashLSH._H`` makes it
    (``bytes(hashvalues[start:end].byteswap().data)``), for a whole batch at once."""
    per_band = []
    for start, end in hashranges:
        band = np.ascontiguousarray(sigs[:, start:end]).byteswap()
        raw = band.tobytes()
        width = band.shape[1] * band.itemsize
        per_band.append([raw[i : i + width] for i in range(0, len(raw), width)])
    return list(zip(*per_band))


_BAND_MULTIPLIERS = np.random.RandomState(20261123).randint(0, 1 << 62, size=1024, dtype=np.uint64) * _U(2) + _U(1)


def band_hashes(sigs: np.ndarray, hashranges: list[tuple[int, int]]) -> np.ndarray:
    """``(documents, bands)`` uint64: a 64-bit hash of each band's rows of each signature.

    Equal rows give equal hashes, so two documents share a band's hash whenever datasketch's ``MinHashLSH``
    would put them in that band's bucket; different rows give equal hashes with probability about 2^-64
    (a random odd multiplier per row, summed mod 2^64, then MurmurHash3's 64-bit finalizer).
    """
    out = np.empty((len(sigs), len(hashranges)), dtype=np.uint64)
    for i, (start, end) in enumerate(hashranges):
        rows = sigs[:, start:end].astype(np.uint64)
        h = rows[:, 0] * _BAND_MULTIPLIERS[0]
        for j in range(1, end - start):
            h += rows[:, j] * _BAND_MULTIPLIERS[j]
        out[:, i] = _fmix64(h)
    return out
