"""Turning document collections into segment collections (segmentation, dedup, the demo corpus)."""
