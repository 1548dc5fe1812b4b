"""`tunelab report` renders whatever a store holds: a store of refine trials only, or of validate trials only
(both made on the SYNTHETIC simulator target), through the command line; no kernel noise
(``[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel.``) reaches the terminal. The reports are built by
``tunelab``'s ``main`` in this process (:mod:`cli_helpers`: the kernels' output is captured at the file
descriptors, as a terminal would show it), the refusal of an empty store by ``python -m tunelab`` as a user
runs it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import tunelab_here  # noqa: F401 - the fixture

from report_helpers import nb_outputs

ROOT = Path(__file__).resolve().parents[2]
NOISE = ("IPKernelApp", "KeyboardInterrupt", "Traceback")


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``refine``: a store of 12 refine trials (no screen, no confirmation); ``validate``: 3 ABBA blocks of
    ``tunelab validate`` (nothing else), both on the simulator's ``simple`` surface."""
    import tunelab

    folder = tmp_path_factory.mktemp("stores")
    tunelab.refine(target="simulator", surface="simple", budget=12, confirm_blocks=0, store=folder / "refine.sqlite")
    tunelab.validate("simulator", {"net.core.somaxconn": 1024}, surface="simple", metrics=["qps:max:5"], blocks=3,
                     warmup_s=0.1, measure_s=0.5, store=folder / "validate.sqlite", write_sysctl=False)
    return {"refine": folder / "refine.sqlite", "validate": folder / "validate.sqlite"}


def report(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m tunelab report ARGS`` in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tunelab", "report", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("kind, args, shown, skipped", [
    ("refine", ["--notebooks", "03"], "03_refine", {"01_screen", "02_posthoc", "04_validate"}),
    ("validate", [], "04_validate", {"01_screen", "02_posthoc", "03_refine"}),
])
def test_a_store_without_a_screen_is_reported(stores: dict[str, Path], tmp_path: Path, kind: str, args: list[str],
                                              shown: str, skipped: set[str], tunelab_here) -> None:
    proc = tunelab_here(["report", str(stores[kind]), "--out", "out", *args], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"report written: {tmp_path / 'out' / 'index.html'}"
    assert not [word for word in NOISE if word in proc.stderr], proc.stderr
    assert f"{shown} executed, 1/2 steps" in proc.stderr and f"{shown} rendered, 2/2 steps" in proc.stderr  # progress
    index = (tmp_path / "out" / "index.html").read_text()
    assert "No screen trials: this store holds 12 " in index and 'id="verdicts"' not in index
    assert f'href="{shown}.html"' in index and not (tmp_path / "out" / "screen.json").exists()
    assert {name for name in skipped if f"<strong>{name}</strong> skipped" in index} == skipped
    outputs = nb_outputs(tmp_path / "out" / f"{shown}.ipynb")
    assert not [o for o in outputs if o["output_type"] == "error" or o.get("name") == "stderr"]
    text = " ".join(str(o.get("data", {}).get("text/html", "")) + str(o.get("data", {}).get("text/markdown", ""))
                    for o in outputs)
    assert "SYNTHETIC" in text
    if kind == "validate":
        assert "verdict <strong>" in text.lower() or "verdict **" in text.lower(), text[:2000]


def test_a_store_without_usable_trials_is_one_line(tmp_path: Path) -> None:
    from tunelab.store import Store

    with Store.open(tmp_path / "empty.sqlite", study="empty", design_hash="0", design_text="{}"):
        pass
    proc = report([str(tmp_path / "empty.sqlite"), "--out", "out"], tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert "has no usable screen, refine, confirm or validate trials (it holds no trials at all)" in proc.stderr
    assert not (tmp_path / "out").exists()
