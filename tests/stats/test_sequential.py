"""Sequential replicates (tunelab.stats.rounds): spending functions, looks, replay, and error rates.

Reference values of the spending functions are computed here from their published formulas with
the standard library only (``math.erfc``, ``math.log``), not with the code under test:

* Lan & DeMets (1983), Biometrika 70(3) 659-663, O'Brien–Fleming type:
  ``alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t)) = erfc(z_{1-alpha/2} / sqrt(2 t))``;
  for two-sided alpha = 0.05 at t = 0.5 this is 0.00557 (the 0.0056 of Jennison & Turnbull 2000,
  "Group Sequential Methods", ch. 7); z_0.975 = 1.959963984540054.
* Lan–DeMets Pocock type: ``alpha(t) = alpha ln(1 + (e - 1) t)``; 0.0310 at t = 0.5.

The simulation test runs the sequential rule on thousands of simulated studies. A full ``screen``
per look costs ~0.1 s, so (as in test_simulation_screen.py) the p-values of every look of every
simulated study are computed in one vectorised pass with the scipy functions that tunelab's own
functions reproduce, and the rule itself uses tunelab's ``recommend``, ``adjust`` and
``look_alphas`` unchanged. ``test_pipeline_matches_screen_in_rounds`` guards the substitution:
on a sample of the simulated studies the real :func:`screen_in_rounds` on the data the rule
collected gives the same verdicts, decision rounds and adjusted p-values.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as ss

from tunelab.errors import DataError
from tunelab.stats import (SPENDING, adjust, look_alphas, pending_levels, recommend, screen, screen_in_rounds,
                           spent_alpha)

ALPHA = 0.05
Z975 = 1.959963984540054
SESOI = 5.0
METRICS = [{"name": "y", "direction": "maximize", "sesoi_pct": SESOI}]


# ---- spending functions ----------------------------------------------------------------------------

@pytest.mark.parametrize("t", [0.1, 0.25, 0.5, 0.75, 0.9])
def test_obrien_fleming_matches_lan_demets(t: float) -> None:
    reference = math.erfc(Z975 / math.sqrt(t) / math.sqrt(2))
    assert spent_alpha(t, ALPHA, "obrien-fleming") == pytest.approx(reference, rel=1e-9)


def test_known_values_at_half_the_information() -> None:
    assert spent_alpha(0.5, ALPHA, "obrien-fleming") == pytest.approx(0.0056, abs=5e-5)
    assert spent_alpha(0.5, ALPHA, "pocock") == pytest.approx(0.05 * math.log(1 + (math.e - 1) / 2), rel=1e-12)
    assert spent_alpha(0.5, ALPHA, "pocock") == pytest.approx(0.0310, abs=5e-5)
    assert spent_alpha(0.5, ALPHA, "linear") == pytest.approx(0.025)


@pytest.mark.parametrize("name", SPENDING.names())
def test_spending_runs_from_zero_to_alpha_and_never_falls(name: str) -> None:
    grid = np.linspace(0, 1, 101)
    spent = np.array([spent_alpha(float(t), ALPHA, name) for t in grid])
    assert spent[0] == 0 and spent[-1] == pytest.approx(ALPHA)
    assert (np.diff(spent) >= 0).all() and (spent <= ALPHA).all()


def test_obrien_fleming_spends_less_early_than_pocock() -> None:
    assert spent_alpha(0.2, ALPHA, "obrien-fleming") < spent_alpha(0.2, ALPHA, "linear") \
        < spent_alpha(0.2, ALPHA, "pocock")


@pytest.mark.parametrize("name", SPENDING.names())
@pytest.mark.parametrize("fractions", [[0.15, 0.3, 0.45, 0.6, 0.75, 0.9, 1.0], [0.3, 0.5], [1.0], [0.2, 0.2, 0.7]])
def test_look_alphas_spend_at_most_alpha(name: str, fractions: list[float]) -> None:
    alphas = look_alphas(fractions, ALPHA, name)
    assert len(alphas) == len(fractions) and min(alphas) >= 0
    assert sum(alphas) <= ALPHA + 1e-15
    assert sum(alphas) == pytest.approx(spent_alpha(fractions[-1], ALPHA, name))
    if fractions[-1] == 1.0:
        assert sum(alphas) == pytest.approx(ALPHA)   # the last look spends what is left


def test_spending_input_errors() -> None:
    with pytest.raises(DataError, match="No alpha-spending function named 'haybittle'; known: linear, "):
        spent_alpha(0.5, ALPHA, "haybittle")
    with pytest.raises(DataError, match=r"information fraction must lie in \[0, 1\]"):
        spent_alpha(1.2, ALPHA, "pocock")
    with pytest.raises(DataError, match="must not decrease"):
        look_alphas([0.5, 0.3], ALPHA, "pocock")
    with pytest.raises(DataError, match="alpha must be between 0 and 1"):
        look_alphas([0.5], 1.5, "pocock")


# ---- replay ----------------------------------------------------------------------------------------

def _oat(rng: np.random.Generator, counts: dict[str, int], round_number: int, effects: dict[str, float],
         cv: float = 0.06, baseline_runs: int | None = None) -> pd.DataFrame:
    """One round of an OAT study over knobs a, b (baseline 0, other level 1)."""
    knobs = ["a", "b"]
    rows = [{"a": 0, "b": 0, "y": 1000 * math.exp(rng.normal(0, cv))}
            for _ in range(baseline_runs if baseline_runs is not None else max(counts.values()))]
    for knob, n in counts.items():
        rows += [{**{k: 0 for k in knobs}, knob: 1, "y": 1000 * (1 + effects[knob]) * math.exp(rng.normal(0, cv))}
                 for _ in range(n)]
    frame = pd.DataFrame(rows)
    frame["round"] = round_number
    return frame


def _without_sequential_columns(result) -> pd.DataFrame:
    return result.verdicts.drop(columns=["round", "alpha_nominal"])


def test_one_look_is_the_plain_screen() -> None:
    data = _oat(np.random.default_rng(1), {"a": 6, "b": 6}, 1, {"a": 0.2, "b": 0.0})
    plain = screen(data.drop(columns="round"), METRICS, ["a", "b"], {"a": 0, "b": 0}, n_boot=200)
    for frame in (data.drop(columns="round"), data):   # no round column; one round with every replicate (t = 1)
        result = screen_in_rounds(frame, METRICS, ["a", "b"], {"a": 0, "b": 0}, max_replicates=6, n_boot=200)
        pd.testing.assert_frame_equal(_without_sequential_columns(result), plain.verdicts)
        for name in plain.tables[1:]:
            pd.testing.assert_frame_equal(getattr(result, name), getattr(plain, name))
        assert result.verdicts["round"].tolist() == [1, 1] and result.verdicts["alpha_nominal"].tolist() == [ALPHA] * 2
        assert result.rounds[["round", "information_fraction", "alpha_spent"]].values.tolist() == [[1, 1.0, ALPHA]]
        assert result.settings["alpha"] == ALPHA and "rounds" in result.tables


def _two_rounds(seed: int = 3) -> pd.DataFrame:
    """Knob a: +100 % (decided at round 1); knob b: +4 % with CV 2 % (inconclusive): round 2 runs only b."""
    rng = np.random.default_rng(seed)
    first = _oat(rng, {"a": 3, "b": 3}, 1, {"a": 1.0, "b": 0.04}, cv=0.02)
    second = _oat(rng, {"b": 3}, 2, {"a": 1.0, "b": 0.04}, cv=0.02)
    return pd.concat([first, second], ignore_index=True)


def test_a_row_decided_at_round_one_keeps_its_round_one_row() -> None:
    data = _two_rounds()
    first_look, second_look = look_alphas([3 / 20, 6 / 20], ALPHA, "pocock")
    result = screen_in_rounds(data, METRICS, ["a", "b"], {"a": 0, "b": 0}, max_replicates=20, spending="pocock",
                               n_boot=200)
    round1 = screen(data[data["round"] == 1], METRICS, ["a", "b"], {"a": 0, "b": 0}, alpha=first_look, n_boot=200)
    a = result.verdicts.set_index("knob").loc["a"]
    expected = round1.verdicts.set_index("knob").loc["a"]
    assert expected["verdict"] == "matters" and round1.verdicts.set_index("knob").loc["b", "verdict"] == "inconclusive"
    assert a["verdict"] == "matters" and a["round"] == 1 and a["alpha_nominal"] == pytest.approx(first_look)
    assert a["p"] == expected["p"] and a["effect_pct"] == expected["effect_pct"]
    # a's detail rows come from round 1 too (round 2 added baseline runs, so a re-screen would differ)
    later = screen(data, METRICS, ["a", "b"], {"a": 0, "b": 0}, alpha=second_look, n_boot=200)
    assert later.effects.set_index("knob").loc["a", "pct_change"] != a["effect_pct"]
    assert result.effects.set_index("knob").loc["a", "pct_change"] == pytest.approx(a["effect_pct"])
    b = result.verdicts.set_index("knob").loc["b"]
    assert b["round"] == 2 and b["alpha_nominal"] == pytest.approx(second_look)
    rounds = result.rounds
    assert rounds["replicates"].tolist() == [3, 6]
    assert rounds["information_fraction"].tolist() == pytest.approx([0.15, 0.3])
    assert rounds["alpha_spent"].tolist() == pytest.approx([spent_alpha(0.15, ALPHA, "pocock"),
                                                           spent_alpha(0.3, ALPHA, "pocock")])
    assert rounds["runs"].tolist() == [9, 15]
    assert (rounds["decided"] + rounds["inconclusive"]).tolist() == [2, 2]


def test_a_rejected_row_leaves_the_family_of_later_looks() -> None:
    """a is ``matters`` at round 1: with alpha recycling (default) b is alone in round 2's Holm family
    (p_adj = p); without, the family is {b, a := 1} and b's adjusted p is twice its p."""
    data = _two_rounds()
    kwargs = {"max_replicates": 20, "n_boot": 200}
    recycled = screen_in_rounds(data, METRICS, ["a", "b"], {"a": 0, "b": 0}, **kwargs)
    kept = screen_in_rounds(data, METRICS, ["a", "b"], {"a": 0, "b": 0}, recycle=False, **kwargs)
    for result, factor in ((recycled, 1), (kept, 2)):
        assert result.verdicts.set_index("knob").loc["a", "verdict"] == "matters"
        b = result.verdicts.set_index("knob").loc["b"]
        assert b["round"] == 2 and 0 < b["p"] < 1
        assert b["p_adj"] == pytest.approx(min(1.0, factor * b["p"]))
        assert b["significant"] == (b["p_adj"] < b["alpha_nominal"])
    assert recycled.settings["sequential"]["recycle"] is True and kept.settings["sequential"]["recycle"] is False
    with pytest.raises(DataError, match="recycle must be True or False"):
        screen_in_rounds(data, METRICS, ["a", "b"], {"a": 0, "b": 0}, recycle="yes", **kwargs)


def test_an_equivalent_row_stays_in_the_family_with_p_one() -> None:
    """a is ``no effect (equivalent)`` at round 1 (no rejection): round 2's family is {b, a := 1}."""
    rng = np.random.default_rng(5)
    rows = []
    for number, knobs in ((1, ["a", "b"]), (2, ["b"])):
        rows += [{"a": 0, "b": 0, "round": number, "y": 1000 * math.exp(rng.normal(0, 0.002))} for _ in range(3)]
        for knob, effect, cv in (("a", 0.0, 0.002), ("b", 0.03, 0.08)):
            if knob in knobs:
                rows += [{"a": int(knob == "a"), "b": int(knob == "b"), "round": number,
                          "y": 1000 * (1 + effect) * math.exp(rng.normal(0, cv))} for _ in range(3)]
    result = screen_in_rounds(pd.DataFrame(rows), METRICS, ["a", "b"], {"a": 0, "b": 0}, max_replicates=20,
                               n_boot=200)
    v = result.verdicts.set_index("knob")
    assert v.loc["a", "verdict"] == "no effect (equivalent)" and v.loc["a", "round"] == 1
    assert v.loc["b", "round"] == 2
    assert v.loc["b", "p_adj"] == pytest.approx(min(1.0, 2 * v.loc["b", "p"]))


def test_resuming_from_a_previous_look_equals_the_full_replay() -> None:
    data = _two_rounds()
    kwargs = {"max_replicates": 20, "n_boot": 200, "seed": 4}
    earlier = screen_in_rounds(data[data["round"] == 1], METRICS, ["a", "b"], {"a": 0, "b": 0}, **kwargs)
    resumed = screen_in_rounds(data, METRICS, ["a", "b"], {"a": 0, "b": 0}, previous=earlier, **kwargs)
    full = screen_in_rounds(data, METRICS, ["a", "b"], {"a": 0, "b": 0}, **kwargs)
    for name in full.tables:
        pd.testing.assert_frame_equal(getattr(resumed, name), getattr(full, name))
    with pytest.raises(DataError, match="same settings"):
        screen_in_rounds(data, METRICS, ["a", "b"], {"a": 0, "b": 0}, previous=earlier,
                          **{**kwargs, "max_replicates": 12})
    with pytest.raises(DataError, match="previous saw 9 runs up to round 1"):
        screen_in_rounds(data.iloc[1:], METRICS, ["a", "b"], {"a": 0, "b": 0}, previous=earlier, **kwargs)


def test_the_json_of_a_sequential_screen_follows_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from tunelab.stats import schema
    result = screen_in_rounds(_two_rounds(), METRICS, ["a", "b"], {"a": 0, "b": 0}, max_replicates=20, n_boot=200)
    document = result.to_json()
    jsonschema.validate(document, schema())
    assert [row["round"] for row in document["rounds"]] == [1, 2]
    assert {"round", "alpha_nominal"} <= set(document["verdicts"][0])


def test_sequential_input_errors() -> None:
    data = _two_rounds()
    base = {"a": 0, "b": 0}
    with pytest.raises(DataError, match="max_replicates must be a whole number"):
        screen_in_rounds(data, METRICS, ["a", "b"], base, max_replicates=0)
    with pytest.raises(DataError, match="must hold each trial's round as a whole number"):
        screen_in_rounds(data.assign(round=data["round"] - 1.5), METRICS, ["a", "b"], base, max_replicates=20)
    factorial = data.copy()
    factorial.loc[factorial.index[-1], ["a", "b"]] = 1
    with pytest.raises(DataError, match="need a one-at-a-time design"):
        screen_in_rounds(factorial, METRICS, ["a", "b"], base, max_replicates=20)


def test_pending_levels() -> None:
    data = pd.DataFrame({"a": [0, 1, 2, 0], "b": ["x", "x", "y", "z"], "c": [(1, 2), (1, 2), (3, 4), (5, 6)]})
    verdicts = pd.DataFrame({"knob": ["a", "a", "b", "c"], "metric": ["y", "z", "y", "y"],
                             "verdict": ["matters", "inconclusive", "no effect (equivalent)", "inconclusive"]})
    baseline = {"a": 0, "b": "x", "c": (1, 2)}
    assert pending_levels(verdicts, data, ["a", "b", "c"], baseline) == {"a": [1, 2], "c": [(3, 4), (5, 6)]}
    decided = verdicts.assign(verdict="untestable")
    assert pending_levels(decided, data, ["a", "b", "c"], baseline) == {}
    with pytest.raises(DataError, match="columns 'knob' and 'verdict'"):
        pending_levels(verdicts.drop(columns="verdict"), data, ["a"], baseline)


# ---- simulation ------------------------------------------------------------------------------------

K = 4                     # knobs, one non-baseline level each; one baseline run per replicate
SCHEDULE = [3, 6, 9, 12, 15, 18]   # replicates per level at each look: min 3, step 3, max 18
N_STUDIES = 2000
CV = 0.06
Z99 = 2.58
ROUTE_TEST = {"anova+tukey": "anova", "welch+games_howell": "welch", "kruskal+dunn": "kruskal"}
MATTERS, EQUIVALENT, INCONCLUSIVE = "matters", "no effect (equivalent)", "inconclusive"


def simulate(rng: np.random.Generator, studies: int, effects: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """Every run a study could make (all rounds): baseline (study, run), levels (study, knob, run)."""
    sd = math.sqrt(math.log1p(CV ** 2))
    n = SCHEDULE[-1]
    base = 1000 * np.exp(rng.normal(0, sd, (studies, n)))
    levels = 1000 * (1 + np.asarray(effects)[None, :, None]) * np.exp(rng.normal(0, sd, (studies, K, n)))
    return base, levels


def look_values(base: np.ndarray, levels: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """Route p-values, chosen p, % change and TOST p of every (study, knob) on its first ``n`` runs."""
    s, k = levels.shape[:2]
    b = np.broadcast_to(base[:, None, :n], (s, k, n)).reshape(s * k, n)
    x = levels[:, :, :n].reshape(s * k, n)
    sds = np.stack([b.std(axis=1, ddof=1), x.std(axis=1, ddof=1)], axis=1)
    residuals = np.concatenate([(b - b.mean(axis=1, keepdims=True)) / sds[:, :1],
                                (x - x.mean(axis=1, keepdims=True)) / sds[:, 1:]], axis=1)
    p = {"shapiro": ss.shapiro(residuals, axis=1).pvalue, "bf": ss.levene(b, x, center="median", axis=1).pvalue,
         "ratio": sds.max(axis=1) / sds.min(axis=1), "anova": ss.f_oneway(b, x, axis=1).pvalue,
         "welch": ss.ttest_ind(b, x, axis=1, equal_var=False).pvalue, "kruskal": ss.kruskal(b, x, axis=1).pvalue}
    routes = [recommend(float(a), float(c), float(r))[0] for a, c, r in zip(p["shapiro"], p["bf"], p["ratio"])]
    chosen = np.array([p[ROUTE_TEST[route]][i] for i, route in enumerate(routes)])
    mb, mx = b.mean(axis=1), x.mean(axis=1)
    vb, vx = b.var(axis=1, ddof=1) / n, x.var(axis=1, ddof=1) / n
    se, df = np.sqrt(vb + vx), (vb + vx) ** 2 / (vb ** 2 / (n - 1) + vx ** 2 / (n - 1))
    margin = SESOI / 100 * np.abs(mb)
    tost = np.maximum(ss.t.sf((mx - mb + margin) / se, df), ss.t.cdf((mx - mb - margin) / se, df))
    return {"p": chosen.reshape(s, k), "effect": (100 * (mx / mb - 1)).reshape(s, k), "tost": tost.reshape(s, k)}


def sequential_rule(looks: list[dict[str, np.ndarray]], alphas: list[float], recycle: str = "matters"
                    ) -> dict[str, np.ndarray]:
    """tunelab's rule per study: look j at alphas[j]; final rows frozen; in Holm, frozen ``matters`` rows
    leave the family (``recycle='matters'``, the default rule) or count with p = 1 (``'none'``);
    ``'all'`` (every frozen row leaves: not the rule, an invalid variant) is for comparison."""
    s = looks[0]["p"].shape[0]
    verdict = np.full((s, K), INCONCLUSIVE, dtype=object)
    decided_at = np.full((s, K), len(looks), dtype=int)
    p_adj = np.full((s, K), np.nan)
    for i in range(s):
        for j, (look, a) in enumerate(zip(looks, alphas)):
            open_ = np.flatnonzero(verdict[i] == INCONCLUSIVE)
            if not len(open_):
                break
            frozen = verdict[i] != INCONCLUSIVE
            kept = {"none": frozen, "matters": frozen & (verdict[i] != MATTERS), "all": frozen & False}[recycle]
            q = adjust(np.concatenate([look["p"][i, open_], np.ones(int(kept.sum()))]), "holm")[:len(open_)]
            for knob, qk in zip(open_, q):
                p_adj[i, knob] = qk
                decided_at[i, knob] = j + 1
                if qk < a and abs(look["effect"][i, knob]) >= SESOI:
                    verdict[i, knob] = MATTERS
                elif look["tost"][i, knob] < a:
                    verdict[i, knob] = EQUIVALENT
    return {"verdict": verdict, "round": decided_at, "p_adj": p_adj}


def upper_bound(rate: float, n: int) -> float:
    """Largest observed rate compatible with a true ``rate`` (99 % one-sided)."""
    return rate + Z99 * math.sqrt(rate * (1 - rate) / n)


@pytest.fixture(scope="module")
def simulated() -> dict[str, tuple]:
    out = {}
    for index, (name, effects) in enumerate({"null": [0.0] * K,
                                             "sesoi": [SESOI / 100, -SESOI / 100] * (K // 2),
                                             "mixed": [2 * SESOI / 100, -2 * SESOI / 100] + [0.0] * (K - 2)
                                             }.items()):
        base, levels = simulate(np.random.default_rng([7, index]), N_STUDIES, effects)
        looks = [look_values(base, levels, n) for n in SCHEDULE]
        out[name] = (base, levels, looks)
    return out


@pytest.mark.parametrize("spending", ["linear", "pocock", "obrien-fleming"])
def test_family_wise_error_and_false_equivalence_stay_below_alpha(simulated: dict, spending: str) -> None:
    alphas = look_alphas([n / SCHEDULE[-1] for n in SCHEDULE], ALPHA, spending)
    naive = [ALPHA] * len(SCHEDULE)
    bound = upper_bound(ALPHA, N_STUDIES)                       # 0.0626 for 2000 studies

    null = simulated["null"][2]
    fwer = (sequential_rule(null, alphas)["verdict"] == MATTERS).any(axis=1).mean()
    naive_fwer = (sequential_rule(null, naive)["verdict"] == MATTERS).any(axis=1).mean()
    assert fwer <= bound, f"family-wise error {fwer:.3f} > {bound:.3f}"
    # the same simulation detects the inflation of testing at the full alpha at every look
    assert naive_fwer > bound, f"naive FWER {naive_fwer:.3f}: the simulation cannot see inflation"

    at_sesoi = simulated["sesoi"][2]
    false_eq = (sequential_rule(at_sesoi, alphas)["verdict"] == EQUIVALENT).mean()   # per knob x metric row
    naive_eq = (sequential_rule(at_sesoi, naive)["verdict"] == EQUIVALENT).mean()
    rows_bound = upper_bound(0.05, N_STUDIES)   # rows of one study share the baseline: the study is the unit
    assert false_eq <= rows_bound, f"false equivalence {false_eq:.3f} > {rows_bound:.3f}"
    assert naive_eq > rows_bound, f"naive false equivalence {naive_eq:.3f}: the simulation cannot see inflation"


@pytest.mark.parametrize("spending", ["linear", "pocock"])
def test_alpha_recycling_keeps_the_family_wise_error(simulated: dict, spending: str) -> None:
    """Two knobs at +-2 SESOI, two null: rejected rows leave later families, the null knobs' FWER stays
    below alpha, and recycling does reject more real effects than keeping them in the family."""
    alphas = look_alphas([n / SCHEDULE[-1] for n in SCHEDULE], ALPHA, spending)
    looks = simulated["mixed"][2]
    recycled = sequential_rule(looks, alphas)["verdict"]
    kept = sequential_rule(looks, alphas, recycle="none")["verdict"]
    fwer = (recycled[:, 2:] == MATTERS).any(axis=1).mean()
    assert fwer <= upper_bound(ALPHA, N_STUDIES), f"family-wise error with recycling {fwer:.3f}"
    null_fwer = (sequential_rule(simulated["null"][2], alphas)["verdict"] == MATTERS).any(axis=1).mean()
    assert null_fwer <= upper_bound(ALPHA, N_STUDIES)
    # recycling can only add rejections (smaller families), and it does add real ones
    assert ((kept == MATTERS) <= (recycled == MATTERS)).all()
    assert (recycled[:, :2] == MATTERS).sum() > (kept[:, :2] == MATTERS).sum()


def _collected(base: np.ndarray, levels: np.ndarray, study: int, rounds: np.ndarray) -> pd.DataFrame:
    """The runs the sequential rule made in one study: a knob's runs up to the look that decided it,
    one baseline run per replicate while any knob was open."""
    knobs = [f"k{j}" for j in range(K)]
    rows, start = [], 0
    last = int(rounds.max())
    for number, n in enumerate(SCHEDULE[:last], start=1):
        for r in range(start, n):
            rows.append({**{k: 0 for k in knobs}, "round": number, "y": base[study, r]})
            for j, knob in enumerate(knobs):
                if rounds[j] >= number:
                    rows.append({**{k: 0 for k in knobs}, knob: 1, "round": number, "y": levels[study, j, r]})
        start = n
    return pd.DataFrame(rows)


def test_pipeline_matches_screen_in_rounds() -> None:
    """The vectorised rule above is tunelab's: the real screen_in_rounds on the collected runs agrees."""
    knobs = [f"k{j}" for j in range(K)]
    base, levels = simulate(np.random.default_rng(11), 4, [0.10, -0.10, 0.0, 0.05])
    looks = [look_values(base, levels, n) for n in SCHEDULE]
    alphas = look_alphas([n / SCHEDULE[-1] for n in SCHEDULE], ALPHA, "pocock")
    rule = sequential_rule(looks, alphas)
    assert (rule["round"] < len(SCHEDULE)).any() and (rule["round"] > 1).any()   # early and late decisions
    for study in range(len(base)):
        data = _collected(base, levels, study, rule["round"][study])
        result = screen_in_rounds(data, METRICS, knobs, {k: 0 for k in knobs}, max_replicates=SCHEDULE[-1],
                                   spending="pocock", n_boot=100)
        v = result.verdicts.set_index("knob").loc[knobs]
        assert v["verdict"].tolist() == rule["verdict"][study].tolist()
        assert v["round"].tolist() == rule["round"][study].tolist()
        assert v["p_adj"].to_numpy(dtype=float) == pytest.approx(rule["p_adj"][study], rel=1e-6)


def test_a_replay_under_other_guards_says_why_its_looks_tested_nothing() -> None:
    """The recorded default study stopped the MTU after round 1 because its guard made latency `not
    comparable`; replayed without guards the MTU's latency stays open with no new runs, and the note says so."""
    from pathlib import Path

    import tunelab.study_data

    store = Path(__file__).resolve().parents[2] / "data" / "examples" / "default.sqlite"
    inputs = tunelab.study_data.screen_inputs(store)
    own = inputs.screen(n_boot=200)
    other = screen(inputs.data, inputs.metrics, inputs.knobs, inputs.baseline, alpha=inputs.alpha,
                   correction=inputs.correction, n_boot=200, design=inputs.design,
                   guards={"guards": [], "conditional_on": {}})
    assert not [n for n in own.settings["notes"] if "had no runs in this round" in n]
    idle = [n for n in other.settings["notes"] if "had no runs in this round" in n]
    assert idle and all("link.mtu[@link]" in n for n in idle), other.settings["notes"]


def test_a_row_that_loses_significance_in_the_padded_family_loses_its_significant_level() -> None:
    """Without alpha recycling b's round-2 family is {b, a := 1}: its p_adj doubles past the look's level,
    so the row is no longer significant; its ``levels`` (the significant ones) are then empty, its
    direction none, and its level and effect are still b = 1's change (its only level), the ratio of
    the means of its runs and the baseline runs (pandas). With recycling the same row matters."""
    data = _two_rounds(35)
    kwargs = {"max_replicates": 20, "n_boot": 200}
    recycled = screen_in_rounds(data, METRICS, ["a", "b"], {"a": 0, "b": 0}, **kwargs).verdicts.set_index("knob")
    kept = screen_in_rounds(data, METRICS, ["a", "b"], {"a": 0, "b": 0}, recycle=False,
                             **kwargs).verdicts.set_index("knob")
    rows = data[data["a"] == 0]
    change = 100 * (rows.loc[rows["b"] == 1, "y"].mean() / rows.loc[rows["b"] == 0, "y"].mean() - 1)
    b = recycled.loc["b"]
    assert (b["verdict"], b["significant"], b["level"], [e["level"] for e in b["levels"]]) == ("matters", True, 1, [1])
    b = kept.loc["b"]
    assert b["p_adj"] == pytest.approx(2 * b["p"]) and b["p"] < b["alpha_nominal"] <= b["p_adj"]
    assert (b["verdict"], b["significant"], b["direction"], b["levels"]) == ("inconclusive", False, "none", [])
    assert b["level"] == 1 and b["effect_pct"] == pytest.approx(change, rel=1e-9)


def _two_metrics(seed: int) -> pd.DataFrame:
    """Knobs a, b over metrics y and z: a moves y by +100 % (decided at round 1) and z by +4 % with CV 8 %
    (open), b moves both by +4 %; round 2 runs a and b again (both have an open row)."""
    rng = np.random.default_rng(seed)
    rows = []
    for number in (1, 2):
        for a, b in [(0, 0)] * 3 + [(1, 0)] * 3 + [(0, 1)] * 3:
            y_effect, z_effect = (1.0, 0.04) if a else (0.04, 0.04) if b else (0.0, 0.0)
            rows.append({"a": a, "b": b, "round": number, "y": 1000 * (1 + y_effect) * math.exp(rng.normal(0, 0.02)),
                         "z": 1000 * (1 + z_effect) * math.exp(rng.normal(0, 0.08))})
    return pd.DataFrame(rows)


def test_a_frozen_row_is_the_row_of_the_look_that_decided_it() -> None:
    """(a, y) matters at round 1 while (a, z) stays open, so round 2 screens knob a again: the final (a, y)
    row is, column for column, the row round 1's screen (at round 1's level) produced, and round 2's Holm
    family holds only the open rows (the rejected (a, y) left it): their p_adj is Holm's (statsmodels) of
    their own p."""
    from statsmodels.stats.multitest import multipletests

    data = _two_metrics(7)
    metrics = [{"name": "y", "direction": "maximize", "sesoi_pct": SESOI},
               {"name": "z", "direction": "maximize", "sesoi_pct": SESOI}]
    first_look, _ = look_alphas([3 / 20, 6 / 20], ALPHA, "pocock")
    result = screen_in_rounds(data, metrics, ["a", "b"], {"a": 0, "b": 0}, max_replicates=20, spending="pocock",
                               n_boot=200)
    round1 = screen(data[data["round"] == 1].drop(columns="round"), metrics, ["a", "b"], {"a": 0, "b": 0},
                    alpha=first_look, n_boot=200).verdicts.set_index(["knob", "metric"])
    assert round1.loc[("a", "y"), "verdict"] == "matters" and round1.loc[("a", "z"), "verdict"] == "inconclusive"
    final = result.verdicts.set_index(["knob", "metric"])
    assert final.loc[("a", "y"), "round"] == 1 and final.loc[("a", "z"), "round"] == 2
    frozen = final.loc[("a", "y")].drop(["round", "alpha_nominal"])
    pd.testing.assert_series_equal(frozen, round1.loc[("a", "y")][frozen.index], check_dtype=False)
    later = final[final["round"] == 2]
    assert len(later) == 3
    expected = multipletests(later["p"].to_numpy(dtype=float), method="holm")[1]
    assert later["p_adj"].to_numpy(dtype=float) == pytest.approx(expected, rel=1e-12)
