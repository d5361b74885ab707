#!/usr/bin/env bash
# Retrieval quality on CACM through our own CLI: lexical, dense, fusion, fusion + CPU rerankers.
#   bash bench/quality_cacm.sh [WORKDIR]      (needs ../shared/data/cacm; runs already in WORKDIR are kept)
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${RAGNAROK_SHARED:-../shared}/data/cacm
W=${1:-/tmp/cacm-quality}
mkdir -p "$W/html"
R="python -m ragnarok.cli"
[ -d "$W/index" ] || { tar xzf "$SHARED/cacm.tar.gz" -C "$W/html"; $R index "$W/html" "$W/index" --collection HtmlCollection; }
[ -d "$W/index.dense" ] || $R index --dense minilm --from-lucene "$W/index"
T="$SHARED/topics.cacm.txt"
run() { [ -s "$W/$1.txt" ] || $R search --topics "$T" --index "$W/index" --output "$W/$1.txt" --run-id "$1" "${@:2}"; }
run bm25 --retriever bm25 --k 1000
run bm25+rocchio --retriever bm25+rocchio --k 1000
run bm25+rm3 --retriever bm25+rm3 --k 1000
run dense-minilm --retriever dense:minilm --k 1000
run rrf --pipeline "rrf(bm25+rocchio, dense:minilm)@1000"
run cc --pipeline "cc(bm25+rocchio, dense:minilm)@1000"
run dbsf --pipeline "dbsf(bm25+rocchio, dense:minilm)@1000"
run rrf+embedding --pipeline "rrf(bm25+rocchio, dense:minilm)@100 | embedding@100"
run rrf+embedding~rrf --pipeline "rrf(bm25+rocchio, dense:minilm)@100 | embedding@100~rrf"
run rrf+mmr0.7 --pipeline "rrf(bm25+rocchio, dense:minilm)@100 | mmr:0.7@100"
cd "$W" && python -m ragnarok.cli eval "$SHARED/qrels.cacm.txt" bm25.txt bm25+rocchio.txt bm25+rm3.txt dense-minilm.txt \
  rrf.txt cc.txt dbsf.txt rrf+embedding.txt rrf+embedding~rrf.txt rrf+mmr0.7.txt
