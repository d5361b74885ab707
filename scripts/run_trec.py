#!/usr/bin/env python
"""Produce a TREC RAG 2024/2025 submission: ``ragnarok run`` as a script.

    python scripts/run_trec.py --topics rag24.test --pipeline 'bm25@100 | extractive' \\
        --run-id my-run --output run.jsonl [--year 2025 [--with-prompt]] [--task r] [--requests given.jsonl] \\
        [--concurrency 16]

Re-running the same command resumes: topics already in the output are skipped. Check the result with
``ragnarok validate run.jsonl --topics rag24.test``.
"""

import typer

from ragnarok.track.cli import run

if __name__ == "__main__":
    typer.run(run)
