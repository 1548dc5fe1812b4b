"""Kernel knobs: the catalogue, typed validation, and backends that read and write them on a target.

Examples
--------
>>> from tunelab.knobs import get_knob
>>> knob = get_knob("net.core.somaxconn")
>>> knob.validate(4096), knob.scope, knob.requires_restart
(4096, 'netns', True)
"""
from __future__ import annotations

import difflib

from tunelab.errors import KnobError
from tunelab.knobs.base import VALUE_TYPES, Knob, KnobValue
from tunelab.knobs.catalogue import CATALOGUE
from tunelab.knobs.discovery import discover
from tunelab.knobs.families import FAMILIES, get_family

__all__ = ["FAMILIES", "VALUE_TYPES", "Knob", "KnobValue", "catalogue", "discover", "get_family", "get_knob", "suggest"]


def catalogue() -> dict[str, Knob]:
    """Every known knob, keyed by name (a copy; the catalogue itself is not changed)."""
    return dict(CATALOGUE)


def get_knob(name: str) -> Knob:
    """The catalogue knob called ``name``.

    Raises
    ------
    KnobError
        If ``name`` is unknown; the message suggests close names.

    >>> get_knob("net.core.somaxcon")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tunelab.errors.KnobError: unknown knob 'net.core.somaxcon'; did you mean net.core.somaxconn? see ...
    """
    try:
        return CATALOGUE[name]
    except (KeyError, TypeError):
        pass
    close = suggest(str(name))
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise KnobError(f"unknown knob {name!r}; {hint}see `tunelab knobs list`")


def suggest(name: str, limit: int = 3) -> list[str]:
    """Catalogue names close to ``name``: same last component, or a near spelling of the full name
    or of its last component.

    >>> suggest("tcp_abort_on_overflow"), suggest("net.core.somaxcon")
    (['net.ipv4.tcp_abort_on_overflow'], ['net.core.somaxconn'])
    """
    leaves: dict[str, list[str]] = {}
    for known in CATALOGUE:
        leaves.setdefault(known.rsplit(".", 1)[-1], []).append(known)
    leaf = name.rsplit(".", 1)[-1]
    found = list(leaves.get(leaf, []))
    found += difflib.get_close_matches(name, list(CATALOGUE), n=limit, cutoff=0.85)
    for close_leaf in difflib.get_close_matches(leaf, list(leaves), n=limit, cutoff=0.75):
        found += leaves[close_leaf]
    return list(dict.fromkeys(found))[:limit]

