"""Reference metrics for evaluation sets with gold answers (AutoRAG's generation node metrics), each from a
well-kept library: ROUGE-L F (``rouge-score``, Porter stemming), sentence BLEU and chrF (``sacrebleu``),
METEOR (``nltk``; offline, so exact and stem matches only: no WordNet synonyms, whose data is a separate
download), token F1 (SQuAD's definition) and SemScore (the cosine of the offline MiniLM embeddings). All in
[0, 1]."""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

METRICS = ("rouge_l", "bleu", "chrf", "meteor", "token_f1", "semscore")


class _NoSynonyms:
    """Stands in for nltk's WordNet reader: METEOR then matches exact words and stems only."""

    @staticmethod
    def synsets(_word: str, *args: Any, **kwargs: Any) -> list[Any]:
        return []


@lru_cache(maxsize=1)
def _rouge() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def _words(text: str) -> list[str]:
    return re.findall(r"\w+|[^\w\s]", text.lower())


def squad_tokens(text: str) -> list[str]:
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    return re.sub(r"\b(a|an|the)\b", " ", text).split()


def token_f1(prediction: str, reference: str) -> float:
    pred, ref = squad_tokens(prediction), squad_tokens(reference)
    common = sum((Counter(pred) & Counter(ref)).values())
    if not pred or not ref or common == 0:
        return float(pred == ref)
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def reference_scores(prediction: str, references: Sequence[str], semscore: bool = True) -> dict[str, float]:
    """Every metric of one prediction against its references (the best reference for ROUGE-L, token F1 and
    SemScore; all references at once for BLEU, chrF and METEOR)."""
    import sacrebleu
    from nltk.translate.meteor_score import meteor_score

    refs = [r for r in references if r.strip()]
    if not refs:
        raise ValueError("no reference answer")
    out = {
        "rouge_l": max(_rouge().score(r, prediction)["rougeL"].fmeasure for r in refs),
        "bleu": sacrebleu.sentence_bleu(prediction, refs).score / 100,
        "chrf": sacrebleu.sentence_chrf(prediction, refs).score / 100,
        "meteor": float(meteor_score([_words(r) for r in refs], _words(prediction), wordnet=_NoSynonyms())),
        "token_f1": max(token_f1(prediction, r) for r in refs),
    }
    if semscore:
        from ragnarok.judge.proxy import cosines

        out["semscore"] = float(cosines([prediction], refs).max())
    return out


def read_references(path: str) -> dict[str, list[str]]:
    """Gold answers: JSONL ``{"qid", "answer": str | [str], ...}`` (``references``/``reference`` also read)."""
    import json

    out: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                data: Mapping[str, Any] = json.loads(line)
                value = next(data[k] for k in ("answer", "references", "reference") if k in data)
                out[str(data["qid"])] = [value] if isinstance(value, str) else [str(v) for v in value]
            except (ValueError, KeyError, StopIteration, TypeError) as exc:
                raise ValueError(f"{path}:{n}: expected {{qid, answer}} ({exc!r})") from None
    return out
