"""The plan-time feasibility probe: which planned knob combinations does the kernel refuse?

``tunelab plan DESIGN --probe`` (``tunelab.plan(..., probe=True)``) runs :func:`probe_design` on
the design's target before any study: for each distinct planned configuration it snapshots the
knobs, journals every change *before* writing it (the runner's rule), writes the changed knobs in
write order (:func:`tunelab.designs.constraints.write_rank`), reads them back, and writes the
snapshot back in reverse order, verified, journal entries marked restored. Nothing is measured.
Host-global knobs are refused unless allowed, exactly as the runner refuses them.

A write the kernel refuses, or a value that reads back otherwise, is a :class:`Refusal`. The
report names the smallest set of the configuration's other levels under which that level was
always refused ("block.queue.nr_requests[@disk]=256 is refused when
block.queue.scheduler[@disk]=none: Invalid argument") and the ``exclude:`` entry to paste into
the design (designs/README.md, "Knob constraints").
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import pandas as pd

from tunelab.designs import Design, make_plan
from tunelab.designs.constraints import entry_text, in_write_order
from tunelab.errors import KnobError, TunelabError
from tunelab.journal import host_identity
from tunelab.model import level_to_json
from tunelab.runner.binding import BoundKnob, KnobLookup, bind_knobs, check_trial
from tunelab.runner.design_access import target_spec_of
from tunelab.runner.knob_writes import reset_by_writes, write_back
from tunelab.runner.plans import recover_journal
from tunelab.signals import deferred_interrupts
from tunelab.store import Store
from tunelab.targets import Target

#: largest set of other knobs a refusal's condition is searched over (beyond it: the whole configuration)
MAX_CONDITION_KNOBS = 3


@dataclass(frozen=True)
class Refusal:
    """One planned configuration the target would not take: ``knob`` could not be set to ``level``."""

    config: dict[str, Any]
    knob: str
    level: Any
    reason: str
    #: the other knobs' levels under which ``knob=level`` was always refused (filled by the report)
    condition: dict[str, Any] = field(default_factory=dict)

    @property
    def exclude(self) -> dict[str, Any]:
        """The ``exclude`` entry that leaves this combination out: the condition plus the knob."""
        return {**self.condition, self.knob: self.level}

    def line(self) -> str:
        when = ", ".join(f"{k}={_text(v)}" for k, v in self.condition.items())
        return f"{self.knob}={_text(self.level)} is refused" + (f" when {when}" if when else "") + f": {self.reason}"


@dataclass
class ProbeResult:
    """What :func:`probe_design` found: configurations probed and the refusals among them."""

    configs: int
    refusals: list[Refusal] = field(default_factory=list)

    @property
    def suggested_exclude(self) -> list[dict[str, Any]]:
        """One ``exclude`` entry per distinct refused combination, in the order found."""
        entries: list[dict[str, Any]] = []
        for refusal in self.refusals:
            if refusal.exclude not in entries:
                entries.append(refusal.exclude)
        return entries

    def lines(self) -> list[str]:
        """The report in words: one line per distinct refusal, then the entries to paste."""
        if not self.refusals:
            return [f"probe: the target took all {self.configs} planned configuration(s); every knob was restored"]
        seen: list[str] = []
        for refusal in self.refusals:
            if refusal.line() not in seen:
                seen.append(refusal.line())
        lines = [f"probe: {len({_key(r.config) for r in self.refusals})} of {self.configs} planned configuration(s) "
                 "cannot be set on this target (every knob was restored):", *[f"  {line}" for line in seen],
                 "to leave them out of the plan, add to the design:", "constraints:", "  exclude:"]
        return lines + [f"    {entry_text(entry)}" for entry in self.suggested_exclude]

    def to_json(self) -> dict[str, Any]:
        return {"configs": self.configs,
                "refused_configs": len({_key(r.config) for r in self.refusals}),
                "refusals": [{"config": level_to_json(r.config), "knob": r.knob, "level": level_to_json(r.level),
                              "reason": r.reason, "condition": level_to_json(r.condition), "line": r.line()}
                             for r in self.refusals],
                "suggested_exclude": [level_to_json(e) for e in self.suggested_exclude],
                "lines": self.lines()}


def _text(value: Any) -> str:
    value = level_to_json(value)
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def _key(config: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((k, repr(v)) for k, v in config.items())


def distinct_configs(plan: pd.DataFrame, ids: Sequence[str]) -> list[dict[str, Any]]:
    """The plan's distinct knob configurations, in order of first appearance in ``run_order``."""
    ordered = plan.sort_values("run_order") if "run_order" in plan.columns else plan
    configs: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
    for record in ordered[list(ids)].to_dict(orient="records"):
        config = {k: _plain(v) for k, v in record.items()}
        configs.setdefault(_key(config), config)
    return list(configs.values())


def _plain(value: Any) -> Any:
    """A plan cell as a plain Python level (numpy scalars -> int/bool)."""
    return value.item() if hasattr(value, "item") and not isinstance(value, (str, tuple)) else value


def probe_config(target: Target, store: Store, specs: Sequence[BoundKnob], config: Mapping[str, Any],
                 *, allow_host_global: bool = False) -> Refusal | None:
    """Apply one configuration in write order, read it back and restore it; the first refusal, else None.

    Raises
    ------
    SafetyError, KnobError
        before anything is written, for a refused host-global knob or an invalid value;
        KnobError after the probe when a knob could not be put back (the journal keeps it).
    """
    levels = check_trial(specs, config, allow_host_global)
    devices = {s.id: target.resolve_device(s.device) if s.device else None for s in specs}
    old = {s.id: s.knob.read(target, s.host, device=devices[s.id]) for s in specs}
    changing = in_write_order(s for s in specs if levels[s.id] != old[s.id])
    if not changing:
        return None
    identities = {host: host_identity(target, host) for host in {s.host for s in changing}}
    written: list[tuple[int, BoundKnob]] = []
    unwritten: list[int] = []

    def write(todo: Sequence[BoundKnob]) -> Refusal | None:
        entries = store.journal_apply_many(None, [(s.host, s.id, devices[s.id], s.knob.to_text(old[s.id]),
                                                   s.knob.to_text(levels[s.id])) for s in todo], identities=identities)
        for index, (entry, spec) in enumerate(zip(entries, todo)):
            written.append((entry, spec))
            try:
                spec.knob.write(target, spec.host, levels[spec.id], device=devices[spec.id])
                got = spec.knob.read(target, spec.host, device=devices[spec.id])
            except TunelabError as exc:
                unwritten.extend(entries[index + 1:])
                return Refusal(dict(levels), spec.id, levels[spec.id], str(exc))
            if got != levels[spec.id]:
                unwritten.extend(entries[index + 1:])
                return Refusal(dict(levels), spec.id, levels[spec.id],
                               f"wrote {spec.knob.to_text(levels[spec.id])!r}, read back {spec.knob.to_text(got)!r}")
        return None

    try:
        refusal = write(changing)
        again = reset_by_writes(target, specs, levels, devices, changing) if refusal is None else []
        if again:                    # as the runner does: a knob a write reset is written too
            refusal = write(again)
    finally:
        with deferred_interrupts():
            _restore(target, store, written, devices, old)
        if unwritten:                # journalled, never written: the knob still holds its old value
            store.journal_restored_many(unwritten)
    return refusal


def _restore(target: Target, store: Store, written: list[tuple[int, BoundKnob]],
             devices: Mapping[str, str | None], old: Mapping[str, Any]) -> None:
    """Write each probed knob back (newest first, with the runner's retry for coupled knobs), verify,
    mark its journal entry restored."""
    restored, problems = write_back(target, [(entry, spec, devices[spec.id], old[spec.id])
                                             for entry, spec in reversed(written)])
    if restored:
        store.journal_restored_many(restored)
    if problems:
        raise KnobError("the probe could not restore " + "; ".join(problems) + f"; the journal in {store.path} keeps "
                        f"the changes: fix the cause and run `tunelab restore {store.path}`")


def explain(refusals: Sequence[Refusal], probed: Sequence[Mapping[str, Any]]) -> list[Refusal]:
    """Each refusal with its ``condition``: the fewest other levels of its configuration under
    which ``knob=level`` was refused in every probed configuration that has them.

    A configuration counts against a condition when it has ``knob=level`` and the condition's
    levels and was probed without that refusal (it took the level, or failed on another knob first
    and never tried it: then it says nothing). Without such a set of at most
    :data:`MAX_CONDITION_KNOBS` knobs the condition is the whole configuration.
    """
    refused = {(_key(r.config), r.knob) for r in refusals}
    tried = {_key(r.config): r.knob for r in refusals}
    explained = []
    for refusal in refusals:
        others = [k for k in refusal.config if k != refusal.knob]
        condition = {k: refusal.config[k] for k in others}
        for size in range(min(len(others), MAX_CONDITION_KNOBS) + 1):
            found = next((subset for subset in itertools.combinations(others, size)
                          if _always_refused(refusal, subset, probed, refused, tried)), None)
            if found is not None:
                condition = {k: refusal.config[k] for k in found}
                break
        explained.append(Refusal(refusal.config, refusal.knob, refusal.level, refusal.reason, condition))
    return explained


def _always_refused(refusal: Refusal, subset: Sequence[str], probed: Sequence[Mapping[str, Any]],
                    refused: set[tuple[Any, str]], tried: Mapping[Any, str]) -> bool:
    for config in probed:
        if config.get(refusal.knob) != refusal.level or any(config.get(k) != refusal.config[k] for k in subset):
            continue
        key = _key(config)
        if (key, refusal.knob) in refused:
            continue
        if key in tried:            # failed on another knob first: this one was maybe never written
            continue
        return False                # the level was taken under these conditions
    return True


def probe_design(design: Design, target: Target, store: Store, *, plan: pd.DataFrame | None = None,
                 allow_host_global: bool = False, knob_lookup: KnobLookup | None = None) -> ProbeResult:
    """Probe every distinct configuration of the design's plan (or ``plan``) on ``target`` (already up).

    ``store`` holds the journal (a crashed probe is rolled back by ``tunelab restore``); what a
    crashed run left in it is put back first. Host-global knobs are refused unless allowed here or
    by the design's ``target.allow_host_global``, before anything is written.

    Examples
    --------
    >>> result = probe_design(design, target, store)                      # doctest: +SKIP
    >>> print("\\n".join(result.lines()))                                 # doctest: +SKIP
    """
    specs = bind_knobs(design, knob_lookup)
    allow = allow_host_global or target_spec_of(design)["allow_host_global"]
    configs = distinct_configs(make_plan(design) if plan is None else plan, [s.id for s in specs])
    for config in configs:                      # every value checked before the first write
        check_trial(specs, config, allow)
    recover_journal(store, target, allow_host_global=allow, knob_lookup=knob_lookup)
    refusals = []
    for config in configs:
        refusal = probe_config(target, store, specs, config, allow_host_global=allow)
        if refusal is not None:
            refusals.append(refusal)
    return ProbeResult(len(configs), explain(refusals, configs))


__all__ = ["MAX_CONDITION_KNOBS", "ProbeResult", "Refusal", "distinct_configs", "explain", "probe_config",
           "probe_design"]
