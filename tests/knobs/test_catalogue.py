"""The catalogue: coverage of the source papers, scope, lookup, and plausibility on this machine."""
from __future__ import annotations

import os

import pytest

from tunelab.errors import KnobError
from tunelab.knobs import catalogue, get_knob
from tunelab.knobs.base import VALUE_TYPES

# Seed 000 (Gembala et al.), Table 2: 12 + 13 + 2 = 27 parameters, copied from the paper's text.
TABLE2_IPV4 = ("tcp_mem tcp_rmem tcp_wmem tcp_moderate_rcvbuf tcp_no_metrics_save tcp_timestamps tcp_window_scaling "
               "tcp_sack tcp_tw_reuse tcp_keepalive_probes tcp_keepalive_intvl tcp_fin_timeout").split()
TABLE2_CORE = ("wmem_max rmem_max rmem_default wmem_default netdev_max_backlog bpf_jit_enable dev_weight "
               "rps_sock_flow_entries optmem_max somaxconn busy_read busy_poll tstamp_allow_data").split()
TABLE2 = ([f"net.ipv4.{n}" for n in TABLE2_IPV4] + [f"net.core.{n}" for n in TABLE2_CORE]
          + ["link.mtu", "link.txqueuelen"])
# Seed 001 (TCP tuning of a DNS server) and the brief's companions.
SEED001 = ["net.ipv4.tcp_abort_on_overflow", "fs.file-max", "net.core.dev_weight_tx_bias", "net.core.default_qdisc",
           "net.ipv4.ip_early_demux", "net.ipv4.tcp_tso_win_divisor", "net.core.somaxconn",
           "net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_syncookies", "net.ipv4.ip_local_port_range",
           "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat"]
# Seed 002 (IOPerf): disk I/O.
SEED002 = ["block.queue.scheduler", "block.queue.read_ahead_kb", "block.queue.nr_requests", "vm.swappiness",
           "vm.dirty_ratio", "vm.dirty_background_ratio", "vm.vfs_cache_pressure"]

# Host-global per the kernel (and the issue): not visible per network namespace.
HOST_GLOBAL = ["net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default", "net.core.wmem_default",
               "net.core.netdev_max_backlog", "net.core.default_qdisc", "net.core.optmem_max", "net.core.busy_read",
               "net.core.busy_poll", "net.core.bpf_jit_enable", "net.core.dev_weight", "net.core.dev_weight_tx_bias",
               "net.core.rps_sock_flow_entries", "net.core.tstamp_allow_data", "net.ipv4.tcp_mem", "vm.swappiness",
               "vm.dirty_ratio", "fs.file-max", "block.queue.scheduler", "block.queue.read_ahead_kb"]
PER_NETNS = ["net.core.somaxconn", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_abort_on_overflow",
             "net.ipv4.tcp_congestion_control", "net.ipv4.ip_local_port_range", "net.ipv4.conf.all.rp_filter",
             "link.mtu", "link.txqueuelen"]


def test_table2_has_27_parameters_and_all_are_catalogued():
    assert len(TABLE2) == 27
    missing = [name for name in TABLE2 if name not in catalogue()]
    assert missing == []


@pytest.mark.parametrize("name", SEED001 + SEED002)
def test_seed_knobs_are_catalogued(name):
    assert get_knob(name).name == name


def test_expected_types_of_well_known_knobs():
    types = {name: get_knob(name).type for name in [
        "net.ipv4.tcp_rmem", "net.ipv4.tcp_mem", "net.ipv4.tcp_congestion_control", "net.core.default_qdisc",
        "block.queue.scheduler", "net.ipv4.tcp_abort_on_overflow", "net.core.somaxconn", "link.mtu"]}
    assert types == {"net.ipv4.tcp_rmem": "triplet", "net.ipv4.tcp_mem": "triplet",
                     "net.ipv4.tcp_congestion_control": "enum", "net.core.default_qdisc": "enum",
                     "block.queue.scheduler": "enum", "net.ipv4.tcp_abort_on_overflow": "bool",
                     "net.core.somaxconn": "int", "link.mtu": "int"}


@pytest.mark.parametrize("name", HOST_GLOBAL)
def test_host_global_knobs_are_scoped_host(name):
    assert get_knob(name).scope == "host"


@pytest.mark.parametrize("name", PER_NETNS)
def test_per_namespace_knobs_are_scoped_netns(name):
    assert get_knob(name).scope == "netns"


def test_every_vm_fs_kernel_and_block_knob_is_host_global():
    prefixes = ("vm.", "fs.", "kernel.", "block.")
    scoped = {k.name: k.scope for k in catalogue().values() if k.name.startswith(prefixes)}
    assert scoped and set(scoped.values()) == {"host"}


def test_listen_time_knobs_require_restart_and_others_do_not():
    restart = sorted(k.name for k in catalogue().values() if k.requires_restart)
    assert restart == ["net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog"]


def test_every_entry_is_complete():
    for knob in catalogue().values():
        assert knob.type in VALUE_TYPES and knob.description.endswith(".")
        assert knob.family in ("sysctl", "block", "link")
        if knob.type in ("int", "triplet", "pair"):
            assert knob.minimum is not None and knob.maximum is not None and knob.minimum <= knob.maximum
        if knob.family == "block":
            assert knob.name.startswith("block.queue.")


def test_catalogue_returns_a_copy():
    first = catalogue()
    first.pop("net.core.somaxconn")
    assert "net.core.somaxconn" in catalogue()


@pytest.mark.parametrize("typo, suggestion", [("net.core.somaxcon", "net.core.somaxconn"),
                                              ("net.ipv4.tcp_rmen", "net.ipv4.tcp_rmem"),
                                              ("tcp_abort_on_overflow", "net.ipv4.tcp_abort_on_overflow")])
def test_unknown_knob_suggests_close_names(typo, suggestion):
    with pytest.raises(KnobError) as info:
        get_knob(typo)
    message = str(info.value)
    assert message.startswith(f"unknown knob {typo!r}; did you mean ") and suggestion in message
    assert "see `tunelab knobs list`" in message


def test_unknown_knob_without_close_names_still_points_to_the_list():
    with pytest.raises(KnobError, match=r"^unknown knob 'zzz'; see `tunelab knobs list`$"):
        get_knob("zzz")


# ---- plausibility against this machine (read-only) ----------------------------------------------

def _devices(directory: str) -> list[str]:
    return sorted(os.listdir(directory)) if os.path.isdir(directory) else []


def test_current_values_on_this_machine_validate(host_view):
    """Every catalogue knob that exists here must accept the value the kernel currently holds."""
    checked, problems = 0, []
    for knob in catalogue().values():
        devices = {"sysctl": [None], "block": _devices("/sys/block"), "link": _devices("/sys/class/net")}[knob.family]
        for device in devices:
            if not os.path.exists(knob.path(host_view, device)):
                continue
            try:
                knob.read(host_view, "server", device)
                checked += 1
            except KnobError as exc:
                problems.append(str(exc))
    assert problems == []
    if checked < 20:
        pytest.skip(f"only {checked} catalogue files exist on this machine")
