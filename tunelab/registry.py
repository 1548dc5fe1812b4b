"""A tiny named registry: the extension point for targets, loads, knob families and designs.

Examples
--------
>>> from tunelab.registry import Registry
>>> loads = Registry("load generator")
>>> @loads.register("echo")
... class Echo: ...
>>> loads.get("echo") is Echo
True
>>> loads.get("nope")
Traceback (most recent call last):
...
KeyError: "No load generator named 'nope'; known: echo"
"""
from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Map names to implementations; ``get`` fails with the list of known names."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._items[name] = obj
            return obj
        return decorator

    def add(self, name: str, obj: T) -> None:
        self.register(name)(obj)

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "(none)"
            raise KeyError(f"No {self.kind} named {name!r}; known: {known}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
