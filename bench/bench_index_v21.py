"""`ragnarok index` on a V2.1-shaped segment file against pyserini's own indexer, and a build killed halfway.

    python bench/bench_index_v21.py --segments 200000 --rounds 3 [--workdir DIR] [--files 1]

1. CPU-seconds (user + system, the whole process tree) per segment of ``ragnarok index FILE OUT --threads 2``
   and of pyserini's indexer (Anserini's ``IndexCollection`` with the arguments ``python -m
   pyserini.index.lucene --collection JsonCollection --threads 2 --storePositions --storeDocvectors --storeRaw``
   passes) on the very same file(s), rounds alternating; their ratio per round and the median.
2. Resume: a full build's wall time T, then the same build started afresh and killed (SIGKILL) at T/2; the
   command run again says how many shards it found done, and the share of the work the kill kept is
   ``1 - (time to finish) / T``.

The file is bench/scale_corpus.py's (V2.1's fields plus ``id``/``contents``, so both indexers read it as it is),
written once into the work directory; ``--files N`` splits it into N files (pyserini indexes one file per
thread, as ragnarok deals each shard into one file per thread).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_corpus  # noqa: E402

PYSERINI = (
    "import sys; from ragnarok.core.java import start_jvm; start_jvm(); from jnius import autoclass; "
    "autoclass('io.anserini.index.IndexCollection').main(sys.argv[1:])"
)
RAGNAROK = [sys.executable, "-m", "ragnarok.cli"]


def cpu_run(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s of the process and its children) of one command."""
    before = os.times()
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    after = os.times()
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def collection(work: Path, segments: int, files: int) -> Path:
    folder = work / f"v21-{segments}-{files}"
    if not folder.exists():
        tmp = work / "all.jsonl"
        scale_corpus.write_collection(tmp, segments)
        folder.mkdir()
        lines = tmp.read_bytes().splitlines(keepends=True)
        for i in range(files):
            (folder / f"part{i:02d}.jsonl").write_bytes(b"".join(lines[i::files]))
        tmp.unlink()
    return folder


def compare(folder: Path, work: Path, segments: int, rounds: int, threads: int) -> None:
    source = folder if len(list(folder.iterdir())) > 1 else next(folder.iterdir())
    ours, theirs = [], []
    for n in range(rounds):
        for label, out in (("ragnarok", work / "ix-ours"), ("pyserini", work / "ix-theirs")):
            shutil.rmtree(out, ignore_errors=True)
            if label == "ragnarok":
                wall, cpu = cpu_run([*RAGNAROK, "index", str(source), str(out), "--threads", str(threads)])
                ours.append(cpu)
            else:
                wall, cpu = cpu_run(
                    [
                        sys.executable,
                        "-c",
                        PYSERINI,
                        "-collection",
                        "JsonCollection",
                        "-input",
                        str(folder),
                        "-index",
                        str(out),
                        "-generator",
                        "DefaultLuceneDocumentGenerator",
                        "-threads",
                        str(threads),
                        "-storePositions",
                        "-storeDocvectors",
                        "-storeRaw",
                        "-quiet",
                    ]
                )
                theirs.append(cpu)
            print(
                f"round {n + 1}  {label:8}  wall {wall:6.1f} s  CPU {cpu:6.1f} s  "
                f"{cpu / segments * 1e6:6.1f} CPU-us/segment  load {os.getloadavg()[0]:.1f}",
                flush=True,
            )
        print(f"round {n + 1}  ratio ragnarok/pyserini CPU {ours[-1] / theirs[-1]:.2f}", flush=True)
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    print(
        f"CPU-seconds per segment, ragnarok / pyserini: median {statistics.median(ratios):.2f} "
        f"(rounds {', '.join(f'{r:.2f}' for r in ratios)}; goal <= 1.0)"
    )


def resume(folder: Path, work: Path, threads: int) -> None:
    source = folder if len(list(folder.iterdir())) > 1 else next(folder.iterdir())
    out = work / "ix-resume"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out.with_name(out.name + ".partial"), ignore_errors=True)
    full, _ = cpu_run([*RAGNAROK, "index", str(source), str(out), "--threads", str(threads)])
    shutil.rmtree(out)
    proc = subprocess.Popen(
        [*RAGNAROK, "index", str(source), str(out), "--threads", str(threads)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    time.sleep(full / 2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    start = time.monotonic()
    again = subprocess.run(
        [*RAGNAROK, "index", str(source), str(out), "--threads", str(threads)],
        capture_output=True,
        text=True,
        check=True,
    )
    rest = time.monotonic() - start
    said = [line for line in again.stderr.splitlines() if line.startswith("resuming")]
    print(
        f"full build {full:.1f} s; killed at {full / 2:.1f} s; the rerun took {rest:.1f} s: "
        f"{1 - rest / full:.0%} of the work kept ({said[0] if said else 'resumed nothing'}; goal >= 40 %)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--segments", type=int, default=200_000)
    ap.add_argument("--files", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--no-resume", action="store_true")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-index-v21-"))
    work.mkdir(parents=True, exist_ok=True)
    print(
        f"# {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {args.segments:,} segments in {args.files} "
        f"file(s), {args.threads} threads"
    )
    folder = collection(work, args.segments, args.files)
    compare(folder, work, args.segments, args.rounds, args.threads)
    if not args.no_resume:
        resume(folder, work, args.threads)


if __name__ == "__main__":
    main()
