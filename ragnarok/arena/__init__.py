"""The pairwise arena: battles, the vote log and ratings recomputed from it."""
