"""The command line of the gallery (``tunelab gallery`` and ``python -m tunelab.seeds``) and its default places.

Light on purpose (argparse and pathlib only): ``tunelab gallery --help`` builds its parser from here
without importing a study, pandas or matplotlib; :func:`tunelab.seeds.gallery.gallery_command` is the body.

>>> parser = argparse.ArgumentParser()
>>> add_arguments(parser)
>>> parser.parse_args(["--quick", "--only", "001"]).only
['001']
"""
from __future__ import annotations

import argparse
from pathlib import Path

#: where the recorded stores ship (data/examples/seeds of the source tree)
RECORDED = Path(__file__).resolve().parents[2] / "data" / "examples" / "seeds"
#: where the gallery is written by default
DEFAULT_OUT = Path("reports") / "seeds"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``tunelab gallery`` and ``python -m tunelab.seeds``."""
    add = parser.add_argument
    add("--record", action="store_true", help="first record the selected studies on the lab into --stores "
        "(resumes), then build the gallery")
    add("--quick", action="store_true", help="no notebooks: the gallery and study pages from the stores only")
    add("--only", action="append", metavar="KEY", help="only this study (repeatable): 000, 001, ...")
    add("--stores", type=Path, default=RECORDED, metavar="DIR",
        help="the recorded stores (default: data/examples/seeds of the source tree)")
    add("--out", type=Path, default=DEFAULT_OUT, metavar="DIR", help="the gallery's directory (default: reports/seeds)")
    add("--scale", type=float, default=1.0, metavar="F", help="with --record: shrink budgets and blocks for a smoke "
        "run (0 < F <= 1; shipped stores use 1)")
    add("--target", metavar="TYPE", help="with --record: run on this target instead of the designs' (lab)")


__all__ = ["DEFAULT_OUT", "RECORDED", "add_arguments"]
