"""TREC RAG track submissions: answer formats (2024, 2025), the validator, resumable concurrent runs."""
