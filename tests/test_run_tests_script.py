"""``./run-tests.sh`` (README command 2, and CI): the parallel phase and the serial phase, and pytest's "no tests
ran" as a failure unless the other phase ran tests. The script is run for real on tiny test folders with the
install step stubbed out (it is tests/test_install.py's subject), so only its own logic is exercised."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _checkout(tmp_path: Path, tests: str) -> Path:
    """A folder shaped like the repository for the script: itself, a no-op install, the venv, the pytest settings
    and a tests/test_x.py holding ``tests``."""
    shutil.copy(ROOT / "run-tests.sh", tmp_path / "run-tests.sh")
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "install.sh").write_text("exit 0\n")
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    serial: alone\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text("import pytest\n" + tests)
    return tmp_path


def _run(folder: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run(["bash", str(folder / "run-tests.sh"), "tests", "-q", "-p", "no:cacheprovider"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("tests, status", [
    ("def test_a(): pass\n\n@pytest.mark.serial\ndef test_b(): pass\n", 0),
    ("def test_a(): pass\n", 0),                                   # no serial test: phase 2 collects none, fine
    ("@pytest.mark.serial\ndef test_b(): pass\n", 0),              # only serial tests
    ("", 1),                                                       # nothing anywhere: a failure
    ("def test_a(): assert False\n\n@pytest.mark.serial\ndef test_b(): pass\n", 1),
    ("def test_a(): pass\n\n@pytest.mark.serial\ndef test_b(): assert False\n", 1),
])
def test_both_phases_decide_the_status(tmp_path: Path, tests: str, status: int) -> None:
    proc = _run(_checkout(tmp_path, tests))
    assert proc.returncode == status, proc.stdout + proc.stderr
    if tests == "":
        assert "collected no tests; that is a failure here" in proc.stderr


def test_the_serial_test_runs_in_the_second_phase_alone(tmp_path: Path) -> None:
    """A serial test never runs on an xdist worker (its environment has no PYTEST_XDIST_WORKER), the others do."""
    body = ("import os\n\ndef test_a():\n    assert os.environ.get('PYTEST_XDIST_WORKER')\n\n"
            "@pytest.mark.serial\ndef test_b():\n    assert 'PYTEST_XDIST_WORKER' not in os.environ\n")
    proc = _run(_checkout(tmp_path, body))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("1 passed") == 2, proc.stdout
