"""Seed 001's page parts: both validations side by side (issue 27.4) and the kernel counters under overload
(issue 29.4), on stores made here: the shipped factorial with counters written into it by a known rule, and
a duet validation on the simulator. Every expected number is computed from the rule, never from the code."""
from __future__ import annotations

import json
import math
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as ss

import tunelab
from tunelab.model import MeasurementKind
from tunelab.report import refinement
from tunelab.report.loading import load_study
from tunelab.seeds import s001_diiner as s001
from tunelab.simulator import get_surface
from tunelab.store import Store

WINDOW_S = 4.0


def _rule(profile: str, somaxconn: int, abort: bool, replicate: int, listening: bool,
          resets: str = "TcpExt.TCPAbortOnOverflow") -> dict[str, float]:
    """Counters per second of one trial: with ``listening`` the listen queue overflows at somaxconn 128 under
    overload (1000 + 10 r per second) and abort_on_overflow=1 turns them into resets (900 + 10 r, counted
    in ``resets``); otherwise the overflow counters take the same values in every cell and nothing is reset.
    ``Tcp.InSegs`` moves everywhere alike."""
    noise = 10.0 * replicate
    full = profile == "overload" and somaxconn == 128
    overflow = (1000.0 if full else 0.0) + noise if listening else 50.0 + noise
    reset = 900.0 + noise if listening and full and abort else 0.0
    return {"TcpExt.ListenOverflows": overflow, "TcpExt.ListenDrops": overflow, "TcpExt.TCPAbortOnOverflow": 0.0,
            "TcpExt.EmbryonicRsts": 0.0, resets: reset, "Tcp.InSegs": 5000.0 + noise}


def _copy(source: Path, directory: Path) -> Path:
    """``source`` (a store of the session's consistent copy) copied into ``directory``, its schema migrated
    (a writable open adds the counters column) and every trial's counters emptied."""
    directory.mkdir(parents=True, exist_ok=True)
    path = Path(shutil.copyfile(source, directory / source.name))
    with Store(path) as _:
        pass
    with sqlite3.connect(path) as db:
        db.execute("UPDATE trials SET counters = NULL")
    db.close()
    return path


def _with_counters(source: Path, directory: Path, listening: bool, resets: str = "TcpExt.TCPAbortOnOverflow") -> Path:
    """A copy of the factorial ``source`` whose trials carry counters by :func:`_rule`."""
    path = _copy(source, directory)
    runs = load_study(path).tidy["screen"]
    with sqlite3.connect(path) as db:
        for row in runs.to_dict("records"):
            rates = _rule(row["profile"], int(row[s001.SOMAXCONN]), bool(row[s001.ABORT]), int(row["replicate"]),
                          listening, resets)
            record = {"window_s": WINDOW_S, "deltas": {k: v * WINDOW_S for k, v in rates.items()}, "problems": []}
            db.execute("UPDATE trials SET counters = ? WHERE trial_id = ?", (json.dumps(record), int(row["trial_id"])))
    db.close()
    return path


@pytest.fixture(scope="module")
def factorial(recorded_stores: Path) -> Path:
    return recorded_stores / s001.SCREEN_STORE


def _cell_rates(runs: pd.DataFrame, where: dict, counter: str, resets: str) -> np.ndarray:
    mask = np.ones(len(runs), dtype=bool)
    for column, value in where.items():
        mask &= (runs[column] == value).to_numpy(bool)
    return np.array([_rule(r["profile"], int(r[s001.SOMAXCONN]), bool(r[s001.ABORT]), int(r["replicate"]),
                           True, resets)[counter] for r in runs[mask].to_dict("records")])


@pytest.mark.parametrize("resets", ["TcpExt.TCPAbortOnOverflow", "TcpExt.EmbryonicRsts"])
def test_listen_queue_checks_follow_the_rule(resets: str, factorial: Path, tmp_path: Path) -> None:
    path = _with_counters(factorial, tmp_path / "on", listening=True, resets=resets)
    runs = load_study(path).tidy["screen"]
    checks = s001.listen_queue_checks(runs)
    assert len(checks) == len(s001.LISTEN_CHECKS) * len(s001.LISTEN_QUEUE)
    for check, level, base in s001.LISTEN_CHECKS:
        for counter in s001.LISTEN_QUEUE:
            row = checks[(checks["check"] == check) & (checks["counter"] == counter)].iloc[0]
            x, y = (_cell_rates(runs, where, counter, resets) for where in (level, base))
            assert (row["n"], row["baseline_n"]) == (len(x), len(y))
            assert row["difference"] == pytest.approx(x.mean() - y.mean())
            if x.std() > 0 or y.std() > 0:
                assert row["p"] == pytest.approx(ss.ttest_ind(x, y, equal_var=True).pvalue, rel=1e-9, abs=1e-300)
            assert bool(row["moved"]) == (counter != "TcpExt.TCPAbortOnOverflow" if resets == "TcpExt.EmbryonicRsts"
                                          else counter != "TcpExt.EmbryonicRsts")
    lines = s001.listen_queue_reading(checks, "inconclusive")
    assert lines[0].startswith("Under overload the listen queue overflows at somaxconn 128: "
                               "TcpExt.ListenOverflows +1,000/s")     # ~999.5/s, in full (never +1e+03)
    assert "and more than at low load" in lines[0]
    assert "reading holds in the lab" in lines[1] and f"{resets} +9" in lines[1]
    assert "the validations do not show (inconclusive)" in lines[1]
    assert "the validations see lost queries fall" in s001.listen_queue_reading(checks, "improve")[1]


def test_listen_queue_reading_with_an_overflow_but_no_reset(factorial: Path, tmp_path: Path) -> None:
    path = _with_counters(factorial, tmp_path / "noreset", listening=True, resets="TcpExt.TCPBacklogDrop")
    first, second = s001.listen_queue_reading(s001.listen_queue_checks(load_study(path).tidy["screen"]), "improve")
    assert first.startswith("Under overload the listen queue overflows at somaxconn 128")
    assert second == ("abort_on_overflow=1 reset no more connections measurably at somaxconn 128 ("
                      "TcpExt.TCPAbortOnOverflow stayed 0 in every trial, TcpExt.EmbryonicRsts stayed 0 in every "
                      "trial), so the lab shows the overflow the paper's reading needs, but not the knob acting on it.")


def test_listen_queue_reading_without_an_overflow(factorial: Path, tmp_path: Path) -> None:
    path = _with_counters(factorial, tmp_path / "off", listening=False)
    checks = s001.listen_queue_checks(load_study(path).tidy["screen"])
    overflow = checks[checks["counter"] == "TcpExt.ListenOverflows"]
    assert (overflow["difference"].abs() < 1e-9).all() and not overflow["significant"].any()
    resets = checks[checks["counter"].isin(s001.RESETS)]
    assert not resets["moved"].any() and resets["q"].isna().all()     # 0 in every run: dropped by the tidy frame
    first, second = s001.listen_queue_reading(checks, "improve")
    assert first.startswith("Under overload the lab does not show the listen queue overflowing more at somaxconn 128")
    assert second.startswith("Without an overflowing queue abort_on_overflow has nothing to act on")
    shown = s001.listen_queue_frame(checks)
    assert set(shown.loc[shown["counter"].isin(s001.RESETS), "change per second [95 % CI]"]) == {
        "never moved (0 in every run)"}


def _judged(rows: list[tuple[str, float, float, int]]) -> pd.DataFrame:
    return pd.DataFrame([{"metric": m, "pct_change": (lo + hi) / 2, "ci_low": lo, "ci_high": hi, "blocks": n,
                          "tost_p": 0.5, "verdict": "inconclusive"} for m, lo, hi, n in rows])


@pytest.mark.parametrize("duet_ci, words", [((-10.0, 30.0), "4.0 times narrower than"),   # 1.4596 / 0.3677 = 3.97
                                            ((-70.0, 130.0), "1.4 times wider than"),     # 2.0369 / 1.4596 = 1.395
                                            ((-60.0, 130.0), "about as wide as")])        # 1.7492 / 1.4596 = 1.198
def test_ci_width_sentence(duet_ci: tuple[float, float], words: str, tmp_path: Path) -> None:
    judged = {MeasurementKind.SEQUENTIAL: _judged([("lost", -54.0, 98.0, 6), ("qps", -10.0, 12.0, 6)]),
              MeasurementKind.DUET: _judged([("qps", -2.0, 3.0, 12), ("lost", *duet_ci, 12)])}
    sequential_width = math.log(198 / 46)                    # 1.4598
    duet_width = math.log((100 + duet_ci[1]) / (100 + duet_ci[0]))
    ratio = sequential_width / duet_width
    assert words.startswith(("about", f"{ratio:.1f} times narrower", f"{1 / ratio:.1f} times wider"))
    text = s001.ci_width_sentence(judged, tmp_path)
    assert text.startswith("On lost, the duet's 95 % CI, ")
    assert f"from 12 pairs (24 trials), is {words} the sequential one, +22 % [-54 %, +98 %] from 6 ABBA blocks " \
        "(24 trials)" in text                                  # the change: the interval's midpoint (_judged)
    frame = s001.validations_frame(judged)
    assert frame["measurement"].tolist() == ["sequential ABBA"] * 2 + ["duet"] * 2
    assert frame["CI width (log ratio)"].tolist() == pytest.approx(
        [sequential_width, math.log(112 / 90), math.log(103 / 98), duet_width])
    assert frame["measured"].tolist()[1:3] == ["6 ABBA blocks (24 trials)", "12 pairs (24 trials)"]


def test_a_missing_duet_says_not_recorded_with_the_command(tmp_path: Path) -> None:
    judged = {MeasurementKind.SEQUENTIAL: _judged([("lost", -54.0, 98.0, 6)])}
    text = s001.ci_width_sentence(judged, tmp_path)
    assert text.startswith("The duet validation is not recorded yet: `tunelab gallery --record --only 001 --stores "
                           f"{tmp_path}`")
    last = s001.validations_frame(judged).iloc[-1]
    assert (last["measurement"], last["verdict"]) == ("duet", "not recorded yet")


@pytest.mark.parametrize("verdicts, expected", [(["inconclusive"], "inconclusive"),
                                                (["inconclusive", "improve"], "improve"),
                                                (["regress", "inconclusive"], "regress"),
                                                (["improve", "regress"], "inconclusive"), ([], "n/a")])
def test_combined_verdict(verdicts: list[str], expected: str) -> None:
    assert s001.combined_verdict(verdicts) == expected


def _simulated_duet(path: Path) -> tunelab.ValidateRun:
    surface = get_surface("simple")
    baseline = {**surface.baseline, s001.SOMAXCONN: 128, s001.ABORT: False}
    return tunelab.validate("simulator", {**baseline, s001.ABORT: True}, baseline=baseline,
                            metrics=["qps:max:5", "latency_mean_ms:min:5"], measurement="duet", pairs=6, store=path,
                            write_sysctl=False)


def test_duet_comparisons_read_back_the_validation(tmp_path: Path) -> None:
    run = _simulated_duet(tmp_path / "duet.sqlite")
    study = load_study(tmp_path / "duet.sqlite")
    assert refinement.abba_comparisons(study) == []
    (comparison,) = refinement.duet_comparisons(study)
    assert comparison.measurement is MeasurementKind.DUET and len(comparison.measurements) == 12
    a_sides = comparison.measurements[comparison.measurements["arm"] == "A"].sort_values("pair")["side"].tolist()
    assert a_sides == [0, 1, 1, 0, 0, 1]                                  # the crossover: 0 1 1 0 repeated
    assert (comparison.measurements.groupby("pair")["arm"].apply(lambda a: "".join(sorted(a))) == "AB").all()
    judged = s001.validation_table(tmp_path / "duet.sqlite", MeasurementKind.DUET)
    recorded = run.confirmation.table.set_index("metric")
    for row in judged.itertuples(index=False):
        assert row.blocks == 6
        assert (row.pct_change, row.ci_low, row.ci_high) == pytest.approx(
            tuple(recorded.loc[row.metric, ["pct_change", "ci_low", "ci_high"]]))
        assert row.verdict == recorded.loc[row.metric, "verdict"]


def test_page_with_counters_and_both_validations(factorial: Path, tmp_path: Path) -> None:
    stores = tmp_path / "stores"
    _with_counters(factorial, stores, listening=True)
    _copy(factorial.parent / s001.VALIDATE_STORE, stores)
    _simulated_duet(stores / s001.DUET_STORE)
    page = s001.page(stores)
    assert [p.name for p in page.stores] == [s001.SCREEN_STORE, s001.VALIDATE_STORE, s001.DUET_STORE]
    validation, mechanisms = page.sections
    assert validation.tables[0].frame["measurement"].unique().tolist() == ["sequential ABBA", "duet"]
    assert validation.paragraphs[1].startswith("On qps, the duet's 95 % CI, ")   # the simulator measures no lost
    assert "duet" in page.measured.verdict
    assert mechanisms.paragraphs[0].startswith("Under overload the listen queue overflows at somaxconn 128")
    assert "kernel counters" in mechanisms.paragraphs[2]
    captions = [t.caption for t in mechanisms.tables]
    assert captions[-1].startswith("The listen queue under overload")
    if any(c.startswith("Mechanisms of net.core.somaxconn") for c in captions):   # somaxconn=128 matters on qps
        assert mechanisms.figures and mechanisms.figures[0].png.startswith(b"\x89PNG")


@pytest.mark.parametrize("duet_store", ["absent", "without pairs"])
def test_page_without_counters_or_duet_says_so(duet_store: str, factorial: Path, tmp_path: Path) -> None:
    stores = tmp_path / "stores"
    for name in (s001.SCREEN_STORE, s001.VALIDATE_STORE):
        _copy(factorial.parent / name, stores)
    if duet_store == "without pairs":          # a duet recording stopped before its first pair
        with Store.open(stores / s001.DUET_STORE, study="validate-lab", design_hash="h", design_text=""):
            pass
    page = s001.page(stores)
    assert [p.name for p in page.stores] == [s001.SCREEN_STORE, s001.VALIDATE_STORE]
    validation, mechanisms = page.sections
    assert "not recorded yet" in validation.paragraphs[1] and "--record --only 001" in validation.paragraphs[1]
    assert len(mechanisms.paragraphs) == 1 and not mechanisms.tables and not mechanisms.figures
    assert "no kernel counters" in mechanisms.paragraphs[0] and "--record --only 001" in mechanisms.paragraphs[0]
    assert math.isnan(validation.tables[0].frame["CI width (log ratio)"].iloc[-1])
