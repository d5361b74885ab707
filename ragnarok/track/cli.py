"""Track commands: ``ragnarok run``, ``ragnarok validate`` and ``ragnarok topics fetch|list``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Optional

import typer

from ragnarok.core.settings import get_settings
from ragnarok.core.topic_sets import PACKAGE_TOPICS, is_track_set, resolve_topics
from ragnarok.core.topics import Topic
from ragnarok.runtime import cli_output
from ragnarok.runtime.cli_errors import fails_cleanly
from ragnarok.runtime.cli_output import Format, OutputFormatOpt, OutputOpt
from ragnarok.runtime.interrupt import resume_with, stops_on_signals

TOPICS_DIR = PACKAGE_TOPICS  # the project's own topic sets (``topics/`` in a checkout links to them)
topics_app = typer.Typer(no_args_is_help=True, add_completion=False, help="Topic sets: list them, fetch the track's.")
convert_app = typer.Typer(no_args_is_help=True, add_completion=False, help="Convert submissions between formats.")


@fails_cleanly
@stops_on_signals("no topic was run yet; run the same command again")
def run(
    topics: Annotated[
        Optional[str],
        typer.Option(
            help="Topic file or set name (e.g. demo, rag24.test); with --requests, defaults to the requests' queries."
        ),
    ] = None,
    pipeline: Annotated[str, typer.Option(help="Pipeline spec or preset, e.g. 'bm25@100 | extractive'.")] = "offline",
    run_id: Annotated[str, typer.Option(help="The run's tag, one word.")] = "ragnarok",
    output: Annotated[Path, typer.Option(help="Submission file (JSONL; a TREC run file for --task r).")] = Path(
        "run.jsonl"
    ),
    task: Annotated[str, typer.Option(help="rag: answers; r: a ranking (TREC run + Request JSONL).")] = "rag",
    year: Annotated[int, typer.Option(help="Answer format: 2024 or 2025.")] = 2024,
    requests: Annotated[
        Optional[Path],
        typer.Option(help="AG-only: generate from these candidates (rank_llm Request JSONL) instead of retrieving."),
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, max=256, help="Topics in flight.")] = 4,
    retries: Annotated[int, typer.Option(min=1, max=20, help="Attempts per topic.")] = 3,
    team_id: Annotated[Optional[str], typer.Option(help="2025 metadata.team_id (default: the run id).")] = None,
    run_type: Annotated[str, typer.Option(help="2025 metadata.type: automatic or manual.")] = "automatic",
    index: Annotated[Optional[str], typer.Option(help="Index name (default from settings).")] = None,
    with_prompt: Annotated[
        bool,
        typer.Option(
            "--with-prompt", help="2025: write the generator's rendered prompt into each line's metadata.prompt."
        ),
    ] = False,
    progress: Annotated[
        Optional[bool],
        typer.Option(
            "--progress/--no-progress", help="Show a progress bar on stderr (default: when stderr is a terminal)."
        ),
    ] = None,
    restart: Annotated[
        bool,
        typer.Option(
            "--restart", help="Start over instead of resuming: the old output is moved aside (OUTPUT.old, .old2, ...)."
        ),
    ] = False,
    output_format: OutputFormatOpt = Format.text,
) -> None:
    """Run a pipeline over a topic set and write a TREC RAG submission; re-run the same command to resume
    (another --pipeline or --index is refused: give another --output, or --restart)."""
    from ragnarok.core.presets import resolve  # noqa: PLC0415
    from ragnarok.track.formats import RUN_TYPES, YEARS  # noqa: PLC0415
    from ragnarok.track.run import TrackOptions, check_names, read_requests, run_track, track_pipeline  # noqa: PLC0415

    cli_output.file_not_format(output)
    if task not in ("rag", "r"):
        raise ValueError(f"--task must be rag or r, got {task!r}")
    if year not in YEARS:
        raise ValueError(f"--year must be one of {YEARS}, got {year}")
    if not run_id or any(c.isspace() for c in run_id):
        raise ValueError(f"--run-id must be one word, got {run_id[:200]!r}")
    if run_type not in RUN_TYPES:
        raise ValueError(f"--run-type must be one of {', '.join(RUN_TYPES)}, got {run_type[:200]!r}")
    if with_prompt and (year != 2025 or task != "rag"):
        raise ValueError(
            "--with-prompt writes metadata.prompt, a field of 2025 answers: give --year 2025 (and --task rag)"
        )
    settings = get_settings()
    pipeline_ = track_pipeline(resolve(pipeline), given=requests is not None)
    check_names(pipeline_, settings, index)  # before anything slow: a typo fails at once
    given = read_requests(requests) if requests is not None else None
    if topics is not None:
        loaded = resolve_topics(topics, settings)
    elif given is not None:
        loaded = [Topic(qid, r.query.text) for qid, r in given.items()]
    else:
        raise ValueError("give --topics (or --requests for an AG-only run)")
    options = TrackOptions(
        run_id=run_id,
        output=output,
        task=task,
        year=year,  # type: ignore[arg-type]
        concurrency=concurrency,
        retries=retries,
        team_id=team_id,
        run_type=run_type,
        index=index,
        progress=progress,
        restart=restart,
        with_prompt=with_prompt,
    )
    resume_with(lambda: interrupted_run(options, len(loaded)))
    summary = asyncio.run(run_track(pipeline_, loaded, settings, options, given))
    typer.echo(f"{output}: {summary}", err=True)
    cli_output.result(
        {
            "output": str(output),
            "topics": summary.topics,
            "written": summary.written,
            "skipped": summary.skipped,
            "failed": sorted(summary.failed),
        }
    )
    if summary.failed:
        for qid, why in sorted(summary.failed.items()):
            cli_output.error(f"{qid}: {why}")
        cli_output.error(f"{len(summary.failed)} of {summary.topics} topics failed")
        raise typer.Exit(1)


def interrupted_run(options, topics: int) -> str:  # type: ignore[no-untyped-def]
    """What an interrupted run kept (its log's whole lines, one per topic) and how to resume it."""
    path = options.log_path
    written = path.read_bytes().count(b"\n") if path.is_file() else 0
    then = f" (it then writes {options.output})" if path != options.output else ""
    return f"{written} of {topics} topics written to {path}; run the same command again to resume{then}"


@fails_cleanly
def validate(
    run_file: Annotated[Path, typer.Argument(metavar="RUN", help="A submission (JSONL, 2024 or 2025 format).")],
    topics: Annotated[Optional[str], typer.Option(help="Topic file or set name: checks coverage and text.")] = None,
    year: Annotated[Optional[int], typer.Option(help="Force the format (default: from the first line).")] = None,
    fix: Annotated[
        Optional[Path],
        typer.Option(help="Write a fixed copy here, fixed as the official checkers fix (docs/track-runs.md)."),
    ] = None,
    apply_fixes: Annotated[
        bool, typer.Option("--apply-fixes", help="The official validator's flag: --fix RUN.fixed.")
    ] = False,
    v21: Annotated[
        Optional[bool],
        typer.Option(
            "--v21/--no-v21",
            help="Check MS MARCO V2.1 segment ids "
            "(default: with the track's topics, rag24/rag25, or when the run "
            "uses them); --no-v21 allows other docids (demo runs).",
        ),
    ] = None,
    output_format: OutputOpt = Format.text,
) -> None:
    """Check a submission against the track's rules; exit 1 when it has errors."""
    from ragnarok.track import validate as checks  # noqa: PLC0415

    if apply_fixes:
        if fix is not None and fix != Path(f"{run_file}.fixed"):
            raise ValueError(f"--apply-fixes writes {run_file}.fixed: give it or --fix OUT, not both")
        fix = Path(f"{run_file}.fixed")
    expected = {t.qid: t.text for t in resolve_topics(topics, get_settings())} if topics else None
    if v21 is None and topics and is_track_set(topics):  # the track's topics: its collection's ids, as its checkers
        v21 = True
    result = checks.validate(run_file, expected, year, v21)
    for problem in result.problems[:200]:
        typer.echo(str(problem), err=True)
    if len(result.problems) > 200:
        typer.echo(f"... and {len(result.problems) - 200} more", err=True)
    typer.echo(result.summary())
    report = _validation_report(result)
    if fix is None:
        _envelope_problems(result)
    cli_output.result(report)
    if fix is not None:
        changed = checks.fix(result, fix, expected)
        again = checks.validate(fix, expected, year, v21)
        typer.echo(f"fixed copy: {fix} ({changed}); {again.summary()}")
        _envelope_problems(again)  # what is left once fixed decides, as the exit code does
        cli_output.result(
            {**report, "fixed": {"path": str(fix), "changes": vars(changed), **_validation_report(again)}}
        )
        if not again.ok:
            raise typer.Exit(1)
        return
    if not result.ok:
        raise typer.Exit(1)


def _envelope_problems(result) -> None:  # type: ignore[no-untyped-def]
    """A validation's problems in the ``--output json`` envelope's errors and warnings (said on stderr)."""
    for problem in result.problems:
        if problem.level == "error":
            cli_output.error(str(problem))
        else:
            cli_output.warn(str(problem), echo=False)


def _validation_report(result) -> dict:  # type: ignore[no-untyped-def]
    """A validation as the ``--output json`` envelope's result."""
    return {
        "path": str(result.path),
        "ok": result.ok,
        "year": result.year,
        "lines": result.lines,
        "errors": len(result.errors),
        "warnings": len(result.warnings),
        "problems": [
            {"level": p.level, "message": p.message, "line": p.line, "topic_id": p.topic_id} for p in result.problems
        ],
    }


@topics_app.command("list")
@fails_cleanly
def list_topics(output_format: OutputOpt = Format.text) -> None:
    """The topic-set names available here (project topics, fetched track topics, RAGNAROK_TOPICS_DIR, the shared
    copies beside a checkout) and the track's sets that can be fetched."""
    from ragnarok.core.topic_sets import ALIASES, TRACK_TOPICS, set_names  # noqa: PLC0415

    here = set(set_names(get_settings()))
    rows = []
    for name in sorted((here - set(ALIASES)) | set(TRACK_TOPICS)):
        aliases = [a for a, target in ALIASES.items() if target == name and a in here]
        rows.append({"name": name, "available": name in here, "aliases": aliases})
        alias = f" (also {aliases[0]})" if aliases else ""
        typer.echo(
            f"{name}\t{'available' + alias if name in here else 'fetch with `ragnarok topics fetch ' + name + '`'}"
        )
    cli_output.result(rows)


@topics_app.command("fetch")
@fails_cleanly
def fetch(
    name: Annotated[str, typer.Argument(help="rag24.test, rag24.raggy-dev, rag24.researchy-dev, rag25.test")],
    output_format: OutputOpt = Format.text,
) -> None:
    """Download one of the track's topic files (needs the internet)."""
    from ragnarok.track.fetch import fetch_topics  # noqa: PLC0415

    path, topics = fetch_topics(name, get_settings())
    cli_output.result({"name": name, "path": str(path), "topics": len(topics)})
    typer.echo(f"{len(topics)} topics in {path}")


@convert_app.command("trec25-format")
@fails_cleanly
def trec25_format(
    source: Annotated[Path, typer.Argument(metavar="IN", help="A TREC RAG 2024 submission (JSONL).")],
    target: Annotated[Path, typer.Argument(metavar="OUT", help="The 2025-format file to write (never IN).")],
    prompts: Annotated[
        Optional[Path],
        typer.Option(
            help="JSONL of prompts per topic ({query: {qid}, "
            "rag_exec_summary: {prompt}} or {qid, prompt}): "
            "written as metadata.prompt."
        ),
    ] = None,
    team_id: Annotated[Optional[str], typer.Option(help="metadata.team_id (default: the run id).")] = None,
    run_type: Annotated[str, typer.Option(help="metadata.type: automatic or manual.")] = "automatic",
    output_format: OutputOpt = Format.text,
) -> None:
    """2024 answers in the 2025 format (metadata, references, answer), normalised as `run --year 2025` writes
    them, written at once; IN is never written."""
    from ragnarok.track.convert import convert_trec25, read_prompts  # noqa: PLC0415

    done = convert_trec25(source, target, read_prompts(prompts) if prompts else None, team_id, run_type)
    for warning in done.warnings:
        cli_output.warn(warning)
    cli_output.result(
        {
            "output": str(target),
            "lines": done.lines,
            "prompts": done.prompts,
            "citations_dropped": done.citations_dropped,
        }
    )
    typer.echo(f"{target}: {done}")
