"""MinHash-LSH near-duplicate removal: exactness against datasketch, planted near-duplicates, classes, bad
input, gzip, and the Redis storage backend (a real redis-server started for the session)."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import socket
from pathlib import Path

import numpy as np
import pytest
from datasketch import MinHash, MinHashLSH

from ragnarok.collection import bands as bands_mod
from ragnarok.collection import clusters
from ragnarok.collection import dedup as dd
from ragnarok.collection import lsh as lsh_mod
from ragnarok.collection import minhash as mh
from ragnarok.collection import workers as workers_mod
from ragnarok.collection.jsonl import CollectionFormatError, DocidSet

VOCAB = [
    f"{random.Random(i).choice('bcdfghklmnprstvz')}{w}"
    for i, w in enumerate(f"{a}{b}{c}" for a in "aeiou" for b in "lmnrstkpd" for c in ["", "a", "en", "is", "or", "um"])
]
VOCAB = sorted(set(VOCAB + [f"w{i}" for i in range(3000)]))


def text(rng: random.Random, n: int) -> str:
    words = [rng.choice(VOCAB) for _ in range(n)]
    return " ".join(" ".join(words[i : i + 12]).capitalize() + "." for i in range(0, n, 12))


def edit(rng: random.Random, body: str, k: int) -> str:
    """Replace ``k`` words spread evenly over the text."""
    words = body.split(" ")
    for i in range(k):
        j = (i * len(words)) // k + len(words) // (2 * k)
        words[j] = "zzedit" + str(rng.randrange(10**6))
    return " ".join(words)


def jaccard(a: str, b: str, n: int = mh.SHINGLE_WORDS) -> float:
    def shingles(t: str) -> set[tuple[str, ...]]:
        w = mh.words(t)
        return {tuple(w[i : i + n]) for i in range(max(len(w) - n + 1, 1))}

    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / len(sa | sb)


def write_jsonl(path: Path, docs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


def docids(path: Path) -> list[str]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line)["docid"] for line in f]


# ------------------------------------------------------------------------------------------ exactness


def test_signatures_are_datasketch_minhashes():
    rng = random.Random(1)
    texts = [text(rng, 60), "", "Too short to shingle.", "x " * 30, "Ünïcödé façade, déjà vu! " * 5]
    hashes, counts = mh.shingle_hashes(texts)
    assert list(counts) == [max(len(mh.words(t)) - 8, 1) if mh.words(t) else 0 for t in texts]
    sigs = mh.minhash_documents(texts, num_perm=64, seed=7)
    offsets = np.concatenate(([0], np.cumsum(counts)))
    for i in range(len(texts)):
        m = MinHash(num_perm=64, seed=7, hashfunc=int)  # datasketch's own affine32 permutations
        m.update_batch(hashes[offsets[i] : offsets[i + 1]].tolist())
        assert np.array_equal(m.hashvalues, sigs[i])


def test_shingles_ignore_case_and_punctuation_but_not_order():
    a = "The quick brown fox jumps over the lazy dog near the river bank today"
    h1, _ = mh.shingle_hashes([a, a.upper().replace(" ", " -- "), " ".join(reversed(a.split()))])
    n = len(h1) // 3
    assert set(h1[:n]) == set(h1[n : 2 * n])
    assert not set(h1[:n]) & set(h1[2 * n :])


def test_band_writes_equal_minhashlsh_insert():
    rng = random.Random(2)
    sigs = mh.minhash_documents([text(rng, 50) for _ in range(20)])
    ours, theirs = (MinHashLSH(threshold=0.8, num_perm=128, weights=dd.LSH_WEIGHTS) for _ in range(2))
    insert = lsh_mod.band_inserter(ours)
    for key, (row, keys) in enumerate(zip(sigs, mh.band_keys(sigs, ours.hashranges))):
        insert(key, keys)
        theirs.insert(key, mh.lean_minhash(row), check_duplication=False)
    for a, b in zip(ours.hashtables, theirs.hashtables):
        assert dict(a._dict) == dict(b._dict)
    assert dict(ours.keys._dict) == dict(theirs.keys._dict)
    assert ours.query(mh.lean_minhash(sigs[3])) == [3]


def test_band_hashes_group_exactly_like_datasketch_buckets():
    rng = np.random.default_rng(5)
    sigs = rng.integers(0, 2**32, size=(400, 128), dtype=np.uint64).astype(np.uint32)
    sigs[200:300] = sigs[:100]  # 100 exact copies
    for i in range(100):  # 100 copies equal in some bands only
        sigs[300 + i] = sigs[100 + i]
        sigs[300 + i, rng.integers(0, 128, size=3)] += np.uint32(1)
    lsh = MinHashLSH(threshold=0.8, num_perm=128, weights=dd.LSH_WEIGHTS)
    hashes, keys = mh.band_hashes(sigs, lsh.hashranges), mh.band_keys(sigs, lsh.hashranges)
    for band in range(lsh.b):
        by_key: dict[bytes, set[int]] = {}
        for i, k in enumerate(keys):
            by_key.setdefault(k[band], set()).add(i)
        by_hash: dict[int, set[int]] = {}
        for i, h in enumerate(hashes[:, band].tolist()):
            by_hash.setdefault(h, set()).add(i)
        assert sorted(map(sorted, by_key.values())) == sorted(map(sorted, by_hash.values()))


def test_runs_are_the_buckets_of_two_or_more_in_input_order():
    hashes = np.array([7, 3, 7, 9, 3, 7, 1], np.uint64)
    lines = np.array([10, 11, 12, 13, 14, 15, 16])
    groups = bands_mod.runs(hashes, lines)
    found = np.split(groups.members, np.cumsum(groups.sizes)[:-1])
    assert sorted(g.tolist() for g in found) == [[10, 12, 15], [11, 14]]


def test_a_bucket_is_split_around_its_first_member():
    """Bucket {0, 1, 2, 3}: 1 is like 0; 2 and 3 are not like 0 but like each other: {0, 1} and {2, 3}."""
    base = np.arange(100, dtype=np.uint32)
    sig = np.stack([base, base, base + 1000, base + 1000])
    sig[1, :5] += 7  # 0.95 like 0
    sig[3, :3] += 9  # 0.97 like 2
    groups = bands_mod.Groups(np.array([0, 1, 2, 3]), np.array([4]))
    verify = clusters.Verifier(sig, 0.9)
    a, b = clusters.pivot_edges(groups, verify)
    assert sorted(zip(a.tolist(), b.tolist())) == [(0, 1), (2, 3)]
    assert (verify.checked, verify.rejected) == (4, 2)  # (0,1) (0,2) (0,3), then (2,3)
    found = clusters.classes(a, b)
    assert found.count == 2 and found.removed().tolist() == [1, 3] and found.largest(5) == [[0, 1], [2, 3]]
    unverified = clusters.classes(*clusters.pivot_edges(groups, None))
    assert unverified.count == 1 and unverified.removed().tolist() == [1, 2, 3]
    # the same bucket in another band, one group per chunk: no pair is estimated twice
    again = clusters.pivot_edges(bands_mod.Groups.concat([groups, groups]), verify, chunk=1)
    assert sorted(zip(*map(np.ndarray.tolist, again))) == [(0, 1), (0, 1), (2, 3), (2, 3)]
    assert (verify.checked, verify.rejected) == (4, 2)


def test_docid_set():
    seen = DocidSet()
    first = seen.add_many(np.array([5, 6, 5, 7], np.uint64))
    assert first.tolist() == [True, True, False, True]
    assert seen.add_many(np.arange(1, 200_000, dtype=np.uint64)).sum() == 200_000 - 1 - 3
    assert not seen.add(199_999) and seen.add(10**12) and len(seen) == 200_000


def test_the_pool_reads_a_bounded_number_of_batches_ahead():
    """Memory stays flat however slowly the parent consumes (Pool.imap would read the whole input ahead)."""
    pulled: list[int] = []

    def batches():
        for i in range(30):
            pulled.append(i)
            yield [0] * i

    out = []
    for got in workers_mod.map_batches(len, batches(), 2, int, (), in_flight=3):
        out.append(got)
        assert len(pulled) <= len(out) + 3
    assert out == list(range(30))


# ------------------------------------------------------------------------------------------ planted near-duplicates

# (name, how the copy is made, caught at the default threshold 0.8?)
PLANTED = [
    ("exact copy", lambda r, b: b, True),
    ("1 word edited", lambda r, b: edit(r, b, 1), True),
    ("2 words edited", lambda r, b: edit(r, b, 2), True),
    ("6 words edited", lambda r, b: edit(r, b, 6), False),
    ("10 words edited", lambda r, b: edit(r, b, 10), False),
    ("punctuation and case changed", lambda r, b: b.upper().replace(".", " ;"), True),
    ("3 paragraphs, two swapped", lambda r, b: _paragraphs(b, 3, [1, 0, 2]), True),
    ("10 paragraphs shuffled", lambda r, b: _paragraphs(b, 10, [3, 7, 0, 9, 5, 1, 8, 2, 6, 4]), False),
    ("first half only", lambda r, b: " ".join(b.split(" ")[:150]), False),
]


def _paragraphs(body: str, k: int, order: list[int]) -> str:
    words = body.split(" ")
    parts = [" ".join(words[i * len(words) // k : (i + 1) * len(words) // k]) for i in range(k)]
    return "\n\n".join(parts[i] for i in order)


def _boilerplate_pages(rng: random.Random, template_words: int, content_words: int) -> tuple[str, str]:
    nav, footer = text(rng, template_words // 2), text(rng, template_words - template_words // 2)
    return tuple(f"{nav}\n\n{text(rng, content_words)}\n\n{footer}" for _ in range(2))  # type: ignore[return-value]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    rng = random.Random(42)
    docs, expect = [], {}
    for i in range(300):  # unrelated documents, 300 words each
        docs.append({"docid": f"base{i}", "title": f"Page {i}", "body": text(rng, 300)})
    for k, (name, make, caught) in enumerate(PLANTED):
        original = docs[k]["body"]
        copy = make(rng, original)
        docs.append({"docid": f"copy{k}", "title": name, "body": copy})
        expect[f"copy{k}"] = (name, caught, jaccard(original, copy))
    for k, (tw, cw, caught) in enumerate([(400, 20, True), (200, 200, False)]):
        a, b = _boilerplate_pages(rng, tw, cw)
        docs.append({"docid": f"tmplA{k}", "body": a})
        docs.append({"docid": f"tmplB{k}", "body": b})
        expect[f"tmplB{k}"] = (f"boilerplate {tw} words + {cw} own words", caught, jaccard(a, b))
    rng.shuffle(docs[300:])  # copies after their originals, in any order among themselves
    path = write_jsonl(tmp_path_factory.mktemp("planted") / "docs.jsonl", docs)
    return path, docs, expect


def test_planted_near_duplicates_at_default_threshold(planted, tmp_path):
    path, docs, expect = planted
    out = tmp_path / "kept.jsonl"
    report = dd.dedup(path, out, workers=1, progress=False)
    kept = set(docids(out))
    table = []
    for docid, (name, caught, j) in expect.items():
        table.append(f"{name:40s} J={j:.2f} {'caught' if docid not in kept else 'kept'}")
    print("\n".join(table))
    for docid, (name, caught, j) in expect.items():
        assert (docid not in kept) == caught, f"{name}: Jaccard {j:.2f}, expected caught={caught}"
    assert all(f"base{i}" in kept for i in range(300)), "an original (first in input order) was removed"
    n_caught = sum(caught for _, caught, _ in expect.values())
    assert report.removed == n_caught and report.classes == n_caught
    assert report.input.documents == len(docs) and report.kept == len(docs) - n_caught
    assert docids(out) == [d["docid"] for d in docs if d["docid"] in kept]  # input order kept


def test_disk_buckets_give_datasketchs_result(planted, tmp_path):
    """The sorted on-disk bands find exactly the buckets of datasketch's in-memory MinHashLSH."""
    path, _, _ = planted
    disk = dd.dedup(path, tmp_path / "disk.jsonl", workers=1, progress=False)
    mem = dd.dedup(path, tmp_path / "mem.jsonl", storage="memory", workers=1, progress=False)
    assert disk.storage == "disk" and disk.removed > 0
    assert (tmp_path / "disk.jsonl").read_bytes() == (tmp_path / "mem.jsonl").read_bytes()
    assert disk.as_dict() == {**mem.as_dict(), "storage": "disk"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk.jsonl", "mem.jsonl"]  # scratch files removed


def test_disk_buckets_agree_with_datasketch_on_many_near_copies(tmp_path):
    """2,000 documents, 400 of them copies of earlier ones with 0-6 words edited (some caught, some not)."""
    rng = random.Random(9)
    docs = [{"docid": f"d{i}", "body": text(rng, rng.randrange(120, 300))} for i in range(1600)]
    for i in range(400):
        original = docs[rng.randrange(len(docs))]["body"]
        docs.append({"docid": f"c{i}", "body": edit(rng, original, k) if (k := rng.randrange(7)) else original})
    rng.shuffle(docs)
    path = write_jsonl(tmp_path / "in.jsonl", docs)
    disk = dd.dedup(path, tmp_path / "disk.jsonl", workers=2, batch_size=300, progress=False)
    mem = dd.dedup(path, tmp_path / "mem.jsonl", storage="memory", workers=1, progress=False)
    assert 100 < disk.removed < 400 and disk.pairs_rejected > 0
    assert (tmp_path / "disk.jsonl").read_bytes() == (tmp_path / "mem.jsonl").read_bytes()
    assert disk.as_dict() == {**mem.as_dict(), "storage": "disk"}


def test_same_result_in_a_worker_pool(planted, tmp_path):
    path, _, _ = planted
    dd.dedup(path, tmp_path / "one.jsonl", workers=1, progress=False)
    dd.dedup(path, tmp_path / "two.jsonl", workers=2, batch_size=50, progress=False)
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()


def test_classes_are_transitive_and_keep_the_first_in_input_order(tmp_path):
    rng = random.Random(3)
    words = text(rng, 1000).split(" ")
    versions = [" ".join(words)]
    for step in range(3):  # each step edits 7 more words, at positions no other step touches
        for j in range(step * 45 + 20, 1000, 143):
            words[j] = f"edit{step}x{j}"
        versions.append(" ".join(words))
    a, b, c, d = versions
    assert jaccard(a, b) > 0.85 and jaccard(b, c) > 0.85 and jaccard(c, d) > 0.85 and jaccard(a, d) < 0.7
    docs = [
        {"docid": "C", "body": c},
        {"docid": "other", "body": text(rng, 300)},
        {"docid": "A", "body": a},
        {"docid": "D", "body": d},
        {"docid": "B", "body": b},
    ]
    out = tmp_path / "out.jsonl"
    report = dd.dedup(write_jsonl(tmp_path / "in.jsonl", docs), out, workers=1, progress=False)
    assert docids(out) == ["C", "other"]
    assert report.classes == 1 and report.removed == 3 and report.percent_removed == 60.0
    top = report.largest[0]
    assert top["size"] == 4 and top["representative"]["docid"] == "C"
    assert {e["docid"] for e in top["examples"]} == {"A", "B", "D"}


def test_lower_threshold_catches_more(planted, tmp_path):
    path, _, expect = planted
    strict = dd.dedup(path, tmp_path / "a.jsonl", threshold=0.95, workers=1, progress=False)
    loose = dd.dedup(path, tmp_path / "b.jsonl", threshold=0.5, num_perm=256, workers=1, progress=False)
    assert strict.removed < sum(c for _, c, _ in expect.values()) < loose.removed


# ------------------------------------------------------------------------------------------ bad input


def test_bad_lines_fail_before_output_is_touched(tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"docid": "a", "body": "one two three"}\n\n{"docid": "b", "body": oops}\n')
    out = tmp_path / "out.jsonl"
    out.write_text("previous result\n")
    with pytest.raises(CollectionFormatError, match=r"in\.jsonl:3: malformed JSON"):
        dd.dedup(src, out, workers=1, progress=False)
    assert out.read_text() == "previous result\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]  # no temp files left


def test_an_input_that_changes_between_the_passes_leaves_the_output_alone(tmp_path):
    src = write_jsonl(tmp_path / "in.jsonl", [{"docid": f"d{i}", "body": f"text {i}"} for i in range(3)])
    out = tmp_path / "out.jsonl"
    out.write_text("previous result\n")
    report = dd.dedup(src, None, workers=1, progress=False)
    for status in (np.zeros(2, np.uint8), np.zeros(4, np.uint8)):  # pass 1 saw fewer / more lines
        with pytest.raises(RuntimeError, match="changed while it was deduplicated"):
            dd._copy_kept(src, out, status, [], report, 0)
        assert out.read_text() == "previous result\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.jsonl"]


@pytest.mark.parametrize(
    ("line", "kind", "message"),
    [
        (b'{"docid": "x", "body": "caf\xe9"}', "utf8", "not valid UTF-8"),
        (b'["not", "an", "object"]', "malformed", "expected a JSON object"),
        (b'{"title": "no id", "body": "text"}', "no-docid", "has no docid"),
        (b'{"docid": "a", "body": "again"}', "duplicate", "duplicate docid 'a'"),
    ],
)
def test_each_kind_of_bad_line(tmp_path, line, kind, message):
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"docid": "a", "body": "alpha beta"}\n' + line + b'\n{"docid": "c", "body": ""}\n')
    with pytest.raises(CollectionFormatError, match=rf"in\.jsonl:2: .*{message}"):
        dd.dedup(src, tmp_path / "out.jsonl", workers=1, progress=False)
    report = dd.dedup(src, tmp_path / "out.jsonl", skip_bad=True, workers=1, progress=False)
    assert report.input.bad[kind] == 1 and report.input.skipped == 1
    assert report.input.documents == 2 and report.input.empty == 1  # the empty document is kept, not compared
    assert docids(tmp_path / "out.jsonl") == ["a", "c"]
    assert "in.jsonl:2" in report.input.examples[0]


def test_empty_documents_are_never_near_duplicates_of_each_other(tmp_path):
    docs = [{"docid": f"e{i}", "body": "" if i % 2 else "  \n "} for i in range(5)]
    report = dd.dedup(write_jsonl(tmp_path / "in.jsonl", docs), tmp_path / "out.jsonl", workers=1, progress=False)
    assert report.removed == 0 and report.input.empty == 5 and len(docids(tmp_path / "out.jsonl")) == 5


def test_gzip_in_and_out_and_a_directory(tmp_path, planted):
    path, docs, _ = planted
    folder = tmp_path / "coll"
    folder.mkdir()
    lines = path.read_bytes().splitlines(keepends=True)
    with gzip.open(folder / "part-0.jsonl.gz", "wb") as f:
        f.writelines(lines[:200])
    (folder / "part-1.jsonl").write_bytes(b"".join(lines[200:]))
    dd.dedup(folder, tmp_path / "out.jsonl.gz", workers=1, progress=False)
    dd.dedup(path, tmp_path / "ref.jsonl", workers=1, progress=False)
    assert gzip.decompress((tmp_path / "out.jsonl.gz").read_bytes()) == (tmp_path / "ref.jsonl").read_bytes()


# ------------------------------------------------------------------------------------------ Redis


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """A real redis-server (Debian's package) on a free port, for the session; stopped at the end."""
    if shutil.which("redis-server") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("redis-server is missing: install it (apt-get install -y redis-server)")
        pytest.skip("redis-server not installed (apt-get install -y redis-server)")
    pytest.importorskip("redis")
    from servers import redis_server

    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server.url


def test_redis_backend_gives_the_same_result_and_cleans_up(planted, tmp_path, redis_url):
    import redis

    path, _, _ = planted
    mem = dd.dedup(path, tmp_path / "mem.jsonl", storage="memory", workers=1, progress=False)
    red = dd.dedup(path, tmp_path / "redis.jsonl", redis_url=redis_url, workers=2, batch_size=64, progress=False)
    assert red.storage == "redis" and mem.storage == "in-memory"
    assert (tmp_path / "mem.jsonl").read_bytes() == (tmp_path / "redis.jsonl").read_bytes()
    assert red.as_dict() == {**mem.as_dict(), "storage": "redis"}
    assert redis.Redis.from_url(redis_url).dbsize() == 0  # this run's buckets are gone


def test_unreachable_redis_is_a_clear_error(tmp_path, planted):
    path, _, _ = planted
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pytest.importorskip("redis")
    with pytest.raises(RuntimeError, match="cannot reach Redis"):
        dd.dedup(path, tmp_path / "out.jsonl", redis_url=f"redis://127.0.0.1:{port}", workers=1, progress=False)
    assert not (tmp_path / "out.jsonl").exists()
