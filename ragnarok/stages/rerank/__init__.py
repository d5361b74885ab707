"""Rerankers: a Request (a query and ranked candidates) in, the top-k reordered out.

* :mod:`ragnarok.stages.rerank.embedding`: cosine similarity and MMR with a sentence-transformers model (CPU, offline).
* :mod:`ragnarok.stages.rerank.listwise`: RankGPT / RankZephyr-style listwise reranking over an OpenAI-compatible API.
* :mod:`ragnarok.stages.rerank.monot5`, :mod:`ragnarok.stages.rerank.cross_encoder`: pointwise monoT5 (transformers) and
  cross-encoders (sentence-transformers), CPU or GPU, sharing :mod:`ragnarok.stages.rerank.pointwise`; test models
  in :mod:`ragnarok.stages.rerank.tiny`.
* :mod:`ragnarok.stages.rerank.rank_llm_adapter`: rank_llm's RankZephyr, LiT5 and RankGPT, when installed.
"""
