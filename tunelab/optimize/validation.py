"""The ``validate`` verb's sequence (:func:`tunelab.validate` calls :func:`run_validate`).

1. Check the request before anything is built: the target spec, the durations, the blocks and the
   SESOI; a registered load's profiles, settings and metrics (:mod:`tunelab.optimize.confirm`).
2. Bring the target up and plan the validation (:func:`tunelab.optimize.confirm.plan_validation`):
   ``current`` is read, a candidate equal to the baseline is refused. Nothing is applied and no
   store is written until here.
3. Open the store, measure the ABBA blocks (or, with ``measurement: duet``, the duet pairs on two targets
   at once: :mod:`tunelab.optimize.duet_confirm`) and judge them; count the failed trials.
4. On ``improve`` or ``equivalent``, write the sysctl.d file and its rollback
   (:mod:`tunelab.optimize.deploy`), else say why not.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from tunelab.duet import check_measurement, side_options
from tunelab.errors import DesignError
from tunelab.loads import get_load
from tunelab.model import Metric, json_value, level_to_json
from tunelab.optimize.confirm import (EXIT_STATUS, ConfirmResult, abba_order, check_durations, checked_goals,
                                      plan_validation, profile_settings, row_text, run_validation)
from tunelab.optimize.duet_confirm import check_pairs, run_duet_validation
from tunelab.runner import cleanup_load
from tunelab.optimize.deploy import SysctlFiles, not_deployable, provenance, write_sysctl_files
from tunelab.store import Store, default_store_path
from tunelab.targets import build_target, check_target_spec

PathLike = str | os.PathLike[str]


@dataclass
class ValidateRun:
    """What :func:`tunelab.validate` found: the confirmation (``verdict``, ``table``, ``baseline``,
    ``candidate``, ``failures``), and the sysctl.d files written (``sysctl``) or why none were (``sysctl_note``)."""

    target_type: str
    store_path: Path
    #: the ABBA blocks' analysis: verdict, per-metric table, baseline and candidate, failures
    confirmation: ConfirmResult
    #: the sysctl.d files written on a deployable verdict, else None and ``sysctl_note`` says why
    sysctl: SysctlFiles | None = None
    sysctl_note: str | None = None

    @property
    def verdict(self) -> str:
        return self.confirmation.verdict

    @property
    def synthetic(self) -> bool:
        return self.target_type == "simulator"

    @property
    def exit_status(self) -> int:
        """0 improve/equivalent, 3 regress, 4 inconclusive, 5 untestable."""
        return EXIT_STATUS[self.verdict]

    def summary(self) -> str:
        return self.confirmation.summary()

    def to_json(self) -> dict[str, Any]:
        """The verdict, both configurations, the table, the failed trials and the sysctl.d files
        (``tunelab validate --json``)."""
        c = self.confirmation
        files = self.sysctl.to_json() if self.sysctl is not None else {"written": False, "reason": self.sysctl_note}
        return {"verdict": c.verdict, "baseline": level_to_json(c.baseline), "candidate": level_to_json(c.candidate),
                "table": [json_value(row) for row in c.table.to_dict(orient="records")],
                "failures": c.failures.to_json() if c.failures is not None else None, "sysctl": files}


def checked_request(spec: Mapping[str, Any], candidate: Any, baseline: Any, *, blocks: int, warmup_s: float,
                    measure_s: float) -> None:
    """The checks that need neither a target nor a load (one error line, nothing built)."""
    check_target_spec(spec, allow_commands=True)
    if not isinstance(candidate, Mapping) or not (isinstance(baseline, Mapping) or baseline == "current"):
        raise DesignError("validate takes the candidate (and baseline) as a mapping knob id -> value, e.g. "
                          "{'net.core.somaxconn': 1024}; for KNOB=VALUE text use tunelab.cli.parsing.parse_config")
    check_durations(warmup_s, measure_s)
    abba_order(blocks)


def default_goals(load: Any) -> list[str]:
    """The load's first metric in its better direction (``qps:max``) when no metric is named."""
    return [str(Metric(name, info.direction)).rpartition(":")[0] for name, info in list(load.metrics.items())[:1]]


@dataclass(frozen=True)
class Measurement:
    """How validate measures: ``sequential`` ABBA blocks on one target, or ``duet`` pairs on two at once
    (:mod:`tunelab.duet`; ``pairs`` default twice the blocks: as many trials; ``cpu_layout`` of two labs)."""

    kind: str = "sequential"
    pairs: int | None = None
    cpu_layout: str | None = None
    #: the target options as given (each side's pinning is added to them)
    options: Mapping[str, Any] = field(default_factory=dict)

    def pair_count(self, blocks: int) -> int:
        return int(self.pairs) if self.pairs is not None else 2 * int(blocks)


def measured(plan: Any, live: Any, spec: Mapping[str, Any], generator: Any, opened: Store, how: Measurement, *,
             blocks: int, allow_host_global: bool) -> ConfirmResult:
    """Run a checked validation plan the way ``how`` says: ABBA on ``live``, or duet on ``live`` and a second
    target built from ``spec`` (a lab pinned by the CPU layout's side 1)."""
    if how.kind == "sequential":
        return run_validation(plan, live, generator, opened, allow_host_global=allow_host_global)
    _, other = side_options(str(spec["type"]), how.options, how.cpu_layout)
    with build_target({**spec, "options": other}, allow_commands=True) as partner:
        paired = type(partner).paired_load(dict(other), None)        # the simulator measures with its own load
        loads = [generator, paired[0] if paired is not None else type(generator)()]
        try:
            return run_duet_validation(plan, [live, partner], loads, opened, pairs=how.pair_count(blocks),
                                       allow_host_global=allow_host_global)
        finally:
            for side, load in zip((live, partner), loads):
                cleanup_load(load, side)


def run_validate(target: str, candidate: Mapping[str, Any], *, baseline: Mapping[str, Any] | str = "current",
                 metrics: Sequence[str] = (), target_options: Mapping[str, Any] | None = None,
                 surface: str | None = None, load: str | None = None, load_settings: Mapping[str, Any] | None = None,
                 sesoi_pct: float | None = None, profiles: Sequence[str] = (), blocks: int = 6, warmup_s: float = 2.0,
                 measure_s: float = 8.0, allow_host_global: bool = False, store: PathLike | None = None,
                 write_sysctl: PathLike | bool | None = None, measurement: Measurement | None = None) -> ValidateRun:
    """:func:`tunelab.validate`'s sequence (see the module docstring; the parameters are the same)."""
    how = measurement or Measurement()
    check_measurement(how.kind)
    options = {**(target_options or {}), **({"surface": surface} if surface else {})}
    spec = {"type": target, "options": options}
    checked_request(spec, candidate, baseline, blocks=blocks, warmup_s=warmup_s, measure_s=measure_s)
    if how.kind == "duet":
        check_pairs(how.pair_count(blocks))
        how = replace(how, options=dict(options))
        spec = {"type": target, "options": side_options(target, options, how.cpu_layout)[0]}
    overrides, chosen = dict(load_settings or {}), list(profiles) or ["overload"]
    generator: Any = None
    if target != "simulator":
        if not load:
            raise DesignError("--load is required on a real target (dnsperf, iperf3, fio, wrk)")
        generator = get_load(load)()
        profile_settings(generator, chosen, overrides)          # before the target is built
        checked_goals(list(metrics) or default_goals(generator), sesoi_pct, generator)
    base: Any = dict(baseline) if isinstance(baseline, Mapping) and baseline else "current"
    path = Path(store) if store is not None else default_store_path(f"validate-{target}")
    study = f"validate-{target}"
    design_text = json.dumps({"validate": target, "options": options}, sort_keys=True, default=str)
    with build_target(spec, allow_commands=True) as live:
        if generator is None:                 # the simulator measures with its own load, in no time
            generator, warmup_s, measure_s = live.load(), 0.0, 1.0
        plan = plan_validation(live, generator, base, dict(candidate), list(metrics) or default_goals(generator),
                               blocks=blocks, sesoi_pct=sesoi_pct, profiles=chosen, load_settings=overrides,
                               warmup_s=warmup_s, measure_s=measure_s, allow_host_global=allow_host_global)
        with Store.open(path, study=study, design_hash=hashlib.sha256(design_text.encode()).hexdigest(),
                        design_text=design_text, target_spec=dict(spec)) as opened:
            result = measured(plan, live, spec, generator, opened, how, blocks=blocks,
                              allow_host_global=allow_host_global)
        note = not_deployable(result.verdict)
        if note is None and write_sysctl is False:
            note = f"no sysctl.d file written: the verdict is {result.verdict.upper()}, but write_sysctl=False"
        if note is not None:
            return ValidateRun(target, path, result, None, note)
        facts = provenance(spec, live.describe(), generator, plan.profiles.values(), result.verdict,
                           [row_text(row) for row in result.table.itertuples()])
    directory = path.with_name(f"{path.stem}-sysctl") if write_sysctl in (None, True) else Path(write_sysctl)
    files = write_sysctl_files(directory, study, result.baseline, result.candidate, facts)
    return ValidateRun(target, path, result, files, None)
