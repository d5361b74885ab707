"""Query stages: a query in, one or more queries out, before retrieval (HyDE, multi-query, decomposition,
query2doc). ``stages`` holds what each stage asks a generator and how its answer becomes queries;
``writer`` calls the generator (bounded, cached per generator, prompt and query)."""
