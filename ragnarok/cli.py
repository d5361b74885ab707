"""The ``ragnarok`` command line. Every failure is one line on stderr and a non-zero exit."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from ragnarok.cli_errors import fails_cleanly
from ragnarok.collection.cli import collection_app
from ragnarok.settings import Settings, get_settings
from ragnarok.track import cli as track_cli

app = typer.Typer(no_args_is_help=True, add_completion=False, help="Retrieval-augmented generation for TREC RAG.")


@app.command()
@fails_cleanly
def serve(
    host: Annotated[Optional[str], typer.Option(help="Interface to bind (default from settings).")] = None,
    port: Annotated[Optional[int], typer.Option(help="Port (default from settings).")] = None,
    no_dense: Annotated[bool, typer.Option("--no-dense", help="Skip the demo's dense (MiniLM) index.")] = False,
) -> None:
    """Start the API (R, AG and /rag) on the configured indexes, building the demo index on first use.

    SIGTERM or Ctrl-C cancels the CPU work in flight, gives requests `RAGNAROK_SHUTDOWN_GRACE_S` (5 s) to
    finish and then exits."""
    from api.main import create_app  # noqa: PLC0415
    from ragnarok.collection.demo_index import ensure_demo_index  # noqa: PLC0415

    settings = get_settings()
    ensure_demo_index(settings, dense_model=None if no_dense else "minilm")
    host, port = host or settings.host, port or settings.port
    _start_jvm_before_uvicorn()
    app = create_app(settings)
    typer.echo(f"ragnarok serving at http://{host}:{port} (OpenAPI at /docs)", err=True)
    _serve(app, host, port, settings.shutdown_grace_s)


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

    server = Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                   timeout_graceful_shutdown=grace_s))
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
) -> None:
    """Segment MS MARCO V2.1-style documents (10 sentences, stride 5) and build a Lucene index (and a dense one)."""
    from ragnarok.collection import lucene_index  # noqa: PLC0415
    from ragnarok.collection.demo_index import ensure_dense_index  # noqa: PLC0415

    kind = "hnsw" if hnsw else "flat"
    if from_lucene is not None:
        if not dense:
            raise ValueError("--from-lucene builds a dense index: give --dense MODEL")
        if not lucene_index.is_lucene_index(from_lucene):
            raise FileNotFoundError(f"no Lucene index at {from_lucene}")
        typer.echo(f"dense index at {ensure_dense_index(from_lucene, dense, kind)}")
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
        typer.echo(f"dense index at {ensure_dense_index(output, dense, kind)}")


@app.command()
@fails_cleanly
def search(
    topics: Annotated[str, typer.Option(help="Topic file or topic-set name (see topics/).")],
    output: Annotated[Path, typer.Option(help="TREC run file to write.")],
    index: Annotated[Optional[str], typer.Option(help="Index name or Lucene index directory.")] = None,
    retriever: Annotated[str, typer.Option(help="bm25, bm25+rocchio, bm25+rm3 or dense:MODEL.")] = "bm25",
    pipeline: Annotated[Optional[str], typer.Option(help="A retrieval pipeline instead of one retriever, e.g. "
                                                         "'rrf(bm25+rocchio, dense:minilm)@1000 | mmr@100'.")] = None,
    k: Annotated[int, typer.Option(min=1, max=10_000, help="Hits per topic (one retriever).")] = 1000,
    run_id: Annotated[Optional[str], typer.Option(help="Run tag (default: the retriever name).")] = None,
    threads: Annotated[int, typer.Option(min=1)] = 2,
) -> None:
    """Run every topic through a retriever (or a retrieval pipeline) and write a TREC run file."""
    from ragnarok.retrieve.service import RetrievalService  # noqa: PLC0415
    from ragnarok.trec import write_run  # noqa: PLC0415

    settings = _with_index_path(get_settings(), index)
    loaded = track_cli.resolve_topics(topics, settings)
    if (index or settings.default_index) == settings.default_index == "demo":
        from ragnarok.collection.demo_index import ensure_demo_index  # noqa: PLC0415

        ensure_demo_index(settings, dense_model="minilm" if "dense" in (pipeline or retriever) else None)
    if pipeline:
        ranking = _pipeline_ranking(pipeline, loaded, settings, _index_name(index), threads)
    else:
        chosen = RetrievalService(settings).get(retriever, _index_name(index))
        queries = {t.qid: t.text for t in loaded}
        if hasattr(chosen, "batch_search"):
            ranking = chosen.batch_search(queries, k, threads)
        else:
            from ragnarok.types import Query  # noqa: PLC0415

            ranking = {qid: [(c.docid, c.score) for c in chosen.retrieve(Query(text=text, qid=qid), k).candidates]
                       for qid, text in queries.items()}
    write_run(output, ranking, run_id or (retriever if not pipeline else "pipeline").replace(" ", ""))
    typer.echo(f"wrote {sum(map(len, ranking.values())):,} lines for {len(ranking)} topics to {output}")


def _pipeline_ranking(spec: str, topics: list, settings: Settings, index: str | None,
                      concurrency: int) -> dict[str, list[tuple[str, float]]]:
    import asyncio  # noqa: PLC0415

    from ragnarok.batch import run_topics  # noqa: PLC0415
    from ragnarok.presets import resolve  # noqa: PLC0415
    from ragnarok.spec import parse  # noqa: PLC0415

    parsed = parse(resolve(spec))
    if parsed.generate is not None:
        raise ValueError(f"search writes rankings: drop the generation stage from {parsed}")
    results = asyncio.run(run_topics(parsed, topics, settings, index, concurrency))
    return {qid: [(c.docid, c.score) for c in r.candidates] for qid, r in results.items()}  # type: ignore[union-attr]


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
app.command("run")(track_cli.run)
app.command("validate")(track_cli.validate)
app.add_typer(track_cli.topics_app, name="topics")


def main() -> None:  # pragma: no cover - console entry point
    app(prog_name="ragnarok")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
