"""Experiments: several pipelines over the same topics, per-topic scores, paired significance tests against a
baseline with a multiple-testing correction, as one pandas DataFrame (``ragnarok.Experiment``, ``ragnarok
compare``). A tool: it imports the service, the judges' scoring, core and runtime, never the entry points."""
