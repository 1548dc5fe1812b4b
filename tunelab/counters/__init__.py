"""Kernel counters recorded with every trial, so a verdict can say why a knob matters.

The path of a trial's counters:

1. the runner asks the target for its sources (:meth:`tunelab.targets.Target.counter_sources` with a
   :class:`CounterRequest`: the load's service and block device); the simulator and dry-run have none;
2. :class:`CounterWindow` reads every source at the end of the warm-up and at the end of the measured
   window while the load runs (:mod:`tunelab.counters.window`), parsing the kernel's files in Python
   (:mod:`tunelab.counters.parsing`);
3. the differences and the window's seconds are stored with the trial (:class:`CounterRecord`, the
   trial's ``counters`` column), and the tidy frame shows each as a rate per second in a column
   ``counter.<Group>.<Name>`` (server side) or ``counter.client.<Group>.<Name>`` (:mod:`tunelab.counters.columns`);
   counters that never move in a study are dropped from its tables (:func:`drop_still_counters`).

docs/counters.md lists the groups and names.
"""
from __future__ import annotations

from tunelab.counters.columns import (COLUMN_PREFIX, check_counter_name, counter_column, counter_columns,
                                      drop_still_counters, is_counter_column)
from tunelab.counters.sources import (NET_FILES, PLACES, CounterFile, CounterRequest, CounterSource, FileCounters,
                                      FileReader, ProcessCounters, block_file, cgroup_files, read_local_files,
                                      tail_reader)
from tunelab.counters.window import CounterRecord, CounterWindow, differences, placed, snapshot

__all__ = ["COLUMN_PREFIX", "NET_FILES", "PLACES", "CounterFile", "CounterRecord", "CounterRequest", "CounterSource",
           "CounterWindow", "FileCounters", "FileReader", "ProcessCounters", "block_file", "cgroup_files",
           "check_counter_name",
           "counter_column", "counter_columns", "differences", "drop_still_counters", "is_counter_column", "placed",
           "read_local_files", "snapshot", "tail_reader"]
