"""HTTP services: the R service (retrieval) today; AG and the /rag gateway build on the same app factory."""
