"""Print lab timings: up, reset, and applying 10 sysctls via the setns fast path vs `ip netns exec`.

Run as root: ``.venv/bin/python benchmarks/bench_lab.py [--repeats 5]``.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from tunelab.targets.lab import LabTarget

SYSCTLS = {  # ten per-namespace sysctls and values to write
    "net.ipv4.tcp_fin_timeout": "30", "net.ipv4.tcp_tw_reuse": "1", "net.ipv4.tcp_syncookies": "1",
    "net.ipv4.tcp_max_syn_backlog": "2048", "net.ipv4.tcp_abort_on_overflow": "1", "net.ipv4.tcp_sack": "1",
    "net.ipv4.tcp_timestamps": "1", "net.ipv4.tcp_window_scaling": "1", "net.ipv4.tcp_keepalive_time": "600",
    "net.core.somaxconn": "1024",
}


def ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1e3:8.2f} ms  (min {min(values) * 1e3:.2f}, max {max(values) * 1e3:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ups, resets, fast, slow = [], [], [], []
    for _ in range(args.repeats):
        start = time.monotonic()
        lab = LabTarget()
        with lab:
            ups.append(time.monotonic() - start)
            lab.reset()
            resets.append(lab.timings["reset_s"])
            start = time.monotonic()
            for key, value in SYSCTLS.items():
                lab.write_text("server", "/proc/sys/" + key.replace(".", "/"), value)
            fast.append(time.monotonic() - start)
            start = time.monotonic()
            for key, value in SYSCTLS.items():
                subprocess.run(["ip", "netns", "exec", lab.namespace("server"), "sysctl", "-q", "-w", f"{key}={value}"],
                               check=True)
            slow.append(time.monotonic() - start)
    print(f"lab up (dns + iperf3)      {ms(ups)}")
    print(f"lab reset                  {ms(resets)}")
    print(f"10 sysctls, setns thread   {ms(fast)}")
    print(f"10 sysctls, ip netns exec  {ms(slow)}")


if __name__ == "__main__":
    main()
