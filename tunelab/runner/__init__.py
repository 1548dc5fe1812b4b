"""Plan -> trials, split by concern; this package's public names, each defined in the module that owns it.

=====================================  =========================================================================
:mod:`tunelab.runner.binding`          the knobs bound to the catalogue (:class:`BoundKnob`), checks before any write
:mod:`tunelab.runner.design_access`    what a run reads from a design: target section, load, profiles, planned trials
:mod:`tunelab.runner.outcomes`         what the runner returns: :class:`TrialOutcome`, :class:`RunSummary`
:mod:`tunelab.runner.busy`             the busy rule: a trial other processes disturbed is measured again
:mod:`tunelab.runner.knob_writes`      journalled host identities, write-order resets, verified write-back
:mod:`tunelab.runner.load_setup`       the load's files on its host before the first trial, removed after the last
:mod:`tunelab.runner.trials`           one trial: snapshot, apply, verify, restart, measure, record, restore
:mod:`tunelab.runner.plans`            a whole plan on one target: checked, recovered, run in ``run_order``
=====================================  =========================================================================

New code imports a name from the module that owns it; this facade keeps ``from tunelab.runner import X`` working.
"""
from __future__ import annotations

from tunelab.runner.binding import (BoundKnob, KnobLookup, bind_knob_ids, bind_knobs, check_host_global, check_trial,
                                    validate_config)
from tunelab.runner.busy import BusyRule, busy_rule, repeat_while_busy
from tunelab.runner.design_access import PlannedTrial, load_for, load_of, profile_settings, target_spec_of
from tunelab.runner.knob_writes import reset_by_writes, write_back
from tunelab.runner.load_setup import StorePrivateDirs, cleanup_load, keyed_settings, prepare_load
from tunelab.runner.outcomes import FOREIGN_LOAD_WARN, RunSummary, TrialOutcome
from tunelab.runner.plans import (PlanRunner, RunRequest, RunSetup, describe_target, preflight, prepare_run, recover_journal,
                                  run_design, run_provenance_of, start_progress_round)
from tunelab.runner.trials import Checkpoint, run_trial, server_cpu_metric, supersede_failed

__all__ = ["FOREIGN_LOAD_WARN", "BoundKnob", "BusyRule", "Checkpoint", "KnobLookup", "PlanRunner", "PlannedTrial",
           "RunRequest", "RunSetup", "RunSummary", "StorePrivateDirs", "TrialOutcome", "bind_knob_ids", "bind_knobs",
           "busy_rule",
           "check_host_global", "check_trial", "cleanup_load", "describe_target", "keyed_settings", "load_for",
           "load_of", "preflight", "prepare_load", "prepare_run", "profile_settings", "recover_journal",
           "repeat_while_busy", "reset_by_writes", "run_design", "run_provenance_of", "run_trial", "server_cpu_metric",
           "start_progress_round", "supersede_failed", "target_spec_of", "validate_config", "write_back"]
