"""Pipeline search (`ragnarok optimize`): AutoRAG-style greedy and Optuna strategies over pipeline specs.
A tool: it imports the other tools (judge, collection), the service, the stages, core and runtime."""
