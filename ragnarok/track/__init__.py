"""TREC RAG track submissions: answer formats (2024, 2025), the validator, resumable concurrent runs.
A tool: it imports the other tools (collection), the service, the stages, core and runtime."""
