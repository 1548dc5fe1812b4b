"""Knob constraints of a design: the order knobs are written in, and configurations to leave out.

Some kernel settings are coupled: the block layer refuses ``nr_requests=256`` on a loop device
once its scheduler is ``none`` (the queue depth is then capped by the hardware queue), so the
scheduler has to be written first, and some combinations cannot be set at all. A design says
so in its ``constraints:`` section (designs/README.md, "Knob constraints")::

    knobs:
      - {name: block.queue.nr_requests, device: "@disk", levels: [256, 64], apply_order: 2}
    constraints:
      apply_order: [block.queue.scheduler[@disk], block.queue.nr_requests[@disk]]
      exclude:
        - {block.queue.scheduler[@disk]: none, block.queue.nr_requests[@disk]: 256}

**Order of application.** Every knob has a write rank; changed knobs are written lowest rank
first (ties: the design's knob order) and restored in reverse. A knob's rank is its
``apply_order`` (knob level, or its position in the design-level list, which puts the listed
knobs before all others), else its built-in rank (:data:`BUILTIN_APPLY_ORDER`), else 0.

**Exclusions.** Each ``exclude`` entry is a partial configuration (knob id -> level); a planned
run whose knobs match every pair of an entry is left out of the plan.

Pure functions only: the plan (:mod:`tunelab.designs.plan`) drops excluded rows, the runner
orders its writes with :func:`write_rank`, and :mod:`tunelab.constraints` probes a target.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Protocol, Sequence, TypeVar

from tunelab.model import DesignType, level_to_json

R = TypeVar("R", bound="Ranked")

#: built-in write ranks of known couplings (lower is written first; a knob not listed has rank 0).
#: ``block.queue.scheduler`` goes first: the elevator decides which ``nr_requests`` the queue
#: accepts (``none`` caps it at the hardware queue depth) and resets the scheduler's own tunables.
BUILTIN_APPLY_ORDER: dict[str, int] = {"block.queue.scheduler": -1}

#: design types whose rows can be left out and still be read (one knob at a time, or cells of a
#: full factorial); the orthogonal fractions and space-filling designs lose their structure
EXCLUDABLE_TYPES = (DesignType.OAT, DesignType.FULL_FACTORIAL)


@dataclass(frozen=True)
class Constraints:
    """A design's ``constraints:`` section, validated: ``exclude`` entries (knob id -> canonical
    level) and the design-level ``apply_order`` (knob ids, first written first)."""

    exclude: tuple[Mapping[str, Any], ...] = ()
    apply_order: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.exclude or self.apply_order)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.exclude:
            out["exclude"] = [level_to_json(dict(entry)) for entry in self.exclude]
        if self.apply_order:
            out["apply_order"] = list(self.apply_order)
        return out


def write_rank(name: str, apply_order: int | None = None) -> int:
    """The write rank of a knob: its explicit ``apply_order``, else its built-in rank, else 0.

    Examples
    --------
    >>> write_rank("block.queue.scheduler"), write_rank("block.queue.nr_requests"), write_rank("x", 3)
    (-1, 0, 3)
    """
    if apply_order is not None:
        return int(apply_order)
    return BUILTIN_APPLY_ORDER.get(name, 0)


class Ranked(Protocol):
    """What :func:`in_write_order` reads of a knob: a design's ``KnobSpec`` or the runner's ``BoundKnob``."""

    @property
    def name(self) -> str: ...

    @property
    def apply_order(self) -> int | None: ...


def in_write_order(knobs: Iterable[R]) -> list[R]:
    """``knobs`` sorted by :func:`write_rank` of their ``name`` and ``apply_order`` (stable: ties keep
    their order).

    Examples
    --------
    >>> from collections import namedtuple
    >>> K = namedtuple("K", "name apply_order")
    >>> [k.name for k in in_write_order([K("block.queue.nr_requests", None), K("block.queue.scheduler", None)])]
    ['block.queue.scheduler', 'block.queue.nr_requests']
    """
    return sorted(knobs, key=lambda knob: write_rank(knob.name, knob.apply_order))


def design_ranks(apply_order: Sequence[str]) -> dict[str, int]:
    """Knob id -> rank for a design-level ``apply_order`` list: all below every default rank, in list order.

    Examples
    --------
    >>> design_ranks(["a", "b"])
    {'a': -3, 'b': -2}
    """
    first = min(0, *BUILTIN_APPLY_ORDER.values()) - len(apply_order)
    return {knob: first + position for position, knob in enumerate(apply_order)}


def matches(config: Mapping[str, Any], entry: Mapping[str, Any]) -> bool:
    """Whether a configuration (knob id -> level) has every level of an ``exclude`` entry."""
    return all(knob in config and config[knob] == level for knob, level in entry.items())


def matching_entry(config: Mapping[str, Any], exclude: Iterable[Mapping[str, Any]]) -> int | None:
    """The index of the first ``exclude`` entry the configuration matches, else None."""
    for index, entry in enumerate(exclude):
        if matches(config, entry):
            return index
    return None


def entry_text(entry: Mapping[str, Any]) -> str:
    """An ``exclude`` entry as one line of YAML, ready to paste under ``exclude:``.

    Examples
    --------
    >>> entry_text({"block.queue.scheduler[@disk]": "none", "block.queue.nr_requests[@disk]": 256})
    "- {'block.queue.scheduler[@disk]': none, 'block.queue.nr_requests[@disk]': 256}"
    """
    import yaml                              # deferred: only the probe report needs it

    flow = yaml.safe_dump(level_to_json(dict(entry)), default_flow_style=True, sort_keys=False, width=10**6)
    return "- " + flow.strip()


__all__ = ["BUILTIN_APPLY_ORDER", "Constraints", "EXCLUDABLE_TYPES", "Ranked", "design_ranks", "entry_text",
           "in_write_order", "matches", "matching_entry", "write_rank"]
