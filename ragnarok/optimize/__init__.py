"""Pipeline search (`ragnarok optimize`): AutoRAG-style greedy and Optuna strategies over pipeline specs."""
