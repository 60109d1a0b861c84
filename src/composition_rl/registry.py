"""Name registries for engines, steps, backends and exporters (the verl ``core_algos`` shape).

Registering one name twice with different objects raises; an unknown name fails with the
list of known ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

__all__ = ["Registry"]


class Registry(Generic[T]):
    """A dict of named objects with loud failures.

    >>> r = Registry[type]("composer")
    >>> @r.register("a")
    ... class A: ...
    >>> r.get("a") is A
    True
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """A decorator that registers its object under ``name`` and returns it unchanged; raises
        ``ValueError`` when ``name`` already holds a different object (one of the same qualified
        name, as a reloaded module makes, replaces it)."""
        def deco(obj: T) -> T:
            old = self._items.get(name)
            if old is not None and old is not obj and getattr(old, "__qualname__", None) != getattr(
                obj, "__qualname__", object()
            ):
                raise ValueError(f"{self.kind} {name!r} is already registered to {old!r}")
            self._items[name] = obj
            return obj

        return deco

    def get(self, name: str) -> T:
        """The object registered under ``name``; raises ``KeyError`` listing the known names."""
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "(none)"
            raise KeyError(f"unknown {self.kind} {name!r}; known: {known}") from None

    def load(self, name: str) -> T:
        """The object registered as ``name``; a ``"module:attr"`` string entry is imported on
        first use, so heavy engines and backends cost nothing until chosen."""
        target = self.get(name)
        if isinstance(target, str):
            import importlib

            mod, _, attr = target.partition(":")
            target = getattr(importlib.import_module(mod), attr)
        return target

    def build(self, name: str, **kwargs):
        """Construct the object registered as ``name`` (see :meth:`load`)."""
        return self.load(name)(**kwargs)

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._items))
