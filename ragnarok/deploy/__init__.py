"""Running the service as an operator would: several ``ragnarok serve`` instances on one PostgreSQL and one
Redis behind nginx (``deploy/cluster``, :mod:`ragnarok.deploy.cluster`).
A tool: it imports the stores, core and runtime, and runs the CLI as processes."""
