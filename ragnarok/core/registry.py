"""The one registry: components are registered by name per role and created by name, never by sniffing
substrings of model names. Registration is explicit (see ``ragnarok.stages.components``) and does no I/O."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ragnarok.runtime.quoting import quote

T = TypeVar("T")


def suggest(name: str, available: list[str]) -> str | None:
    """The available name closest to a mistyped ``name`` (``extractiv`` -> ``extractive``), if one is close;
    ``dense:MODEL``-style entries are compared by their name before the colon."""
    import difflib  # noqa: PLC0415

    if not isinstance(name, str) or not name or len(name) > 100:
        return None
    bases = {entry.partition(":")[0] if entry.endswith(":MODEL") else entry: entry for entry in available}
    for candidate in (name, name.partition(":")[0]):
        close = difflib.get_close_matches(candidate.lower(), list(bases), n=1, cutoff=0.75)
        if close:
            return bases[close[0]]
    return None


class UnknownComponentError(LookupError):
    """A name that no component of ``role`` has: the message lists what is available and, when one of those is
    close to it, asks "did you mean ...?". ``public`` (what the API answers) is the same without the name: one
    fixed message per role (and suggestion), which names only what exists here, so that an error body never
    passes on the caller's text (scrubbed or not, it would confirm guesses about the server's paths and
    keys)."""

    def __init__(self, role: str, name: str, available: list[str]):
        self.role, self.name, self.available = role, name, available
        self.suggestion = suggest(name, available)
        hint = f"; did you mean {quote(self.suggestion)}?" if self.suggestion else ""
        listed = f"available: {', '.join(available) or 'none'}{hint}"
        self.public = f"unknown {role} (the name is not echoed); {listed}"
        super().__init__(f"unknown {role} {quote(name)}; {listed}")


#: A quoted piece of a message (``repr`` or :func:`~ragnarok.runtime.quoting.quote`, cut or not): the caller's text.
_QUOTED = re.compile(r"""(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")(?:… \([0-9,]+ characters\))?""")


class ComponentArgumentError(ValueError):
    """A component's argument (``mmr:LAMBDA``) that it cannot take: the message names the argument.
    ``public`` (what the API answers) is the message with every quoted value left out (``got (not echoed)``):
    the rule, never the caller's text."""

    def __init__(self, message: str, public: str | None = None):
        super().__init__(message)
        self.public = public if public is not None else _QUOTED.sub("(not echoed)", message)


@dataclass
class Entry(Generic[T]):
    name: str
    factory: Callable[..., T]
    description: str = ""


@dataclass
class Registry(Generic[T]):
    role: str
    entries: dict[str, Entry[T]] = field(default_factory=dict)

    def register(self, name: str, factory: Callable[..., T], description: str = "") -> None:
        if name in self.entries:
            raise ValueError(f"{self.role} {name!r} is registered twice")
        self.entries[name] = Entry(name, factory, description)

    def get(self, name: str) -> Entry[T]:
        try:
            return self.entries[name]
        except KeyError:
            raise UnknownComponentError(self.role, name, self.names()) from None

    def create(self, name: str, **kwargs: Any) -> T:
        return self.get(name).factory(**kwargs)

    def names(self) -> list[str]:
        return sorted(self.entries)


def lookup(name: str, first: Registry[Any], *others: Registry[Any]) -> Registry[Any]:
    """The registry, of ``first`` and ``others``, that has ``name`` (a stage after the retriever: a reranker or a
    passage stage); otherwise an :class:`UnknownComponentError` in ``first``'s role that lists, and suggests
    from, the names of all of them (``neighbors`` -> ``neighbours``, a passage stage)."""
    registries = (first, *others)
    for registry in registries:
        if name in registry.entries:
            return registry
    raise UnknownComponentError(first.role, name, sorted({n for r in registries for n in r.names()}))


class Instances(Generic[T]):
    """Components created once per key (a name, a name and an index) and reused; thread-safe."""

    def __init__(self) -> None:
        self._items: dict[Hashable, T] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, create: Callable[[], T]) -> T:
        with self._lock:
            if key not in self._items:
                self._items[key] = create()
            return self._items[key]

    def drop(self, which: Callable[[Hashable], bool]) -> list[T]:
        """Forget the instances whose key ``which`` accepts (created anew on their next ``get``); returns them."""
        with self._lock:
            keys = [key for key in self._items if which(key)]
            return [self._items.pop(key) for key in keys]
