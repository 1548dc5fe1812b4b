"""Fork server for the kill-point tests: run real ``tunelab`` CLI verbs and signal them at named points.

usage: kill_driver.py serve        (inside ``ip netns exec NS`` for the local target)

Starting a Python process that imports tunelab costs ~2.5 s (pandas, scipy via pyDOE3), and the
kill-point suite runs ~100 verbs, so this driver imports everything once and then forks one child
per request. Each child is a fresh, single-threaded process that runs ``tunelab.cli.main(argv)``
exactly as the ``tunelab`` command does (including the SIGTERM handling of ``tunelab.api`` and the
lab's atexit teardown), with its output in files, and ends with the verb's exit status.

The server is a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): whatever a killed run leaves behind
(nsd, iperf3, dnsperf, fio) is re-parented to it instead of to init, so ``survivors`` lists
precisely the processes of our runs that are still alive, and nobody else's.

Requests are JSON lines on stdin, answers JSON lines on stdout:

``{"op": "run", "argv": [...], "cwd": DIR, "kill": KILL|null, "record": FILE, "labs_log": FILE,
"timeout_s": 120}`` -> ``{"pid", "returncode" (negative: killed by that signal), "stdout", "stderr",
"wall_s", "timed_out"}``

``KILL = {"point": NAME, "occurrence": N, "signal": "SIGKILL"|"SIGINT"|"SIGTERM", "delay_s": 0}``:
the child sends itself the signal at the N-th time point NAME is reached; with ``delay_s`` the
signal is sent that many seconds later from a timer thread (``measuring`` = ``before_measure`` +
delay, i.e. while the load generator runs). Just before signalling, the child writes RECORD (JSON:
the point, the run key in flight, its live descendants, the state files of its labs).

Points are the runner's checkpoints (``begin``, ``before_apply``, ``after_apply``,
``before_measure``, ``after_measure``, ``after_record``, ``restore``, ``end``) plus points the runner
does not have yet, injected here by wrapping (see the report / ``INJECTED_POINTS``):

* ``lab_coming_up``: inside ``LabTarget.up()``, right after the namespaces and the veth link exist,
  before the services start (wraps ``LabTarget._build_network`` while ``up`` runs);
* ``target_up``: the target's ``__enter__`` returned (lab up), before the first trial;
* ``between_trials``: ``run_design`` is about to call ``target.reset()`` before a trial;
* ``teardown``: the target's ``down()`` is about to run (lab still complete);
* ``teardown_mid``: inside ``LabTarget.down()``, services stopped, namespaces not yet deleted.

``{"op": "survivors"}`` -> ``{"survivors": [{"pid", "name", "cmdline"}]}`` after reaping zombies.
"""
from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import psutil  # noqa: E402

import tunelab.api  # noqa: E402,F401
import tunelab.cli  # noqa: E402
import tunelab.designs  # noqa: E402,F401
import tunelab.knobs  # noqa: E402,F401
import tunelab.loads  # noqa: E402,F401
import tunelab.runner.trials  # noqa: E402
import tunelab.journal  # noqa: E402,F401
import tunelab.store  # noqa: E402,F401
import tunelab.targets.base  # noqa: E402
import tunelab.targets.lab  # noqa: E402
import tunelab.targets.local  # noqa: E402,F401

INJECTED_POINTS = ("lab_coming_up", "target_up", "between_trials", "teardown", "teardown_mid")
PR_SET_CHILD_SUBREAPER = 36


# ---- in the child: the kill hook -----------------------------------------------------------------


class Killer:
    """Counts points; at the N-th occurrence of the wanted one, records the moment and signals."""

    def __init__(self, spec: dict[str, Any] | None, record: str | None) -> None:
        self.spec = spec or {}
        self.record = record
        self.seen: dict[str, int] = {}
        self.in_flight: str | None = None
        self.fired = False
        point = self.spec.get("point")
        # "measuring" is before_measure + a delay: the signal lands while the load generator runs
        self.trigger = "before_measure" if point == "measuring" else point

    def __call__(self, name: str) -> None:
        self.seen[name] = self.seen.get(name, 0) + 1
        if self.fired or name != self.trigger or self.seen[name] != int(self.spec.get("occurrence", 1)):
            return
        self.fired = True
        delay = float(self.spec.get("delay_s") or 0)
        if delay > 0:
            threading.Thread(target=self._later, args=(delay,), daemon=True).start()
        else:
            self._fire()

    def _later(self, delay: float) -> None:
        time.sleep(delay)
        self._fire()

    def _fire(self) -> None:
        sig = getattr(signal, self.spec.get("signal", "SIGKILL"))
        me = psutil.Process()
        children = []
        for child in me.children(recursive=True):
            try:
                children.append({"pid": child.pid, "name": child.name(), "cmdline": child.cmdline()})
            except psutil.Error:
                continue
        labs = {}
        for lab in list(tunelab.targets.lab._LIVE):
            state = getattr(lab, "state", None)
            if state is not None:
                labs[lab.lab_name] = {"services": dict(state.services), "namespaces": dict(state.namespaces),
                                      "workdir": state.workdir, "disk_file": state.disk_file,
                                      "disk_device": state.disk_device}
        if self.record:
            _write_json(self.record, {"point": self.spec.get("point"), "occurrence": self.spec.get("occurrence"),
                                      "signal": self.spec.get("signal"), "pid": os.getpid(),
                                      "in_flight": self.in_flight, "children": children, "labs": labs,
                                      "seen": dict(self.seen), "time": time.time()})
        os.kill(os.getpid(), sig)


def _write_json(path: str, data: Any) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _append_line(path: str | None, data: Any) -> None:
    if not path:
        return
    with open(path, "a") as fh:
        fh.write(json.dumps(data) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def install_hooks(killer: Killer, labs_log: str | None) -> None:
    """Route the runner's checkpoints and the injected points to ``killer``; log every lab created."""
    trials, api = tunelab.runner.trials, tunelab.api
    real_run, real_run_trial = api.run, trials.run_trial

    def run(*args: Any, **kwargs: Any) -> Any:
        given: Callable[[str], None] | None = kwargs.get("checkpoint")

        def checkpoint(name: str) -> None:
            if given is not None:
                given(name)
            killer(name)

        kwargs["checkpoint"] = checkpoint
        return real_run(*args, **kwargs)

    def run_trial(*args: Any, **kwargs: Any) -> Any:
        killer.in_flight = kwargs.get("run_key", args[4] if len(args) > 4 else None)
        try:
            return real_run_trial(*args, **kwargs)
        finally:
            killer.in_flight = None

    api.run = run                    # `tunelab run` calls tunelab.api.run, which passes checkpoint to run_design
    trials.run_trial = run_trial     # run_design calls each trial as tunelab.runner.trials.run_trial

    base = tunelab.targets.base.Target
    real_enter = base.__enter__

    def enter(self: Any) -> Any:
        result = real_enter(self)
        real_reset, real_down = self.reset, self.down

        def reset() -> None:
            killer("between_trials")
            real_reset()

        def down() -> None:
            self._kp_in_down = True
            try:
                killer("teardown")
                real_down()
            finally:
                self._kp_in_down = False

        self.reset, self.down = reset, down
        killer("target_up")
        return result

    base.__enter__ = enter

    lab_cls = tunelab.targets.lab.LabTarget
    real_up, real_build, real_close = lab_cls.up, lab_cls._build_network, lab_cls._close_workers

    def up(self: Any) -> None:
        _append_line(labs_log, {"name": self.lab_name, "namespaces": dict(self.namespaces),
                                "workdir": str(self.workdir), "pid": os.getpid()})
        self._kp_in_up = True
        try:
            real_up(self)
        finally:
            self._kp_in_up = False

    def build(self: Any) -> None:
        real_build(self)
        if getattr(self, "_kp_in_up", False):
            killer("lab_coming_up")

    def close_workers(self: Any) -> None:
        real_close(self)
        if getattr(self, "_kp_in_down", False):
            killer("teardown_mid")

    lab_cls.up, lab_cls._build_network, lab_cls._close_workers = up, build, close_workers


def child_main(request: dict[str, Any]) -> int:
    os.chdir(request["cwd"])
    killer = Killer(request.get("kill"), request.get("record"))
    install_hooks(killer, request.get("labs_log"))
    try:
        status = tunelab.cli.main([str(a) for a in request["argv"]])
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - what the interpreter would print, then exit 1
        traceback.print_exc()
        status = 1
    return status


# ---- the server ---------------------------------------------------------------------------------


def _run(request: dict[str, Any]) -> dict[str, Any]:
    out, err = request["out"] + ".stdout", request["out"] + ".stderr"
    sys.stdout.flush()
    sys.stderr.flush()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: a fresh process as far as tunelab can tell
        status = 1
        try:
            os.setpgid(0, 0)
            fd_in = os.open(os.devnull, os.O_RDONLY)
            fd_out = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            fd_err = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd_in, 0)
            os.dup2(fd_out, 1)
            os.dup2(fd_err, 2)
            sys.stdin = open(0, closefd=False)
            sys.stdout = open(1, "w", buffering=1, closefd=False)
            sys.stderr = open(2, "w", buffering=1, closefd=False)
            status = child_main(request)
            # interpreter shutdown: join non-daemon threads, run atexit (the lab's teardown hook)
            try:
                threading._shutdown()  # type: ignore[attr-defined]
            except Exception:  # noqa: BLE001
                pass
            import atexit

            atexit._run_exitfuncs()
        except BaseException:  # noqa: BLE001
            try:
                traceback.print_exc()
            except BaseException:  # noqa: BLE001
                pass
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(status if isinstance(status, int) else 1)
    deadline = start + float(request.get("timeout_s", 120))
    returncode, timed_out = None, False
    while returncode is None:
        try:
            reaped, wstatus = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if reaped == pid:
            returncode = os.waitstatus_to_exitcode(wstatus)
            break
        if reaped:
            continue  # an orphan of an earlier run, re-parented to us
        if time.monotonic() > deadline and not timed_out:
            timed_out = True
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 10
        time.sleep(0.005)
    return {"pid": pid, "returncode": returncode, "timed_out": timed_out, "wall_s": time.monotonic() - start,
            "stdout": Path(out).read_text(errors="replace"), "stderr": Path(err).read_text(errors="replace")}


def _survivors() -> dict[str, Any]:
    while True:  # reap what exited; only the living count
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if not reaped:
            break
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
            found.append({"pid": child.pid, "name": child.name(), "cmdline": child.cmdline(),
                          "status": child.status()})
        except psutil.Error:
            continue
    return {"survivors": found}


def serve() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(json.dumps({"error": f"prctl(PR_SET_CHILD_SUBREAPER): errno {ctypes.get_errno()}"}), flush=True)
        return 1
    reply = sys.stdout
    print(json.dumps({"ready": True, "pid": os.getpid()}), file=reply, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            op = request.get("op")
            if op == "run":
                answer = _run(request)
            elif op == "survivors":
                answer = _survivors()
            elif op == "quit":
                print(json.dumps({"bye": True}), file=reply, flush=True)
                return 0
            else:
                answer = {"error": f"unknown op {op!r}"}
        except Exception as exc:  # noqa: BLE001 - answer, never die
            answer = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        print(json.dumps(answer), file=reply, flush=True)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["serve"]:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(serve())
