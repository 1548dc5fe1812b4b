"""The methods section and the plain-words summary, written from the example study."""
from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from tunelab import formatting
from tunelab.report import load_study, loading, screen_study, tables, wording


@pytest.fixture(scope="module")
def screened(default_store: Path) -> tuple:
    study = load_study(default_store)
    inputs, result = screen_study(study, n_boot=200)
    return study, inputs, result


def test_summary_has_one_sentence_per_knob_and_metric(screened: tuple) -> None:
    _, inputs, result = screened
    lines = wording.summary_sentences(result, inputs)
    assert len(lines) == len(result.verdicts)
    # the interval at the verdict's level (issue 37): a sequential look's 1 - alpha_nominal, e.g. 98.75 %
    matters = re.compile(r"^`[^`]+` = \S.* (lowers|raises) \w+ by \d+(\.\d+)? % \[(?P<level>[\d.]+) % CI [-+]\d.* % to "
                         r"[-+]\d.* %\] "
                         r"against the baseline \S.*, p_adj (< 0\.001|= [\d.e-]+) \(.+\): \*\*matters\*\*")
    for row, line in zip(result.verdicts.sort_values("verdict", key=lambda v: v.map(wording.VERDICT_ORDER),
                                                     kind="stable").itertuples(), lines):
        assert f"`{row.knob}`" in line and row.metric in line
        if row.verdict == "matters":
            found = matters.match(line)
            assert found, line
            assert float(found["level"]) == pytest.approx(100 * row.ci_level, abs=0.005), line


def test_methods_text(screened: tuple) -> None:
    study, inputs, result = screened
    text = wording.methods_markdown(study, inputs, result)
    design = study.design
    assert f"`{design.design_type}`" in text and f"{design.replicates} replicates" in text
    assert f"Load generator `{design.load.generator}`, profile `{design.load.profile}`" in text
    assert f"{design.warmup_s:g} s warm-up" in text and f"{design.measure_s:g} s measured" in text
    for knob in inputs.knobs:
        assert f"`{knob}`" in text
    for package in ("tunelab", "numpy", "scipy", "statsmodels", "pingouin"):
        assert re.search(rf"{package} \d", text), package
    host = loading.machine(study)
    assert host.get("kernel") and f"Linux kernel {host['kernel']}" in text
    assert str(host.get("cpu_model")) in text


def test_verdict_frame_formats(screened: tuple) -> None:
    _, _, result = screened
    frame = tables.verdict_frame(result.verdicts)
    assert list(frame.columns[:3]) == ["knob", "metric", "verdict"]
    assert frame["p_adj"].str.match(r"^(< 0\.001|n/a|[\d.e-]+)$").all()


def test_formatting_helpers() -> None:
    assert formatting.fmt_ci(-99.12, -98.95) == "[95 % CI -99.1 % to -99.0 %]"
    assert formatting.fmt_ci(-99.04, -98.96) == "[95 % CI -99.04 % to -98.96 %]"
    assert formatting.fmt_p(0.0004) == "p_adj < 0.001"
    assert formatting.fmt_pct(float("nan")) == "n/a"


def test_methods_report_the_foreign_cpu_load(screened: tuple) -> None:
    """Other processes are the main noise source in the lab: the methods say how busy the machine was."""
    import pandas as pd

    study, inputs, result = screened
    cpu_s = study.tidy["screen"]["foreign_cpu_s"].dropna()
    text = wording.methods_markdown(study, inputs, result)
    assert f"a median of {cpu_s.median():.2g} CPU-seconds" in text
    busy = loading.foreign_load(pd.DataFrame({"foreign_cpu_s": [0.1, 4.0, None]}), n_cpus=2, trial_s=8)
    assert busy.tolist() == pytest.approx([0.1 / 16, 0.25])


def test_methods_counts_the_runs_of_a_sequential_design_per_round(screened: tuple) -> None:
    """The example ran in rounds (sequential replicates): the plan covers round 1 only, so the methods say
    how many runs round 1 planned and how many ran in how many rounds, never "27 runs planned, 54 usable".
    The expected numbers are read from the store's trials, not from the screen."""
    study, inputs, result = screened
    text = wording.methods_markdown(study, inputs, result)
    screen = study.tidy["screen"]
    rounds = int(screen["round"].nunique())
    first_round = int((screen["round"] == screen["round"].min()).sum())
    ran = int((study.trials["phase"] == "screen").sum())
    usable = int(study.trials[study.trials["phase"] == "screen"]["status"].eq("ok").sum())
    assert rounds > 1 and ran > first_round
    assert f", {first_round} runs planned in round 1, {ran} run in {rounds} rounds. {usable} runs were usable" in text
    assert f"{first_round} runs planned." not in text and f"{first_round} runs planned," not in text


def test_result_notes_finds_the_screen_notes_of_one_knob_and_metric(screened: tuple) -> None:
    """The post-hoc page shows every note the screen result carries for a knob × metric, whatever the
    screen calls it: a verdict column holding ``note``, or a ``settings["notes"]`` entry naming both."""
    _, _, result = screened
    row = result.verdicts.iloc[0]
    knob, metric = row["knob"], row["metric"]
    other_metric = next(m for m in result.verdicts["metric"] if m != metric)
    why = "The post-hoc test adjusts over every pair, the verdict's interval only the baseline contrast."
    verdicts = result.verdicts.assign(verdict_note=[why if i == 0 else None for i in range(len(result.verdicts))])
    notes = [f"`{knob}` × {metric}: a second sentence.", f"`{knob}` × {other_metric}: not this one.",
             {"knob": knob, "metric": metric, "text": "a third, as a mapping"}, f"{metric}: a model note"]
    carrying = SimpleNamespace(verdicts=verdicts, settings={**result.settings, "notes": notes})
    assert wording.result_notes(carrying, knob, metric) == [why, notes[0], "a third, as a mapping"]
    assert wording.result_notes(carrying, knob, other_metric) == [notes[1]]


def test_every_posthoc_method_the_report_can_choose_has_its_name_and_estimate_wording():
    """The duet's ``duet_paired_t`` once reached the post-hoc notebook without a name (KeyError in its cell 6):
    every method :func:`significant_pairs` can pick must be named, and its ``estimate`` column explained."""
    from tunelab.report.tables import POSTHOC_METHOD_OF_TEST
    from tunelab.report.wording import POSTHOC_TEXT, posthoc_estimate_text

    assert set(POSTHOC_METHOD_OF_TEST.values()) <= set(POSTHOC_TEXT)
    assert "% change" in posthoc_estimate_text("duet_paired_t")
    assert "mean ranks" in posthoc_estimate_text("dunn")
    assert "mean(group2) − mean(group1)" in posthoc_estimate_text("tukey_hsd")
