"""Network-namespace primitives: create, delete, list, and run code or commands inside one.

Two ways into a namespace:

* :class:`NetnsWorker` - one persistent thread that has entered the namespace with
  ``setns(2)``. ``/proc/sys/net`` is resolved against the netns of the *thread* that opens
  it, so reading and writing sysctls from that thread costs a file open (~30 us) instead of a
  process (~2 ms). Sockets created in that thread also belong to the namespace. The calling
  (main) thread never changes namespace.
* :func:`exec_argv` - the argv prefix ``ip netns exec NS ...`` for child processes (it also
  mounts a namespace-private ``/sys`` so ``/sys/class/net`` shows the namespace's devices).

Examples
--------
>>> create_namespace("tl-demo-srv")                       # doctest: +SKIP
>>> with NetnsWorker("tl-demo-srv") as w:                 # doctest: +SKIP
...     w.call(lambda: open("/proc/sys/net/ipv4/tcp_fin_timeout").read())
'60\\n'
>>> delete_namespace("tl-demo-srv")                       # doctest: +SKIP
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Sequence, TypeVar

from tunelab.errors import TargetError, ToolMissingError

T = TypeVar("T")

CLONE_NEWNET = 0x40000000
NETNS_RUN_DIR = "/run/netns"

_libc = ctypes.CDLL(None, use_errno=True)


def _ip(*args: str, timeout_s: float = 10.0) -> subprocess.CompletedProcess[str]:
    """Run ``ip ARGS`` (argv list) and raise TargetError with its stderr on failure."""
    argv = ["ip", *args]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise ToolMissingError("`ip` (iproute2) is not installed; install the Debian package iproute2") from None
    except subprocess.TimeoutExpired:
        raise TargetError(f"`{' '.join(argv)}` did not finish within {timeout_s} s") from None
    if proc.returncode != 0:
        raise TargetError(f"`{' '.join(argv)}` failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return proc


def ip_batch(commands: Iterable[Sequence[str]], namespace: str | None = None, timeout_s: float = 10.0,
             tool: str = "ip") -> None:
    """Run several ``ip`` (or ``tc``) commands in one process (``ip [-n NS] -batch -``).

    Each command is an argv list without the leading ``ip``.

    Arguments are joined with spaces, so they must not contain whitespace (names and addresses
    built by tunelab never do; anything else is rejected).
    """
    lines = []
    for command in commands:
        for arg in command:
            if not arg or any(ch.isspace() for ch in arg) or arg.startswith("#"):
                raise TargetError(f"ip batch argument {arg!r} is empty or contains whitespace; use plain names")
        lines.append(" ".join(command))
    argv = [tool, *(["-n", namespace] if namespace else []), "-batch", "-"]
    try:
        proc = subprocess.run(argv, input="\n".join(lines) + "\n", capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except FileNotFoundError:
        raise ToolMissingError(f"`{tool}` (iproute2) is not installed; install the Debian package iproute2") from None
    except subprocess.TimeoutExpired:
        raise TargetError(f"`{' '.join(argv)}` did not finish within {timeout_s} s") from None
    if proc.returncode != 0:
        raise TargetError(f"{' '.join(argv)} failed (exit {proc.returncode}): {proc.stderr.strip()}\nbatch was:\n"
                          + "\n".join(lines))


def list_namespaces(prefix: str = "") -> list[str]:
    """Names of the named network namespaces (``/run/netns``) starting with ``prefix``."""
    try:
        names = os.listdir(NETNS_RUN_DIR)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(prefix))


def namespace_exists(name: str) -> bool:
    return os.path.exists(os.path.join(NETNS_RUN_DIR, name))


def create_namespace(name: str, loopback_up: bool = True) -> None:
    """``ip netns add NAME`` and bring its loopback up (TargetError if it already exists)."""
    if namespace_exists(name):
        raise TargetError(f"network namespace {name!r} already exists; remove it with `ip netns delete {name}` "
                          "or `tunelab lab down --all`")
    _ip("netns", "add", name)
    if loopback_up:
        _ip("-n", name, "link", "set", "lo", "up")


def namespace_pids(name: str) -> list[int]:
    """PIDs of the processes whose network namespace is ``name`` (``ip netns pids``)."""
    if not namespace_exists(name):
        return []
    proc = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True, check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def kill_pids(pids: Iterable[int], grace_s: float = 0.5) -> None:
    """SIGTERM ``pids``, wait up to ``grace_s``, then SIGKILL whatever is left and wait for it."""
    pids = [p for p in pids if p != os.getpid()]
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        live = [p for p in pids if _alive(p)]
        if not live:
            return
        for pid in live:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(_alive(p) for p in live):
            time.sleep(0.005)


def kill_namespace_processes(name: str, grace_s: float = 0.5, rounds: int = 5) -> None:
    """Terminate every process living in namespace ``name``, listing them again after each kill: a process
    forked while the others died (an sshd accepting one more connection, say) is caught by the next round
    instead of outliving the namespace."""
    for _ in range(rounds):
        pids = [p for p in namespace_pids(name) if p != os.getpid() and _alive(p)]
        if not pids:
            return
        kill_pids(pids, grace_s=grace_s)


def delete_namespace(name: str) -> None:
    """Kill the namespace's processes and ``ip netns delete`` it; a missing namespace is fine."""
    if not namespace_exists(name):
        return
    kill_namespace_processes(name)
    proc = subprocess.run(["ip", "netns", "delete", name], capture_output=True, text=True, check=False)
    if proc.returncode != 0 and namespace_exists(name):
        raise TargetError(f"could not delete network namespace {name!r}: {proc.stderr.strip()}")


def exec_argv(namespace: str, argv: Sequence[str], cpu: int | str | None = None) -> list[str]:
    """The argv that runs ``argv`` inside ``namespace``, pinned to ``cpu`` (a CPU or a
    ``taskset --cpu-list`` text such as ``"0-1"``) with taskset if given."""
    prefix = ["ip", "netns", "exec", namespace]
    if cpu is not None:
        prefix += ["taskset", "--cpu-list", str(cpu)]
    return prefix + list(argv)


def _enter(name: str) -> None:
    """Move the calling thread (only it) into the named network namespace."""
    fd = os.open(os.path.join(NETNS_RUN_DIR, name), os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into network namespace {name!r} failed: {os.strerror(err)}")
    finally:
        os.close(fd)


class NetnsWorker:
    """A single thread living inside a network namespace; ``call(fn)`` runs ``fn`` there.

    The thread keeps the namespace alive while it runs, so :meth:`close` it before deleting
    the namespace if the namespace's resources should be freed at once.
    """

    def __init__(self, namespace: str) -> None:
        if not namespace_exists(namespace):
            raise TargetError(f"network namespace {namespace!r} does not exist")
        self.namespace = namespace
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"netns-{namespace}",
                                        initializer=_enter, initargs=(namespace,))
        # one call now, so a failing setns surfaces here, not at the first real call
        #: the kernel's id of the thread inside the namespace: ``/proc/PID/task/TID/net`` is its namespace's
        #: (:func:`task_path`), readable from any thread of this process without a hand-over
        self.native_id: int = self.call(threading.get_native_id)

    def call(self, fn: Callable[..., T], *args: object, timeout_s: float = 30.0) -> T:
        """Run ``fn(*args)`` in the namespace thread and return its result (exceptions propagate)."""
        try:
            return self._pool.submit(fn, *args).result(timeout=timeout_s)
        except RuntimeError as exc:  # BrokenThreadPool (setns failed) or shut down
            raise TargetError(f"worker for network namespace {self.namespace!r} is unusable: {exc}") from exc

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "NetnsWorker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def thread_path(path: str) -> str:
    """Rewrite ``/proc/net/...`` (which follows the process) to ``/proc/thread-self/net/...``."""
    if path == "/proc/net" or path.startswith("/proc/net/"):
        return "/proc/thread-self/net" + path[len("/proc/net"):]
    if path.startswith("/proc/self/net"):
        return "/proc/thread-self/net" + path[len("/proc/self/net"):]
    return path


def task_path(path: str, tid: int) -> str:
    """Rewrite ``/proc/net/...`` to ``/proc/PID/task/TID/net/...``: the namespace of this process's thread
    ``tid`` (a :class:`NetnsWorker`'s ``native_id``), read from the calling thread.

    >>> task_path("/proc/net/snmp", 12).endswith("/task/12/net/snmp")
    True
    """
    if path == "/proc/net" or path.startswith("/proc/net/"):
        return f"/proc/{os.getpid()}/task/{tid}/net" + path[len("/proc/net"):]
    return path


def needs_namespace_sysfs(path: str) -> bool:
    """Whether ``path`` is a sysfs network-device path, which only ``ip netns exec`` sees per namespace."""
    return path.startswith(("/sys/class/net/", "/sys/devices/virtual/net/"))
