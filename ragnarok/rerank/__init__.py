"""Rerankers: a Request (a query and ranked candidates) in, the top-k reordered out.

* :mod:`ragnarok.rerank.embedding`: cosine similarity and MMR with a sentence-transformers model (CPU, offline).
* :mod:`ragnarok.rerank.listwise`: RankGPT / RankZephyr-style listwise reranking over an OpenAI-compatible API.
* :mod:`ragnarok.rerank.monot5`, :mod:`ragnarok.rerank.cross_encoder`: pointwise monoT5 (transformers) and
  cross-encoders (sentence-transformers), CPU or GPU, sharing :mod:`ragnarok.rerank.pointwise`; test models
  in :mod:`ragnarok.rerank.tiny`.
* :mod:`ragnarok.rerank.rank_llm_adapter`: rank_llm's RankZephyr, LiT5 and RankGPT, when installed.
"""
