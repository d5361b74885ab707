"""Judging answers: nuggets (AutoNuggetizer), citation support, UMBRELA relevance labels, reference metrics,
pairwise judgments; every LLM judgment cached (:mod:`ragnarok.judge.cache`), a proxy judge without an LLM.
A tool: it imports the other tools' formats (track), the service, the stores, the stages, core and runtime."""
