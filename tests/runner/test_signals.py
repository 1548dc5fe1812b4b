"""SIGTERM has one owner, :mod:`tunelab.signals`: outside a run it tears down first, then the process dies of it."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _child(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    code = textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(ROOT)!r})
        from tunelab.signals import sigterm_interrupts, teardown_on_sigterm
        mark = {str(tmp_path / "torn-down")!r}
        def teardown():
            open(mark, "w").write("yes")
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_sigterm_outside_a_run_tears_down_then_kills(tmp_path: Path) -> None:
    proc = _child(tmp_path, """
        teardown_on_sigterm(teardown)
        os.kill(os.getpid(), signal.SIGTERM)
        signal.pause()
    """)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert (tmp_path / "torn-down").read_text() == "yes"


def test_a_run_keeps_its_own_sigterm_handler(tmp_path: Path) -> None:
    proc = _child(tmp_path, """
        with sigterm_interrupts():
            teardown_on_sigterm(teardown)          # a lab brought up inside a run: the run's handler stays
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                signal.pause()
            except KeyboardInterrupt:
                print("interrupted")
    """)
    assert proc.returncode == 0 and proc.stdout.strip() == "interrupted", proc.stderr
    assert not (tmp_path / "torn-down").exists()


def test_a_sigterm_inside_a_fork_hook_is_sent_again_not_lost(tmp_path: Path) -> None:
    # logging's lock is released by a Python fork hook around every fork with a preexec_fn (every target command);
    # a KeyboardInterrupt raised there is "ignored": the handler sends the signal again instead
    proc = _child(tmp_path, """
        import logging, time
        from tunelab.signals import _sigterm_as_interrupt
        in_hook = compile("_sigterm_as_interrupt(signal.SIGTERM, sys._getframe())", logging.__file__, "exec")
        with sigterm_interrupts():
            try:
                exec(in_hook, {"_sigterm_as_interrupt": _sigterm_as_interrupt, "signal": signal, "sys": sys})
                print("returned")
                time.sleep(10)
            except KeyboardInterrupt:
                print("interrupted")
    """)
    assert proc.returncode == 0 and proc.stdout.split() == ["returned", "interrupted"], proc.stderr
