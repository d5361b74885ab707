"""The command line's front-ends: ``main`` (the typer app; ``serve`` and ``index``), ``search`` (search,
eval), ``prompt``, ``schema``, ``serving`` (the server's workers) and ``doctor``; each tool's own commands are
in its ``cli.py``. An entry point, beside :mod:`ragnarok.api`: it imports any layer below, nothing imports
it."""
