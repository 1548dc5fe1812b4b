"""The README's commands work as written on a fresh clone.

Every command of the README's ``bash`` code blocks and its ``python`` block runs, in README order, in a folder
holding what a fresh clone holds (the files git tracks in designs/, examples/, data/ and notebooks/: the example
stores, but no data/default.sqlite or any other store the lab writes); each must exit 0. The only commands not
run are those in :data:`NOT_RUN`, each with the reason; a command the README no longer has fails the test, so the
list cannot go stale. ``tunelab`` runs in this process (:mod:`cli_helpers`), with the clone as its working
directory.
"""
from __future__ import annotations

import contextlib
import io
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from cli_helpers import run_in_process

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: commands not run (a command matches when it is the text or starts with it and a space), first match wins
NOT_RUN = {
    "./quickstart.sh": "installs Debian packages and a virtual environment, then runs the default study on the lab "
                       "(minutes); tests/test_quickstart.py runs it",
    "./run-tests.sh": "runs the whole test suite, this test included (15 minutes)",
    "tunelab run designs/iperf_bottleneck.yaml": "runs a study on the lab (root, minutes)",
    "tunelab run designs/default_duet.yaml": "runs a study on two labs (root, minutes)",
    "tunelab run designs/default.yaml --testbeds": "runs a study on two labs or an ssh cluster (minutes)",
    "tunelab refine designs/default.yaml": "a search on the lab (root, minutes)",
    "tunelab validate --target lab": "ABBA blocks or duet pairs on the lab (root, minutes)",
    "tunelab restore --testbeds": "acts on the labs of a testbeds file (root); the lab tests restore labs",
    "dask": "starts a Dask scheduler or worker in the background (tests/cluster start their own)",
    "tunelab gallery --quick": "about a minute on 2 cores: tests/seeds/test_gallery_committed.py builds exactly this "
                               "gallery from the same stores and compares it with reports/seeds",
    "tunelab gallery --record": "records a seed study on the lab (root, up to 10 minutes)",
    "tunelab gallery": "the gallery with every store's full report: the notebooks of all seed stores (minutes)",
}
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def readme_blocks() -> list[tuple[str, str]]:
    """(language, text) of each fenced code block of the README, in order."""
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def bash_commands(text: str) -> list[list[str]]:
    """The commands of a bash block as argument lists: continued lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [argv for line in joined.splitlines() if (argv := shlex.split(line, comments=True))]


def not_run_reason(argv: list[str]) -> str | None:
    text = " ".join(argv)
    return next((reason for key, reason in NOT_RUN.items() if text == key or text.startswith(key + " ")), None)


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    clone = tmp_path_factory.mktemp("clone")
    tracked = subprocess.run(["git", "ls-files", "-z", "designs", "examples", "data", "notebooks"], cwd=ROOT,
                             capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, clone / name)
    assert (clone / "data" / "examples" / "default.sqlite").is_file()
    assert not (clone / "data" / "default.sqlite").exists()
    return clone


def test_the_readme_has_commands_of_each_kind() -> None:
    kinds = [kind for kind, _ in readme_blocks()]
    assert kinds.count("bash") >= 6 and kinds.count("python") == 1, kinds


def test_every_readme_command_runs_on_a_fresh_clone(fresh_clone: Path, capfd: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ran, skipped, failed = [], set(), []
    for kind, text in readme_blocks():
        if kind == "python":
            monkeypatch.chdir(fresh_clone)
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(text, "README.md (python block)", "exec"), {"__name__": "readme"})  # noqa: S102
            assert printed.getvalue().lstrip().startswith("{"), printed.getvalue()[:500]   # the json.dumps line
            ran.append("python block")
            continue
        if kind != "bash":
            continue
        for argv in bash_commands(text):
            reason = not_run_reason(argv)
            if reason is not None:
                skipped.update(key for key in NOT_RUN if NOT_RUN[key] == reason)
                continue
            assert argv[0] == "tunelab", f"a README command this test does not know how to run: {argv}"
            proc = run_in_process(argv[1:], fresh_clone, capfd, monkeypatch)
            ran.append(" ".join(argv))
            if proc.returncode != 0:
                failed.append(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    assert not failed, failed
    assert set(NOT_RUN) == skipped, f"NOT_RUN names commands the README no longer has: {set(NOT_RUN) - skipped}"
    assert len(ran) >= 12, ran
    assert (fresh_clone / "screen.json").is_file() and (fresh_clone / "my-runs.csv").is_file()
