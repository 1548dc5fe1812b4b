"""The CLI's string parsing (tunelab/cli/parsing.py): what `tunelab validate` and `tunelab report -p` read."""
from __future__ import annotations

from pathlib import Path

import pytest

from tunelab.cli.parsing import parse_baseline, parse_config, parse_options, parse_parameters
from tunelab.designs.config_files import read_config_file
from tunelab.errors import DesignError, TunelabError


def test_a_sysctl_d_file_and_items_merge_in_order(tmp_path: Path) -> None:
    conf = tmp_path / "99-tuned.conf"
    conf.write_text("# tuned\nnet.core.somaxconn = 1024\n; old style comment\nnet.ipv4.tcp_rmem = 4096 131072 6291456\n")
    assert parse_config([str(conf), "net.core.somaxconn=2048"]) == {
        "net.core.somaxconn": 2048, "net.ipv4.tcp_rmem": "4096 131072 6291456"}


def test_a_design_fragment_gives_its_baselines_by_knob_id(tmp_path: Path) -> None:
    fragment = tmp_path / "winner.yaml"
    fragment.write_text("knobs:\n  - {name: link.mtu, device: veth0, host: client, baseline: 1400}\n"
                        "  - {name: net.ipv4.tcp_rmem, baseline: [4096, 131072, 6291456]}\n")
    assert read_config_file(fragment) == {"link.mtu[veth0]@client": 1400,
                                          "net.ipv4.tcp_rmem": (4096, 131072, 6291456)}


def test_bad_items_are_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DesignError, match="does not exist"):
        parse_config([str(tmp_path / "missing.conf")])
    with pytest.raises(DesignError, match="KNOB=VALUE"):
        parse_config(["=5"])
    with pytest.raises(DesignError, match="--load-setting 'rate' must look like KEY=VALUE"):
        parse_options(["rate"], "--load-setting")
    with pytest.raises(TunelabError, match="NAME a Python identifier"):
        parse_parameters(["1x=3"])


def test_the_baseline_is_current_unless_values_are_given() -> None:
    assert parse_baseline([]) == parse_baseline(["current"]) == "current"
    assert parse_baseline(["current", "net.core.somaxconn=128"]) == {"net.core.somaxconn": 128}


def test_an_option_may_be_a_yaml_mapping_as_an_operator_writes_it() -> None:
    # issue 26: `--target-option connect_kwargs={key_filename: ...}` was rejected as text
    options = parse_options(["connect_kwargs={key_filename: /root/.ssh/tunelab, port: 2222}",
                             "service_commands={dns: {restart: systemctl restart nsd}}", 'hosts=["a", "b"]'])
    assert options == {"connect_kwargs": {"key_filename": "/root/.ssh/tunelab", "port": 2222},
                       "service_commands": {"dns": {"restart": "systemctl restart nsd"}}, "hosts": ["a", "b"]}
    with pytest.raises(DesignError, match="connect_kwargs.*not a valid mapping") as caught:
        parse_options(["connect_kwargs={key_filename: [unclosed}"])
    assert "\n" not in str(caught.value)
