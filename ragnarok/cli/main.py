"""The ``ragnarok`` command line. Every failure is one line on stderr and a non-zero exit."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ragnarok.auth.cli import keys_app
from ragnarok.cli import describe as describe_cli
from ragnarok.cli import prompt as prompt_cli
from ragnarok.cli import schema as schema_cli
from ragnarok.cli.compare import compare
from ragnarok.cli.search import evaluate_run, search
from ragnarok.collection.cli import collection_app, prebuilt_app
from ragnarok.core.settings import get_settings
from ragnarok.judge import cli as judge_cli
from ragnarok.judge import eval_rag_cli
from ragnarok.optimize import cli as optimize_cli
from ragnarok.runtime import cli_output, quiet
from ragnarok.runtime.cli_errors import fails_cleanly
from ragnarok.runtime.cli_output import Format, OutputOpt
from ragnarok.runtime.interrupt import stops_on_signals
from ragnarok.runtime.netaddr import bare_host, bind_error, http_url, is_loopback
from ragnarok.track import cli as track_cli
from ragnarok.viewer import cli as viewer_cli

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Retrieval-augmented generation for TREC RAG.")


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

        try:
            typer.echo(f"ragnarok {version('ragnarok-rag')}")
        except PackageNotFoundError:  # run from a checkout that was never installed
            typer.echo("ragnarok (not installed: version unknown)")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = None,
) -> None:
    """Retrieval-augmented generation for TREC RAG."""
    quiet.no_telemetry()  # every command: before any library that would phone home loads


@app.command()
@fails_cleanly
def doctor(
    json_out: Annotated[
        bool, typer.Option("--json", help="Deprecated: the report alone, indented; --output json gives the envelope.")
    ] = False,
    output_format: OutputOpt = Format.text,
) -> None:
    """Why something is or is not available here: Java, each index (documents, dense status), each generator
    (reachable, key present: never its value), the database (reachable, migration version), optional
    packages, free disk. Exit 0 when the default setup can serve, else 1 naming what is missing and the
    command that fixes it."""
    from ragnarok.cli import doctor as checks  # noqa: PLC0415

    raise typer.Exit(checks.main(get_settings(), json_out))


@app.command()
@fails_cleanly
def serve(
    host: Annotated[Optional[str], typer.Option(help="Interface to bind (default from settings).")] = None,
    port: Annotated[Optional[int], typer.Option(help="Port (default from settings).")] = None,
    no_dense: Annotated[bool, typer.Option("--no-dense", help="Skip the demo's dense (MiniLM) index.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show the JVM's and Anserini's log lines.")] = False,
    insecure_open: Annotated[
        bool,
        typer.Option(
            "--insecure-open",
            help="Serve on a non-loopback address "
            "without API keys (RAGNAROK_AUTH=off): anyone who can reach "
            "it can spend your backends.",
        ),
    ] = False,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="Worker processes (each with its own JVM and caches; "
            "metrics added up across them; no background dense "
            "build).",
        ),
    ] = 1,
) -> None:
    """Start the API (R, AG and /rag) on the configured indexes, building the demo index on first use.

    On an address other than loopback it needs RAGNAROK_AUTH=keys (ragnarok keys create), or --insecure-open.

    The server answers as soon as the demo's Lucene index exists; its dense (MiniLM) index is built in the
    background meanwhile (GET /v1/retrievers shows the progress; dense pipelines answer 503 until it is done).
    Neither is built when RAGNAROK_INDEXES points the name `demo` at another index.
    SIGTERM or Ctrl-C cancels the CPU work in flight, gives requests `RAGNAROK_SHUTDOWN_GRACE_S` (5 s) to
    finish and then exits."""
    from ragnarok.runtime import logs  # noqa: PLC0415

    settings = get_settings()
    logs.configure(settings.log_format, settings.log_level)  # RAGNAROK_LOG_FORMAT, RAGNAROK_LOG_LEVEL
    if settings.log_format == "json":  # every line the service writes one JSON object
        logs.capture_std_streams()
        quiet.no_progress_bars()
    host, port = bare_host(host or settings.host), port if port is not None else settings.port
    if settings.auth != "keys" and not insecure_open and not is_loopback(host):
        raise ValueError(
            f"refusing to serve on {host} without API keys: set RAGNAROK_AUTH=keys and make keys "
            "with `ragnarok keys create` (docs/deploying.md), or bind 127.0.0.1, or pass "
            "--insecure-open"
        )
    if (why := bind_error(host, port)) is not None:  # before the banner and the start-up's slow work
        raise OSError(why)

    from api.main import create_app  # noqa: PLC0415
    from ragnarok.collection.demo_index import ensure_demo_index  # noqa: PLC0415
    from ragnarok.core.java import set_verbose  # noqa: PLC0415

    set_verbose(verbose)
    demo = settings.demo_is_embedded()  # RAGNAROK_INDEXES may point `demo` at another index: nothing to build
    if demo:
        ensure_demo_index(settings)  # the Lucene index; the dense one is built in the background once serving
    if workers > 1:
        from ragnarok.cli.serving import serve_workers  # noqa: PLC0415

        _banner(f"ragnarok serving at {http_url(host, port)} with {workers} workers", settings.log_format)
        serve_workers(host, port, workers, settings.shutdown_grace_s)
        return
    _start_jvm_before_uvicorn()
    app = create_app(settings)
    # the arena's UI is built once the server is quiet (webui.lazy: retrieval first), or on its first visit
    app.state.arena_ui.build_at_start = True
    if demo and not no_dense:
        app.state.retrieval.build_dense(settings.demo_index_dir, "minilm")
    _banner(f"ragnarok serving at {http_url(host, port)} (OpenAPI at /docs)", settings.log_format)
    _serve(app, host, port, settings.shutdown_grace_s)


def _banner(line: str, log_format: str) -> None:
    """The start-up line on stderr: a log record with ``RAGNAROK_LOG_FORMAT=json`` (every line one JSON
    object), else the line as it is."""
    if log_format == "json":
        logging.getLogger("ragnarok.serve").warning(line)
    else:
        typer.echo(line, err=True)


def _start_jvm_before_uvicorn() -> None:
    """The JVM sets its own SIGTERM and SIGINT handlers when it starts (they exit at once, mid-request); started
    now, before uvicorn sets its handlers, it leaves the signals to uvicorn's graceful shutdown."""
    from ragnarok.core.java import JavaNotFoundError, start_jvm  # noqa: PLC0415

    try:
        start_jvm()
    except JavaNotFoundError:
        pass  # remote indexes only: Lucene never runs in this process


def _serve(app: Any, host: str, port: int, grace_s: float) -> None:
    """uvicorn until a signal; then the process leaves within about ``grace_s`` seconds, whatever its threads
    are doing (the interpreter would wait at exit for a thread blocked in a Java or backend call)."""
    import uvicorn  # noqa: PLC0415

    from ragnarok.cli.serving import leave_by  # noqa: PLC0415

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            app.state.inflight.cancel_all()  # CPU work stops within one batch and answers 503
            leave_by(grace_s)  # gone within the grace + 0.9 s, whatever is still running
            super().handle_exit(sig, frame)

    # proxy_headers off: the app believes X-Forwarded-For from RAGNAROK_TRUSTED_PROXIES only (api/main.py)
    # log_config None: uvicorn's own lines go to the root logger's handler, in RAGNAROK_LOG_FORMAT (ragnarok.runtime.logs);
    # its access lines are off (api/observability.py writes one per request, with the request id)
    server = Server(
        uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=grace_s,
            proxy_headers=False,
        )
    )
    code = 1
    try:
        server.run()
        code = 0
    except KeyboardInterrupt:
        code = 130
    except SystemExit as exc:  # uvicorn could not start (e.g. the port is taken)
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


@app.command()
@fails_cleanly
@stops_on_signals(
    "the index was not changed (a new one is put in place only when complete); run the same "
    "command again to build it (a JSONL build resumes at its first shard not done)"
)
def index(
    input: Annotated[Optional[Path], typer.Argument(help="JSONL documents (file or directory, .gz ok).")] = None,
    output: Annotated[Optional[Path], typer.Argument(help="Index directory to create.")] = None,
    collection: Annotated[
        Optional[str],
        typer.Option(
            help="Index INPUT as it is with this Anserini collection class "
            "(e.g. HtmlCollection, JsonCollection) instead of segmenting it."
        ),
    ] = None,
    threads: Annotated[int, typer.Option(min=1, help="Indexing threads.")] = 2,
    workers: Annotated[
        Optional[int],
        typer.Option(min=1, help="Segmenting processes (default: CPU cores, at most 4; 1 for V2.1 segments)."),
    ] = None,
    skip_bad: Annotated[
        bool,
        typer.Option(
            "--skip-bad", help="Leave bad lines (malformed JSON, invalid UTF-8, repeated docid) out instead of failing."
        ),
    ] = False,
    demo: Annotated[bool, typer.Option("--demo", help="Build the demo index (Python documentation).")] = False,
    dense: Annotated[
        Optional[str],
        typer.Option(
            help="Also build a dense (FAISS) index with this model (minilm offline; any sentence-transformers name)."
        ),
    ] = None,
    dense_kind: Annotated[
        str,
        typer.Option(
            help="The --dense index's kind: flat (exact), hnsw, hnsw-sq8 (HNSW "
            "over 8-bit codes, 4x smaller), lucene-hnsw (Anserini), or auto "
            "(flat up to RAGNAROK_DENSE_EXACT_MAX_SEGMENTS, then hnsw-sq8)."
        ),
    ] = "auto",
    hnsw: Annotated[bool, typer.Option("--hnsw", help="Same as --dense-kind hnsw.")] = False,
    shards: Annotated[
        int, typer.Option(min=1, help="The --dense index in this many shards (row ranges) searched in parallel.")
    ] = 1,
    dense_batch_size: Annotated[
        int,
        typer.Option(
            min=1,
            help="Segments encoded per batch for the --dense "
            "index (a checkpoint every 10 batches: an "
            "interrupted build resumes from it).",
        ),
    ] = 256,
    from_lucene: Annotated[
        Optional[Path],
        typer.Option(help="Build only the --dense index, from the segments stored in this existing Lucene index."),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Rebuild the --dense index even when it is up to date "
            "(it is rebuilt anyway when its Lucene index changed).",
        ),
    ] = False,
    sentence_store: Annotated[
        Optional[bool],
        typer.Option(
            help="With the --dense index, store its segments' sentence vectors (answers read them; ~1.5 KB per "
            "sentence). Default: on up to RAGNAROK_SENTENCE_STORE_MAX_SEGMENTS segments (8,000), off past it.",
            show_default=False,
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show Anserini's and the JVM's log lines.")] = False,
    shard_segments: Annotated[
        Optional[int],
        typer.Option(
            min=1,
            help="Segments per shard: a killed build resumes at its first shard not done. Default: a tenth of "
            "the collection (estimated from its first MB), 5,000 to 1,000,000.",
            show_default=False,
        ),
    ] = None,
    output_format: OutputOpt = Format.text,
) -> None:
    """Segment MS MARCO V2.1-style documents (10 sentences, stride 5; V2.1 segments are indexed as they are) and
    build a Lucene index (and a dense one), resumably, in shards merged at the end.

    A dense index records which build of its Lucene index it was encoded from: `--dense MODEL --from-lucene
    INDEX` rebuilds it when the Lucene index changed since (and returns at once when nothing changed)."""
    from ragnarok.collection import lucene_index  # noqa: PLC0415
    from ragnarok.collection.demo_index import ensure_dense_index  # noqa: PLC0415
    from ragnarok.core.java import set_heap, set_verbose  # noqa: PLC0415
    from ragnarok.stages.retrieve.dense_kinds import check_kind  # noqa: PLC0415

    set_verbose(verbose)
    set_heap(get_settings().index_jvm_heap)  # a build's memory stays flat as the collection grows
    if hnsw and dense_kind not in ("auto", "hnsw"):
        raise ValueError(f"--hnsw is --dense-kind hnsw: give one of them, not --hnsw with --dense-kind {dense_kind}")
    kind = check_kind("hnsw" if hnsw else dense_kind)
    if from_lucene is not None:
        if not dense:
            raise ValueError("--from-lucene builds a dense index: give --dense MODEL")
        if not lucene_index.is_lucene_index(from_lucene):
            raise FileNotFoundError(f"no Lucene index at {from_lucene}")
        built = ensure_dense_index(
            from_lucene, dense, kind, force, sentence_store=sentence_store, shards=shards, batch_size=dense_batch_size
        )
        cli_output.result({"lucene": None, "dense": str(built)})
        typer.echo(f"dense index at {built}")
        return
    if demo:
        from ragnarok.collection.demo_index import ensure_demo_index  # noqa: PLC0415

        made = ensure_demo_index(get_settings(), threads, dense)
        cli_output.result({"lucene": str(made), "dense": None})
        typer.echo(f"demo index at {made}")
        return
    if input is None or output is None:
        raise ValueError("give INPUT and OUTPUT (or --demo, or --dense MODEL --from-lucene INDEX)")
    if collection:
        lucene_index.index_collection(input, output, collection, threads)
        typer.echo(f"indexed {input} as {collection} into {output}")
    else:
        from ragnarok.collection.sharded_build import build_index  # noqa: PLC0415

        built = build_index(input, output, threads, workers, skip_bad, shard_segments)
        typer.echo(f"indexed {built.describe()} into {output}")
    if dense:
        built = ensure_dense_index(
            output, dense, kind, force, sentence_store=sentence_store, shards=shards, batch_size=dense_batch_size
        )
        typer.echo(f"dense index at {built}")
    cli_output.result({"lucene": str(output), "dense": str(built) if dense else None})
    _warn_stale_dense(output, dense)


def _warn_stale_dense(lucene_dir: Path, built: str | None) -> None:
    """Name the dense indexes beside ``lucene_dir`` that its rebuild made stale (they refuse to load)."""
    from ragnarok.stages.retrieve.dense import is_dense_index, rebuild_command, stale_reason  # noqa: PLC0415

    root = Path(f"{lucene_dir}.dense")
    for path in sorted(p / "meta.json" for p in root.iterdir() if is_dense_index(p)) if root.is_dir() else []:
        model = path.parent.name.replace("__", "/")
        if model != built and stale_reason(path.parent, lucene_dir) is not None:
            cli_output.warn(
                f"the dense index at {path.parent} is now stale; rebuild it with "
                f"`{rebuild_command(lucene_dir, model)}`",
                prefix="note: ",
            )


app.command()(search)
app.command("eval")(evaluate_run)
app.add_typer(collection_app, name="collection")
app.add_typer(prebuilt_app, name="prebuilt")
app.add_typer(keys_app, name="keys")
app.add_typer(judge_cli.judge_app, name="judge")
app.command("eval-rag")(eval_rag_cli.eval_rag)
app.command("compare")(compare)
app.command("optimize")(optimize_cli.optimize)
app.command("run")(track_cli.run)
app.command("validate")(track_cli.validate)
app.command("view")(viewer_cli.view)
app.add_typer(track_cli.topics_app, name="topics")
app.add_typer(track_cli.convert_app, name="convert")
app.command("prompt")(prompt_cli.prompt)
app.command("schema")(schema_cli.schema)
app.command("describe")(describe_cli.describe)


def main() -> None:  # pragma: no cover - console entry point
    app(prog_name="ragnarok")
