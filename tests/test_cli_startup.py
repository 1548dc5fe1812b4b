"""Start-up stays light: ``tunelab --help``, every verb's and sub-verb's ``--help`` and ``import tunelab`` import
none of the heavy libraries (the verbs import what they use when they run), and a mistyped verb gets one
``tunelab: error:`` line with a suggestion. Timings are in benchmarks/bench_startup.py, not here."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tunelab.cli import main

ROOT = Path(__file__).resolve().parents[1]
#: libraries the --help path must not import (each costs 0.1-3 s here)
HEAVY = ("pandas", "numpy", "scipy", "statsmodels", "pingouin", "optuna", "torch", "matplotlib", "seaborn", "pymoo",
         "papermill", "nbconvert", "paramiko", "dask")

#: in a fresh interpreter: parse ``--help`` of the main command and of every verb and sub-verb found in the parser
#: itself (so a new verb is covered), then print which heavy modules each one had pulled in
PROBE = """
import argparse, contextlib, io, json, sys
from tunelab.cli import build_parser

def commands(parser, prefix=()):
    yield prefix
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*prefix, name))

heavy = HEAVY
found = {}
for command in list(commands(build_parser())):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        build_parser().parse_args([*command, "--help"])
    found[" ".join(command)] = [name for name in heavy if name in sys.modules]
print(json.dumps(found))
"""


def probe(code: str) -> Any:
    """What ``code``, run by a fresh interpreter in the source tree, prints as JSON."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(proc.stdout)


def test_help_of_every_command_imports_nothing_heavy() -> None:
    found = probe(PROBE.replace("heavy = HEAVY", f"heavy = {HEAVY!r}"))
    assert {"", "plan", "knobs", "knobs list", "lab status", "refine", "gallery"} <= set(found)
    assert {command: heavy for command, heavy in found.items() if heavy} == {}


def test_import_tunelab_and_tunelab_seeds_is_light() -> None:
    code = ("import json, sys, tunelab, tunelab.seeds, tunelab.seeds.arguments; "
            f"print(json.dumps([n for n in {HEAVY!r} if n in sys.modules]))")
    assert probe(code) == []


def test_the_lazy_seed_package_still_registers_every_study_for_the_gallery(tmp_path: Path) -> None:
    """In a fresh process (nothing imported the studies before), ``tunelab gallery`` knows the five seed studies."""
    proc = subprocess.run([sys.executable, "-m", "tunelab", "gallery", "--quick", "--only", "999", "--stores",
                           str(tmp_path), "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert "known studies are 000, 001, 002, 003, 004;" in proc.stderr


def test_plan_imports_no_statistics_optimiser_or_plotting_library() -> None:
    """``tunelab plan`` needs the design layer (pandas, PyYAML), not scipy, statsmodels, Optuna or matplotlib."""
    code = ("import contextlib, io, json, sys\n"
            "from tunelab.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    status = main(['plan', 'designs/default.yaml'])\n"
            f"print(json.dumps([status, [n for n in {HEAVY!r} if n in sys.modules]]))")
    status, heavy = probe(code)
    assert status == 0
    assert set(heavy) <= {"pandas", "numpy", "paramiko"}, heavy


@pytest.mark.parametrize(("argv", "line"), [
    (["plna"], "tunelab: error: argument VERB: invalid choice: 'plna' (choose from 'quickstart', 'plan', 'knobs', "
               "'lab', 'run', 'export', 'restore', 'screen', 'refine', 'tune', 'validate', 'report', 'gallery'); "
               "did you mean 'plan'? (see `tunelab --help`)"),
    (["lab", "statu"], "tunelab: error: argument COMMAND: invalid choice: 'statu' (choose from 'up', 'status', "
                       "'down'); did you mean 'status'? (see `tunelab lab --help`)"),
    (["knobs", "lst"], "tunelab: error: argument ACTION: invalid choice: 'lst' (choose from 'list', 'show', "
                       "'check'); did you mean 'list'? (see `tunelab knobs --help`)"),
    (["plan", "d.yaml", "--format", "jsno"], "tunelab: error: argument --format: invalid choice: 'jsno' (choose "
                                             "from 'table', 'csv', 'json'); did you mean 'json'? (see `tunelab plan "
                                             "--help`)"),
    (["knobs", "list", "--famly", "link"], "tunelab: error: unrecognized arguments: --famly link (see `tunelab knobs "
                                           "list --help`)"),
])
def test_a_typo_gets_one_error_line_with_a_suggestion(argv: list[str], line: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert [e for e in err.splitlines() if "error" in e] == [line]   # after the usage; "tunelab:" once


def test_a_word_like_no_verb_gets_no_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["frobnicate"])
    err = capsys.readouterr().err
    assert "invalid choice: 'frobnicate'" in err and "did you mean" not in err
