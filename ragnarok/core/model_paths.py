"""What a request may name as a model: configured names only, unless the operator allows paths.

* A model argument that looks like a path (:func:`looks_like_path`: a ``/`` or ``\\``, or a leading ``~`` or
  ``.``) is refused with one 404 (:class:`UnknownModelPath`) that never echoes it and is the same whether or
  not anything exists there: without ``allow_model_paths`` the file system is not even looked at.
* With ``allow_model_paths`` (``RAGNAROK_ALLOW_MODEL_PATHS=1``) a path is resolved with ``realpath`` (after
  ``expanduser``), so every spelling of one directory is one model; a path that is not a model directory
  (missing, not a directory, no ``config.json``) is that same 404. The models loaded for such paths are kept in
  a :class:`ModelLRU` bounded by count and by their size on disk (``model_cache_max``,
  ``model_cache_max_mb``), least recently used dropped first.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from ragnarok.core.registry import ComponentArgumentError, UnknownComponentError

T = TypeVar("T")
#: What the choices of a 404 add when a request may name a model directory.
A_DIRECTORY = "a local model directory"
#: Files walked at most to size a model directory (a bigger tree is refused as too large).
MAX_FILES = 10_000


def looks_like_path(name: str) -> bool:
    """Whether a request's model argument names a path (and so is never taken for a configured name)."""
    return "/" in name or "\\" in name or name.startswith(("~", "."))


class UnknownModelPath(UnknownComponentError):
    """A path a request named that is not a model it may load: the same 404 for every path (never echoed)."""

    def __init__(self, role: str, available: list[str]):
        self.role, self.name, self.available, self.suggestion = role, "", available, None
        self.public = f"unknown {role} (a path, not echoed); available: {', '.join(available) or 'none'}"
        LookupError.__init__(self, self.public)


def model_dir(role: str, name: str, available: list[str], allow_paths: bool) -> str:
    """The realpath of the model directory ``name`` (a path a request named), or :class:`UnknownModelPath`:
    always when ``allow_paths`` is off (without looking at the file system), else when it is not a directory
    holding ``config.json``. ``available``: the configured names (the 404 lists them)."""
    if not allow_paths:
        raise UnknownModelPath(role, available)
    try:
        real = os.path.realpath(os.path.expanduser(name))
        if os.path.isfile(os.path.join(real, "config.json")):
            return real
    except (OSError, ValueError):  # a name no file system takes (a NUL byte, too long)
        pass
    raise UnknownModelPath(role, [*available, A_DIRECTORY])


def dir_bytes(path: str, limit: int | None = None) -> int:
    """The size of the files under ``path`` (symlinks followed, as a Hugging Face snapshot's are); the walk stops
    once past ``limit`` bytes or :data:`MAX_FILES` files (the size returned is then over ``limit``)."""
    total = files = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                continue
            files += 1
            if (limit is not None and total > limit) or files > MAX_FILES:
                return max(total, (limit or 0) + 1)
    return total


class ModelLRU(Generic[T]):
    """Instances of request-named models by key (a realpath), at most ``max_count`` of them and ``max_bytes``
    of model files in all; the least recently used are dropped first (their memory goes once no request holds
    them). Thread-safe; an instance is created (cheaply: models load on first use) under the lock."""

    def __init__(self, max_count: int, max_bytes: int):
        self.max_count, self.max_bytes = max_count, max_bytes
        self._items: OrderedDict[Hashable, tuple[T, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, path: str, create: Callable[[], T]) -> T:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key][0]
            size = dir_bytes(path, self.max_bytes)
            if size > self.max_bytes:
                raise ComponentArgumentError(
                    f"that model directory holds more than RAGNAROK_MODEL_CACHE_MAX_MB "
                    f"({self.max_bytes // 2**20:,} MB), the most request-named models may take"
                )
            item = create()
            self._items[key] = (item, size)
            while len(self._items) > self.max_count or self.bytes() > self.max_bytes:
                self._items.popitem(last=False)
            return item

    def bytes(self) -> int:
        return sum(size for _, size in self._items.values())

    def keys(self) -> list[Hashable]:
        """The keys held, least recently used first."""
        with self._lock:
            return list(self._items)
