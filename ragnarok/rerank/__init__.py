"""Rerankers: a Request (a query and ranked candidates) in, the top-k reordered out.

* :mod:`ragnarok.rerank.embedding`: cosine similarity and MMR with a sentence-transformers model (CPU, offline).
* :mod:`ragnarok.rerank.listwise`: RankGPT / RankZephyr-style listwise reranking over an OpenAI-compatible API.
* :mod:`ragnarok.rerank.rank_llm_adapter`: rank_llm's monoT5, RankZephyr, LiT5 and RankGPT, when installed.
"""
