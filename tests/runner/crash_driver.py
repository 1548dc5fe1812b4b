"""Run the fake study in this process and SIGKILL ourselves at a named checkpoint (crash tests).

usage: crash_driver.py STORE ROOT [--kill-at NAME --occurrence N]

NAME is a runner checkpoint (before_apply, after_apply, after_measure, restore, ...) or
``measuring``, which fires inside the load invocation itself.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runner_fakes import (FakeLoad, FileTarget, crash_arguments, fake_design, killer, make_knobs,  # noqa: E402
                          oat_plan)

from tunelab.runner.plans import run_design  # noqa: E402
from tunelab.store import Store  # noqa: E402


def main() -> int:
    args = crash_arguments("store", "root")
    checkpoint = killer(args.kill_at, args.occurrence)

    target = FileTarget(args.root, on_run=lambda: checkpoint("measuring"))
    with Store.open(args.store, study="fake-study", design_hash="hash-1", design_text="name: fake-study\n",
                    target_spec={"type": "file-fake", "options": {"root": args.root}}) as store:
        summary = run_design(fake_design(), target, store, plan=oat_plan(), load=FakeLoad(),
                             knob_lookup=make_knobs(), progress=False, checkpoint=checkpoint)
    print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
