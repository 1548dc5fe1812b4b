"""Writes the mechanism tables tests/stats/test_mechanisms_memory.py compares with (run once, by hand).

They were made with the implementation of tunelab/stats/mechanisms.py as of commit 96e9064 (one
``scipy.stats.ttest_ind(equal_var=True, nan_policy="omit")`` over every counter at once), before the
mechanisms ran per column: the study ``data/examples/default.sqlite`` (54 screen trials, 112 counters)
with its screen's verdicts, as a one-at-a-time study (OAT) and as if it were factorial (marginal means).

Usage: ``.venv/bin/python tests/stats/reference/mechanisms/make_reference.py``
"""
from pathlib import Path

import tunelab
from tunelab.model import AnalysisKind
from tunelab.stats.mechanisms import mechanism_table
from tunelab.store import Store

HERE = Path(__file__).resolve().parent
STORE = HERE.parents[3] / "data" / "examples" / "default.sqlite"

if __name__ == "__main__":
    with Store(STORE, readonly=True) as store:
        data = store.tidy("screen", include_failed=True)
    result = tunelab.screen(STORE)
    for kind in (AnalysisKind.OAT, AnalysisKind.FACTORIAL):
        table = mechanism_table(data, result.verdicts, result.settings["knobs"], result.settings["baseline"], kind)
        table.to_csv(HERE / f"default-{kind.value}.csv", index=False, float_format="%.17g")
        print(kind.value, len(table), "rows")
