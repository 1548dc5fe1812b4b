"""Validation, text conversion and parsing of each knob value type."""
from __future__ import annotations

import numpy as np
import pytest

from tunelab.errors import KnobError
from tunelab.knobs import get_knob
from tunelab.knobs.base import Knob


def rejected(knob_name: str, value: object) -> str:
    with pytest.raises(KnobError) as info:
        get_knob(knob_name).validate(value)
    message = str(info.value)
    assert message.startswith(f"{knob_name}: value {value!r}"), message
    return message


# ---- int -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [(4096, 4096), ("4096", 4096), (" 128\n", 128), (np.int64(16), 16),
                                             (1024.0, 1024), (0, 0), (2**31 - 1, 2**31 - 1)])
def test_int_accepts_integers_in_range(value, expected):
    result = get_knob("net.core.somaxconn").validate(value)
    assert result == expected and type(result) is int


@pytest.mark.parametrize("value, rule", [(-1, "below the minimum 0"), (2**31, "above the maximum 2147483647"),
                                         (1.5, "not a whole number"), ("12k", "expected an integer"),
                                         (True, "not a boolean"), (None, "expected an integer")])
def test_int_rejects_with_rule_and_range(value, rule):
    message = rejected("net.core.somaxconn", value)
    assert rule in message
    assert "integer 0..2147483647 (connections)" in message


def test_int_ranges_follow_kernel_limits():
    swappiness = get_knob("vm.swappiness")
    assert swappiness.validate(200) == 200
    assert "above the maximum 200" in rejected("vm.swappiness", 201)
    assert "below the minimum 1" in rejected("net.core.dev_weight", 0)
    assert get_knob("net.ipv4.tcp_adv_win_scale").validate(-2) == -2


# ---- bool ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [(True, True), (False, False), (1, True), (0, False), ("true", True),
                                             ("False", False), ("1", True), ("0\n", False), ("yes", True),
                                             ("off", False)])
def test_bool_accepts_yaml_and_kernel_spellings(value, expected):
    assert get_knob("net.ipv4.tcp_abort_on_overflow").validate(value) is expected


@pytest.mark.parametrize("value", [2, -1, "maybe", 0.5, None])
def test_bool_rejects_other_values(value):
    assert "expected a boolean" in rejected("net.ipv4.tcp_abort_on_overflow", value)


def test_bool_kernel_text_is_one_or_zero():
    knob = get_knob("net.ipv4.tcp_sack")
    assert (knob.to_text(True), knob.to_text("false")) == ("1", "0")
    assert knob.from_text("1\n") is True and knob.from_text("0\n") is False


# ---- enum ----------------------------------------------------------------------------------------

def test_enum_accepts_choices_and_rejects_others():
    cc = get_knob("net.ipv4.tcp_congestion_control")
    assert cc.validate("bbr") == "bbr" and cc.validate(" cubic ") == "cubic"
    message = rejected("net.ipv4.tcp_congestion_control", "turbo")
    assert "'turbo' is not one of the choices" in message and "reno" in message and "cubic" in message
    assert "expected one of the names" in rejected("net.ipv4.tcp_congestion_control", 3)


def test_block_scheduler_choices_and_qdisc():
    assert set(get_knob("block.queue.scheduler").choices) == {"none", "mq-deadline", "bfq", "kyber"}
    assert get_knob("net.core.default_qdisc").validate("fq_codel") == "fq_codel"


@pytest.mark.parametrize("text, expected", [("[mq-deadline] none\n", "mq-deadline"), ("none [mq-deadline] kyber bfq",
                                            "mq-deadline"), ("mq-deadline kyber [bfq] none\n", "bfq"),
                                            ("[none] mq-deadline", "none"), ("none\n", "none")])
def test_scheduler_selection_is_parsed_from_sysfs_text(text, expected):
    assert get_knob("block.queue.scheduler").from_text(text) == expected


def test_enum_text_with_several_names_and_no_brackets_is_refused():
    with pytest.raises(KnobError, match="cannot tell the selected value"):
        get_knob("block.queue.scheduler").from_text("none mq-deadline")


# ---- triplet and pair ----------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["4096 131072 6291456", "4096\t131072\t6291456\n", [4096, 131072, 6291456],
                                   (4096, "131072", 6291456.0), "4096,131072,6291456"])
def test_triplet_accepts_text_and_sequences(value):
    assert get_knob("net.ipv4.tcp_rmem").validate(value) == (4096, 131072, 6291456)


def test_triplet_with_two_numbers_is_rejected_clearly():
    message = rejected("net.ipv4.tcp_rmem", "4096 131072")
    assert "expected exactly 3 integers, got 2" in message
    assert "3 integers 'min default max'" in message
    assert "expected exactly 3 integers, got 4" in rejected("net.ipv4.tcp_wmem", [1, 2, 3, 4])


def test_triplet_order_min_default_max_is_enforced():
    message = rejected("net.ipv4.tcp_rmem", "4096 8192 1024")
    assert "min <= default <= max must hold, but default 8192 > max 1024" in message
    assert get_knob("net.ipv4.tcp_rmem").validate("4096 4096 4096") == (4096, 4096, 4096)
    assert "low <= pressure <= high" in rejected("net.ipv4.tcp_mem", "300 200 400")


def test_triplet_elements_are_range_checked_and_typed():
    assert "min 0 is below the minimum 1" in rejected("net.ipv4.tcp_rmem", "0 131072 6291456")
    assert "expected an integer" in rejected("net.ipv4.tcp_rmem", "4096 lots 6291456")
    assert "expected 3 integers" in rejected("net.ipv4.tcp_rmem", 4096)


def test_triplet_round_trips_through_kernel_text():
    knob = get_knob("net.ipv4.tcp_wmem")
    assert knob.to_text((4096, 16384, 4194304)) == "4096 16384 4194304"
    assert knob.from_text("4096\t16384\t4194304\n") == (4096, 16384, 4194304)


def test_port_range_is_an_ordered_pair():
    knob = get_knob("net.ipv4.ip_local_port_range")
    assert knob.type == "pair" and knob.length == 2
    assert knob.validate("32768 60999") == (32768, 60999)
    assert knob.from_text("32768\t60999\n") == (32768, 60999)
    assert "low <= high must hold" in rejected("net.ipv4.ip_local_port_range", [60999, 32768])
    assert "expected exactly 2 integers, got 3" in rejected("net.ipv4.ip_local_port_range", "1 2 3")
    assert "above the maximum 65535" in rejected("net.ipv4.ip_local_port_range", "1024 70000")


def test_value_read_from_the_kernel_outside_the_range_names_the_catalogue():
    with pytest.raises(KnobError, match="catalogue entry is too narrow"):
        get_knob("vm.swappiness").from_text("250\n")


def test_malformed_catalogue_entries_are_refused():
    with pytest.raises(KnobError, match="type 'float' is unknown"):
        Knob(name="x.y", family="sysctl", type="float", description="", scope="host")
    with pytest.raises(KnobError, match="scope 'global' is unknown"):
        Knob(name="x.y", family="sysctl", type="int", description="", scope="global")
    with pytest.raises(KnobError, match="needs choices"):
        Knob(name="x.y", family="sysctl", type="enum", description="", scope="host")


def test_numpy_and_pandas_scalars_from_plan_frames_are_accepted():
    assert get_knob("net.ipv4.tcp_sack").validate(np.bool_(False)) is False
    assert get_knob("net.core.somaxconn").validate(np.float64(128.0)) == 128
    assert get_knob("net.ipv4.tcp_rmem").validate(np.array([4096, 8192, 16384])) == (4096, 8192, 16384)
    assert "not a boolean" in rejected("net.core.somaxconn", np.bool_(True))
