"""HTTP services from one app factory (:func:`api.main.create_app`): R (retrieval, reranking, segments), AG
(generation), the ``POST /rag`` gateway over them, evaluation, and the arena. Below the command line and the
Python API, above the arena's UI (``webui``) and everything of ``ragnarok`` it serves."""
