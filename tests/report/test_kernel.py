"""Notebooks run in a kernel of this interpreter (the venv), whatever `python` on PATH is."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.provisioning.local_provisioner import LocalProvisioner
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tunelab.report.build import execute_notebook


def test_kernel_runs_this_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """...and is shut down without a SIGINT (jupyter_client's default interrupts it first, and ipykernel then
    logs ``KeyboardInterrupt caught in kernel.`` to the terminal when a handler is still running)."""
    sent: list[int] = []
    real_send = LocalProvisioner.send_signal

    async def spy(self: LocalProvisioner, signum: int) -> None:
        sent.append(signum)
        await real_send(self, signum)

    monkeypatch.setattr(LocalProvisioner, "send_signal", spy)
    params = new_code_cell("marker = 'unset'")
    params.metadata["tags"] = ["parameters"]
    nb = new_notebook(cells=[new_markdown_cell("# probe"), params,
                             new_code_cell("import sys, tunelab, matplotlib\n"
                                           "print(sys.executable, marker, matplotlib.get_backend(), sep='|')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source = tmp_path / "probe.ipynb"
    nbformat.write(nb, source)
    before = os.environ.get("JUPYTER_PATH")
    out = execute_notebook(source, tmp_path / "probe.out.ipynb", {"marker": "injected"})
    assert os.environ.get("JUPYTER_PATH") == before  # the temporary kernelspec is gone again
    executed = nbformat.read(str(out), as_version=4)
    assert any("injected-parameters" in c.metadata.get("tags", []) for c in executed.cells)
    text = executed.cells[-1].outputs[0]["text"].strip()
    executable, marker, backend = text.split("|")
    assert Path(executable).resolve() == Path(sys.executable).resolve()
    assert marker == "injected"
    assert backend.lower() == "agg"
    assert signal.SIGINT not in sent
