"""Retrieval backends: Lucene (local or prebuilt) and remote Anserini REST servers."""
