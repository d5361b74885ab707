"""``ragnarok collection ...``: curating a document collection at scale (near-duplicate removal, segmentation)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ragnarok.runtime import cli_output
from ragnarok.runtime.cli_errors import fails_cleanly
from ragnarok.runtime.cli_output import Format, OutputOpt

collection_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="Curate a JSONL document collection: near-duplicate removal (MinHash-LSH) and segmentation.",
)

InputArg = Annotated[Path, typer.Argument(help="JSONL documents: a file or a directory of them (.gz ok).")]
SkipBad = Annotated[
    bool,
    typer.Option(
        "--skip-bad",
        help="Leave bad lines (malformed JSON, invalid UTF-8, no docid, repeated docid) out instead of failing.",
    ),
]
Workers = Annotated[
    Optional[int], typer.Option(min=1, help="Worker processes (default: CPU cores, at most 4; 1 runs in this process).")
]
Report = Annotated[Optional[Path], typer.Option(help="Also write the report as JSON to this file.")]
Progress = Annotated[
    Optional[bool], typer.Option("--progress/--no-progress", help="Progress bar on stderr (default: when a terminal).")
]


@collection_app.command()
@fails_cleanly
def dedup(
    input: InputArg,
    output: Annotated[Path, typer.Argument(help="JSONL file to write the kept documents to (.gz compresses).")],
    threshold: Annotated[
        float,
        typer.Option(
            min=0.05,
            max=1.0,
            help="Jaccard similarity of 9-word shingle sets above which documents are near-duplicates.",
        ),
    ] = 0.8,
    num_perm: Annotated[int, typer.Option(min=16, max=1024, help="MinHash permutations.")] = 128,
    storage: Annotated[
        str,
        typer.Option(
            help="Where the LSH buckets live: 'disk' (scratch files beside OUTPUT, "
            "sorted at the end; ~30 bytes of memory per document) or 'memory' "
            "(datasketch's MinHashLSH; ~4.7 KiB per document)."
        ),
    ] = "disk",
    redis_url: Annotated[
        Optional[str],
        typer.Option(
            help="Keep the LSH buckets in Redis (redis://host:port/db) for collections beyond this machine's memory."
        ),
    ] = None,
    skip_bad: SkipBad = False,
    workers: Workers = None,
    no_verify: Annotated[
        bool,
        typer.Option(
            "--no-verify", help="Trust LSH buckets without checking each pair's MinHash similarity against --threshold."
        ),
    ] = False,
    report: Report = None,
    examples: Annotated[int, typer.Option(min=0, help="Largest classes listed in the report.")] = 10,
    progress: Progress = None,
    output_format: OutputOpt = Format.text,
) -> None:
    """Remove near-duplicate documents (MinHash-LSH over 9-word shingles); keep the first of each class."""
    from ragnarok.collection import dedup as dd  # noqa: PLC0415

    _check_paths(input, output, report)
    result = dd.dedup(
        input,
        output,
        threshold=threshold,
        num_perm=num_perm,
        storage=storage,
        redis_url=redis_url,
        skip_bad=skip_bad,
        workers=workers,
        verify=not no_verify,
        examples=examples,
        progress=progress,
    )
    if report is not None:
        dd.write_report(report, result)
    cli_output.result({"output": str(output), **result.as_dict()})
    typer.echo(result.summary(), err=True)
    typer.echo(
        f"kept {result.kept:,} of {result.input.documents:,} documents "
        f"({result.removed:,} near-duplicates removed, {result.percent_removed:.2f} %) in {output}"
    )


@collection_app.command()
@fails_cleanly
def segment(
    input: InputArg,
    output: Annotated[Path, typer.Argument(help="JSONL file to write the segments to (.gz compresses).")],
    window: Annotated[int, typer.Option(min=1, help="Sentences per segment.")] = 10,
    stride: Annotated[int, typer.Option(min=1, help="Sentences between segment starts.")] = 5,
    skip_bad: SkipBad = False,
    workers: Workers = None,
    report: Report = None,
    progress: Progress = None,
    anserini: Annotated[
        bool,
        typer.Option(
            "--anserini",
            help="Write Anserini JsonCollection records (id, contents, "
            "and every segment field), as `ragnarok index` "
            "indexes them: then `ragnarok index --collection "
            "JsonCollection DIR INDEX` indexes OUTPUT's "
            "directory.",
        ),
    ] = False,
    output_format: OutputOpt = Format.text,
) -> None:
    """Segment documents into overlapping sentence windows (MS MARCO V2.1 segmented: 10 sentences, stride 5)."""
    import json  # noqa: PLC0415

    from ragnarok.collection.parallel_segment import segment_collection  # noqa: PLC0415
    from ragnarok.collection.workers import write_atomically  # noqa: PLC0415

    _check_paths(input, output, report)
    result = segment_collection(
        input,
        output,
        workers=workers,
        skip_bad=skip_bad,
        window=window,
        stride=stride,
        progress=progress,
        anserini=anserini,
    )
    if report is not None:
        write_atomically(report, [json.dumps(result.as_dict(), indent=2).encode() + b"\n"])
    cli_output.result({"output": str(output), **result.as_dict()})
    typer.echo(result.summary(), err=True)
    typer.echo(f"wrote {result.segments:,} segments of {result.input.documents:,} documents to {output}")


def _check_paths(input: Path, output: Path, report: Optional[Path]) -> None:
    if not input.exists():
        raise FileNotFoundError(f"collection not found: {input}")
    if output.exists() and output.is_dir():
        raise IsADirectoryError(f"OUTPUT is a directory: {output}")
    if input.resolve() == output.resolve() or (
        report is not None and report.resolve() in {input.resolve(), output.resolve()}
    ):
        raise ValueError("INPUT, OUTPUT and --report must be different files")


prebuilt_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    help="pyserini's prebuilt indexes by their catalogue names: which are here, and downloading one.",
)


@prebuilt_app.command("list")
@fails_cleanly
def prebuilt_list(
    match: Annotated[Optional[str], typer.Argument(help="Only names containing this (e.g. msmarco-v2.1).")] = None,
    output_format: OutputOpt = Format.text,
) -> None:
    """Every index of the catalogue (and each set of shards), its tarball's size, and where it is unpacked here."""
    from ragnarok.core.settings import get_settings  # noqa: PLC0415
    from ragnarok.stages.retrieve import prebuilt  # noqa: PLC0415

    where = get_settings().prebuilt_path
    rows = [
        (
            name,
            "set",
            sum(e.compressed_bytes for e in shards),
            "here" if all(prebuilt.locate(e.name, where) for e in shards) else "missing",
        )
        for name, shards in prebuilt.sets().items()
    ]
    rows += [
        (e.name, e.type, e.compressed_bytes, str(prebuilt.locate(e.name, where) or "missing"))
        for e in prebuilt.catalogue().values()
    ]
    shown = sorted(r for r in rows if not match or match in r[0])
    cli_output.result([{"name": n, "kind": k, "bytes": size, "status": status} for n, k, size, status in shown])
    for name, kind, size, status in shown:
        typer.echo(f"{name}\t{kind}\t{prebuilt.gb(size)}\t{status}")


@prebuilt_app.command("fetch")
@fails_cleanly
def prebuilt_fetch(
    name: Annotated[
        str,
        typer.Argument(help="A catalogue name, or a set's (msmarco-v2.1-doc-segmented.arctic-embed-l: its 10 shards)."),
    ],
    dest: Annotated[
        Optional[Path], typer.Option(help="Where to unpack (default: RAGNAROK_PREBUILT_DIR, else DATA_DIR/prebuilt).")
    ] = None,
    mirror: Annotated[
        Optional[str], typer.Option(help="Download MIRROR/<tarball> instead of the catalogue's URL.")
    ] = None,
    output_format: OutputOpt = Format.text,
) -> None:
    """Download and unpack NAME under pyserini's own directory name, resumably, after checking the disk; the
    R service then finds it by name (prebuilt:NAME, dense:prebuilt:NAME)."""
    from ragnarok.collection.prebuilt_fetch import fetch  # noqa: PLC0415
    from ragnarok.core.settings import get_settings  # noqa: PLC0415

    done = fetch(name, dest or get_settings().prebuilt_path, mirror, say=lambda line: typer.echo(line, err=True))
    cli_output.result({"name": name, "paths": [str(path) for path in done]})
