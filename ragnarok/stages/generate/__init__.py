"""Augmented generation: prompts, LLM backends, citation post-processing."""
