"""Run a design on the real lab and SIGKILL ourselves at a named runner checkpoint (lab crash test).

usage: lab_crash_driver.py DESIGN STORE [--kill-at NAME --occurrence N]
"""
from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from tunelab.designs import load_design
from tunelab.runner import run_design, target_spec_of
from tunelab.store import Store
from tunelab.targets import get_target


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("design")
    parser.add_argument("store")
    parser.add_argument("--kill-at")
    parser.add_argument("--occurrence", type=int, default=1)
    args = parser.parse_args()
    seen: dict[str, int] = {}

    def checkpoint(name: str) -> None:
        seen[name] = seen.get(name, 0) + 1
        if name == args.kill_at and seen[name] == args.occurrence:
            os.kill(os.getpid(), signal.SIGKILL)

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
