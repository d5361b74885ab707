"""What a run's output was written with, so that resuming it with another pipeline is refused rather than mixing
the answers of two pipelines in one submission.

Beside the log of finished topics (the submission itself for ``--task rag``, its Request JSONL for ``r``) lies
``LOG.pipeline.json``: the pipeline (its spec, presets resolved) and the index, written with the first line.
Resuming into a log that holds lines of another pipeline or index fails (exit 2) and shows the difference;
``--restart`` starts over instead, after moving every file of the old run aside (``run.jsonl`` ->
``run.jsonl.old``, then ``.old2``, ...: nothing is overwritten) and says so.
"""

from __future__ import annotations

import json
from pathlib import Path

from ragnarok.track.output import OutputError, atomic_write


def record_path(log: Path) -> Path:
    return log.with_name(log.name + ".pipeline.json")


def made_with(pipeline: str, index: str | None) -> dict[str, str | None]:
    return {"pipeline": pipeline, "index": index}


def check_same(log: Path, made: dict[str, str | None]) -> str | None:
    """None when ``log`` may be resumed with ``made``: no log, no line in it, or lines of the same pipeline and
    index. A note (to show) when the log holds lines but no record of what made them (an older ragnarok). Raises
    :class:`OutputError` showing the difference when they were made otherwise."""
    if not log.exists() or not log.read_bytes().strip():
        return None
    path = record_path(log)
    try:
        before = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return f"note: {log} records no pipeline (an older ragnarok wrote it): resuming it with `{made['pipeline']}`"
    except (OSError, ValueError) as exc:
        raise OutputError(f"cannot read {path}: {exc}; give another --output, or --restart") from None
    changed = [f"{key} `{before.get(key)}` -> `{made[key]}`" for key in made if before.get(key) != made[key]]
    if changed:
        raise OutputError(
            f"{log} holds answers of another pipeline ({'; '.join(changed)}): resuming would mix "
            "them; give another --output, the same --pipeline and --index, or --restart to move "
            "the old output aside and start over"
        )
    return None


def record(log: Path, made: dict[str, str | None]) -> None:
    """Write (or rewrite) the record beside ``log``, replaced at once."""
    path = record_path(log)
    data = (json.dumps(made, ensure_ascii=False, indent=1) + "\n").encode()
    if not path.exists() or path.read_bytes() != data:
        atomic_write(path, data)


def move_aside(output: Path, log: Path) -> list[tuple[Path, Path]]:
    """Rename the existing files of one run (``output``, its ``log`` when another file, the log's record) to
    ``NAME.old`` (or ``.old2``, ...: the first suffix none of them has yet, so nothing is overwritten; the record
    follows its log: ``run.jsonl.old.pipeline.json``); returns (old name, new name) pairs."""

    def targets(n: int) -> list[tuple[Path, Path]]:
        old = f".old{n if n > 1 else ''}"
        pairs = {output: output.with_name(output.name + old), log: log.with_name(log.name + old)}
        pairs[record_path(log)] = record_path(pairs[log])
        return [(f, to) for f, to in pairs.items() if f.exists()]

    n = 1
    while any(to.exists() for _, to in targets(n)):
        n += 1
    moved = []
    for f, to in targets(n):
        try:
            f.rename(to)
        except OSError as exc:
            raise OutputError(f"cannot move {f} aside to {to}: {exc.strerror or exc}") from None
        moved.append((f, to))
    return moved
