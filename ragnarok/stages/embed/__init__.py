"""The shared text encoder and the vectors computed with it (:mod:`.encoder`, :mod:`.backends`, :mod:`.vectors`),
below every stage that reads embeddings: retrieval, reranking, passage filters, generation, judging."""
