"""Passage stages: a ranking in, a ranking out (the contract rerankers have), run by the gateway between
retrieval and generation: neighbour windows, auto-merging, near-duplicate collapse, cutoffs, compression
and long-context reordering. Every output candidate is one of the input candidates, or a span of the same
document that contains it (its id is then the input segment's id, and ``doc.merged`` lists the segments the
span covers)."""
