"""The core: the standardized JSON's types, the pipeline grammar and its presets, the one Settings object
and the one registry, topics and run files, fusion, IR evaluation, and the JVM (started with the settings'
heap). Every layer above may import it; it imports only :mod:`ragnarok.runtime` (and libraries)."""
