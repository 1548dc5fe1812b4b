"""The plan-time feasibility probe (``tunelab plan --probe``) as a run: its own journal store under the study-run
sequence (:func:`tunelab.study_run.study_store`: SIGTERM as Ctrl-C, the lease, orphaned labs, crashed runs), the
target built, then :func:`tunelab.constraints.probe_design` applies, reads back and restores each distinct
planned configuration."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pandas as pd

from tunelab.constraints import ProbeResult, probe_design
from tunelab.designs import Design
from tunelab.errors import TargetError
from tunelab.store import default_store_path
from tunelab.study_run import study_store, target_spec_for
from tunelab.targets import build_target, check_target_spec


def probe_plan(design: Design, design_path: str | os.PathLike[str], frame: pd.DataFrame, *,
               target: str | None = None, allow_host_global: bool = False, allow_design_commands: bool = False,
               store: str | os.PathLike[str] | None = None) -> ProbeResult:
    """Probe ``frame`` (the design's plan) on the design's target (or ``target``) under the run's safety rules.

    Its journal is a store of its own (default ``data/<study>.probe.sqlite``), keyed by the study name only, so
    editing the design after a probe (adding the suggested exclusions) neither clashes with it nor with the
    study's store. Returns :func:`tunelab.constraints.probe_design`'s result.

    Raises
    ------
    TargetError
        for a target that writes nothing (dry-run): it cannot tell which combinations the kernel refuses.
    """
    spec = target_spec_for(design, target)
    target_cls = check_target_spec(spec, allow_commands=allow_design_commands)
    if getattr(target_cls, "writes_nothing", False):
        raise TargetError(f"the {spec['type']} target writes nothing, so it cannot tell which knob combinations the "
                          "kernel refuses; probe on the target the study runs on (lab, local, ssh, simulator)")
    path = Path(store) if store is not None else default_store_path(design.name).with_suffix(".probe.sqlite")
    key = hashlib.sha256(f"probe:{design.name}".encode()).hexdigest()
    with study_store(design.name, key, Path(design_path).read_text(), spec, path) as (opened, _):
        with build_target(spec, allow_commands=allow_design_commands) as live:
            return probe_design(design, live, opened, plan=frame, allow_host_global=allow_host_global)


__all__ = ["probe_plan"]
