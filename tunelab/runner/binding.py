"""The knobs of a study bound to the catalogue, and the checks before any write.

The runner handles a study's knobs as :class:`BoundKnob`: a plan column id bound to its catalogue
:class:`~tunelab.knobs.Knob`, host and device (:func:`bind_knobs`, :func:`bind_knob_ids`). Before anything
is written (:func:`check_trial` for one trial, :func:`tunelab.runner.plans.prepare_run` for a whole plan):

1. every planned value is validated against the catalogue (``knob.validate``) so no command is
   ever built from an out-of-range or ill-typed value (:func:`validate_config`);
2. a host-global knob (``knob.scope == "host"``: ``vm.*``, ``fs.*``, ``kernel.*``, most of
   ``net.core.*``) is refused with :class:`~tunelab.errors.SafetyError` unless the user allowed
   it (design ``target.allow_host_global: true`` or ``--allow-host-global``; :func:`check_host_global`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from tunelab.designs import Design
from tunelab.errors import DesignError, KnobError, SafetyError
from tunelab.knobs import Knob, get_knob
from tunelab.model import KnobId

#: knob name -> catalogue :class:`~tunelab.knobs.Knob` (default :func:`~tunelab.knobs.get_knob`; tests pass fakes)
KnobLookup = Callable[[str], Knob]


@dataclass(frozen=True)
class BoundKnob:
    """One knob of a study as the runner handles it: plan column id, catalogue knob, host, device."""

    id: str
    knob: Knob
    host: str = "server"
    device: str | None = None
    #: write rank from the design (``apply_order``); None: the built-in default (designs.constraints)
    apply_order: int | None = None

    @property
    def name(self) -> str:
        return self.knob.name


def bind_knobs(design: Design, knob_lookup: KnobLookup | None = None) -> list[BoundKnob]:
    """The :class:`BoundKnob` of each knob in the design (ids per Contract 1); ``knob_lookup`` defaults
    to :func:`tunelab.knobs.get_knob`."""
    lookup = knob_lookup or get_knob
    return _some([BoundKnob(id=entry.id, knob=lookup(entry.name), host=entry.host, device=entry.device,
                            apply_order=entry.apply_order) for entry in design.knobs])


def bind_knob_ids(ids: Iterable[str], knob_lookup: KnobLookup | None = None) -> list[BoundKnob]:
    """The :class:`BoundKnob` of each knob id (``name[device]@host``, :class:`tunelab.model.KnobId`).

    Examples
    --------
    >>> [(k.name, k.host, k.device) for k in bind_knob_ids(["link.mtu[veth0]@client"])]
    [('link.mtu', 'client', 'veth0')]
    >>> bind_knob_ids(["net.core.somaxconn@client"])[0].id
    'net.core.somaxconn@client'
    """
    lookup = knob_lookup or get_knob
    parsed = [(str(text), KnobId.parse(str(text))) for text in ids]
    return _some([BoundKnob(id=text, knob=lookup(kid.name), host=kid.host, device=kid.device) for text, kid in parsed])


def _some(bound: list[BoundKnob]) -> list[BoundKnob]:
    if not bound:
        raise DesignError("the design has no knobs to run; list at least one under `knobs:`")
    return bound


def check_host_global(specs: Sequence[BoundKnob], allow_host_global: bool) -> None:
    """Refuse host-global knobs unless allowed; raises before anything is written.

    Raises
    ------
    SafetyError
        naming every host-global knob and the two ways to allow them.
    """
    host_global = [spec.id for spec in specs if getattr(spec.knob, "scope", "host") == "host"]
    if host_global and not allow_host_global:
        raise SafetyError(
            f"refusing to change host-global knob(s) {', '.join(host_global)}: they affect the whole machine, "
            "not just the lab's namespaces. If this machine is yours to tune, set `target: {allow_host_global: true}` "
            "in the design or pass --allow-host-global; every change is journalled and `tunelab restore` rolls it back"
        )


def validate_config(specs: Sequence[BoundKnob], config: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``config`` (knob id -> level) against the catalogue; return canonical values.

    Raises
    ------
    KnobError
        for a missing knob id or an invalid value (the knob's own message names the range).
    """
    missing = [spec.id for spec in specs if spec.id not in config]
    if missing:
        raise KnobError(f"the trial config has no value for knob(s) {', '.join(missing)}; "
                        f"it has {', '.join(map(str, config)) or 'nothing'}")
    return {spec.id: spec.knob.validate(config[spec.id]) for spec in specs}


def check_trial(specs: Sequence[BoundKnob], config: Mapping[str, Any], allow_host_global: bool) -> dict[str, Any]:
    """Both pre-write checks: host-global policy, then catalogue validation."""
    check_host_global(specs, allow_host_global)
    return validate_config(specs, config)


__all__ = ["BoundKnob", "KnobLookup", "bind_knob_ids", "bind_knobs", "check_host_global", "check_trial",
           "validate_config"]
