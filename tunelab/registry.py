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

A registry made with ``error=`` raises that error class instead of :class:`KeyError`, so each
package's ``get_x(name)`` is the registry's own ``get``:

>>> Registry("target", error=LookupError).get("nope")
Traceback (most recent call last):
...
LookupError: No target named 'nope'; known: (none)
"""
from __future__ import annotations

from enum import Enum
from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


def same_definition(a: object, b: object) -> bool:
    """True when ``a`` and ``b`` are the same object, or the same definition imported twice (a module
    loaded again under pytest's importlib mode registers its classes again)."""
    def name(obj: object) -> tuple[str | None, str | None]:
        return getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    return a is b or (name(a)[1] is not None and name(a) == name(b))


class Registry(Generic[T]):
    """Map names to implementations; ``get`` fails with the list of known names.

    Parameters
    ----------
    kind : what is registered, in words (``"load generator"``), for the error message
    error : the exception class ``get`` raises for an unknown name (default :class:`KeyError`)
    same : ``same(a, b)``: whether two objects registered under one name are one definition (then the
        second replaces the first); default :func:`same_definition`. Registries of instances, whose
        re-imported copies are new objects, pass their own.
    """

    def __init__(self, kind: str, error: type[Exception] = KeyError,
                 same: Callable[[object, object], bool] = same_definition) -> None:
        self.kind = kind
        self.error = error
        self.same = same
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            known = self._items.get(name)
            if known is not None and not self.same(known, obj):
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._items[name] = obj
            return obj
        return decorator

    def add(self, name: str, obj: T) -> None:
        self.register(name)(obj)

    def get(self, name: str | Enum) -> T:
        """The object registered as ``name``; an :class:`~enum.Enum` member (``DesignType.OAT``) is looked up by
        its text (``"oat"``), the name it is registered under."""
        try:
            return self._items[name.value if isinstance(name, Enum) else name]
        except KeyError:
            known = ", ".join(sorted(self._items)) or "(none)"
            raise self.error(f"No {self.kind} named {name!r}; known: {known}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
