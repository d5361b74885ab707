"""Cross-validation by topic of the proxy judge's rule families and thresholds over judge-dev.

The 16 topics are split once, in a fixed way, into 4 folds of 4: topic ``demo-NN`` goes to fold ``(NN - 1) % 4``
(fold 0: demo-01, 05, 09, 13; fold 1: 02, 06, 10, 14; fold 2: 03, 07, 11, 15; fold 3: 04, 08, 12, 16). For each
fold, every tunable choice (each rule family on or off, each threshold from its grid) is made on the other 3
folds: each one on its own, the others at their defaults, a family kept only when it raises the training kappa
(a tie removes it), a threshold's default kept on a tie. The choices together are then scored on the held-out
fold: nugget kappa, citation-support kappa, the gold variant's mean ``all``. Ablation: per fold, the chosen
configuration with one family removed, scored on the held-out fold. Labels of one answer depend on that answer
alone, so each configuration is judged once over all 16 topics and the folds read their own topics from it.
Run through ``python bench/bench_judge_dev.py --cv`` (or this file with the same ``--index``)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

FOLDS = tuple(tuple(f"demo-{n:02d}" for n in range(1 + k, 17, 4)) for k in range(4))
NUGGET_CLASSES = ("support", "partial_support", "not_support")
SUPPORT_CLASSES = ("full", "partial", "none")
SUPPORT_NAMES = {"full_support": "full", "partial_support": "partial", "no_support": "none"}
# thresholds and their grids (the default first); the nugget ones chosen by nugget kappa, the rest by support kappa
GRIDS: dict[str, tuple[object, ...]] = {
    "FULL": ((0.4, 0.5, 0.5), (0.4, 0.5, 0.55), (0.4, 0.5, 0.6), (0.5, 0.5, 0.55), (0.3, 0.55, 0.55)),
    "PARTIAL": ((0.25, 0.3, 0.45), (0.35, 0.3, 0.45), (0.35, 0.3, 0.5), (0.35, 0.4, 0.45)),
    "ECHO_MARGIN": (0.05, 0.0, 0.1),
    "SUPPORT_FULL": ((0.7, 0.45, 0.7), (0.7, 0.45, 0.75), (0.6, 0.45, 0.75), (0.8, 0.45, 0.8)),
    "SUPPORT_PARTIAL": ((0.35, 0.35, 0.62), (0.45, 0.35, 0.62), (0.45, 0.35, 0.55), (0.55, 0.35, 0.7)),
}


@dataclass(frozen=True)
class Config:
    off: frozenset[str] = frozenset()
    thresholds: tuple[tuple[str, object], ...] = ()

    def but(self, off: frozenset[str] | None = None, **thresholds: object) -> Config:
        merged = dict(self.thresholds) | thresholds
        return Config(self.off if off is None else off, tuple(sorted(merged.items())))

    def describe(self) -> str:
        moved = [f"{k}={v}" for k, v in self.thresholds if GRIDS[k][0] != v]
        return "off: " + (", ".join(sorted(self.off)) or "none") + "; thresholds: " + (", ".join(moved) or "defaults")


def _support_side(name: str) -> bool:
    return name.startswith("s_") or name.startswith("SUPPORT_")


class CrossValidation:
    """``judge_all(config) -> (nugget labels, support labels)``, aligned with judge-dev's rows."""

    def __init__(self, nugget_rows: list[dict], support_rows: list[dict], families: tuple[str, ...]) -> None:
        from ragnarok.judge.nuggets import Nugget, nugget_scores

        self.nugget_rows, self.support_rows, self.families = nugget_rows, support_rows, families
        self.gold_n = [n["assignment"] for row in nugget_rows for n in row["nuggets"]]
        self.n_qid = [row["qid"] for row in nugget_rows for _ in row["nuggets"]]
        self.gold_s = [item["label"] for row in support_rows for item in row["support"]]
        self.s_qid = [row["qid"] for row in support_rows for _ in row["support"]]
        self._scores = nugget_scores
        self._nugget = Nugget
        self.seen: dict[Config, tuple[list[str], list[str]]] = {}

    def labels(self, config: Config) -> tuple[list[str], list[str]]:
        if config not in self.seen:
            from ragnarok.judge import entail
            from ragnarok.judge.proxy import cosines

            entail.configure(config.off, **dict(config.thresholds))
            try:
                names = ("not_support", "partial_support", "support")
                nuggets = [
                    names[level]
                    for row in self.nugget_rows
                    for level in entail.nugget_levels(
                        row["query"], row["text"], [n["text"] for n in row["nuggets"]], cosines
                    )
                ]
                support = [
                    SUPPORT_CLASSES[2 - entail.support_level(item["sentence_text"], item["passage"], cosines)]
                    for row in self.support_rows
                    for item in row["support"]
                ]
            finally:
                entail.configure()
            self.seen[config] = (nuggets, support)
        return self.seen[config]

    def kappas(self, config: Config, topics: set[str]) -> tuple[float, float]:
        from ragnarok.judge.agreement import cohen_kappa

        nuggets, support = self.labels(config)
        n = [(g, p) for g, p, q in zip(self.gold_n, nuggets, self.n_qid) if q in topics]
        s = [(g, p) for g, p, q in zip(self.gold_s, support, self.s_qid) if q in topics]
        return (
            cohen_kappa([g for g, _ in n], [p for _, p in n], NUGGET_CLASSES),
            cohen_kappa([g for g, _ in s], [p for _, p in s], SUPPORT_CLASSES),
        )

    def gold_all(self, config: Config, topics: set[str]) -> float:
        """The gold variant's mean ``all`` over ``topics`` as the judge labels it."""
        nuggets, _ = self.labels(config)
        it, scores = iter(nuggets), []
        for row in self.nugget_rows:
            labels = [next(it) for _ in row["nuggets"]]
            if row["variant"] == "gold" and row["qid"] in topics:
                judged = [
                    self._nugget(text=n["text"], importance=n["importance"], assignment=a)
                    for n, a in zip(row["nuggets"], labels)
                ]
                scores.append(self._scores(judged)["all"])
        return sum(scores) / len(scores) if scores else float("nan")

    def choose(self, train: set[str]) -> Config:
        """One pass in a fixed order on the ``train`` topics (see the module's docstring)."""
        config = Config()
        for family in self.families:
            side = 1 if _support_side(family) else 0
            fewer = config.but(off=config.off | {family})
            if self.kappas(fewer, train)[side] >= self.kappas(config, train)[side]:
                config = fewer
        for name, grid in GRIDS.items():
            side = 1 if _support_side(name) else 0
            scored = [(self.kappas(config.but(**{name: v}), train)[side], -i, v) for i, v in enumerate(grid)]
            config = config.but(**{name: max(scored)[2]})
        return config

    def run(self, progress: Callable[[str], None] = lambda _: None) -> dict:
        folds = []
        for k, held in enumerate(FOLDS):
            train = {q for j, f in enumerate(FOLDS) if j != k for q in f}
            config = self.choose(train)
            progress(f"fold {k}: {config.describe()}")
            kn, ks = self.kappas(config, set(held))
            ablation = {}
            for family in self.families:
                if family not in config.off:
                    ablation[family] = self.kappas(config.but(off=config.off | {family}), set(held))
            folds.append(
                {
                    "topics": held,
                    "config": config,
                    "train": self.kappas(config, train),
                    "kappa": kn,
                    "s_kappa": ks,
                    "gold": self.gold_all(config, set(held)),
                    "ablation": ablation,
                }
            )
        every = {q for f in FOLDS for q in f}
        return {"folds": folds, "default": [self.kappas(Config(), set(f)) for f in FOLDS], "all": self.choose(every)}


def report(cv: dict, families: tuple[str, ...]) -> str:
    folds = cv["folds"]
    lines = [
        "| fold | held-out topics | nugget κ | support κ | gold `all` | train nugget κ | chosen |",
        "|---|---|---|---|---|---|---|",
    ]
    for k, f in enumerate(folds):
        lines.append(
            f"| {k} | {', '.join(t[-2:] for t in f['topics'])} | {f['kappa']:.3f} | {f['s_kappa']:.3f} | "
            f"{f['gold']:.3f} | {f['train'][0]:.3f} | {f['config'].describe()} |"
        )
    kn = [f["kappa"] for f in folds]
    ks = [f["s_kappa"] for f in folds]
    lines.append(
        f"\nCross-validated (held-out folds): nugget κ **{statistics.mean(kn):.3f}** (folds {min(kn):.3f} .. "
        f"{max(kn):.3f}, sd {statistics.stdev(kn):.3f}); support κ **{statistics.mean(ks):.3f}** (folds "
        f"{min(ks):.3f} .. {max(ks):.3f}); gold `all` per fold " + ", ".join(f"{f['gold']:.3f}" for f in folds)
    )
    default = cv["default"]
    lines.append(
        "The shipped configuration (the protocol on all 16 topics, so no fold held out), per fold: nugget κ "
        + ", ".join(f"{a:.3f}" for a, _ in default)
        + "; support κ "
        + ", ".join(f"{b:.3f}" for _, b in default)
    )
    lines.append(f"The same protocol on all 16 topics (the shipped defaults should be this): {cv['all'].describe()}")
    lines += [
        "\nAblation: held-out κ (mean of the 4 folds) of the chosen configuration with one family removed "
        "(- where the fold's own choice already removed it; Δ against the chosen configuration)\n",
        "| family | nugget κ | Δ nugget | support κ | Δ support | folds that removed it |",
        "|---|---|---|---|---|---|",
    ]
    for family in families:
        kept = [f for f in folds if family in f["ablation"]]
        removed = len(folds) - len(kept)
        if not kept:
            lines.append(f"| {family} | - | - | - | - | {removed} |")
            continue
        an = statistics.mean(f["ablation"][family][0] for f in kept)
        as_ = statistics.mean(f["ablation"][family][1] for f in kept)
        bn = statistics.mean(f["kappa"] for f in kept)
        bs = statistics.mean(f["s_kappa"] for f in kept)
        lines.append(f"| {family} | {an:.3f} | {an - bn:+.3f} | {as_:.3f} | {as_ - bs:+.3f} | {removed} |")
    return "\n".join(lines)


def prepared(answers: dict, nugget_rows: list[dict], support_rows: list[dict], segments) -> tuple[list, list]:  # type: ignore[no-untyped-def]
    """judge-dev's rows with the texts the judge reads (answer text; the cited sentence and its segment)."""
    n_rows = [{**row, "text": answers[row["variant"]][row["qid"]].text} for row in nugget_rows]
    s_rows = []
    for row in support_rows:
        answer = answers[row["variant"]][row["qid"]]
        items = [
            {**item, "sentence_text": answer.sentences[item["sentence"]][0], "passage": segments(item["docid"]) or ""}
            for item in row["support"]
        ]
        s_rows.append({**row, "support": items})
    return n_rows, s_rows
