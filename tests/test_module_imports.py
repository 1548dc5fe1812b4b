"""Every ``tunelab.*`` module imports by its dotted name, in a fresh interpreter: with
:func:`importlib.import_module` and with ``import tunelab.x.y as y`` (which reads each parent's
attribute, so an API name such as ``tunelab.report`` must not hide the subpackage behind it)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: in a fresh interpreter: import every module found by walking the package, both ways; print the failures
PROBE = """
import importlib, json, pkgutil, tunelab

failures = {}
for module in pkgutil.walk_packages(tunelab.__path__, "tunelab."):
    for how in (f"importlib.import_module({module.name!r})", f"import {module.name} as imported"):
        try:
            exec(how)
        except BaseException as error:
            failures[how] = f"{type(error).__name__}: {error}"
modules = sorted(m.name for m in pkgutil.walk_packages(tunelab.__path__, "tunelab."))
print(json.dumps({"failures": failures, "modules": modules}))
"""


def test_every_module_imports_by_its_dotted_name() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.splitlines()[-1])
    assert {"tunelab.report.figures", "tunelab.__main__", "tunelab.cli.report"} <= set(found["modules"])
    assert found["failures"] == {}
