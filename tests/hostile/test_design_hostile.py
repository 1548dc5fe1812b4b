"""Hostile design files: commands, fio paths, resource limits, malformed YAML, unknown keys, fuzzing.

Every case goes through the real CLI (``tunelab plan`` / ``tunelab run`` in-process) and asserts
the absence of the effect (no marker file from a command, no store, no file written by fio), not
only the message. Nothing here changes this machine's knobs: ``run`` is only exercised on its
refusal path, and :func:`tunelab.runner.run_design` is replaced by a tripwire in case it were reached.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.conftest import assert_one_error
from tunelab.designs import load_design_text
from tunelab.designs import schema
from tunelab.errors import LoadError, TunelabError
from tunelab.loads.fio import FioLoad
from tunelab.paths import SCRATCH_DIR
from tunelab.targets import build_target

SCRATCH = Path(os.path.normpath(str(SCRATCH_DIR)))


def base_design(**overrides: Any) -> dict[str, Any]:
    design = {
        "name": "hostile",
        "target": {"type": "dry-run", "options": {}},
        "load": {"generator": "dnsperf", "profile": "low", "settings": {}},
        "warmup_s": 1, "measure_s": 2,
        "metrics": [{"name": "qps"}],
        "knobs": [{"name": "net.ipv4.tcp_fin_timeout", "levels": [60, 30]}],
        "design": {"type": "oat", "replicates": 1},
    }
    design.update(overrides)
    return design


def write(tmp_path: Path, data: Any, name: str = "d.yaml") -> Path:
    path = tmp_path / name
    if isinstance(data, (bytes, bytearray)):
        path.write_bytes(bytes(data))
    else:
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(autouse=True)
def no_trials(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tripwire: if a refusal ever failed, no trial (and so no command, no knob write) would run."""
    def tripwire(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("run_design was reached: the design was not refused")
    monkeypatch.setattr("tunelab.runner.run_design", tripwire)


# --------------------------------------------------------------------------------------------
# 1. commands named by a design


def marker_argv(marker: Path) -> list[str]:
    return ["touch", str(marker)]


COMMAND_TARGETS = [
    pytest.param("local", {}, "dns", id="local-dns"),
    pytest.param("local", {}, "http", id="local-http"),
    pytest.param("local", {"server_cpu": 0}, "iperf3", id="local-iperf3-pinned"),
    pytest.param("ssh", {"server": "root@192.0.2.1:22"}, "dns", id="ssh-dns"),
    pytest.param("ssh", {"server": "root@192.0.2.1", "client": "root@192.0.2.2"}, "iperf3", id="ssh-two-hosts"),
]


@pytest.mark.parametrize(("target", "options", "service"), COMMAND_TARGETS)
def test_plan_refuses_commands_without_the_flag(cli, tmp_path, target, options, service):
    marker = tmp_path / "MARKER"
    opts = {**options, "service_commands": {service: marker_argv(marker)}}
    path = write(tmp_path, base_design(target={"type": target, "options": opts}))
    result = cli("plan", path)
    assert_one_error(result, "target.options.service_commands", "--allow-design-commands")
    assert not marker.exists()


@pytest.mark.parametrize(("target", "options", "service"), COMMAND_TARGETS)
def test_run_refuses_commands_before_anything_happens(cli, tmp_path, target, options, service):
    marker, store = tmp_path / "MARKER", tmp_path / "store.sqlite"
    opts = {**options, "service_commands": {service: marker_argv(marker)}}
    path = write(tmp_path, base_design(target={"type": target, "options": opts}))
    result = cli("run", path, "--store", store, "--no-progress")
    assert_one_error(result, "target.options.service_commands", "--allow-design-commands")
    assert not marker.exists() and not store.exists()


@pytest.mark.parametrize("verb", ["quickstart", "refine"])
def test_other_verbs_refuse_commands(cli, tmp_path, verb):
    marker, store = tmp_path / "MARKER", tmp_path / "store.sqlite"
    path = write(tmp_path, base_design(target={"type": "local",
                                               "options": {"service_commands": {"dns": marker_argv(marker)}}}))
    args = ("quickstart", "--design", path, "--no-report") if verb == "quickstart" else \
        ("refine", path, "--store", store, "--budget", "2")
    result = cli(*args)
    assert_one_error(result, "service_commands", "--allow-design-commands")
    assert not marker.exists() and not store.exists()


def test_plan_with_the_flag_prints_every_command_and_runs_none(cli, tmp_path):
    marker = tmp_path / "MARKER"
    commands = {"dns": marker_argv(marker), "http": ["sh", "-c", f"echo pwned > {marker}"]}
    path = write(tmp_path, base_design(target={"type": "local", "options": {"service_commands": commands}}))
    result = cli("plan", path, "--allow-design-commands")
    assert result.status == 0, result.err
    lines = [line for line in result.out.splitlines() if line.startswith("command (runs as root)")]
    assert lines == [f"command (runs as root) target.options.service_commands.dns: touch {marker}",
                     f"command (runs as root) target.options.service_commands.http: sh -c 'echo pwned > {marker}'"]
    json_result = cli("plan", path, "--allow-design-commands", "--format", "json")
    assert len(yaml.safe_load(json_result.out)["commands"]) == 2
    assert not marker.exists()


def test_restore_factory_never_builds_a_target_with_commands(tmp_path):
    from tunelab.errors import SafetyError
    from tunelab.journal import restore_target as restore_build

    marker = tmp_path / "MARKER"
    spec = {"type": "local", "options": {"service_commands": {"dns": marker_argv(marker)}}}
    rebuilt = restore_build(spec)                       # restore drops command options: it never runs them
    assert rebuilt.service_commands == {}
    rebuilt.up()
    rebuilt.start_service("dns")
    rebuilt.down()
    assert not marker.exists()
    with pytest.raises(SafetyError, match="allow-design-commands"):
        build_target(spec)
    target = build_target(spec, allow_commands=True)   # only an explicit user decision builds it
    assert target.service_commands == {"dns": marker_argv(marker)} and not marker.exists()


HIDDEN_COMMANDS = [
    pytest.param({"type": "ssh", "options": {"server": "root@h", "connect_kwargs": {"sock": "nc evil 22"}}},
                 "target.options.connect_kwargs", id="ssh-sock"),
    pytest.param({"type": "ssh", "options": {"server": "root@h", "connect_kwargs": {"transport_factory": "x"}}},
                 "not allowed", id="ssh-transport-factory"),
    pytest.param({"type": "ssh", "options": {"server": "root@h", "connect_kwargs": {"ProxyCommand": "touch M"}}},
                 "not allowed", id="ssh-proxycommand"),
    pytest.param({"type": "ssh", "options": {"server": "root@h", "connect_kwargs": {"gss_auth": True}}},
                 "not allowed", id="ssh-gss"),
    pytest.param({"type": "ssh", "options": {"server": "root@h", "connect_socket": "nc evil 22"}},
                 "unknown option 'connect_socket'", id="ssh-connect-socket"),
    pytest.param({"type": "ssh", "options": {"server": "-oProxyCommand=touch M"}},
                 "target.options.server", id="ssh-server-option-injection"),
    pytest.param({"type": "ssh", "options": {"server": "root@h", "gateway": "touch M"}},
                 "unknown option 'gateway'", id="ssh-gateway"),
    pytest.param({"type": "lab", "options": {"services": "touch M"}},
                 "target.options.services", id="lab-services-string"),
    pytest.param({"type": "local", "options": {"service_commands": "touch M"}},
                 "must be of type", id="local-commands-string"),
    pytest.param({"type": "dry-run", "options": {"pre_command": ["touch", "M"]}},
                 "unknown option 'pre_command'", id="dry-run-unknown"),
]


@pytest.mark.parametrize(("target", "fragment"), HIDDEN_COMMANDS)
def test_no_other_target_option_carries_a_command(cli, tmp_path, monkeypatch, target, fragment):
    monkeypatch.chdir(tmp_path)
    result = cli("plan", write(tmp_path, base_design(target=target)), "--allow-design-commands")
    assert_one_error(result, fragment)
    assert not (tmp_path / "M").exists()


LOAD_COMMANDS = [
    pytest.param("wrk", {"script": "/tmp/evil.lua"}, "script", id="wrk-lua-script"),
    pytest.param("wrk", {"path": "/ -s /tmp/evil.lua"}, "path", id="wrk-path-with-space"),
    pytest.param("wrk", {"path": "/\r\nX-Evil: 1"}, "path", id="wrk-path-crlf"),
    pytest.param("fio", {"ioengine": "exec"}, "ioengine", id="fio-exec-engine"),
    pytest.param("fio", {"ioengine": "external:/tmp/evil.so"}, "ioengine", id="fio-external-engine"),
    pytest.param("fio", {"exec_prerun": "touch M"}, "exec_prerun", id="fio-exec-prerun"),
    pytest.param("fio", {"device_from_target": "/dev/sda", "filename": "/dev/sda"}, "load.settings",
                 id="fio-forged-device-marker"),
    pytest.param("dnsperf", {"query_file": "/etc/shadow"}, "query_file", id="dnsperf-query-file"),
    pytest.param("iperf3", {"bitrate": "1M --logfile /etc/passwd"}, "bitrate", id="iperf3-bitrate-injection"),
    pytest.param("iperf3", {"congestion": "--logfile=/etc/x"}, "congestion", id="iperf3-congestion-injection"),
]


@pytest.mark.parametrize(("generator", "settings_", "fragment"), LOAD_COMMANDS)
def test_no_load_setting_carries_a_command_or_file(cli, tmp_path, generator, settings_, fragment):
    metric = {"dnsperf": "qps", "wrk": "requests_per_s", "fio": "iops", "iperf3": "throughput_mbps"}[generator]
    design = base_design(load={"generator": generator, "settings": settings_}, metrics=[{"name": metric}])
    result = cli("plan", write(tmp_path, design))
    assert_one_error(result, fragment)
    assert not (tmp_path / "M").exists()


# --------------------------------------------------------------------------------------------
# 2. fio confinement


def fio_design(filename: str, rw: str = "randwrite") -> dict[str, Any]:
    return base_design(load={"generator": "fio", "settings": {"filename": filename, "rw": rw, "size": "16M"}},
                       metrics=[{"name": "iops"}])


BAD_FIO_PATHS = [
    pytest.param("/etc/passwd", "outside", id="etc-passwd"),
    pytest.param("//dev/sda", "outside", id="double-slash-dev"),
    pytest.param("/dev/sda", "outside", id="dev-sda"),
    pytest.param("/dev/loop0", "outside", id="dev-loop-named"),
    pytest.param("/dev/nvme0n1", "outside", id="dev-nvme"),
    pytest.param(f"{SCRATCH}/a:/etc/passwd", "list of several files", id="colon-list"),
    pytest.param("a:b", "list of several files", id="relative-colon"),
    pytest.param("fio.dat", "not an absolute path", id="relative"),
    pytest.param(f"{SCRATCH}/../../../etc/passwd", "'..'", id="dotdot"),
    pytest.param(f"{SCRATCH}/x/../../y", "'..'", id="dotdot-inner"),
    pytest.param(f"{SCRATCH}", "outside", id="scratch-itself"),
    pytest.param(f"{SCRATCH}-evil/f", "outside", id="scratch-prefix-sibling"),
    pytest.param("/proc/self/mem", "outside", id="proc-mem"),
    pytest.param(f"{SCRATCH}/f\nx", "control", id="newline"),
    pytest.param(f"{SCRATCH}/f\x00x", "control", id="nul"),
    pytest.param("@link", "outside", id="other-symbol"),
]


@pytest.mark.parametrize("rw", ["randwrite", "read"])
@pytest.mark.parametrize(("filename", "fragment"), BAD_FIO_PATHS)
def test_fio_paths_outside_the_scratch_dir_are_refused(cli, tmp_path, filename, fragment, rw):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    before = victim.stat().st_mtime_ns
    result = cli("plan", write(tmp_path, fio_design(filename, rw)))
    assert_one_error(result, "load.settings.filename", fragment, "@disk")
    assert victim.read_text() == "precious" and victim.stat().st_mtime_ns == before


@pytest.mark.parametrize(("filename", "fragment"), BAD_FIO_PATHS[:6])
def test_fio_command_refuses_again_defence_in_depth(filename, fragment):
    with pytest.raises(LoadError, match="scratch|list of several"):
        FioLoad().command({"filename": filename, "rw": "randwrite", "ioengine": "psync",
                           "device_from_target": True}, 5, "x")


def test_fio_symlink_escaping_the_scratch_dir_is_refused(cli, tmp_path, monkeypatch):
    scratch, victim = tmp_path / "scratch", tmp_path / "victim"
    scratch.mkdir()
    victim.write_text("precious")
    (scratch / "link").symlink_to(victim)
    monkeypatch.setattr("tunelab.loads.fio.SCRATCH_DIR", scratch)
    result = cli("plan", write(tmp_path, fio_design(str(scratch / "link"))))
    assert_one_error(result, "load.settings.filename", "symlink")
    assert victim.read_text() == "precious"


def test_fio_prepare_checks_the_path_on_the_target_and_creates_nothing_else(tmp_path, monkeypatch):
    from tunelab.targets.base import CommandResult

    scratch = tmp_path / "scratch"
    monkeypatch.setattr("tunelab.loads.fio.SCRATCH_DIR", scratch)
    ran: list[list[str]] = []

    class Target:   # answers realpath as if scratch/f were a symlink to /etc/passwd
        def run(self, host, argv, timeout_s, cpu=None):
            ran.append(list(argv))
            out = "/etc/passwd\n" if argv[0] == "realpath" else ""
            return CommandResult(tuple(argv), 0, out, "", 0.0)

    with pytest.raises(LoadError, match="symlink"):
        FioLoad().prepare(Target(), {"filename": str(scratch / "f"), "ioengine": "psync"})
    assert [a[0] for a in ran] == ["mkdir", "realpath"] and not any(a[0] == "fio" for a in ran)


def test_fio_file_in_the_scratch_dir_is_accepted(cli, tmp_path):
    result = cli("plan", write(tmp_path, fio_design(f"{SCRATCH}/fio.dat")))
    assert result.status == 0, result.err


# --------------------------------------------------------------------------------------------
# 4. bounded resources


def knob_list(n: int) -> list[dict[str, Any]]:
    names = ["net.ipv4.tcp_fin_timeout", "net.core.somaxconn", "net.ipv4.tcp_syncookies", "net.ipv4.tcp_timestamps"]
    return [{"name": names[i % len(names)], "host": ("server", "client")[i // len(names) % 2],
             "levels": [60, 30]} for i in range(n)]


LIMITS = [
    pytest.param({"name": "a" * 65}, "MAX_NAME_LENGTH", id="name-too-long"),
    pytest.param({"name": "--all"}, "must start with a letter or digit", id="name-option-all"),
    pytest.param({"name": "-x"}, "must start with a letter or digit", id="name-option-x"),
    pytest.param({"name": "_x"}, "must start with a letter or digit", id="name-underscore"),
    pytest.param({"name": "../etc"}, "must start with a letter or digit", id="name-traversal"),
    pytest.param({"name": "caf\u00e9"}, "a-z, 0-9", id="name-unicode"),
    pytest.param({"warmup_s": 3601}, "MAX_DURATION_S", id="warmup-too-long"),
    pytest.param({"measure_s": 1e300}, "MAX_DURATION_S", id="measure-1e300"),
    pytest.param({"measure_s": 10**400}, "finite", id="measure-huge-int"),
    pytest.param({"measure_s": float("nan")}, "finite", id="measure-nan"),
    pytest.param({"design": {"type": "oat", "replicates": 10**8}}, "MAX_REPLICATES", id="replicates-1e8"),
    pytest.param({"design": {"type": "oat", "replicates": 2, "blocks": 10**6}}, "MAX_REPLICATES", id="blocks"),
    pytest.param({"design": {"type": "oat", "seed": 10**30}}, "MAX_SEED", id="seed"),
    pytest.param({"design": {"type": "latin_hypercube", "options": {"samples": 10**7}}}, "MAX_OPTION_VALUE",
                 id="lhs-samples"),
    pytest.param({"design": {"type": "full_factorial", "options": {"baseline_runs": 10**6}}}, "MAX_OPTION_VALUE",
                 id="baseline-runs"),
    pytest.param({"design": {"type": "oat", "replicates": 1000}, "knobs": [
        {"name": "net.core.somaxconn", "low": 1, "high": 1000, "step": 1}]}, "MAX_PLAN_RUNS", id="plan-runs"),
    pytest.param({"design": {"type": "full_factorial"}, "knobs": [
        {"name": "net.core.somaxconn", "host": h, "low": 1, "high": 100, "step": 1} for h in ("server", "client")]
        + [{"name": "net.ipv4.tcp_fin_timeout", "low": 1, "high": 100, "step": 1}]}, "MAX_PLAN_RUNS",
        id="factorial-product"),
    pytest.param({"knobs": [{"name": "net.core.somaxconn", "levels": list(range(1, 1002))}]}, "MAX_LEVELS",
                 id="levels-list"),
    pytest.param({"knobs": [{"name": "net.core.somaxconn", "low": 0, "high": 2**31 - 1, "step": 1}]}, "MAX_LEVELS",
                 id="levels-range-step"),
    pytest.param({"knobs": [{"name": "net.core.somaxconn", "low": 1, "high": 2**31 - 1, "n": 10**9}]}, "MAX_LEVELS",
                 id="levels-range-n"),
    pytest.param({"knobs": knob_list(65)}, "MAX_KNOBS", id="knobs"),
    pytest.param({"metrics": [{"name": f"m{i}", "direction": "maximize"} for i in range(33)]}, "MAX_METRICS",
                 id="metrics"),
    pytest.param({"load": {"generator": "dnsperf", "settings": {"records": 10**9}}}, "records", id="dnsperf-records"),
    pytest.param({"load": {"generator": "dnsperf", "settings": {"threads": 10**6}}}, "threads", id="dnsperf-threads"),
    pytest.param({"load": {"generator": "fio", "settings": {"filename": f"{SCRATCH}/f", "size": "10T"}},
                  "metrics": [{"name": "iops"}]}, "size", id="fio-size"),
    pytest.param({"load": {"generator": "fio", "settings": {"numjobs": 100000}}, "metrics": [{"name": "iops"}]},
                 "numjobs", id="fio-numjobs"),
]


@pytest.mark.parametrize(("overrides", "fragment"), LIMITS)
def test_limits_are_one_clear_error(cli, tmp_path, overrides, fragment):
    start = time.monotonic()
    result = cli("plan", write(tmp_path, base_design(**overrides)))
    assert_one_error(result, fragment)
    assert time.monotonic() - start < 5
    assert not list(tmp_path.glob("*.sqlite"))


def test_limit_error_names_path_limit_and_value(cli, tmp_path):
    result = cli("plan", write(tmp_path, base_design(design={"type": "oat", "replicates": 100000000})))
    assert_one_error(result, "design.replicates", "MAX_REPLICATES=1000", "100000000")


# --------------------------------------------------------------------------------------------
# malformed files: YAML, bytes, sizes

BILLION_LAUGHS = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x, x]"]
                           + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]"
                              for i in range(8)]) + "\n"

MALFORMED = [
    pytest.param(BILLION_LAUGHS, "MAX_YAML_NODES", id="billion-laughs"),
    pytest.param("x: " + "[" * 5000 + "]" * 5000 + "\n", "nesting", id="deep-nesting"),
    pytest.param("a: &a [*a]\n", "MAX_YAML_DEPTH", id="recursive-alias"),
    pytest.param("name: x\nname: y\n", "duplicate key", id="duplicate-key"),
    pytest.param("name: [unclosed\n", "malformed YAML", id="unclosed-bracket"),
    pytest.param("name:\tx\n\tload: 1\n", "malformed YAML", id="tabs"),
    pytest.param("!!python/object/apply:os.system ['touch M']\n", "must be a mapping", id="python-object-tag"),
    pytest.param("name: !!python/name:os.system\n", "malformed YAML", id="python-name-tag"),
    pytest.param("name: !!int abc\n", "cannot read the value", id="bad-int-tag"),
    pytest.param("name: !!float x\n", "cannot read the value", id="bad-float-tag"),
    pytest.param("name: !!timestamp 2020-99-99\n", "cannot read the value", id="bad-timestamp"),
    pytest.param("measure_s: " + "9" * 5000 + "\n", "cannot read the value", id="5000-digit-int"),
    pytest.param("base: &b {name: x}\n<<: *b\n", "malformed YAML", id="merge-key"),
    pytest.param("? [a, b]\n: 1\n", "plain string", id="complex-key"),
    pytest.param("name: x\x00\n", "malformed YAML", id="nul-byte"),
    pytest.param("name: x\x1b[31m\n", "malformed YAML", id="escape-sequence"),
    pytest.param("", "required key `name`", id="empty-file"),
    pytest.param("# only a comment\n", "required key `name`", id="only-comment"),
    pytest.param("- a\n- b\n", "must be a mapping", id="top-level-list"),
    pytest.param("just text\n", "must be a mapping", id="top-level-scalar"),
    pytest.param("--- {a: 1}\n--- {b: 2}\n", "malformed YAML", id="two-documents"),
    pytest.param("name: !!binary aGVsbG8=\nload: {generator: dnsperf}\nmetrics: [{name: qps}]\nknobs: []\n"
                 "design: {type: oat}\n", "name: must be a non-empty string", id="binary-name"),
    pytest.param("1: x\n", "unknown key 1", id="int-key"),
    pytest.param("name: \u202etxt.exe\n", "required key", id="bidi-name-first-missing-keys"),
]


@pytest.mark.parametrize(("text", "fragment"), MALFORMED)
def test_malformed_yaml_is_one_error(cli, tmp_path, monkeypatch, text, fragment):
    monkeypatch.chdir(tmp_path)
    start = time.monotonic()
    result = cli("plan", write(tmp_path, text))
    assert_one_error(result, fragment)
    assert time.monotonic() - start < 5
    assert not (tmp_path / "M").exists()


BAD_BYTES = [
    pytest.param(b"name: \xff\xfe\n", "not UTF-8", id="invalid-utf8"),
    pytest.param(b"\xef\xbb\xbf" + b"x" * (schema.MAX_FILE_BYTES + 1), "MAX_FILE_BYTES", id="huge-with-bom"),
    pytest.param(b"# " + b"a" * (50 * 2**20) + b"\n", "MAX_FILE_BYTES", id="50MB-comment"),
    pytest.param(b"knobs:\n" + b"  - {name: net.core.somaxconn, levels: [1]}\n" * 40000, "MAX_FILE_BYTES",
                 id="huge-knob-list"),
]


@pytest.mark.parametrize(("data", "fragment"), BAD_BYTES)
def test_bad_bytes_and_huge_files_are_one_error(cli, tmp_path, data, fragment):
    start = time.monotonic()
    result = cli("plan", write(tmp_path, data))
    assert_one_error(result, fragment)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom"])
def test_endless_device_as_design_is_cut_at_the_limit(cli, path):
    result = cli("plan", path)
    assert result.status == 2 and len(result.error_lines) == 1


# --------------------------------------------------------------------------------------------
# 5. plan validates what run would: unknown keys, options, settings, wrong types

UNKNOWN = [
    pytest.param({"nmae": "x"}, "unknown key 'nmae'", id="top-key"),
    pytest.param({"knobs": [{"name": "net.core.somaxconn", "levles": [1]}]}, "knobs[0].levles", id="knob-key"),
    pytest.param({"target": {"type": "lab", "options": {"bottleneck": 200}}}, "target.options.bottleneck",
                 id="lab-option-typo"),
    pytest.param({"target": {"type": "lab", "options": {"bottleneck_mbit": "fast"}}}, "must be of type",
                 id="lab-option-type"),
    pytest.param({"target": {"type": "local", "options": {"server_cpu": "0"}}}, "target.options.server_cpu",
                 id="local-cpu-type"),
    pytest.param({"target": {"type": "ssh", "options": {}}}, "option 'server' is required", id="ssh-missing-server"),
    pytest.param({"target": {"type": "ssh", "options": {"server": 22}}}, "target.options.server", id="ssh-server-int"),
    pytest.param({"target": {"type": "simulator", "options": {"cv": [1]}}}, "target.options.cv", id="sim-cv-type"),
    pytest.param({"target": {"type": "dry-run", "options": {"quiet": "yes"}}}, "target.options.quiet",
                 id="dry-run-quiet-type"),
    pytest.param({"target": {"type": "nope"}}, "unknown target type", id="target-type"),
    pytest.param({"load": {"generator": "dnsperf", "settings": {"clinets": 4}}}, "load.settings.clinets",
                 id="setting-typo"),
    pytest.param({"load": {"generator": "dnsperf", "settings": {"clients": "many"}}}, "load.settings.clients",
                 id="setting-type"),
    pytest.param({"load": {"generator": "dnsperf", "settings": {"clients": True}}}, "load.settings.clients",
                 id="setting-bool"),
    pytest.param({"load": {"generator": "dnsperf", "settings": {"mode": "sctp"}}}, "load.settings.mode",
                 id="setting-choice"),
    pytest.param({"load": {"generator": "dnsperf", "profile": "nope"}}, "load.profile", id="profile"),
    pytest.param({"load": {"generator": "wrk", "settings": {"threads": 8, "connections": 2}},
                  "metrics": [{"name": "requests_per_s"}]}, "load.settings.connections", id="wrk-combination"),
    pytest.param({"load": {"generator": "dnsperf", "settings": {"port": 70000}}}, "load.settings.port",
                 id="port-range"),
    pytest.param({"load": {"generator": "dnsperf", "settings": ["clients", 4]}}, "load.settings", id="settings-list"),
    pytest.param({"design": {"type": "oat", "replicates": "3"}}, "design.replicates", id="replicates-string"),
    pytest.param({"design": {"type": "oat", "replicates": 2.5}}, "design.replicates", id="replicates-float"),
    pytest.param({"warmup_s": True}, "warmup_s", id="warmup-bool"),
    pytest.param({"warmup_s": -1}, "warmup_s", id="warmup-negative"),
    pytest.param({"knobs": [{"name": "net.core.somaxconn\x00", "levels": [1]}]}, "knobs[0].name", id="knob-nul"),
    pytest.param({"knobs": [{"name": "net.core.somaxconn", "levels": [{"a": 1}]}]}, "knobs[0].levels[0]",
                 id="level-mapping"),
]


@pytest.mark.parametrize(("overrides", "fragment"), UNKNOWN)
def test_plan_refuses_what_run_would_refuse(cli, tmp_path, overrides, fragment):
    result = cli("plan", write(tmp_path, base_design(**overrides)))
    assert_one_error(result, fragment)


def test_valid_target_options_pass_plan_without_building_anything(cli, tmp_path):
    design = base_design(target={"type": "ssh", "options": {"server": "root@192.0.2.1:22",
                                                            "connect_kwargs": {"look_for_keys": False}}})
    result = cli("plan", write(tmp_path, design))
    assert result.status == 0, result.err      # no connection was attempted (192.0.2.1 is TEST-NET)


# --------------------------------------------------------------------------------------------
# property-based fuzzing of the parser

YAMLISH = st.lists(st.sampled_from(list("{}[]:,-&*!|>'\"#%@` \n\tab01.~?<=\x00\x1b\u00e9")
                                   + ["name", "knobs", "load", "design", "&a ", "*a", "!!int ", "!!python/", "<<"]),
                   max_size=120).map("".join)

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                    st.floats(allow_nan=True), st.text(max_size=20))
KEYS = st.sampled_from(list(schema.TOP_KEYS) + list(schema.KNOB_KEYS) + ["type", "options", "settings", "generator",
                                                                          "replicates", "levels", "x"])
nested = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(KEYS, inner, max_size=5)), max_leaves=25)


def _parse_quietly(text: str) -> None:
    start = time.monotonic()
    try:
        load_design_text(text, source="fuzz.yaml")
    except TunelabError as exc:
        assert "\n" not in str(exc)
    assert time.monotonic() - start < 2


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(YAMLISH)
def test_fuzz_yamlish_text_gives_a_design_or_a_design_error(text):
    _parse_quietly(text)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(KEYS, nested, max_size=8))
def test_fuzz_nested_structures_give_a_design_or_a_design_error(data):
    full = {**base_design(), **data}
    _parse_quietly(yaml.safe_dump(full))
    _parse_quietly(yaml.safe_dump(data))
