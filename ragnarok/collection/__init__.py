"""Turning document collections into segment collections (segmentation, dedup, the demo corpus).
A tool: it imports the service, the stores, the stages, core and runtime (pyproject.toml's contract)."""
