"""The pairwise arena: battles, the vote log and ratings recomputed from it.
A store, below the service and the tools: it imports core and runtime only."""
