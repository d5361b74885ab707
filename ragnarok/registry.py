"""The one registry: components are registered by name per role and created by name, never by sniffing
substrings of model names. Registration is explicit (see ``ragnarok.components``) and does no I/O."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ragnarok.quoting import quote

T = TypeVar("T")


class UnknownComponentError(LookupError):
    def __init__(self, role: str, name: str, available: list[str]):
        self.role, self.name, self.available = role, name, available
        super().__init__(f"unknown {role} {quote(name)}; available: {', '.join(available) or 'none'}")


class ComponentArgumentError(ValueError):
    """A component's argument (``mmr:LAMBDA``) that it cannot take: the message names the argument."""


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
