"""The ``ragnarok`` command line. Every failure is one line on stderr and a non-zero exit."""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ragnarok.auth.cli import keys_app
from ragnarok.cli_errors import fails_cleanly
from ragnarok.interrupt import resume_with, stops_on_signals, writing
from ragnarok.collection.cli import collection_app
from ragnarok.judge import cli as judge_cli
from ragnarok.optimize import cli as optimize_cli
from ragnarok.settings import Settings, get_settings
from ragnarok.track import cli as track_cli

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
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
) -> None:
    """Retrieval-augmented generation for TREC RAG."""


@app.command()
@fails_cleanly
def doctor(
    json_out: Annotated[bool, typer.Option("--json", help="One JSON object instead of text.")] = False,
) -> None:
    """Why something is or is not available here: Java, each index (documents, dense status), each generator
    (reachable, key present: never its value), the database (reachable, migration version), optional
    packages, free disk. Exit 0 when the default setup can serve, else 1 naming what is missing and the
    command that fixes it."""
    from ragnarok import doctor as checks  # noqa: PLC0415

    raise typer.Exit(checks.main(get_settings(), json_out))


@app.command()
@fails_cleanly
def serve(
    host: Annotated[Optional[str], typer.Option(help="Interface to bind (default from settings).")] = None,
    port: Annotated[Optional[int], typer.Option(help="Port (default from settings).")] = None,
    no_dense: Annotated[bool, typer.Option("--no-dense", help="Skip the demo's dense (MiniLM) index.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show the JVM's and Anserini's log lines.")] = False,
    insecure_open: Annotated[bool, typer.Option("--insecure-open", help="Serve on a non-loopback address "
                                                "without API keys (RAGNAROK_AUTH=off): anyone who can reach "
                                                "it can spend your backends.")] = False,
    workers: Annotated[int, typer.Option(min=1, help="Worker processes (each with its own JVM and caches; "
                                                     "metrics added up across them; no background dense "
                                                     "build).")] = 1,
) -> None:
    """Start the API (R, AG and /rag) on the configured indexes, building the demo index on first use.

    On an address other than loopback it needs RAGNAROK_AUTH=keys (ragnarok keys create), or --insecure-open.

    The server answers as soon as the demo's Lucene index exists; its dense (MiniLM) index is built in the
    background meanwhile (GET /v1/retrievers shows the progress; dense pipelines answer 503 until it is done).
    SIGTERM or Ctrl-C cancels the CPU work in flight, gives requests `RAGNAROK_SHUTDOWN_GRACE_S` (5 s) to
    finish and then exits."""
    from api.main import create_app  # noqa: PLC0415
    from ragnarok.collection.demo_index import ensure_demo_index  # noqa: PLC0415
    from ragnarok.java import set_verbose  # noqa: PLC0415

    from ragnarok import logs  # noqa: PLC0415

    set_verbose(verbose)
    settings = get_settings()
    logs.configure(settings.log_format, settings.log_level)  # RAGNAROK_LOG_FORMAT, RAGNAROK_LOG_LEVEL
    host, port = host or settings.host, port or settings.port
    if settings.auth != "keys" and not insecure_open and not is_loopback(host):
        raise ValueError(f"refusing to serve on {host} without API keys: set RAGNAROK_AUTH=keys and make keys "
                         "with `ragnarok keys create` (README: Deploying), or bind 127.0.0.1, or pass "
                         "--insecure-open")
    if workers == 1:  # the arena's UI is built at start-up: Gradio's import (seconds) overlaps the JVM's start
        threading.Thread(target=importlib.import_module, args=("gradio",), daemon=True).start()
    ensure_demo_index(settings)  # the Lucene index; the dense one is built in the background once serving
    if workers > 1:
        from ragnarok.serving import serve_workers  # noqa: PLC0415

        typer.echo(f"ragnarok serving at http://{host}:{port} with {workers} workers", err=True)
        serve_workers(host, port, workers, settings.shutdown_grace_s)
        return
    _start_jvm_before_uvicorn()
    app = create_app(settings)
    app.state.arena_ui.build_at_start = True  # the arena's first visit should not wait seconds for Gradio
    if not no_dense:
        app.state.retrieval.build_dense(settings.demo_index_dir, "minilm")
    serving = f"ragnarok serving at http://{host}:{port} (OpenAPI at /docs)"
    if settings.log_format == "json":  # every line on stderr one JSON object
        logging.getLogger("ragnarok.serve").warning(serving)
    else:
        typer.echo(serving, err=True)
    _serve(app, host, port, settings.shutdown_grace_s)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (127.0.0.0/8, ::1) or ``localhost``."""
    import ipaddress  # noqa: PLC0415

    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _start_jvm_before_uvicorn() -> None:
    """The JVM sets its own SIGTERM and SIGINT handlers when it starts (they exit at once, mid-request); started
    now, before uvicorn sets its handlers, it leaves the signals to uvicorn's graceful shutdown."""
    from ragnarok.java import JavaNotFoundError, start_jvm  # noqa: PLC0415

    try:
        start_jvm()
    except JavaNotFoundError:
        pass  # remote indexes only: Lucene never runs in this process


def _serve(app: Any, host: str, port: int, grace_s: float) -> None:
    """uvicorn until a signal; then the process leaves within about ``grace_s`` seconds, whatever its threads
    are doing (the interpreter would wait at exit for a thread blocked in a Java or backend call)."""
    import uvicorn  # noqa: PLC0415

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            app.state.inflight.cancel_all()  # CPU work stops within one batch and answers 503
            super().handle_exit(sig, frame)

    # proxy_headers off: the app believes X-Forwarded-For from RAGNAROK_TRUSTED_PROXIES only (api/main.py)
    # log_config None: uvicorn's own lines go to the root logger's handler, in RAGNAROK_LOG_FORMAT (ragnarok.logs);
    # its access lines are off (api/observability.py writes one per request, with the request id)
    server = Server(uvicorn.Config(app, host=host, port=port, log_level="warning", log_config=None,
                                   access_log=False, timeout_graceful_shutdown=grace_s, proxy_headers=False))
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
@stops_on_signals("the index was not changed (a new one is put in place only when complete); run the same "
                  "command again to build it")
def index(
    input: Annotated[Optional[Path], typer.Argument(help="JSONL documents (file or directory, .gz ok).")] = None,
    output: Annotated[Optional[Path], typer.Argument(help="Index directory to create.")] = None,
    collection: Annotated[
        Optional[str], typer.Option(help="Index INPUT as it is with this Anserini collection class "
                                         "(e.g. HtmlCollection, JsonCollection) instead of segmenting it.")
    ] = None,
    threads: Annotated[int, typer.Option(min=1, help="Indexing threads.")] = 2,
    workers: Annotated[Optional[int], typer.Option(min=1, help="Segmenting processes (default: CPU cores, "
                                                               "at most 4).")] = None,
    skip_bad: Annotated[bool, typer.Option("--skip-bad", help="Leave bad lines (malformed JSON, invalid UTF-8, "
                                                              "repeated docid) out instead of failing.")] = False,
    demo: Annotated[bool, typer.Option("--demo", help="Build the demo index (Python documentation).")] = False,
    dense: Annotated[Optional[str], typer.Option(help="Also build a dense (FAISS) index with this model "
                                                      "(minilm offline; any sentence-transformers name).")] = None,
    hnsw: Annotated[bool, typer.Option("--hnsw", help="HNSW instead of a flat dense index (large collections).")] = False,
    from_lucene: Annotated[Optional[Path], typer.Option(help="Build only the --dense index, from the segments "
                                                            "stored in this existing Lucene index.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild the --dense index even when it is up to date "
                                                        "(it is rebuilt anyway when its Lucene index changed).")] = False,
    sentence_store: Annotated[bool, typer.Option(help="With the --dense index, store its segments' sentence "
                                                     "vectors (answers read them; ~1.5 KB per sentence).")] = True,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show Anserini's and the JVM's log lines.")] = False,
) -> None:
    """Segment MS MARCO V2.1-style documents (10 sentences, stride 5) and build a Lucene index (and a dense one).

    A dense index records which build of its Lucene index it was encoded from: `--dense MODEL --from-lucene
    INDEX` rebuilds it when the Lucene index changed since (and returns at once when nothing changed)."""
    from ragnarok.collection import lucene_index  # noqa: PLC0415
    from ragnarok.collection.demo_index import ensure_dense_index  # noqa: PLC0415
    from ragnarok.java import set_verbose  # noqa: PLC0415

    set_verbose(verbose)
    kind = "hnsw" if hnsw else "flat"
    if from_lucene is not None:
        if not dense:
            raise ValueError("--from-lucene builds a dense index: give --dense MODEL")
        if not lucene_index.is_lucene_index(from_lucene):
            raise FileNotFoundError(f"no Lucene index at {from_lucene}")
        built = ensure_dense_index(from_lucene, dense, kind, force, sentence_store=sentence_store)
        typer.echo(f"dense index at {built}")
        return
    if demo:
        from ragnarok.collection.demo_index import ensure_demo_index  # noqa: PLC0415

        typer.echo(f"demo index at {ensure_demo_index(get_settings(), threads, dense)}")
        return
    if input is None or output is None:
        raise ValueError("give INPUT and OUTPUT (or --demo, or --dense MODEL --from-lucene INDEX)")
    if collection:
        lucene_index.index_collection(input, output, collection, threads)
        typer.echo(f"indexed {input} as {collection} into {output}")
    else:
        n = lucene_index.index_jsonl(input, output, threads, workers, skip_bad)
        typer.echo(f"indexed {n:,} segments into {output}")
    if dense:
        typer.echo(f"dense index at {ensure_dense_index(output, dense, kind, force, sentence_store=sentence_store)}")
    _warn_stale_dense(output, dense)


def _warn_stale_dense(lucene_dir: Path, built: str | None) -> None:
    """Name the dense indexes beside ``lucene_dir`` that its rebuild made stale (they refuse to load)."""
    from ragnarok.retrieve.dense import rebuild_command, stale_reason  # noqa: PLC0415

    root = Path(f"{lucene_dir}.dense")
    for path in sorted(root.glob("*/index.faiss")) if root.is_dir() else []:
        model = path.parent.name.replace("__", "/")
        if model != built and stale_reason(path.parent, lucene_dir) is not None:
            typer.echo(f"note: the dense index at {path.parent} is now stale; rebuild it with "
                       f"`{rebuild_command(lucene_dir, model)}`", err=True)


@app.command()
@fails_cleanly
@stops_on_signals("nothing written yet (the run file is written once every topic is searched); run the same "
                  "command again")
def search(
    topics: Annotated[str, typer.Option(help="Topic file or topic-set name (see topics/).")],
    output: Annotated[Path, typer.Option(help="TREC run file to write.")],
    index: Annotated[Optional[str], typer.Option(help="Index name or Lucene index directory.")] = None,
    retriever: Annotated[str, typer.Option(help="bm25, bm25+rocchio, bm25+rm3 or dense:MODEL.")] = "bm25",
    pipeline: Annotated[Optional[str], typer.Option(
        help="A pipeline (spec, preset name or TOML/YAML file) instead of one retriever, e.g. "
             "'rrf(bm25+rocchio, dense:minilm)@1000 | mmr@100'; its retrieval part is used (a generation stage "
             "is left out), and its stages set the depths.")] = None,
    k: Annotated[Optional[int], typer.Option(min=1, max=10_000, help="Hits per topic (one retriever; "
                                                                     "default 1000).")] = None,
    run_id: Annotated[Optional[str], typer.Option(help="Run tag (default: the retriever name, or the pipeline's "
                                                       "spec made one word, e.g. bm25-100-mmr-0.5-10).")] = None,
    threads: Annotated[int, typer.Option(min=1, help="Java search threads (one retriever), or topics in flight "
                                                     "at once (a --pipeline).")] = 2,
    verbose: Annotated[bool, typer.Option("--verbose", help="Show the JVM's and Lucene's log lines.")] = False,
) -> None:
    """Run every topic through a retriever (or a retrieval pipeline) and write a TREC run file."""
    from ragnarok.java import set_verbose  # noqa: PLC0415

    set_verbose(verbose)
    settings = _with_index_path(get_settings(), index)
    if index is not None and not Path(index).is_dir() and index not in settings.index_sources() \
            and ("/" in index or index.startswith(".")):
        raise FileNotFoundError(f"no index directory {index} (and no configured index of that name)")
    loaded = track_cli.resolve_topics(topics, settings)
    parsed = None
    if pipeline:
        if k is not None:
            raise ValueError("--k sets the hits of one --retriever; a --pipeline sets its own depths "
                             "(e.g. 'bm25@1000 | mmr@100')")
        parsed = _retrieval_part(pipeline, settings, _index_name(index))
        sources = [s.name + (f":{s.arg}" if s.arg else "") for s in parsed.sources()]
    else:
        sources = [retriever]
    if (index or settings.default_index) == settings.default_index == "demo":
        from ragnarok.collection.demo_index import ensure_demo_index, ensure_dense_index  # noqa: PLC0415

        target = ensure_demo_index(settings)
        for model in dense_models(sources):
            ensure_dense_index(target, model)  # built on first use, rebuilt when stale
    failures: list = []
    if parsed is not None:
        ranking, failures = _pipeline_ranking(parsed, loaded, settings, _index_name(index), threads)
    else:
        ranking = _retriever_ranking(retriever, loaded, settings, index, k or 1000, threads)
    from ragnarok.trec import write_run  # noqa: PLC0415

    output.parent.mkdir(parents=True, exist_ok=True)
    resume_with(f"{output} was written whole; nothing left to do")
    with writing():  # an interrupt waits for the whole file
        write_run(output, ranking, run_id or (retriever.replace(" ", "") if parsed is None else run_tag(parsed)))
    typer.echo(f"wrote {sum(map(len, ranking.values())):,} lines for {len(ranking)} topics to {output}")
    if failures:
        typer.echo(f"{len(failures)} of {len(loaded)} topics failed: "
                   + ", ".join(f.qid for f in failures[:20])
                   + (f" and {len(failures) - 20} more" if len(failures) > 20 else "")
                   + f" (each named above; left out of {output}; run the same command again for all of them)", err=True)
        raise typer.Exit(1)


def run_tag(pipeline: Any, limit: int = 48) -> str:
    """A TREC run tag (one word) that says which pipeline wrote a run: its spec made a word
    (``rrf(bm25, dense:minilm)@100 | mmr:0.5@10`` -> ``rrf-bm25-dense-minilm-100-mmr-0.5-10``); a longer one is
    cut and ends with a digest of the whole spec, so two pipelines never share a tag."""
    import hashlib  # noqa: PLC0415
    import re  # noqa: PLC0415

    spec = str(pipeline)
    tag = re.sub(r"[^A-Za-z0-9+._]+", "-", spec).strip("-") or "pipeline"
    if len(tag) <= limit:
        return tag
    return tag[:limit - 7].rstrip("-") + "-" + hashlib.sha256(spec.encode()).hexdigest()[:6]


def dense_models(retrievers: list[str]) -> list[str]:
    """The embedding models that retrievers named like ``dense:minilm`` (``dense``: MiniLM) need."""
    return sorted({r.partition(":")[2] or "minilm" for r in retrievers if r.partition(":")[0] == "dense"})


def _retrieval_part(spec: str, settings: Settings | None = None, index: str | None = None) -> Any:
    """The pipeline named by ``spec`` (a preset, a spec or a TOML/YAML file) without its generation stage.
    With ``settings``, every component the whole pipeline names (its generator too) is checked first, as
    ``/rag`` and ``ragnarok run`` check it: an unknown name fails with "did you mean ...?"."""
    import dataclasses  # noqa: PLC0415

    from ragnarok.presets import resolve  # noqa: PLC0415
    from ragnarok.spec import parse  # noqa: PLC0415
    from ragnarok.spec_mapping import load  # noqa: PLC0415

    parsed = load(Path(spec)) if Path(spec).suffix in {".toml", ".yaml", ".yml"} and Path(spec).is_file() \
        else parse(resolve(spec))
    if settings is not None:
        from ragnarok.track.run import check_names  # noqa: PLC0415

        check_names(parsed, settings, index)
    if parsed.generate is not None:
        parsed = dataclasses.replace(parsed, generate=None)
        typer.echo(f"search writes rankings: using the retrieval part of the pipeline, {parsed}", err=True)
    return parsed


def _retriever_ranking(retriever: str, topics: list, settings: Settings, index: str | None, k: int,
                       threads: int) -> dict[str, list[tuple[str, float]]]:
    from ragnarok.registry import UnknownComponentError  # noqa: PLC0415
    from ragnarok.retrieve.service import RetrievalService  # noqa: PLC0415
    from ragnarok.types import Query  # noqa: PLC0415

    try:
        chosen = RetrievalService(settings).get(retriever, _index_name(index))
    except UnknownComponentError as exc:
        if exc.role != "retriever":
            raise
        names = [f"{n}:MODEL" if n == "dense" else n for n in exc.available]
        raise UnknownComponentError("retriever", exc.name, names) from None
    queries = {t.qid: t.text for t in topics}
    if hasattr(chosen, "batch_search"):
        return chosen.batch_search(queries, k, threads)
    from ragnarok.progress import progress_iter  # noqa: PLC0415

    if hasattr(chosen, "warm_up"):
        chosen.warm_up()  # a missing or stale index fails here, before the bar starts
    return {qid: [(c.docid, c.score) for c in chosen.retrieve(Query(text=text, qid=qid), k).candidates]
            for qid, text in progress_iter(queries.items(), len(queries), f"searching ({retriever})")}


def _pipeline_ranking(parsed: Any, topics: list, settings: Settings, index: str | None,
                      concurrency: int) -> tuple[dict[str, list[tuple[str, float]]], list[Any]]:
    """The rankings of the topics that succeeded (in the topics' order), and the failures of the others: each
    named on stderr in one line as it fails (after its retries); a refused pipeline stops the search."""
    import asyncio  # noqa: PLC0415

    from ragnarok.batch import PipelineRefused, run_topics  # noqa: PLC0415
    from ragnarok.progress import progress  # noqa: PLC0415

    failures: list[Any] = []
    with progress(len(topics), "running the pipeline") as bar:  # a bar on a terminal, else lines
        def failed(failure: Any) -> None:
            failures.append(failure)
            typer.echo(str(failure), err=True)
            bar.update(1)

        def lowered(old: int, new: int) -> None:
            typer.echo(f"note: {'a stage timed out' if new < old else 'no timeouts lately'}: "
                       f"{new} topics in flight at once (was {old})", err=True)

        try:
            results = asyncio.run(run_topics(parsed, topics, settings, index, concurrency,
                                             on_result=lambda _topic, _result: bar.update(1),
                                             on_failure=failed, on_limit=lowered))
        except PipelineRefused as exc:
            raise PipelineRefused(f"the pipeline was refused, nothing written: {exc}") from None
    # in the topics' order, not the order they finished in: the same search writes the same bytes
    return {t.qid: [(c.docid, c.score) for c in results[t.qid].candidates]  # type: ignore[union-attr]
            for t in topics if t.qid in results}, failures


def _index_name(index: str | None) -> str | None:
    return None if index is None else (f"path:{index}" if Path(index).is_dir() else index)


def _with_index_path(settings: Settings, index: str | None) -> Settings:
    """Settings that also know ``index`` when it is a directory rather than a configured name."""
    if index is not None and Path(index).is_dir():
        return settings.model_copy(update={"indexes": {**settings.indexes, f"path:{index}": index}})
    return settings


@app.command("eval")
@fails_cleanly
def evaluate_run(
    qrels: Annotated[Path, typer.Argument(help="TREC qrels file.")],
    runs: Annotated[list[Path], typer.Argument(help="One or more TREC run files.")],
    run_name: Annotated[Optional[list[str]], typer.Option(help="Row names, one per run in order "
                                                               "(default: the file names).")] = None,
    maxp: Annotated[
        Optional[bool], typer.Option("--maxp/--no-maxp", help="Score documents by their best segment "
                                                            "(default: when qrels are document-level and runs segment-level).")
    ] = None,
) -> None:
    """nDCG@10, MAP@100, Recall@100 and MAP of run files, one row per run (the paper's Table 3 layout).

    Segment-level runs against document-level qrels are scored after MaxP (a document scores as its best
    segment) unless --no-maxp; --maxp forces it."""
    from ragnarok.evaluate import evaluate, format_table, read_qrels  # noqa: PLC0415
    from ragnarok.trec import read_run  # noqa: PLC0415

    judged = read_qrels(qrels)
    names = run_name or [run.name for run in runs]
    if len(names) != len(runs):
        raise ValueError(f"{len(names)} --run-name for {len(runs)} runs")
    if len(set(names)) != len(names):
        raise ValueError("two rows would have the same name; give --run-name for each run")
    rows = {name: evaluate(judged, read_run(run), maxp=maxp) for name, run in zip(names, runs)}
    typer.echo(format_table(rows))


app.add_typer(collection_app, name="collection")
app.add_typer(keys_app, name="keys")
app.add_typer(judge_cli.judge_app, name="judge")
app.command("eval-rag")(judge_cli.eval_rag)
app.command("optimize")(optimize_cli.optimize)
app.command("run")(track_cli.run)
app.command("validate")(track_cli.validate)
app.add_typer(track_cli.topics_app, name="topics")


def main() -> None:  # pragma: no cover - console entry point
    app(prog_name="ragnarok")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
