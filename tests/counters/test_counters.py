"""Counter parsing, sources and the measured window, on real /proc samples copied from a machine.

The samples in ``samples/`` are this machine's ``/proc/net/{netstat,snmp,snmp6}``, ``/sys/block/loop0/stat``
and ``/proc/1/{stat,status}``; expected values are read off the text with plain splitting (proc(5),
Documentation/block/stat.rst), and every delta is a known edit of a sample.
"""
from __future__ import annotations

import math
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tunelab.counters import (CounterRecord, CounterWindow, FileCounters, NET_FILES, ProcessCounters, block_file,
                              cgroup_files, differences, read_local_files, snapshot, tail_reader)
from tunelab.counters.parsing import (GAUGES, parse_block_stat, parse_cgroup_stat, parse_net_table, parse_proc_stat,
                                      parse_proc_status, parse_snmp6)
from tunelab.errors import TargetError
from tunelab.targets import check_target_spec
from tunelab.targets.base import TargetOptionError

SAMPLES = Path(__file__).parent / "samples"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


def table_pairs(text: str) -> dict[str, str]:
    """Name -> value text of a /proc/net/netstat-style file, by plain splitting (the reference)."""
    lines = text.splitlines()
    out = {}
    for header, values in zip(lines[::2], lines[1::2]):
        group = header.split(":")[0]
        out.update({f"{group}.{n}": v for n, v in zip(header.split()[1:], values.split()[1:])})
    return out


@pytest.mark.parametrize("name", ["netstat.txt", "snmp.txt"])
def test_net_tables_parse_every_counter_of_a_real_sample(name):
    text = sample(name)
    reference = table_pairs(text)
    parsed = parse_net_table(text)
    assert set(parsed) == set(reference) - GAUGES
    assert all(parsed[key] == float(int(reference[key])) for key in parsed)


def test_real_samples_hold_the_listen_queue_and_udp_buffer_counters():
    parsed = parse_net_table(sample("netstat.txt") + sample("snmp.txt"))
    for name in ("TcpExt.ListenOverflows", "TcpExt.ListenDrops", "TcpExt.TCPBacklogDrop", "Udp.RcvbufErrors",
                 "Tcp.RetransSegs", "IpExt.InOctets"):
        assert name in parsed
    assert "Tcp.CurrEstab" not in parsed and "Tcp.MaxConn" not in parsed      # levels, not counts


def test_snmp6_names_split_into_group_and_name():
    text = sample("snmp6.txt")
    parsed = parse_snmp6(text)
    reference = {line.split()[0]: float(line.split()[1]) for line in text.splitlines() if line.strip()}
    assert len(parsed) == len(reference)
    assert parsed["Ip6.InReceives"] == reference["Ip6InReceives"]
    assert parsed["Udp6.RcvbufErrors"] == reference["Udp6RcvbufErrors"]
    assert parsed["UdpLite6.InDatagrams"] == reference["UdpLite6InDatagrams"]
    assert {name.split(".")[0] for name in parsed} == {"Ip6", "Icmp6", "Udp6", "UdpLite6"}


def test_block_stat_fields_follow_the_kernel_documentation():
    fields = sample("block_stat.txt").split()
    parsed = parse_block_stat(sample("block_stat.txt"))
    assert parsed["block.read_ios"] == float(fields[0])
    assert parsed["block.read_sectors"] == float(fields[2])
    assert parsed["block.write_ios"] == float(fields[4])
    assert parsed["block.io_ticks_ms"] == float(fields[9])
    assert "block.in_flight" not in parsed
    assert len(parsed) == len(fields) - 1
    # an old kernel's 11 fields: the discard and flush counters are simply absent
    assert "block.discard_ios" not in parse_block_stat(" ".join(fields[:11]))


def test_proc_stat_and_status_of_a_real_process():
    fields = sample("proc_stat.txt").split()          # pid 1's name has no space: proc(5) field N is fields[N - 1]
    parsed = parse_proc_stat(sample("proc_stat.txt"), 100.0)
    assert parsed["cpu_s"] == pytest.approx((int(fields[13]) + int(fields[14])) / 100)
    assert parsed["child_cpu_s"] == pytest.approx((int(fields[15]) + int(fields[16])) / 100)
    assert parsed["major_faults"] == int(fields[11]) + int(fields[12])
    assert parsed["minor_faults"] == int(fields[9]) + int(fields[10])
    status = {line.partition(":")[0]: line.partition(":")[2].strip() for line in sample("proc_status.txt").splitlines()}
    assert parse_proc_status(sample("proc_status.txt")) == {
        "voluntary_switches": float(status["voluntary_ctxt_switches"]),
        "involuntary_switches": float(status["nonvoluntary_ctxt_switches"])}


def edited(text: str, group: str, name: str, by: int) -> str:
    """``text`` (a netstat-style table) with counter ``group.name`` raised by ``by``."""
    lines = text.splitlines()
    for i in range(0, len(lines), 2):
        header, values = lines[i].split(), lines[i + 1].split()
        if header[0] == f"{group}:" and name in header:
            k = header.index(name)
            values[k] = str(int(values[k]) + by)
            lines[i + 1] = " ".join(values)
    return "\n".join(lines) + "\n"


def test_window_deltas_of_edited_samples_are_exact(tmp_path):
    """Two snapshots of real files, the second with known increases: each rate is the increase over the window."""
    start = {"netstat": sample("netstat.txt"), "snmp": sample("snmp.txt")}
    end = {"netstat": edited(edited(start["netstat"], "TcpExt", "ListenOverflows", 120), "TcpExt", "ListenDrops", 121),
           "snmp": edited(edited(start["snmp"], "Udp", "RcvbufErrors", 7), "Tcp", "CurrEstab", 50)}
    values = {}
    for which, texts in (("start", start), ("end", end)):
        for key, text in texts.items():
            (tmp_path / key).write_text(text)
        source = FileCounters("server", tuple(type(f)(str(tmp_path / Path(f.path).name), f.parse)
                                              for f in NET_FILES[:2]), read_local_files)
        values[which], problems = snapshot([source])
        assert problems == []
    record = CounterRecord(2.0, differences(values["start"], values["end"]))
    moved = {name: rate for name, rate in record.rates().items() if rate}
    assert moved == {"TcpExt.ListenOverflows": 60.0, "TcpExt.ListenDrops": 60.5, "Udp.RcvbufErrors": 3.5}
    assert "Tcp.CurrEstab" not in record.deltas
    assert len(record.deltas) == len(set(table_pairs(start["netstat"] + start["snmp"])) - GAUGES)


def test_client_counters_are_named_for_their_place(tmp_path):
    (tmp_path / "snmp").write_text(sample("snmp.txt"))
    source = FileCounters("client", (type(NET_FILES[1])(str(tmp_path / "snmp"), parse_net_table),), read_local_files)
    values, _ = snapshot([source])
    assert values and all(name.startswith("client.") for name in values)
    assert "client.Udp.RcvbufErrors" in values


def test_a_missing_file_is_absent_and_a_failing_source_is_a_problem_line(tmp_path):
    source = FileCounters("server", (type(NET_FILES[0])(str(tmp_path / "nope"), parse_net_table),), read_local_files)

    class Broken(FileCounters):
        def read(self):
            raise TargetError("host gone")

    values, problems = snapshot([source, Broken("client", (), read_local_files)])
    assert values == {} and problems == ["client Broken: host gone"]


def test_a_counter_that_went_down_or_appeared_has_no_difference():
    assert differences({"a": 5.0, "b": 1.0}, {"a": 4.0, "b": 3.0, "c": 9.0}) == {"b": 2.0}


def test_block_file_refuses_paths():
    assert block_file("/dev/loop7").path == "/sys/block/loop7/stat"
    with pytest.raises(TargetError, match="not a device name"):
        block_file("../../etc")


@pytest.mark.skipif(shutil.which("tail") is None, reason="needs tail (coreutils)")
def test_the_remote_reader_splits_one_tail_of_all_files():
    """What the ssh target runs on its hosts, run here: one tail, every file back, a missing one absent."""
    def run(argv):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    paths = [str(SAMPLES / "netstat.txt"), str(SAMPLES / "nope.txt"), str(SAMPLES / "snmp6.txt")]
    texts = tail_reader(run, "here")(paths)
    assert set(texts) == {paths[0], paths[2]}
    assert parse_net_table(texts[paths[0]]) == parse_net_table(sample("netstat.txt"))
    assert parse_snmp6(texts[paths[2]]) == parse_snmp6(sample("snmp6.txt"))
    with pytest.raises(TargetError, match="here: could not read counter files"):
        tail_reader(run, "here")([str(SAMPLES / "nope.txt")])


def fake_process(root: Path, pid: int, utime: int, stime: int, cutime: int, majflt: int, children: list[int],
                 switches: dict[int, tuple[int, int]]) -> None:
    """A /proc/PID with stat, and one task per ``switches`` entry (voluntary, involuntary)."""
    (root / str(pid)).mkdir()
    fields = ["S", "1", "1", "1", "0", "-1", "0", "10", "0", str(majflt), "0", str(utime), str(stime), str(cutime), "0"]
    (root / str(pid) / "stat").write_text(f"{pid} (srv (x)) {' '.join(fields)} 20 0 1 0\n")
    for i, (tid, (vol, invol)) in enumerate(switches.items()):
        task = root / str(pid) / "task" / str(tid)
        task.mkdir(parents=True)
        (task / "status").write_text(f"Name:\tsrv\nvoluntary_ctxt_switches:\t{vol}\nnonvoluntary_ctxt_switches:\t{invol}\n")
        (task / "children").write_text(" ".join(map(str, children)) + " " if i == 0 else "")


def test_process_counters_sum_a_service_tree(tmp_path):
    ticks = os.sysconf("SC_CLK_TCK")
    fake_process(tmp_path, 10, utime=ticks, stime=ticks, cutime=ticks, majflt=2, children=[11],
                 switches={10: (5, 1), 12: (7, 0)})
    fake_process(tmp_path, 11, utime=3 * ticks, stime=0, cutime=0, majflt=1, children=[], switches={11: (2, 2)})
    counters = ProcessCounters("server", lambda: [10], proc_dir=str(tmp_path)).read()
    assert counters == {"proc.cpu_s": 6.0, "proc.minor_faults": 20.0, "proc.major_faults": 3.0,
                        "proc.voluntary_switches": 14.0, "proc.involuntary_switches": 3.0}
    assert ProcessCounters("server", lambda: [99], proc_dir=str(tmp_path)).read() == {}


class Ticking(FileCounters):
    """A source whose counter goes up by one at every read."""

    def read(self):
        object.__setattr__(self, "reads", getattr(self, "reads", 0) + 1)
        return {"Tcp.InSegs": float(self.reads)}


def test_the_window_reads_at_the_end_of_the_warm_up_and_of_the_window():
    source = Ticking("server", (), read_local_files)
    began = time.monotonic()
    with CounterWindow([source], warmup_s=0.05, measure_s=0.1) as window:
        time.sleep(0.4)                 # the load runs past its window: both timers fire while it runs
    assert time.monotonic() - began >= 0.4
    assert source.reads == 2
    assert window.record is not None and window.record.deltas == {"Tcp.InSegs": 1.0}
    assert 0 < window.record.window_s < 0.4 and window.cost_s > 0


def test_a_load_that_ends_in_its_warm_up_records_no_counters():
    source = Ticking("server", (), read_local_files)
    with CounterWindow([source], warmup_s=5.0, measure_s=5.0) as window:
        pass
    assert window.record is None and getattr(source, "reads", 0) == 0


def test_an_early_end_is_read_when_the_load_returns():
    source = Ticking("server", (), read_local_files)
    with CounterWindow([source], warmup_s=0.0, measure_s=30.0) as window:
        time.sleep(0.01)
    assert source.reads == 2 and window.record.deltas == {"Tcp.InSegs": 1.0}


def test_cpu_per_answered_query():
    record = CounterRecord(8.0, {"proc.cpu_s": 2.0})
    assert record.cpu_us_per(25_000.0) == pytest.approx(10.0)      # 0.25 CPU s per s / 25k queries per s
    assert record.cpu_us_per(0.0) is None and record.cpu_us_per(math.nan) is None
    assert CounterRecord(8.0, {}).cpu_us_per(1.0) is None


def test_a_cgroups_cpu_stat_gives_the_servers_cpu_seconds():
    text = sample("cgroup_cpu.stat")
    usage = {line.split()[0]: int(line.split()[1]) for line in text.splitlines()}["usage_usec"]
    assert parse_cgroup_stat(text) == {"proc.cpu_s": usage / 1e6}
    assert parse_cgroup_stat("pgfault 10\npgmajfault 3\n") == {"proc.major_faults": 3.0}


@pytest.mark.parametrize("path", ["/etc", "/sys/fs/cgroup/../../etc", "sys/fs/cgroup/x", "/sys/fs/cgroup/a/./b",
                                  "/sys/fs/cgroup/a b", "/sys/fs/cgroup"])
def test_a_server_cgroup_must_be_a_folder_under_the_cgroup_root(path):
    with pytest.raises(TargetError, match="not a cgroup folder under /sys/fs/cgroup"):
        cgroup_files(path)
    with pytest.raises(TargetOptionError, match="server_cgroup"):
        check_target_spec({"type": "local", "options": {"server_cgroup": path}})
    with pytest.raises(TargetOptionError, match="server_cgroup"):
        check_target_spec({"type": "ssh", "options": {"server": "root@h", "server_cgroup": path}})
