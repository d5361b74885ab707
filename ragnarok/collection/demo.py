"""The offline demo collection: the Python standard library's own documentation, built from the running
interpreter (PSF-licensed text; no network, no download).

Documents come in MS MARCO V2.1 document shape ``{docid, url, title, headings, body}``: one per module of a
curated allowlist and one per language reference topic. Order and text are deterministic for a given
interpreter, so the demo index and its benchmarks are reproducible.

Design notes: docs/internals/collection.md.
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

#: The curated allowlist: present in 3.11-3.13, importable without side effects, documented.
MODULES: tuple[str, ...] = tuple(
    sorted(
        """
abc argparse array ast asyncio base64 bdb binascii bisect builtins bz2 calendar cmath cmd code codecs codeop
collections collections.abc colorsys compileall concurrent.futures concurrent.futures.process
concurrent.futures.thread configparser contextlib contextvars copy
copyreg cProfile csv ctypes curses.ascii dataclasses datetime dbm decimal difflib dis doctest email
email.charset email.contentmanager email.encoders email.errors email.generator email.header
email.headerregistry email.iterators email.message email.mime.text email.parser email.policy email.utils
encodings enum errno faulthandler filecmp fileinput fnmatch fractions ftplib functools gc getopt getpass
gettext glob graphlib gzip hashlib heapq hmac html html.entities html.parser http http.client
http.cookiejar http.cookies http.server imaplib importlib importlib.abc importlib.machinery
importlib.metadata importlib.resources importlib.util inspect io ipaddress itertools json keyword linecache
locale logging logging.config logging.handlers lzma mailbox marshal math mimetypes mmap modulefinder
multiprocessing multiprocessing.pool multiprocessing.shared_memory netrc numbers operator optparse os
os.path pathlib pdb pickle pickletools pkgutil platform plistlib poplib pprint profile pstats pty pwd
py_compile pyclbr pydoc queue quopri random re reprlib rlcompleter runpy sched secrets select selectors
shelve shlex shutil signal site smtplib socket socketserver sqlite3 ssl stat statistics string stringprep
struct subprocess symtable sys sysconfig syslog tabnanny tarfile tempfile termios textwrap threading time
timeit token tokenize tomllib trace traceback tracemalloc tty types typing unicodedata unittest
unittest.mock urllib urllib.error urllib.parse urllib.request urllib.response urllib.robotparser uuid
warnings wave weakref webbrowser wsgiref wsgiref.handlers wsgiref.headers wsgiref.simple_server
wsgiref.util wsgiref.validate xml xml.dom xml.dom.minidom xml.dom.pulldom xml.etree.ElementTree xml.sax
xml.sax.handler xml.sax.saxutils xml.sax.xmlreader xmlrpc xmlrpc.client xmlrpc.server zipapp zipfile
zipimport zlib zoneinfo
""".split()
    )
)
#: C modules that hold the implementation of an allowlisted module under another name.
_IMPLEMENTED_IN: dict[str, tuple[str, ...]] = {"os": ("posix", "nt"), "os.path": ("posixpath", "ntpath", "genericpath")}
LIBRARY_URL = "https://docs.python.org/3/library/{module}.html"
REFERENCE_URL = "https://docs.python.org/3/reference/"

MIN_WORDS = 4  # shorter member docstrings ("Return self.") stay in the module page only
_ADDRESS = re.compile(r"\s+at 0x[0-9a-fA-F]+")
_TRAILING = re.compile(r"[ \t]+$", re.M)
_BLANKS = re.compile(r"\n{3,}")


def normalize(text: str) -> str:
    """Deterministic, tidy text: no memory addresses, tabs expanded, no trailing spaces, at most one blank
    line between paragraphs (indentation inside code examples is kept)."""
    text = _ADDRESS.sub("", text.replace("\r\n", "\n").expandtabs(4))
    return _BLANKS.sub("\n\n", _TRAILING.sub("", text)).strip()


def _docstring(obj: Any) -> str:
    """The object's own docstring (not one inherited from a base class), cleaned; ``""`` if none."""
    try:
        doc = obj.__doc__
    except Exception:  # noqa: BLE001 - some C objects refuse introspection
        return ""
    return normalize(inspect.cleandoc(doc)) if isinstance(doc, str) else ""


def _defined_in(obj: Any, module: str) -> bool:
    """Whether ``obj`` comes from ``module``: the module itself, one of its submodules (packages such as
    ``asyncio`` define their classes there), or its C implementation (``_heapq`` for ``heapq``)."""
    try:
        origin = obj.__module__
    except Exception:  # noqa: BLE001
        return False
    if not isinstance(origin, str):
        return False
    if origin in (module, "_" + module, *_IMPLEMENTED_IN.get(module, ())):
        return True
    return origin.startswith(module + ".")


def _methods(cls: type) -> Iterator[tuple[str, Any]]:
    """Public methods and properties that ``cls`` itself defines, sorted by name."""
    for attr, member in sorted(vars(cls).items()):
        if attr.startswith("_"):
            continue
        if isinstance(member, (classmethod, staticmethod)):
            member = member.__func__
        if inspect.isroutine(member) or isinstance(member, property):
            yield attr, member


def module_members(module: Any, name: str) -> list[tuple[str, str]]:
    """``(qualified name, docstring)`` of the documented public classes, their public methods, and the public
    functions that ``module`` (imported as ``name``: ``os.path`` is ``posixpath``) defines, in name order;
    each object once (aliases are skipped)."""
    seen: set[int] = set()
    members: list[tuple[str, str]] = []

    def add(qualified: str, obj: Any) -> None:
        doc = _docstring(obj)
        if doc and id(obj) not in seen:
            seen.add(id(obj))
            members.append((qualified, doc))

    for attr, obj in sorted(vars(module).items()):
        if attr.startswith("_") or not _defined_in(obj, name):
            continue
        if inspect.isclass(obj):
            if id(obj) in seen:
                continue
            add(f"{name}.{attr}", obj)
            seen.add(id(obj))
            for method, member in _methods(obj):
                add(f"{name}.{attr}.{method}", member)
        elif inspect.isfunction(obj) or inspect.isbuiltin(obj) or inspect.ismethod(obj):
            add(f"{name}.{attr}", obj)
    return members


def _summary(doc: str) -> str:
    """The first paragraph of a docstring, on one line."""
    return " ".join(doc.split("\n\n", 1)[0].split())


def module_documents(name: str) -> Iterator[dict[str, str]]:
    """The documents of one stdlib module: its page, then one per documented member; nothing if the module
    cannot be imported here.

    The page ``stdlib.<module>`` holds the module docstring and a contents paragraph with the first paragraph
    of each member's docstring; ``stdlib.<module>.<member>`` holds the member's whole docstring. (One page
    per module alone is too little text for a collection of 5,000+ segments: the 10-sentence windows of
    short member documents are what make it that size.)
    """
    try:
        with warnings.catch_warnings():  # a few imports and docstrings warn (deprecations)
            warnings.simplefilter("ignore")
            module = importlib.import_module(name)
            summary = normalize(inspect.getdoc(module) or "")
            members = module_members(module, name)
    except Exception:  # noqa: BLE001 - a platform without this module
        return
    url = LIBRARY_URL.format(module=name)
    contents = "\n".join(f"{qualified}: {_summary(doc)}" for qualified, doc in members)
    body = "\n\n".join(part for part in (summary, contents) if part)
    if not body:
        return
    first = summary.splitlines()[0].strip() if summary else f"the {name} module"
    yield {
        "docid": f"stdlib.{name}",
        "url": url,
        "title": f"{name} — {first}",
        "headings": "\n".join(qualified for qualified, _ in members),
        "body": body,
    }
    for qualified, doc in members:
        if len(doc.split()) >= MIN_WORDS:
            yield {
                "docid": f"stdlib.{qualified}",
                "url": f"{url}#{qualified}",
                "title": f"{qualified} ({name})",
                "headings": name,
                "body": f"{qualified}: {doc}",
            }


def langref_documents() -> Iterator[dict[str, str]]:
    """One document per language reference topic of ``pydoc_data.topics``, sorted by topic."""
    from pydoc_data.topics import topics  # noqa: PLC0415 - a large module, loaded only when building

    for topic, text in sorted(topics.items()):
        body = normalize(text)
        if body:
            first = body.splitlines()[0].strip()
            yield {
                "docid": f"langref.{topic}",
                "url": REFERENCE_URL,
                "title": f"The Python language reference: {first}",
                "headings": topic,
                "body": body,
            }


def iter_demo_documents() -> Iterator[dict[str, str]]:
    """Every demo document, in a fixed order: the stdlib modules (sorted), then the language reference."""
    for name in MODULES:
        yield from module_documents(name)
    yield from langref_documents()


def write_demo_jsonl(path: Path) -> int:
    """Write the demo collection to ``path``, one JSON document per line; the number of documents."""
    n = 0
    with open(path, "w", encoding="utf-8") as out:
        for document in iter_demo_documents():
            out.write(json.dumps(document, ensure_ascii=False) + "\n")
            n += 1
    return n
