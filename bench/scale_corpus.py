"""MS MARCO V2.1-style segmented collections of any size, for bench/bench_scale.py, and the track's real queries.

Records have V2.1's fields and docid shape, ``{"docid": "msmarco_v2.1_doc_NN_N#K_S", "url", "title",
"headings", "segment", "start_char", "end_char"}`` (NN the file 00..58, N the document's byte offset in that file,
K the segment's number in its document, S its start character), plus ``id`` and ``contents`` (what Anserini's
JsonCollection reads: ``ragnarok.collection.lucene_index.anserini_record``), so that ragnarok's build and
pyserini's indexer read the very same file.

The text has realistic term statistics without any download: words are drawn from the unigram distribution of
real text shipped here (the demo collection's documents, CACM's abstracts, every TREC RAG topic file), whose
rank/frequency curve is Zipfian, with 6 % of tokens from a Zipfian tail of made-up rare words (so the vocabulary
keeps growing with the collection, Heaps-like, as a web collection's does); each document also dwells on the
words of one real passage (a demo document, an abstract or a TREC topic: bursty terms, so BM25 sees term
frequencies above 1 and real queries match some documents better than others). Half of a document's sentences
are real sentences of that passage (and of another, for a passage of one or two sentences: a TREC topic's own
words then appear in some documents, as a real query's do in its relevant segments), so that an encoder does not
see every document alike, as it sees word salad. Documents are segmented as V2.1 was, 10 sentences with a
stride of 5 (``ragnarok.collection.segment.Segmenter``), with lognormal sentence
lengths (mean about 25 words) and document lengths (mean about 9 segments): segments average about 1,500
characters with a long tail. Everything is streamed: memory holds one document, and output is deterministic
for a given ``seed`` (and interpreter: the demo's text comes from its standard library).
"""

from __future__ import annotations

import json
import os
import re
import tarfile
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import blingfire
import numpy as np

from ragnarok.collection.lucene_index import anserini_record
from ragnarok.collection.segment import Segmenter

ROOT = Path(__file__).resolve().parent.parent
FILES = 59  # msmarco_v2.1_doc_00 .. _58
TAIL_SHARE = 0.06  # tokens drawn from the made-up rare words
FOCUS_SHARE = 0.2  # tokens drawn from the document's own passage
REAL_SHARE = 0.5  # sentences that are real ones of the document's passage (and another's, if it has under 3)
DOCID = re.compile(r"^msmarco_v2\.1_doc_(\d\d)_(\d+)#(\d+)_(\d+)$")
_WORD = re.compile(r"[a-z]+")
_TAG = re.compile(r"<[^>]+>")
_NOT_PLAIN = re.compile(r"[^A-Za-z0-9, ]+")
_STOP = frozenset(
    "the of and to a in is for on with as by it that this be are or an from at which what how "
    "can do does why when who".split()
)


def shared_data() -> Path:
    """``../shared/data`` (or ``$RAGNAROK_SHARED/data``, as the tests find it): the TREC RAG and CACM files."""
    for candidate in (os.environ.get("RAGNAROK_SHARED"), ROOT.parent / "shared", ROOT / "shared"):
        if candidate and (Path(candidate) / "data").is_dir():
            return Path(candidate) / "data"
    return ROOT.parent / "shared" / "data"


def real_passages(shared: Path | None = None) -> Iterator[str]:
    """The real text the vocabulary is sampled from: the demo documents, CACM's abstracts, every TREC RAG topic
    (skipped where a file is missing)."""
    from ragnarok.collection.demo import iter_demo_documents  # noqa: PLC0415

    shared = shared or shared_data()

    for doc in iter_demo_documents():
        yield f"{doc['title']} {doc['body']}"
    cacm = shared / "cacm" / "cacm.tar.gz"
    if cacm.exists():
        with tarfile.open(cacm) as tar:
            for member in sorted(tar.getmembers(), key=lambda m: m.name):
                if member.isfile():
                    text = tar.extractfile(member).read().decode("utf-8", "replace")
                    yield _TAG.sub(" ", text.split("\nCACM ")[0])  # title and abstract, not the record's codes
    for path in sorted((shared / "trec-rag").glob("topics.*")):
        for line in path.read_text(encoding="utf-8").splitlines():
            yield json.loads(line)["title"] if path.suffix == ".jsonl" else line.partition("\t")[2]


@dataclass
class Vocabulary:
    words: np.ndarray  # real words, most frequent first
    cumulative: np.ndarray  # their cumulative probabilities
    focus: list[np.ndarray]  # per real passage: the indexes of its content words
    sentences: list[list[str]]  # per real passage: its sentences (letters, digits and commas; no full stop)

    @classmethod
    def from_text(cls, passages: Iterable[str]) -> Vocabulary:
        passages = list(passages)
        tokenised = [_WORD.findall(p.lower()) for p in passages]
        counts = Counter(w for words in tokenised for w in words)
        ranked = sorted(counts, key=lambda w: (-counts[w], w))
        rank = {w: i for i, w in enumerate(ranked)}
        freq = np.array([counts[w] for w in ranked], dtype=np.float64)
        focus = [
            np.array(sorted({rank[w] for w in words if w not in _STOP and len(w) > 2}), dtype=np.int64)
            for words in tokenised
        ]
        keep = [i for i, f in enumerate(focus) if len(f)]
        return cls(
            np.array(ranked, dtype=object),
            np.cumsum(freq) / freq.sum(),
            [focus[i] for i in keep],
            [_sentences(passages[i]) for i in keep],
        )

    def draw(self, rng: np.random.Generator, n: int, focus: np.ndarray) -> list[str]:
        """``n`` words: the real unigram distribution, the document's focus words, and the rare tail."""
        real = np.searchsorted(self.cumulative, rng.random(n), side="right").clip(max=len(self.words) - 1)
        pick = rng.random(n)
        words = list(self.words[np.where(pick < FOCUS_SHARE, focus[rng.integers(len(focus), size=n)], real)])
        for i in np.flatnonzero(pick > 1 - TAIL_SHARE):
            words[i] = _rare(min(int(1000 * (1 + rng.pareto(0.5))), 5_000_000))
        return words


def _sentences(passage: str) -> list[str]:
    """A real passage's sentences of 4 words or more, with only letters, digits and commas (full stops end
    the sentences this module writes)."""
    out = []
    for sentence in blingfire.text_to_sentences(" ".join(passage.split())).split("\n"):
        clean = " ".join(_NOT_PLAIN.sub(" ", sentence).split())
        if len(clean.split()) >= 4:
            out.append(clean[0].upper() + clean[1:])
    return out


def _rare(rank: int) -> str:
    """The made-up word of that rank in the rare tail (deterministic, pronounceable, never a real word's
    spelling only by chance)."""
    syllables = (
        "ba be bi bo bu ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu ra re ri ro ru ta te ti "
        "to tu za ze zi zo zu".split()
    )
    out = ["q"]
    while True:
        rank, r = divmod(rank, len(syllables))
        out.append(syllables[r])
        if rank == 0:
            return "".join(out)


class _KnownSentences(Segmenter):
    """The V2.1 windows over bodies whose sentences this module wrote: each ends with the only full stops."""

    def sentences(self, body: str) -> list[tuple[int, int]]:
        return [m.span() for m in re.finditer(r"[^.\s][^.]*\.", body)]


def _sentence(rng: np.random.Generator, vocab: Vocabulary, focus: np.ndarray, real: list[str]) -> str:
    if len(real) >= 3 and rng.random() < REAL_SHARE:
        return real[int(rng.integers(len(real)))] + "."
    n = max(3, int(rng.lognormal(3.0, 0.45)))  # words: median 20, mean ~22, long tail
    if rng.random() < 0.03:
        n *= 4  # a list or table flattened into one "sentence", as web pages have
    words = vocab.draw(rng, n, focus)
    for i in range(4, n - 2, 9):
        if rng.random() < 0.25:
            words[i] += ","
    return " ".join(words).capitalize() + "."


def documents(vocab: Vocabulary, seed: int) -> Iterator[dict[str, str]]:
    """An endless stream of V2.1-shaped documents ``{docid, url, title, headings, body}``."""
    rng = np.random.default_rng(seed)
    rich = [i for i, sentences in enumerate(vocab.sentences) if len(sentences) >= 3]
    offsets = [0] * FILES
    n = 0
    while True:
        passage = int(rng.integers(len(vocab.focus)))
        focus, real = vocab.focus[passage], vocab.sentences[passage]
        if len(real) < 3:  # a topic or a short abstract: its own sentences among another passage's
            real = real + vocab.sentences[rich[int(rng.integers(len(rich)))]]
        title = " ".join(vocab.draw(rng, int(rng.integers(3, 10)), focus)).title()
        headings = "\n".join(
            [
                title,
                *(
                    " ".join(vocab.draw(rng, int(rng.integers(2, 6)), focus)).capitalize()
                    for _ in range(int(rng.integers(0, 4)))
                ),
            ]
        )
        sentences = max(1, min(3000, int(rng.lognormal(3.5, 0.9))))
        body = " ".join(_sentence(rng, vocab, focus, real) for _ in range(sentences))
        url = f"https://www.{''.join(vocab.draw(rng, 2, focus))}.com/{'/'.join(vocab.draw(rng, 2, focus))}"
        file = n % FILES
        doc = {
            "docid": f"msmarco_v2.1_doc_{file:02d}_{offsets[file]}",
            "url": url,
            "title": title,
            "headings": headings,
            "body": body,
        }
        offsets[file] += sum(map(len, doc.values())) + 80  # about its byte offset in that file, as V2.1's docids
        n += 1
        yield doc


def write_collection(path: Path, size: int, seed: int = 0, vocab: Vocabulary | None = None) -> dict[str, float]:
    """Write ``size`` segment records to ``path`` (JSONL), streaming; returns their statistics (segments,
    documents, mean and 99th-percentile segment characters, distinct words seen in the first 10,000)."""
    vocab = vocab or Vocabulary.from_text(real_passages())
    segmenter = _KnownSentences()
    lengths = np.zeros(size, dtype=np.int32)
    count = docs = 0
    with open(path, "w", encoding="utf-8") as out:
        for doc in documents(vocab, seed):
            docs += 1
            for seg in segmenter.segment(doc):
                out.write(json.dumps(anserini_record(seg), ensure_ascii=False) + "\n")
                lengths[count] = len(seg["segment"])
                count += 1
                if count == size:
                    return {
                        "segments": size,
                        "documents": docs,
                        "mean_chars": float(lengths.mean()),
                        "p99_chars": float(np.percentile(lengths, 99)),
                    }
    raise AssertionError("unreachable: the document stream is endless")


def load_queries(shared: Path | None = None, name: str = "topics.rag24.test.txt") -> list[str]:
    """The TREC RAG 2024 test topics (301), the real queries the bench searches with (``name``: another topic
    file of ``trec-rag``, e.g. ``topics.rag24.raggy-dev.txt``, whose queries warm the server up)."""
    path = (shared or shared_data()) / "trec-rag" / name
    if not path.exists():
        raise FileNotFoundError(f"the TREC RAG 2024 topics are not at {path} (see its README)")
    return [line.partition("\t")[2] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
