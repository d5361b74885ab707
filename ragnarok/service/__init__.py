"""The services: the R service's retrievers and rerankers made once by name (``retrieval_service``), the
gateway that runs a pipeline over the R and AG services (``gateway``, ``gateway_stream``) and the batch runner
the tools share (``batch``). It imports the stores (auth, arena), the stages, core and runtime; the tools and
the entry points import it."""
