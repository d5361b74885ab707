"""The one registry of components, by role. Registration is explicit, cheap and does no I/O:
factories build objects whose heavy parts (indexes, models, clients) load on first use."""

from __future__ import annotations

import math

from ragnarok.core.model_paths import A_DIRECTORY, looks_like_path, model_dir
from ragnarok.core.protocols import Reranker, Retriever
from ragnarok.core.registry import ComponentArgumentError, Registry, UnknownComponentError
from ragnarok.core.settings import Settings
from ragnarok.runtime.quoting import quote
from ragnarok.stages.generate.backends import GENERATOR_BACKENDS  # noqa: F401 - re-exported (its old home)
from ragnarok.stages.passage.base import PassageStage
from ragnarok.stages.passage.compress import Compress
from ragnarok.stages.passage.filters import Collapse, Cutoff, Percentile, Reorder, SimilarityCutoff
from ragnarok.stages.passage.llmcompress import LLMCompress
from ragnarok.stages.passage.window import AutoMerge, Neighbours
from ragnarok.stages.query.stages import DECOMPOSE, HYDE, MULTIQUERY, QUERY2DOC, QueryStageDef
from ragnarok.stages.rerank.base import RerankerUnavailable
from ragnarok.stages.rerank.cross_encoder import KNOWN as CROSS_ENCODERS
from ragnarok.stages.rerank.cross_encoder import CrossEncoderReranker
from ragnarok.stages.rerank.embedding import EmbeddingReranker, MMRReranker
from ragnarok.stages.rerank.listwise import ListwiseReranker
from ragnarok.stages.rerank.monot5 import KNOWN as MONOT5S
from ragnarok.stages.rerank.monot5 import MonoT5Reranker
from ragnarok.stages.rerank.pointwise import PointwiseReranker, resolve_checkpoint
from ragnarok.stages.rerank.rank_llm_adapter import MODELS as RANK_LLM_MODELS
from ragnarok.stages.rerank.rank_llm_adapter import RankLLMReranker
from ragnarok.stages.retrieve import prebuilt
from ragnarok.stages.retrieve.bm25_args import parse_args as parse_bm25_args
from ragnarok.stages.retrieve.dense import PACKAGED, REMOTE_MODELS, DenseRetriever, download_refused, resolve_model
from ragnarok.stages.retrieve.lucene import LuceneRetriever
from ragnarok.stages.retrieve.remote import RemoteRetriever

RETRIEVERS: Registry[Retriever] = Registry("retriever")
MAX_EF_SEARCH = 10_000
RERANKERS: Registry[Reranker] = Registry("reranker")


def _lucene(feedback: str):
    def factory(name: str, source: str, settings: Settings, arg: str | None = None) -> Retriever:
        if source.startswith(("http://", "https://")):
            if feedback != "none":
                raise UnknownComponentError("retriever", name, ["bm25 (the only model of a remote index)"])
            if arg:
                raise ComponentArgumentError("a remote index searches with its own BM25 parameters: drop the argument")
            return RemoteRetriever(name, source, settings.remote_timeout_s)
        # bm25:k1_1.2-b_0.75, bm25+rocchio:terms_20-docs_5 (ragnarok/stages/retrieve/bm25_args.py)
        return LuceneRetriever(
            name,
            source,
            feedback,
            parse_bm25_args(arg, feedback),  # type: ignore[arg-type]
            search_threads=settings.search_threads,
            prebuilt_dir=settings.prebuilt_path,
        )

    return factory


RETRIEVERS.register("bm25", _lucene("none"), "BM25 (k1=0.9, b=0.4); bm25:k1_1.2-b_0.75 sets them")
RETRIEVERS.register("bm25+rocchio", _lucene("rocchio"), "BM25 with Rocchio pseudo-relevance feedback")
RETRIEVERS.register("bm25+rm3", _lucene("rm3"), "BM25 with RM3 pseudo-relevance feedback")


# -- what a request may name as a model: configured names; paths only with allow_model_paths,
# resolved by realpath (ragnarok/core/model_paths.py); a hub name loads from the local cache unless allow_downloads

MODEL_ROLES = {
    "monot5": f"{MonoT5Reranker.kind} model",
    "crossencoder": f"{CrossEncoderReranker.kind} model",
    "embedding": "embedding model",
    "dense": "embedding model",
}


def model_choices(base: str, settings: Settings) -> dict[str, str] | None:
    """The names a request may give ``base`` (a reranker or retriever) as its model argument, name -> what it
    loads; None for one that takes no model."""
    if base == "monot5":
        return {**MONOT5S, **settings.rerank_models}
    if base == "crossencoder":
        return {**CROSS_ENCODERS, **settings.rerank_models}
    if base in ("embedding", "dense"):
        return {**{name: name for name in PACKAGED}, **REMOTE_MODELS}
    return None


def _configured_default(base: str, settings: Settings) -> str | None:
    return {"monot5": settings.monot5_model, "crossencoder": settings.cross_encoder_model}.get(base)


def request_model_path(base: str, arg: str, settings: Settings) -> str | None:
    """The realpath of the model directory that ``base:arg`` names when ``arg`` is a path rather than a
    configured name; None when it is not a path (or is a configured one). A path is the one 404 of
    :class:`ragnarok.core.model_paths.UnknownModelPath` unless ``allow_model_paths`` is on and it is a model directory
    (without it the file system is not looked at)."""
    choices = model_choices(base, settings)
    if (
        choices is None
        or not arg
        or not looks_like_path(arg)
        or arg in choices
        or arg in choices.values()
        or arg == _configured_default(base, settings)
    ):
        return None
    return model_dir(MODEL_ROLES[base], arg, list(choices), settings.allow_model_paths)


def _embedding_model(base: str, arg: str, settings: Settings) -> tuple[str, bool]:
    """``(the model to load, whether it is a request-named directory)`` for ``embedding:arg`` / ``dense:arg``:
    a configured name or a path (:func:`request_model_path`); anything else is a 404, refused before anything
    loads."""
    if (real := request_model_path(base, arg, settings)) is not None:
        return real, True
    choices = model_choices(base, settings) or {}
    if arg not in choices and arg not in choices.values():
        raise UnknownComponentError(
            MODEL_ROLES[base], arg, [*choices, *([A_DIRECTORY] if settings.allow_model_paths else [])]
        )
    resolve_model(arg)  # the packaged MiniLM: its package is installed
    return arg, False


def _prebuilt_arg(arg: str) -> tuple[str, int | None]:
    """``prebuilt:NAME[:ef_N]`` -> ``(NAME, efSearch or None)``; NAME a catalogue name (else the fixed 404)."""
    name, _, rest = arg.removeprefix("prebuilt:").partition(":")
    prebuilt.check_name(name)
    if not rest:
        return name, None
    digits = rest.removeprefix("ef_")
    if not (rest.startswith("ef_") and digits.isascii() and digits.isdigit() and 1 <= int(digits) <= MAX_EF_SEARCH):
        raise ComponentArgumentError(
            f"dense:prebuilt:NAME takes one option, ef_N (efSearch, 1 to {MAX_EF_SEARCH:,}), got {quote(rest, 40)}"
        )
    return name, int(digits)


def _dense(name: str, source: str, settings: Settings, arg: str | None = None) -> Retriever:
    if source.startswith(("http://", "https://")):
        raise UnknownComponentError(
            "retriever",
            name,
            ["bm25 (a remote index serves BM25 alone: dense retrieval reads its texts from a local or prebuilt index)"],
        )
    set_name, ef_search = _prebuilt_arg(arg) if arg and arg.startswith("prebuilt:") else (None, None)
    texts = source  # the BM25 index that holds the segments' texts
    if source.startswith("prebuilt:"):
        texts = str(prebuilt.resolve(source.removeprefix("prebuilt:"), settings.prebuilt_path))
    if set_name is not None:  # dense:prebuilt:NAME, one catalogue HNSW index or a set of shards
        return DenseRetriever(
            name,
            texts,
            allow_downloads=settings.allow_downloads,
            prebuilt=set_name,
            prebuilt_dir=str(settings.prebuilt_path),
            ef_search=ef_search,
        )
    model, _ = _embedding_model("dense", arg or "minilm", settings)
    # a hub model not in the local cache: 503 once its dense index is found, unless allow_downloads
    return DenseRetriever(name, texts, model, allow_downloads=settings.allow_downloads)


RETRIEVERS.register(
    "dense",
    _dense,
    "dense retrieval: dense:MODEL (minilm offline; arctic-l, gte-l online), "
    "dense:prebuilt:NAME[:ef_N] (pyserini's prebuilt HNSW indexes by their catalogue names, a set "
    "of shards as one: msmarco-v2.1-doc-segmented.arctic-embed-l)",
)


def _listwise_over(generator: str, settings: Settings, name: str, passes: int = 1) -> Reranker:
    from ragnarok.stages.generate.openai_compat import OpenAIChatGenerator  # noqa: PLC0415

    configs = settings.generator_configs()
    if generator not in configs or configs[generator].backend not in ("openai", "azure"):
        usable = sorted(n for n, c in configs.items() if c.backend in ("openai", "azure"))
        raise UnknownComponentError("OpenAI-compatible generator for listwise reranking", generator, usable)
    return ListwiseReranker(name, OpenAIChatGenerator(configs[generator]), passes=passes)


def _rankzephyr(settings: Settings, arg: str | None = None) -> Reranker:
    name = "rankzephyr" + (f":{arg}" if arg else "")
    passes = 3 if arg == "rho" else 1
    local = RankLLMReranker(name, RANK_LLM_MODELS["rankzephyr"])
    if local.availability() is None:
        return local
    if not settings.rankzephyr_url:
        raise RerankerUnavailable(
            "rankzephyr needs a vLLM endpoint: set RAGNAROK_RANKZEPHYR_URL to a vLLM server of "
            f"{RANK_LLM_MODELS['rankzephyr']} (or install rank_llm: {local.availability()})"
        )
    from ragnarok.stages.generate.base import GeneratorConfig  # noqa: PLC0415
    from ragnarok.stages.generate.openai_compat import OpenAIChatGenerator  # noqa: PLC0415

    config = GeneratorConfig(
        name=name,
        backend="openai",
        base_url=settings.rankzephyr_url,
        model=RANK_LLM_MODELS["rankzephyr"],
        max_tokens=200,
    )
    return ListwiseReranker(name, OpenAIChatGenerator(config), passes=passes)


def _rank_llm_only(kind: str):
    def factory(settings: Settings, arg: str | None = None) -> Reranker:
        reranker = RankLLMReranker(kind, RANK_LLM_MODELS[kind])
        if reason := reranker.availability():
            raise RerankerUnavailable(f"{kind} runs through rank_llm, which cannot run here: {reason}")
        return reranker

    return factory


def _pointwise(cls: type[PointwiseReranker], known: dict[str, str], setting: str):
    """``NAME`` loads ``settings.<setting>``; ``NAME:ARG`` a known or configured checkpoint, or, with
    ``allow_model_paths``, a local directory (never a name a request made up). Nothing is downloaded unless
    ``allow_downloads``. A checkpoint that is missing here is a 422 saying what is missing; one of another
    architecture a 422 naming it."""

    def factory(settings: Settings, arg: str | None = None) -> Reranker:
        name = cls.name if arg is None else f"{cls.name}:{arg}"
        default = getattr(settings, setting)
        checkpoint = (
            default
            if arg is None or arg == default
            else resolve_checkpoint(cls.kind, arg, {**known, **settings.rerank_models}, settings.allow_model_paths)
        )
        reranker = cls(
            name=name,
            checkpoint=checkpoint,
            batch_size=settings.pointwise_batch_size,
            device=settings.pointwise_device,
            allow_downloads=settings.allow_downloads,
        )
        if reason := reranker.availability():
            where = f" (RAGNAROK_{setting.upper()})" if arg is None else ""
            raise RerankerUnavailable(f"{name} cannot run here: {reason}{where}")
        reranker.validate()
        return reranker

    return factory


def _embedding(settings: Settings, arg: str | None = None) -> Reranker:
    model, path = _embedding_model("embedding", arg or "minilm", settings)
    if not path:  # one spelling per model, so one shared encoder (all-MiniLM-L6-v2 is minilm)
        model = "minilm" if model in PACKAGED else next((k for k, v in REMOTE_MODELS.items() if v == model), model)
    if not settings.allow_downloads and (refused := download_refused(model)):
        raise RerankerUnavailable(refused)  # a hub model not in the local cache: nothing is fetched
    return EmbeddingReranker(model=model, own_encoder=path)


def _mmr(settings: Settings, arg: str | None = None) -> Reranker:
    if arg is None:
        return MMRReranker()
    try:  # ASCII only: float() also reads other scripts' digits ("０.５")
        lambda_ = float(arg) if arg.isascii() else math.nan
    except ValueError:
        lambda_ = math.nan
    if not 0.0 <= lambda_ <= 1.0:  # NaN fails too
        raise ComponentArgumentError(f"mmr:LAMBDA takes a number from 0 to 1, got {quote(arg, 40)}")
    return MMRReranker(lambda_=lambda_)


RERANKERS.register("embedding", _embedding, "cosine similarity of MiniLM embeddings (CPU, offline); embedding:MODEL")
RERANKERS.register("mmr", _mmr, "maximal marginal relevance with MiniLM; mmr:LAMBDA (default 0.7)")
RERANKERS.register(
    "listwise",
    lambda settings, arg=None: _listwise_over(arg or "", settings, f"listwise:{arg}"),
    "listwise LLM reranking over a configured OpenAI-compatible generator: listwise:GENERATOR",
)
RERANKERS.register(
    "rankgpt",
    lambda settings, arg=None: _listwise_over(arg or "gpt-4o", settings, "rankgpt"),
    "RankGPT: listwise reranking with GPT-4o (OPENAI_API_KEY)",
)
RERANKERS.register("rankzephyr", _rankzephyr, "RankZephyr on a vLLM server or rank_llm; rankzephyr:rho = 3 passes")
RERANKERS.register(
    "monot5",
    _pointwise(MonoT5Reranker, MONOT5S, "monot5_model"),
    "monoT5 with transformers (CPU or GPU): RAGNAROK_MONOT5_MODEL; monot5:base|3b|NAME|DIR",
)
RERANKERS.register(
    "crossencoder",
    _pointwise(CrossEncoderReranker, CROSS_ENCODERS, "cross_encoder_model"),
    "a sentence-transformers cross-encoder: RAGNAROK_CROSS_ENCODER_MODEL; "
    "crossencoder:minilm-l6|bge-base|bge-v2-m3|NAME|DIR",
)
RERANKERS.register("lit5", _rank_llm_only("lit5"), "LiT5 through rank_llm (GPU)")

# Query stages (before retrieval: the AG service writes, the gateway retrieves each query) and passage
# stages (a ranking in, a ranking out, run by the gateway): see ragnarok/stages/query/ and ragnarok/stages/passage/.

QUERY_STAGES: Registry[QueryStageDef] = Registry("query stage")
QUERY_STAGES.register(
    "hyde",
    lambda: HYDE,
    "HyDE: a hypothetical answer passage is the dense query and is appended to the BM25 query; hyde:GENERATOR",
)
QUERY_STAGES.register(
    "query2doc",
    lambda: QUERY2DOC,
    "query2doc: the query x5 plus a generated pseudo-document for BM25; query2doc:GENERATOR",
)
QUERY_STAGES.register(
    "multiquery",
    lambda: MULTIQUERY,
    "N paraphrases, each retrieved, fused with the original (RRF); multiquery:GENERATOR:N (default 3)",
)
QUERY_STAGES.register(
    "decompose",
    lambda: DECOMPOSE,
    "N sub-questions, each retrieved, fused with the original (RRF); decompose:GENERATOR:N (default 3)",
)

PASSAGE_STAGES: Registry[PassageStage] = Registry("passage stage")
PASSAGE_STAGES.register(
    "neighbours",
    Neighbours.create,
    "each segment with W segments before and after it, overlapping windows merged; neighbours:W@k (default 1)",
)
PASSAGE_STAGES.register(
    "automerge",
    AutoMerge.create,
    "M or more close segments of one document replaced by the span covering them; automerge:M@k (default 2)",
)
PASSAGE_STAGES.register(
    "collapse",
    Collapse.create,
    "near-duplicates (overlapping windows of a document, trigram Jaccard >= T) count once; collapse:T@k (default 0.8)",
)
PASSAGE_STAGES.register("cutoff", Cutoff.create, "keep min-max normalised score >= T; cutoff:T@k (default 0.5)")
PASSAGE_STAGES.register("percentile", Percentile.create, "keep scores >= the P-th percentile; percentile:P@k")
PASSAGE_STAGES.register(
    "simcutoff", SimilarityCutoff.create, "keep MiniLM cosine similarity to the query >= T; simcutoff:T@k (default 0.3)"
)
PASSAGE_STAGES.register(
    "compress",
    Compress.create,
    "extractive sentence compressor: each segment keeps its "
    "sentences with query terms (at most a fraction R); compress:R@k (default 0.5)",
)
PASSAGE_STAGES.register(
    "llmcompress",
    LLMCompress.create,
    "an LLM compressor over a generator: select (each "
    "segment's useful sentences, the default), refine (a running summary over the segments) or "
    "tree_summarize (chunk summaries, then summaries of summaries); llmcompress:GENERATOR[:MODE]@k",
)
PASSAGE_STAGES.register("reorder", Reorder.create, "long-context reorder: the best candidates at both ends; reorder@k")
