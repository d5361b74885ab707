"""The offline demo collection: the Python standard library's own documentation, built from the running
interpreter (PSF-licensed text; no network, no download).

Documents in MS MARCO V2.1 shape ``{docid, url, title, headings, body}``:

* ``stdlib.<module>``: the docstring of each module of a curated list (modules present in Python 3.11-3.13,
  no GUI or side effects on import);
* ``stdlib.<module>.<name>``: one per documented public class, method, property and function of those
  modules (signature, then docstring): short documents, so answers point at the exact API;
* ``langref.<topic>``: the language reference topics shipped in ``pydoc_data.topics``.
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

MODULES = """
abc argparse array ast asyncio base64 bdb binascii bisect builtins bz2 calendar cmath cmd code codecs
codeop collections collections.abc colorsys compileall concurrent.futures configparser contextlib contextvars
copy copyreg cProfile csv ctypes dataclasses datetime dbm decimal difflib dis doctest email email.message
email.parser email.utils encodings enum errno faulthandler filecmp fileinput fnmatch fractions ftplib
functools gc getopt getpass gettext glob graphlib gzip hashlib heapq hmac html html.parser http http.client
http.cookies http.server imaplib importlib importlib.metadata importlib.resources inspect io ipaddress
itertools json keyword linecache locale logging logging.config logging.handlers lzma mailbox marshal math
mimetypes mmap modulefinder multiprocessing netrc numbers operator optparse os os.path pathlib pdb pickle
pickletools pkgutil platform plistlib poplib pprint profile pstats pty pwd py_compile pyclbr pydoc queue quopri
random re reprlib rlcompleter runpy sched secrets select selectors shelve shlex shutil signal site smtplib
socket socketserver sqlite3 ssl stat statistics string stringprep struct subprocess symtable sys sysconfig
syslog tabnanny tarfile tempfile termios textwrap threading time timeit token tokenize tomllib trace
traceback tracemalloc tty types typing unicodedata unittest unittest.mock urllib urllib.error urllib.parse
urllib.request urllib.robotparser uuid warnings wave weakref webbrowser wsgiref xml xml.dom xml.dom.minidom
xml.etree.ElementTree xml.sax zipapp zipfile zipimport zlib zoneinfo
""".split()
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
MIN_WORDS = 5
_ACCELERATORS = {"os": ("posix",)}  # modules whose functions live in a C module of another name


def _doc(obj: Any) -> str:
    try:
        text = inspect.getdoc(obj) or ""
    except Exception:  # noqa: BLE001 - some C objects refuse introspection
        return ""
    return _ADDRESS.sub("", text).strip()


def _defined_in(obj: Any, module: str) -> bool:
    """Defined by ``module``, one of its private submodules, or its C accelerator (``_json`` for ``json``)."""
    origin = getattr(obj, "__module__", None)
    if not isinstance(origin, str):
        return False
    return origin in (module, "_" + module, *_ACCELERATORS.get(module, ())) or origin.startswith(module + ".")


def _members(module: Any) -> Iterator[tuple[str, Any, str]]:
    """``(qualified name, object, docstring)`` of the public classes, their methods and properties, and the
    functions that ``module`` defines."""
    for name, obj in sorted(vars(module).items()):
        if name.startswith("_") or not _defined_in(obj, module.__name__):
            continue
        if inspect.isclass(obj):
            yield f"{module.__name__}.{name}", obj, _doc(obj)
            for attr, member in sorted(vars(obj).items()):
                if not attr.startswith("_") and (callable(member) or isinstance(member, property)):
                    yield f"{module.__name__}.{name}.{attr}", member, _doc(member)
        elif inspect.isfunction(obj) or inspect.isbuiltin(obj):
            yield f"{module.__name__}.{name}", obj, _doc(obj)


def _signature(obj: Any) -> str:
    try:
        return _ADDRESS.sub("", str(inspect.signature(obj)))
    except (TypeError, ValueError):
        return ""


def module_documents(name: str) -> Iterator[dict[str, str]]:
    """The module's own document, then one per documented public class, method and function."""
    try:
        module = importlib.import_module(name)
    except Exception:  # noqa: BLE001 - a platform without this module
        return
    url = f"https://docs.python.org/3/library/{name}.html"
    summary = _doc(module)
    members = [(q, obj, doc) for q, obj, doc in _members(module) if len(doc.split()) >= MIN_WORDS and doc != summary]
    if summary:
        first = summary.splitlines()[0].strip()
        yield {"docid": f"stdlib.{name}", "url": url, "title": f"{name} — {first}",
               "headings": "\n".join(q for q, _, _ in members), "body": summary}
    for qualified, obj, doc in members:
        yield {"docid": f"stdlib.{qualified}", "url": f"{url}#{qualified}", "title": qualified,
               "headings": name, "body": f"{qualified}{_signature(obj)}\n\n{doc}"}


def langref_documents() -> Iterator[dict[str, str]]:
    from pydoc_data.topics import topics  # noqa: PLC0415

    for topic, text in sorted(topics.items()):
        body = text.strip()
        if body:
            first = body.splitlines()[0].strip()
            yield {"docid": f"langref.{topic}", "url": "https://docs.python.org/3/reference/",
                   "title": f"The Python language reference: {first}", "headings": topic, "body": body}


def iter_demo_documents() -> Iterator[dict[str, str]]:
    """Every demo document, in a fixed order."""
    seen: set[str] = set()
    for name in MODULES:
        with warnings.catch_warnings():  # reading some docstrings warns (typing.io, typing.re)
            warnings.simplefilter("ignore")
            documents = list(module_documents(name))
        for document in documents:
            if document["docid"] not in seen:  # a class re-exported by two modules counts once
                seen.add(document["docid"])
                yield document
    yield from langref_documents()


def write_demo_jsonl(path: Path) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as out:
        for document in iter_demo_documents():
            out.write(json.dumps(document, ensure_ascii=False) + "\n")
            n += 1
    return n
