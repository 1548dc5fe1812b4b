"""Figures and text of the screen's model (factorial designs): on the real abort-on-overflow recording
(a 3 × 2 factorial, somaxconn × tcp_abort_on_overflow, 24 runs in 4 blocks) and on small synthetic frames
whose shape the assertions need (a 2^(4-1) fractional factorial, a saturated two-level design, a range
design's response curves)."""
from __future__ import annotations

import base64
import io
import itertools
import math
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from scipy import stats as ss

from report_helpers import EXAMPLES, copy_store, nb_outputs
from tunelab.errors import DataError
from tunelab.model import AnalysisKind
from tunelab.report import figures, tables, wording

# the session's report builds (conftest's default_report, refine_report) happen once: on one worker
pytestmark = pytest.mark.xdist_group("default-report")

ABORT = EXAMPLES / "abort-on-overflow.sqlite"
SOMAXCONN, ABORT_KNOB = "net.core.somaxconn", "net.ipv4.tcp_abort_on_overflow"


@pytest.fixture(scope="module")
def abort_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not ABORT.is_file():
        pytest.skip(f"{ABORT} is absent (a real lab recording; see tests/report/test_examples.py)")
    return copy_store(ABORT, tmp_path_factory.mktemp("stores"))


@pytest.fixture(scope="module")
def abort(abort_store: Path) -> tuple:
    """(study, inputs, result) of the abort-on-overflow example, screened as the report does."""
    from tunelab.report import load_study, screen_study

    study = load_study(abort_store)
    inputs, result = screen_study(study, n_boot=200)
    return study, inputs, result


@pytest.fixture(scope="module")
def fractional() -> tuple:
    """A 2^(4-1) fractional factorial (d = abc, so a:c is aliased with b:d), twice, in two blocks; log(y)
    has a main effect of a and an a × c interaction: (inputs, result) of the screen."""
    from tunelab.stats import screen

    rng = np.random.default_rng(3)
    rows = [{"a": a, "b": b, "c": c, "d": a * b * c, "block": rep,
             "y": math.exp(5 + 0.3 * a + 0.02 * b + 0.15 * a * c + rng.normal(0, 0.03))}
            for rep in range(2) for a, b, c in itertools.product([-1, 1], repeat=3)]
    data = pd.DataFrame(rows)
    metrics = [{"name": "y", "direction": "maximize", "sesoi_pct": 5.0}]
    baseline = {k: -1 for k in "abcd"}
    result = screen(data, metrics, list("abcd"), baseline, n_boot=200,
                    design={"type": "fractional_factorial",
                            "aliases": {"a:b": ["c:d"], "a:c": ["b:d"], "a:d": ["b:c"]}})
    inputs = SimpleNamespace(data=data, runs=data, metrics=metrics, metric=metrics[0], knobs=list("abcd"),
                             baseline=baseline, alpha=0.05, correction="holm")
    return inputs, result


def _residual_df(result, metric: str) -> float:
    terms = result.model_terms
    return float(terms.loc[(terms["metric"] == metric) & (terms["kind"] != "block"), "df2"].iloc[0])


# ---- the model's tables on the real example ------------------------------------------------------


def test_abort_example_is_read_through_the_model(abort: tuple) -> None:
    _, inputs, result = abort
    assert result.design is AnalysisKind.FACTORIAL
    assert set(result.model_terms["metric"]) == {m["name"] for m in inputs.metrics}
    interaction = f"{SOMAXCONN}:{ABORT_KNOB}"
    assert interaction in set(result.verdicts["knob"])
    cells = result.emmeans[(result.emmeans["metric"] == "qps") & result.emmeans["by"].notna()]
    assert len(cells) == 3 * 2 and set(cells["knob"]) == {SOMAXCONN} and set(cells["by"]) == {ABORT_KNOB}


# ---- figures on the real example -----------------------------------------------------------------


def test_interaction_plot_one_line_per_level_of_the_second_knob(abort: tuple) -> None:
    _, inputs, result = abort
    fig = figures.interaction_plot(result.emmeans, "qps", inputs.baseline)
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    ax = fig.axes[0]
    assert ax.get_title() == f"{SOMAXCONN} × {ABORT_KNOB}"
    assert ax.get_yscale() == "log"                      # qps is modelled on the log scale
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16", "128", "4096\n(baseline)"]
    legend = ax.get_legend()
    assert legend.get_title().get_text() == ABORT_KNOB
    assert [t.get_text() for t in legend.get_texts()] == ["False (baseline)", "True"]
    assert len(ax.containers) == 2                       # one errorbar line per level of the second knob
    # the plotted means are the model's cell means (geometric, in qps)
    cells = result.emmeans[(result.emmeans["metric"] == "qps") & result.emmeans["by"].notna()]
    plotted = np.sort(np.concatenate([container.lines[0].get_ydata() for container in ax.containers]))
    assert plotted == pytest.approx(np.sort(cells["mean"].to_numpy(float)))
    assert len(figures.to_png(fig)) > 5000


def test_main_effects_figure_shares_the_y_range(abort: tuple) -> None:
    _, inputs, result = abort
    fig = figures.main_effects_figure(result.emmeans, "latency_mean_ms", inputs.baseline)
    assert [ax.get_xlabel() for ax in fig.axes] == [SOMAXCONN, ABORT_KNOB]
    assert fig.axes[0].get_ylim() == pytest.approx(fig.axes[1].get_ylim())
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["False\n(baseline)", "True"]


def test_pareto_of_the_standardised_effects(abort: tuple) -> None:
    _, _, result = abort
    df = _residual_df(result, "qps")
    fig = figures.effects_pareto_figure(result.standardized_effects, "qps", 0.05, df)
    ax = fig.axes[0]
    effects = result.standardized_effects[result.standardized_effects["metric"] == "qps"]
    assert [t.get_text() for t in ax.get_yticklabels()] == effects.sort_values("t", key=abs)["term"].tolist()
    assert [p.get_width() for p in ax.patches] == pytest.approx(sorted(effects["t"].abs()))
    critical = [line.get_xdata()[0] for line in ax.lines]
    assert critical == pytest.approx([ss.t.ppf(0.975, df)])


def test_residuals_figure(abort: tuple) -> None:
    _, _, result = abort
    fig = figures.residuals_figure(result.residuals, "qps", "log")
    left, right = fig.axes
    assert left.get_xlabel() == "fitted log(qps)"
    rows = result.residuals[result.residuals["metric"] == "qps"]
    assert len(left.collections[0].get_offsets()) == len(rows) == 24
    theoretical, ordered = np.asarray(right.collections[0].get_offsets(), dtype=float).T
    assert ordered == pytest.approx(np.sort(rows["studentized"].to_numpy(float)))
    assert theoretical == pytest.approx(ss.probplot(rows["studentized"].to_numpy(float))[0][0])


def test_model_figures_say_which_metric_is_missing(abort: tuple) -> None:
    _, _, result = abort
    with pytest.raises(DataError, match="metrics present: qps, latency_mean_ms"):
        figures.interaction_plot(result.emmeans, "lost")
    marginal = result.emmeans[result.emmeans["by"].isna()]
    with pytest.raises(DataError, match="no interaction"):
        figures.interaction_plot(marginal, "qps")
    with pytest.raises(DataError, match="no residuals"):
        figures.residuals_figure(result.residuals.assign(fitted=np.nan), "qps")


# ---- synthetic frames ------------------------------------------------------------------------------


def test_half_normal_labels_the_significant_terms(fractional: tuple) -> None:
    _, result = fractional
    effects = result.standardized_effects
    fig = figures.half_normal_figure(effects, "y", 0.05, _residual_df(result, "y"))
    ax = fig.axes[0]
    labelled = {t.get_text() for t in ax.texts}
    significant = effects[effects["p"] < 0.05]
    assert labelled == {f"{term} (+)" for term in significant["term"]} == {"a (+)", "a:c (+)"}
    points = np.concatenate([np.asarray(c.get_offsets(), dtype=float) for c in ax.collections])
    assert len(points) == len(effects) == 7
    assert sorted(points[:, 0]) == pytest.approx(ss.halfnorm.ppf((np.arange(1, 8) - 0.5) / 7))


def test_interaction_plot_names_aliases(fractional: tuple) -> None:
    inputs, result = fractional
    fig = figures.interaction_plot(result.emmeans, "y", inputs.baseline, {"a:c": "b:d"})
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["a × b", "a × c\n(aliased with b:d)", "a × d"]


def test_saturated_design_has_a_half_normal_plot_and_no_residuals() -> None:
    """A 2^(7-4) design (8 runs, 7 two-level knobs) leaves no residual df: Lenth's method, no residuals."""
    from tunelab.stats import screen

    rng = np.random.default_rng(0)
    data = pd.DataFrame([{"a": a, "b": b, "c": c, "d": a * b, "e": a * c, "f": b * c, "g": a * b * c,
                          "y": 100 * math.exp(0.4 * a + rng.normal(0, 0.02))}
                         for a, b, c in itertools.product([-1, 1], repeat=3)])
    result = screen(data, [{"name": "y", "sesoi_pct": 5.0}], list("abcdefg"), {k: -1 for k in "abcdefg"},
                    n_boot=200, design={"type": "fractional_factorial"})
    assert result.model_terms["test"].eq("lenth").all()
    with pytest.raises(DataError, match="no residuals"):
        figures.residuals_figure(result.residuals, "y")
    fig = figures.half_normal_figure(result.standardized_effects, "y", 0.05, _residual_df(result, "y"))
    assert {t.get_text() for t in fig.axes[0].texts} == {"a (+)"}
    text = wording.model_markdown(result)
    assert "Lenth's pseudo standard error" in text and "`a` = `b:d = c:e = f:g`" in text


def test_response_curves_figure() -> None:
    x = np.linspace(1, 1000, 21)
    response = pd.concat([
        pd.DataFrame({"metric": "qps", "knob": "buf", "x": x, "estimate": 0.01 * x, "ci_low": 0.01 * x - 1,
                      "ci_high": 0.01 * x + 1}),
        pd.DataFrame({"metric": "qps", "knob": "backlog", "x": x, "estimate": -0.002 * x, "ci_low": -0.002 * x - 2,
                      "ci_high": -0.002 * x + 2}),
        pd.DataFrame({"metric": "lat", "knob": "buf", "x": x, "estimate": 0.0, "ci_low": -1.0, "ci_high": 1.0}),
    ])
    fig = figures.response_curves_figure(response, "qps", baseline={"buf": 100}, band=(-5, 5),
                                         x_scale={"buf": "log"})
    buf, backlog = fig.axes
    assert (buf.get_xlabel(), backlog.get_xlabel()) == ("buf", "backlog")
    assert buf.get_xscale() == "log" and backlog.get_xscale() == "linear"
    estimate = [line for line in buf.lines if line.get_label() == "estimate"][0]
    assert estimate.get_ydata() == pytest.approx(0.01 * x)
    assert [line.get_xdata()[0] for line in buf.lines if line.get_label() == "baseline"] == [100]
    assert not any(line.get_label() == "baseline" for line in backlog.lines)
    assert any(p.get_label() == "±SESOI" for p in buf.patches)
    pct = response.assign(effect_pct=response["estimate"], effect_ci_low=response["ci_low"],
                          effect_ci_high=response["ci_high"])
    assert len(figures.response_curves_figure(pct, "lat", columns=("effect_pct", "effect_ci_low",
                                                                   "effect_ci_high")).axes) == 1
    with pytest.raises(DataError, match="ci_high"):
        figures.response_curves_figure(response.drop(columns="ci_high"), "qps")
    with pytest.raises(DataError, match="metrics present: qps, lat"):
        figures.response_curves_figure(response, "lost")


# ---- words -----------------------------------------------------------------------------------------


def _verdict(**values) -> dict:
    row = {"knob": "k", "metric": "qps", "test": "ols_type2", "reason": "model residuals normal enough: type II F tests",
           "p": 0.001, "p_adj": 0.002, "significant": True, "level": 16, "effect_pct": -40.0,
           "effect_ci_low": -50.0, "effect_ci_high": -30.0, "eta2": 0.5, "direction": "worse", "relevant": True,
           "equivalent": False, "verdict": "matters", "effect_abs": math.nan, "effect_abs_ci_low": math.nan,
           "effect_abs_ci_high": math.nan, "scale": "log", "only_when": None}
    return {**row, **values}


def test_summary_says_matters_only_when_and_describes_interactions() -> None:
    reason = ("model residuals normal enough: type II F tests; qps at b=0: k=16 -60.0 % [-70.0 %, -50.0 %]; "
              "at b=1: k=16 -2.0 % [-9.0 %, +5.0 %] (no clear effect)")
    verdicts = pd.DataFrame([
        _verdict(only_when="b=0"),
        _verdict(knob="b", level=1, verdict="inconclusive", significant=False, relevant=False,
                 effect_pct=1.0, effect_ci_low=-3.0, effect_ci_high=5.0, p_adj=0.8, direction="none"),
        _verdict(knob="k:b", level=None, reason=reason, effect_pct=58.0, effect_ci_low=40.0,
                 effect_ci_high=80.0, only_when="b=0"),
        _verdict(knob="k", metric="lost", level=16, effect_pct=math.nan, effect_abs=12.0, effect_abs_ci_low=4.0,
                 effect_abs_ci_high=20.0, scale="linear", direction="worse"),
    ])
    terms = pd.DataFrame({"metric": ["qps"], "term": ["k:b"], "aliases": ["c:d"]})
    result = SimpleNamespace(verdicts=verdicts, model_terms=terms, design=AnalysisKind.FACTORIAL)
    inputs = SimpleNamespace(metrics=[{"name": "qps", "direction": "maximize", "sesoi_pct": 5.0},
                                      {"name": "lost", "direction": "minimize", "sesoi_abs": 10.0}],
                             baseline={"k": 4096, "b": 1}, knobs=["k", "b"])
    lines = wording.summary_sentences(result, inputs)
    text = "\n".join(lines)
    assert "`k` = 16 lowers qps by 40.0 % [95 % CI -50.0 % to -30.0 %]" in text
    assert "**matters only when `b` = 0** (worse)" in text
    interaction = next(line for line in lines if line.startswith("The effect of"))
    assert interaction.startswith("The effect of `k` on qps **depends on** `b` (interaction, p_adj = 0.002")
    assert "at b=0: k=16 -60.0 %" in interaction and "(aliased with `c:d`" in interaction
    assert "it matters only when `b` = 0" in interaction
    assert "model residuals" not in interaction          # the model's route is in the methods, not here
    assert "`b` = 1 changes qps by +1.0 %" in text and "its effect depends on `k`" in text
    assert "`k` = 16 raises lost by 12 [95 % CI +4 to +20]" in text
    head = wording.summary_markdown(result, inputs).split("\n")[0]
    assert head.startswith("1 of 2 knobs") and "The effect of `k` depends on `b` (qps)" in head
    frame = tables.verdict_frame(verdicts, inputs.metrics)
    assert frame["only when"].tolist() == ["b=0", "-", "b=0", "-"]
    assert frame.loc[3, "change vs baseline"] == "+12 [+4, +20]"
    assert frame.loc[2, "change vs baseline"].startswith("effects differ by +58")


def test_sesoi_text_for_absolute_smallest_effects() -> None:
    assert wording.sesoi_text({"name": "lost", "sesoi_abs": 10.0}) == "±10 (absolute)"
    assert wording.sesoi_text({"name": "qps", "sesoi_pct": 5.0}) == "±5 %"


def test_methods_name_the_model_and_its_tests(abort: tuple) -> None:
    study, inputs, result = abort
    text = wording.methods_markdown(study, inputs, result)
    assert "one linear model per metric" in text
    assert "Shapiro–Wilk" not in text.split("**Tests chosen and why.**")[0]
    for words in ("Breusch–Pagan", "HC3 Wald", "Freedman–Lane", "Lenth", "Dunnett", "qps ±5 %",
                  "latency_mean_ms ±10 %", f"log(qps) ~ block + {SOMAXCONN} + {ABORT_KNOB} + {SOMAXCONN}:{ABORT_KNOB}"):
        assert words in text, words
    tests = set(result.model_terms["test"])
    assert any(wording.MODEL_TEST_TEXT[t] in text for t in tests)
    assert "bootstrap" not in text                       # the model's intervals, not the OAT bootstrap


def test_model_markdown_lists_aliases(fractional: tuple) -> None:
    inputs, result = fractional
    text = wording.model_markdown(result, inputs)
    assert "`log(y) ~ block + a + b + c + d + a:b + a:c + a:d`" in text
    assert "`a:b` = `c:d`; `a:c` = `b:d`; `a:d` = `b:c`" in text
    assert "aliases of the design" not in text           # said once
    terms = tables.model_terms_frame(result.model_terms)
    assert list(terms.columns) == ["metric", "term", "kind", "df", "statistic", "p", "p_adj", "partial η²", "test",
                                   "aliases"]


# ---- the executed report -----------------------------------------------------------------------------


class _Page(HTMLParser):
    """Headings, images (alt, src) and text of a rendered notebook page."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.headings: list[str] = []
        self.images: list[tuple[str, str]] = []
        self.text: list[str] = []
        self._heading = False
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("h2", "h3"):
            self._heading = True
            self.headings.append("")
        if tag == "img":
            a = dict(attrs)
            self.images.append((a.get("alt") or "", a.get("src") or ""))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h2", "h3"):
            self._heading = False

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._heading:
            self.headings[-1] += data


def _png(src: str) -> tuple[int, int]:
    from PIL import Image

    assert src.startswith("data:image/png;base64,")
    return Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1]))).size


def test_abort_report_shows_the_model(abort_store: Path, tmp_path: Path) -> None:
    from tunelab.report import build_report

    index = build_report(abort_store, tmp_path / "report", notebooks=["01"], n_boot=200)
    for output in nb_outputs(index.parent / "01_screen.ipynb"):     # clean (test_notebooks.py leaves this store to us)
        assert output["output_type"] != "error", f"{output.get('ename')}: {output.get('evalue')}"
        assert not (output["output_type"] == "stream" and output["name"] == "stderr"), output["text"][:500]
    page = _Page((index.parent / "01_screen.html").read_text(encoding="utf-8"))
    headings = [h.strip().rstrip("¶").strip() for h in page.headings]
    model = headings.index("The model")
    assert headings[model + 1:model + 5] == ["Tests per term", "Estimated means and interactions",
                                             "Which effects stand out", "Residual diagnostics"]
    assert headings.index("Data overview") > model + 4
    alts = {alt: src for alt, src in page.images}
    interaction = f"interaction plot of qps: {SOMAXCONN} × {ABORT_KNOB} (model means, 95 % CI)"
    assert interaction in alts and f"interaction plot of latency_mean_ms: {SOMAXCONN} × {ABORT_KNOB} " \
        "(model means, 95 % CI)" in alts
    width, height = _png(alts[interaction])
    assert width > 300 and height > 200
    for alt in ("main-effects plot of qps: model mean per knob level with 95 % CI",
                "Pareto chart of the standardised effects on qps",
                "residual diagnostics of the model of qps: residuals vs fitted and normal Q-Q plot"):
        assert alt in alts, sorted(alts)
    assert all(alt for alt, _ in page.images), "an image without alt text"
    text = " ".join(page.text)
    assert f"log(qps) ~ block + {SOMAXCONN}" in text
    assert "One-at-a-time design:" not in text
    index_page = _Page(index.read_text(encoding="utf-8"))
    assert "interaction plot of qps (model means)" in {alt for alt, _ in index_page.images}
    assert "depends on" in " ".join(index_page.text)


def test_oat_report_skips_the_model(default_report: Path) -> None:
    """The default example is one-at-a-time: the model section says so in one sentence, with no figure."""
    page = _Page((default_report.parent / "01_screen.html").read_text(encoding="utf-8"))
    text = " ".join(page.text)
    assert "One-at-a-time design: every run varies at most one knob, so there is no model" in text
    headings = [h.strip().rstrip("¶").strip() for h in page.headings]
    assert "The model" in headings and "Estimated means and interactions" not in headings
    assert not [alt for alt, _ in page.images if "model" in alt or "interaction" in alt]


def test_morris_figure_on_salib_elementary_effects() -> None:
    """A Morris design (SALib sample) of a response where only `a` acts: the plane puts `a` right of the SESOI."""
    from SALib.sample import morris as morris_sample

    from tunelab.stats.response import morris_effects

    problem = {"num_vars": 2, "names": ["a", "b"], "bounds": [[0.0, 1.0], [0.0, 1.0]]}
    points = pd.DataFrame(morris_sample.sample(problem, N=6, num_levels=4, seed=1), columns=["a", "b"])
    runs = points.assign(y=np.exp(0.3 * points["a"]) * 100)
    table = morris_effects(points, runs, "y", ["a", "b"], {"a": (0.0, 1.0), "b": (0.0, 1.0)}, log_y=True)
    fig = figures.morris_figure(table.assign(metric="y"), "y", sesoi=np.log1p(0.05))
    ax = fig.axes[0]
    labels = {text.get_text(): text.xy for text in ax.texts}
    assert labels["a"][0] == pytest.approx(0.3, abs=1e-9) and labels["b"][0] == pytest.approx(0.0, abs=1e-12)
    assert ax.get_xlabel().startswith("mu*")
