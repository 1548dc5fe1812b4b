"""``tunelab.stats.linear_model.fit_model`` (one linear model per metric) against R.

Values: ``reference.json`` key ``model``, written by ``Rscript tests/stats/reference/make_reference.R``
(R 4.2.2 with car 3.1.1, emmeans 1.8.4.1, mvtnorm 1.1.3; see ``reference/README.md``). Each case is one
``lm`` with ``contr.sum`` coding: ``[block +]`` main effects ``+`` the listed two-factor interactions.

* ``npk`` (R ``datasets::npk``; Venables & Ripley (2002) *Modern Applied Statistics with S*, 4th ed.,
  section 6.7, and R's ``?npk``): 2^3 N, P, K in 6 blocks, each block a half-fraction, so N:P:K is
  confounded with blocks and ``summary(aov(yield ~ block + N*P*K))`` drops it (residual 12 df).
* ``warpbreaks``, ``warpbreaks_unbalanced``: ``log(breaks) ~ wool * tension``; ``ToothGrowth``:
  ``len ~ supp * factor(dose)``.

Tables: ``car::Anova`` type II and III (and with ``white.adjust = "hc3"``); ``emmeans`` marginal
means and ``trt.vs.ctrl`` contrasts, marginal (``at == ""``) and within each level of an interacting
factor. Dunnett: max-|t| over the contrasts of one knob and ``at`` from the multivariate t with the
model's correlations, computed exactly in R and checked against ``emmeans(adjust = "mvt")``.
Baselines: wool A, tension L (sorted order is H, L, M, so ``baseline`` is exercised), supp OJ,
dose 0.5, N/P/K 0. Tolerances: ``rel=1e-9`` (p ``rel=1e-6``); Dunnett-adjusted values ``abs=2e-3``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tunelab.stats.linear_model import fit_model

REFERENCE_DIR = Path(__file__).parent / "reference"
REFERENCE = json.loads((REFERENCE_DIR / "reference.json").read_text(encoding="utf-8"))["model"]
CASES = sorted(REFERENCE)
EXACT = 1e-9
P_REL = 1e-6
DUNNETT_ABS = 2e-3


def norm(value: Any) -> Any:
    """A level as a comparable key: R writes levels as strings ("0.5", "1"), pandas reads numbers."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def at_key(at: str) -> tuple[str, Any]:
    """``"other=level"`` -> (other, level); ``""`` -> ("", None)."""
    if not at:
        return "", None
    other, level = str(at).split("=", 1)
    return other, norm(level)


def fit(case: str, **kwargs: Any):
    ref = REFERENCE[case]
    data = pd.read_csv(REFERENCE_DIR / "datasets" / f"{ref['dataset']}.csv")
    baseline = {k: next(v for v in data[k].unique() if norm(v) == norm(s)) for k, s in ref["baseline"].items()}
    return fit_model(data, ref["dv"], ref["factors"], baseline=baseline,
                     interactions=[tuple(pair) for pair in ref["interactions"]], block=ref["block"],
                     log=ref["log"], **kwargs)


def compare_terms(got: pd.DataFrame, rows: list[dict], call: str, eta: bool = True) -> None:
    exp = pd.DataFrame(rows).set_index("source").drop("Residual", errors="ignore")
    got = got.set_index("term")
    assert sorted(got.index) == sorted(exp.index), call
    got = got.loc[exp.index]
    df1 = exp["df1"] if "df1" in exp else exp["df"]
    assert got["df1"].tolist() == pytest.approx(df1.tolist(), rel=EXACT), call
    assert got["statistic"].tolist() == pytest.approx(exp["F"].tolist(), rel=EXACT), call
    assert got["p"].tolist() == pytest.approx(exp["p"].tolist(), rel=P_REL), call
    if eta:
        assert got["partial_eta2"].tolist() == pytest.approx(exp["partial_eta2"].tolist(), rel=EXACT), call


@pytest.mark.parametrize("typ", [2, 3, None])
@pytest.mark.parametrize("case", CASES)
def test_terms_match_car_anova(case: str, typ: int | None) -> None:
    """R: ``car::Anova(fit, type = 2 | 3)``; ``typ=None`` is type II on balanced data, III otherwise."""
    ref = REFERENCE[case]
    table = {2: "type2", 3: "type3", None: "type3" if "unbalanced" in case else "type2"}[typ]
    got = fit(case, typ=typ)
    assert got.residual_df == ref["residual_df"]
    assert (got.terms["df2"] == ref["residual_df"]).all()
    compare_terms(got.terms, ref[table]["rows"], f"{ref['call']}; {ref[table]['call']}")


@pytest.mark.parametrize("typ", [2, 3])
@pytest.mark.parametrize("case", CASES)
def test_hc3_matches_car_white_adjust(case: str, typ: int) -> None:
    """R: ``car::Anova(fit, type = 2 | 3, white.adjust = "hc3")`` (Wald F with the HC3 covariance)."""
    ref = REFERENCE[case][f"hc3_type{typ}"]
    got = fit(case, typ=typ, robust="hc3").terms
    compare_terms(got, ref["rows"], ref["call"], eta=False)
    assert got["df2"].tolist() == [r["df2"] for r in ref["rows"]]


def test_npk_blocks_confound_npk_as_in_venables_ripley() -> None:
    """MASS section 6.7 / ``?npk``: ``summary(aov(yield ~ block + N*P*K, npk))`` has no N:P:K row
    and 12 residual df; blocks are orthogonal to the rest, so these SS are also type II and III."""
    ref = REFERENCE["npk"]
    got = fit("npk")
    assert got.residual_df == 12
    kinds = dict(zip(got.terms["term"], got.terms["kind"]))
    assert kinds == {"block": "block", "N": "main", "P": "main", "K": "main",
                     "N:P": "interaction", "N:K": "interaction", "P:K": "interaction"}
    ss_res = next(r["ss"] for r in ref["aov"]["rows"] if r["source"] == "Residual")
    rows = [{**r, "partial_eta2": r["ss"] / (r["ss"] + ss_res)} for r in ref["aov"]["rows"]]
    compare_terms(got.terms, rows, ref["aov"]["call"])


@pytest.mark.parametrize("case", CASES)
def test_contrasts_match_emmeans_trt_vs_ctrl(case: str) -> None:
    """R: ``contrast(emmeans(fit, ~ knob [| other]), "trt.vs.ctrl", ref = baseline)``, unadjusted and
    Dunnett. Marginal contrasts and simple effects of ``a | b`` for each term ``a:b`` are required;
    any simple effects ``b | a`` the fit also reports must match too."""
    ref = REFERENCE[case]
    exp = {(r["knob"], norm(r["level"]), norm(r["baseline"]), at_key(r["at"])): r for r in ref["contrasts"]["rows"]}
    got = {(r["knob"], norm(r["level"]), norm(r["baseline"]), at_key(r["at"])): r
           for r in fit(case).contrasts.to_dict("records")}
    pairs = {tuple(p) for p in ref["interactions"]}
    required = {k for k in exp if k[3][0] == "" or (k[0], k[3][0]) in pairs}
    assert required <= set(got), sorted(required - set(got))
    assert set(got) <= set(exp), sorted(set(got) - set(exp))
    for key, g in got.items():
        e = exp[key]
        for col in ("estimate", "se", "t", "ci_low", "ci_high"):
            assert g[col] == pytest.approx(e[col], rel=EXACT, abs=1e-12), (key, col, ref["contrasts"]["call"])
        assert g["df"] == pytest.approx(e["df"], rel=EXACT), key
        assert g["p"] == pytest.approx(e["p"], rel=P_REL), key
        for col in ("p_adj", "adj_ci_low", "adj_ci_high"):
            assert g[col] == pytest.approx(e[col], abs=DUNNETT_ABS), (key, col)


@pytest.mark.parametrize("case", CASES)
def test_emmeans_match(case: str) -> None:
    """R: ``emmeans(fit, ~ knob)`` and, for each term ``a:b``, ``emmeans(fit, ~ a | b)``."""
    ref = REFERENCE[case]["emmeans"]

    def key(r: dict) -> tuple:
        return r["knob"], norm(r["level"]), norm(r["by"]), norm(r["by_level"])

    exp = {key(r): r for r in ref["rows"]}
    got = {key(r): r for r in fit(case).emmeans.to_dict("records")}
    assert set(got) == set(exp), sorted(set(got) ^ set(exp), key=str)
    for k, g in got.items():
        for col in ("mean", "se", "ci_low", "ci_high"):
            assert g[col] == pytest.approx(exp[k][col], rel=EXACT), (k, col, ref["call"])


@pytest.mark.parametrize("case", [c for c in CASES if "unbalanced" not in c])
def test_type2_equals_type3_on_balanced_data(case: str) -> None:
    t2, t3 = fit(case, typ=2).terms, fit(case, typ=3).terms
    cols = ["df1", "df2", "statistic", "p", "partial_eta2"]
    pd.testing.assert_frame_equal(t2.set_index("term")[cols], t3.set_index("term").loc[t2["term"], cols],
                                  check_exact=False, rtol=1e-9)


def test_unbalanced_reference_separates_the_types() -> None:
    """Guard on the reference: on the unbalanced case type II and III differ (so ``typ=None`` matters)."""
    ref = REFERENCE["warpbreaks_unbalanced"]
    f2, f3 = ({r["source"]: r["F"] for r in ref[t]["rows"]} for t in ("type2", "type3"))
    assert abs(f2["wool"] - f3["wool"]) > 0.1
