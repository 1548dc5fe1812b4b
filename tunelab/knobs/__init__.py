"""Kernel knobs: the catalogue, typed validation, and backends that read and write them on a target.

Examples
--------
>>> from tunelab.knobs import get_knob
>>> knob = get_knob("net.core.somaxconn")
>>> knob.validate(4096), knob.scope, knob.requires_restart
(4096, 'netns', True)
"""
from __future__ import annotations

from tunelab.knobs.base import VALUE_TYPES, Knob, KnobValue
from tunelab.knobs.catalogue import CATALOGUE, catalogue, get_knob, suggest
from tunelab.knobs.discovery import discover
from tunelab.knobs.families import FAMILIES, get_family

__all__ = ["FAMILIES", "VALUE_TYPES", "Knob", "KnobValue", "catalogue", "discover", "get_family", "get_knob", "suggest"]
