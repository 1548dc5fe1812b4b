"""Run a design on the real lab and SIGKILL ourselves at a named runner checkpoint (lab crash test).

usage: lab_crash_driver.py DESIGN STORE [--kill-at NAME --occurrence N]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from runner_fakes import crash_arguments, killer  # noqa: E402

from tunelab.designs import load_design  # noqa: E402
from tunelab.runner import run_design, target_spec_of  # noqa: E402
from tunelab.store import Store  # noqa: E402
from tunelab.targets import get_target  # noqa: E402


def main() -> int:
    args = crash_arguments("design", "store")
    checkpoint = killer(args.kill_at, args.occurrence)

    design = load_design(args.design)
    spec = target_spec_of(design)
    with Store.open(args.store, study=design.name, design_hash=design.design_hash,
                    design_text=Path(args.design).read_text(),
                    target_spec={"type": spec["type"], "options": spec["options"]}) as store:
        with get_target(spec["type"])(**spec["options"]) as target:
            print(run_design(design, target, store, progress=False, checkpoint=checkpoint))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
