"""Load level as a factor: ``load.profile: [low, overload]`` crosses every design row with every profile.

Checked here: the schema (a name or a list of distinct known names; one error naming an unknown
profile and the load's profiles), the plan (each row once per profile, counts, size limits, the
OAT baseline interleaving within each profile, reproducible order), single-profile designs
unchanged (against plans and hashes recorded in data/examples by the code before this feature),
and the runner running each trial with its own profile's settings.
"""
from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pandas as pd
import pytest

from tunelab.designs import Design, LoadSpec, load_design, load_design_text, make_plan, plan_summary
from tunelab.errors import DesignError, LoadError
from tunelab.store import Store
from tunelab.model import DesignType

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "data" / "examples"
PROFILES = {"generator": "dnsperf", "profile": ["low", "overload"], "settings": {}}
TWO_BY_TWO = [{"name": "net.core.somaxconn", "levels": [4096, 128]},
              {"name": "net.ipv4.tcp_abort_on_overflow", "levels": [0, 1]}]
OAT_KNOBS = [{"name": "net.core.somaxconn", "levels": [4096, 128, 16]},
             {"name": "net.ipv4.tcp_fin_timeout", "levels": [60, 10]},
             {"name": "net.ipv4.tcp_syncookies", "levels": [1, 0]}]


def _knob_ids(plan: pd.DataFrame) -> list[str]:
    return [c for c in plan.columns if c.startswith("net.")]


def _crossed(make_design: Callable[..., Design], **overrides: Any) -> tuple[Design, Design]:
    """The same design with one profile and with two."""
    single = make_design(load={**PROFILES, "profile": "overload"}, **overrides)
    crossed = make_design(load=PROFILES, **overrides)
    return single, crossed


# ---- schema -------------------------------------------------------------------------------------


def test_profile_list_is_parsed_and_a_single_name_keeps_its_meaning(make_design) -> None:
    crossed = make_design(load=PROFILES)
    assert crossed.load.profiles == ("low", "overload") and crossed.load.crossed
    assert crossed.load.profile == "low"         # the first: what a single-load phase (refine, validate) uses
    single = make_design(load={**PROFILES, "profile": "overload"})
    assert (single.load.profile, single.load.profiles, single.load.crossed) == ("overload", ("overload",), False)
    none = make_design(load={**PROFILES, "profile": None})
    assert (none.load.profile, none.load.profiles) == (None, ())
    assert crossed.to_dict()["load"]["profile"] == ["low", "overload"]
    assert single.to_dict()["load"]["profile"] == "overload"
    assert crossed.design_hash != make_design(load={**PROFILES, "profile": ["overload", "low"]}).design_hash


@pytest.mark.parametrize("profile, where, words", [
    (["low", "heavy"], "load.profile[1]", ["no profile 'heavy'", "known: low, open_loop, overload"]),
    ("heavy", "load.profile", ["no profile 'heavy'", "known: low, open_loop, overload"]),
    (["low", "low"], "load.profile[1]", ["listed twice"]),
    (["low"], "load.profile", ["at least two"]),
    (["low", 3], "load.profile[1]", ["non-empty string"]),
], ids=["unknown-in-list", "unknown-single", "repeated", "one-in-list", "not-a-name"])
def test_a_bad_profile_is_one_error_naming_it(make_design, profile: Any, where: str, words: list[str]) -> None:
    with pytest.raises(DesignError) as info:
        make_design(load={**PROFILES, "profile": profile})
    message = str(info.value)
    assert "\n" not in message and f": {where}: " in message
    for word in words:
        assert word in message


def test_range_designs_refuse_a_profile_list(make_design) -> None:
    knobs = [{"name": "net.core.somaxconn", "low": 16, "high": 4096}]
    with pytest.raises(DesignError, match=r"load\.profile: .*not supported by latin_hypercube"):
        make_design(load=PROFILES, knobs=knobs, design={"type": "latin_hypercube", "options": {"samples": 4}})


def test_the_plan_size_limit_counts_the_profiles(make_design, two_level, monkeypatch) -> None:
    from tunelab.designs import schema

    knobs = two_level(6)                                     # 64 runs per profile and replicate
    monkeypatch.setattr(schema, "MAX_PLAN_RUNS", 100)
    make_design(load={**PROFILES, "profile": "low"}, knobs=knobs, design={"type": "full_factorial"})
    with pytest.raises(DesignError, match=r"the plan would have 128 runs \(128 per replicate"):
        make_design(load=PROFILES, knobs=knobs, design={"type": "full_factorial"})


# ---- plan ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("design", [
    {"type": "full_factorial", "replicates": 3, "blocks": 3, "seed": 5},
    {"type": "oat", "replicates": 2, "seed": 5, "options": {"baseline_every": 2}},
], ids=["factorial", "oat"])
def test_every_design_row_runs_once_per_profile(make_design, design: dict) -> None:
    knobs = TWO_BY_TWO if design["type"] != "oat" else OAT_KNOBS
    single, crossed = _crossed(make_design, knobs=knobs, design=design)
    one, both = make_plan(single), make_plan(crossed)
    assert "profile" not in one.columns
    assert len(both) == 2 * len(one)
    assert plan_summary(crossed, both)["runs_per_replicate"] == 2 * plan_summary(single, one)["runs_per_replicate"]
    assert Counter(both["profile"]) == {"low": len(one), "overload": len(one)}
    ids = _knob_ids(one)
    rows = lambda frame: Counter(map(tuple, frame[["replicate", "block", "is_baseline", *ids]].astype(str).values))
    for profile in ("low", "overload"):
        assert rows(both[both["profile"] == profile]) == rows(one)
    assert sorted(both["run_id"]) == list(range(len(both))) and sorted(both["run_order"]) == list(range(len(both)))
    # a configuration keeps its config_id under every profile (config_id numbers knob settings)
    assert both.groupby(ids)["config_id"].nunique().eq(1).all()
    summary = plan_summary(crossed, both)
    assert summary["design"]["load"] == {"generator": "dnsperf", "profile": ["low", "overload"],
                                         "profiles": ["low", "overload"]}
    assert summary["runs"] == len(both)


def test_oat_keeps_the_baseline_interleaving_within_each_profile(make_design) -> None:
    design = make_design(load=PROFILES, knobs=OAT_KNOBS, design={"type": "oat", "replicates": 3, "seed": 11,
                                                                 "options": {"baseline_every": 2}})
    plan = make_plan(design)
    varied_per_profile = sum(len(k["levels"]) - 1 for k in OAT_KNOBS)
    for _, replicate in plan.groupby("replicate"):
        runs = replicate.sort_values("run_order")
        assert runs["run_order"].diff().dropna().eq(1).all()          # a replicate's runs stay together
        assert bool(runs["is_baseline"].iloc[0])                      # and open with a baseline run
        groups = (runs["is_baseline"]).cumsum()
        for _, group in runs.groupby(groups):
            assert group["profile"].nunique() == 1                    # a baseline and the varied runs it opens
            assert 1 <= len(group) - 1 <= 2                           # at most baseline_every varied runs
        for profile in ("low", "overload"):
            mine = runs[runs["profile"] == profile]
            assert (~mine["is_baseline"]).sum() == varied_per_profile
    # the profiles are shuffled, not blocked: both alternate within a replicate somewhere in the plan
    switches = plan.sort_values("run_order")["profile"].ne(plan.sort_values("run_order")["profile"].shift()).sum()
    assert switches > 3 * 2


def test_the_order_is_reproducible_and_depends_on_the_seed(make_design) -> None:
    design = {"type": "full_factorial", "replicates": 2, "blocks": 1, "seed": 7}
    a = make_plan(make_design(load=PROFILES, knobs=TWO_BY_TWO, design=design))
    b = make_plan(make_design(load=PROFILES, knobs=TWO_BY_TWO, design=design))
    c = make_plan(make_design(load=PROFILES, knobs=TWO_BY_TWO, design={**design, "seed": 8}))
    pd.testing.assert_frame_equal(a, b)
    assert a["run_id"].tolist() != c["run_id"].tolist()
    assert set(map(tuple, a[["run_id", "profile"]].values)) == set(map(tuple, c[["run_id", "profile"]].values))


@pytest.mark.parametrize("example", ["default.sqlite", "abort-on-overflow.sqlite"])
def test_single_profile_plans_and_hashes_are_unchanged(example: str) -> None:
    """The stores in data/examples were planned by the code before profiles existed: the same design
    text must give the same hash and, run by run, the same run_order, config and bookkeeping."""
    with Store(EXAMPLES / example, readonly=True) as store:
        text, stored_hash = store.study.design_text, store.study.design_hash
        trials = store.trials("screen")
    design = load_design_text(text, source=example)
    assert design.design_hash == stored_hash
    plan = make_plan(design).set_index("run_id")
    assert "profile" not in plan.columns
    checked = 0
    for config, info in zip(trials["config"], trials["plan"]):
        if info.get("round", 1) != 1:
            continue                        # a sequential study's later rounds are planned from its looks
        row = plan.loc[info["run_id"]]
        for column in ("run_order", "config_id", "block", "replicate", "is_baseline"):
            assert row[column] == info[column], (example, info["run_id"], column)
        assert {k: row[k] for k in config} == config
        checked += 1
    assert checked >= 20


def test_the_shipped_profile_design_plans() -> None:
    design = load_design(ROOT / "designs" / "overload_profiles.yaml")
    plan = make_plan(design)
    summary = plan_summary(design, plan)
    assert design.load.profiles == ("low", "overload") and design.design_type is DesignType.FULL_FACTORIAL
    assert len(plan) == 2 * 2 * 2 * design.replicates
    assert summary["estimated_wall_s"] < 6 * 60                        # small: a few minutes in the lab
    assert json.loads(json.dumps(summary))["design"]["load"]["profiles"] == ["low", "overload"]


# ---- runner -------------------------------------------------------------------------------------


@pytest.fixture
def fakes() -> Any:
    sys.path.insert(0, str(ROOT / "tests" / "runner"))
    try:
        import runner_fakes
    finally:
        sys.path.pop(0)
    return runner_fakes


def _profile_load(fakes: Any) -> Any:
    class TwoProfileLoad(fakes.FakeLoad):
        profiles = {"low": {"rate": 10, "mode": "udp"}, "overload": {"rate": 99, "mode": "tcp"}}
    return TwoProfileLoad()


def _crossed_plan(fakes: Any, profiles: tuple[str, ...]) -> pd.DataFrame:
    plan = fakes.oat_plan(knobs=["net.fake.alpha"])
    frames = [plan.assign(profile=p, run_id=plan["run_id"] + i * len(plan), run_order=plan["run_order"] * 2 + i)
              for i, p in enumerate(profiles)]
    return pd.concat(frames, ignore_index=True)


def test_each_trial_runs_with_its_profiles_settings(fakes: Any, tmp_path: Path) -> None:
    from tunelab.runner.plans import run_design

    target = fakes.FileTarget(tmp_path / "machine")
    target.seed(fakes.INITIAL)
    target.seed(fakes.INITIAL, host="client")
    design = fakes.fake_design(knobs=["net.fake.alpha"],
                               load=LoadSpec("fake", "low", {"rate": 5}, profiles=("low", "overload")))
    plan = _crossed_plan(fakes, ("low", "overload"))
    with Store.open(tmp_path / "s.sqlite", study="fake-study", design_hash="h", design_text="name: fake-study\n") as store:
        summary = run_design(design, target, store, plan=plan, progress=False, load=_profile_load(fakes),
                             knob_lookup=fakes.make_knobs())
        assert summary.ok == len(plan)
        trials = store.trials("screen")
        tidy = store.tidy()
    modes = {info["profile"]: set() for info in trials["plan"]}
    for info, provenance in zip(trials["plan"], trials["provenance"]):
        settings = provenance["load_settings"]
        assert settings["rate"] == 5                                   # the design's override, for every profile
        modes[info["profile"]].add(settings["mode"])
    assert modes == {"low": {"udp"}, "overload": {"tcp"}}
    assert Counter(tidy["profile"]) == {"low": len(plan) // 2, "overload": len(plan) // 2}
    assert tidy.set_index("run_id")["profile"].to_dict() == plan.set_index("run_id")["profile"].to_dict()


def test_a_plan_naming_an_unknown_profile_stops_before_anything_runs(fakes: Any, tmp_path: Path) -> None:
    from tunelab.runner.plans import run_design

    target = fakes.FileTarget(tmp_path / "machine")
    target.seed(fakes.INITIAL)
    target.seed(fakes.INITIAL, host="client")
    plan = _crossed_plan(fakes, ("low", "heavy"))
    with Store.open(tmp_path / "s.sqlite", study="fake-study", design_hash="h", design_text="name: fake-study\n") as store:
        with pytest.raises(LoadError, match="no load profile 'heavy'"):
            run_design(fakes.fake_design(knobs=["net.fake.alpha"]), target, store, plan=plan, progress=False,
                       load=_profile_load(fakes), knob_lookup=fakes.make_knobs())
        assert store.trials("screen").empty
    assert target.writes == [] and target.commands == []
