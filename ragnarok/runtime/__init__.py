"""Runtime helpers that know nothing of retrieval or generation: logs, Prometheus metrics, cancellation,
signals and deadlines, quoting and redaction, progress, network addresses, a Lucene index's files, and the
command line's output envelope and errors. The lowest layer: it imports nothing else of ragnarok."""
