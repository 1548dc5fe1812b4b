"""Everything a report reads from a study's store, loaded once into a :class:`Study`.

The screen's arguments (metrics, knobs, baselines, alpha, correction) come from the design stored
with the study, through the same code path as ``tunelab screen STUDY``
(:func:`tunelab.study_data.screen_inputs`), so a report and the CLI always analyse the same thing:
:func:`study_inputs` returns them as a :class:`StudyInputs`, :func:`screen_study` runs the screen.
Facts the methods section states (machine, software versions, repeated trials, planned runs) are read
here too.

Examples
--------
A lab recording shipped in ``data/examples`` (run from the checkout):

>>> study = load_study("default", data_dir="data/examples")
>>> inputs, result = screen_study(study, n_boot=200)
>>> result.verdicts.loc[0, ["knob", "metric", "verdict"]].tolist()
['net.core.somaxconn', 'qps', 'matters']
"""
from __future__ import annotations

import difflib
import os
import platform
from dataclasses import dataclass, field, fields
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pandas as pd

import tunelab.simulator  # noqa: F401  (registers the "simulator" target: the designs of SYNTHETIC studies name it)
from tunelab.designs import load_design_text, make_plan
from tunelab.formatting import level_label
from tunelab.errors import TunelabError
from tunelab.model import PHASES, USABLE_STATUSES, Metric
from tunelab.optimize.tune import OUTCOME_ID, outcome_of
from tunelab.store import SEARCH_BATCH_COLUMNS, SEARCH_COLUMNS, Store, store_path_for
from tunelab.study_data import BOOKKEEPING, ScreenInputs
from tunelab.study_data import screen_inputs as read_screen_inputs

if TYPE_CHECKING:
    from tunelab.stats import ScreenResult


class ReportError(TunelabError):
    """A report cannot be built as asked (no screen trials, unknown parameter, a notebook failed, ...)."""


class UnknownParameterError(ReportError):
    """A notebook parameter was given that the notebook does not declare."""


@dataclass(frozen=True)
class Study:
    """A study's store contents, read once (the store is closed afterwards).

    Attributes
    ----------
    path : Path
        The store file.
    name : str
        The study name recorded in the store.
    design : Design or None
        The parsed design stored with the study; ``None`` when the store holds no YAML design
        (simulator-only refinements, ``tunelab validate`` stores).
    design_text : str
        The stored design text (YAML, or JSON for simulator/validate stores).
    trials : DataFrame
        Every trial as stored (:meth:`tunelab.store.Store.trials`), all phases and statuses.
    tidy : dict of str to DataFrame
        Phase -> :meth:`tunelab.store.Store.tidy` frame (usable trials only).
    targets : list of dict
        Target descriptions of every run (:meth:`tunelab.store.Store.run_targets`).
    git_sha, tunelab_version, created : str or None
        Provenance of the store.
    include_flagged : bool
        Whether ``tidy`` includes flagged trials.
    searches, search_batches : DataFrame
        The stored search state as read (:meth:`tunelab.store.Store.searches`,
        :meth:`~tunelab.store.Store.search_batches`; empty for stores without it), not yet checked:
        :mod:`tunelab.report.refinement` validates it.
    search_error : str or None
        Why the stored search state could not be read (a damaged or newer store), raised by the
        refinement read-back only, so the other notebooks still build.
    tune : dict or None
        The outcome of ``tunelab tune`` when the store holds one (:func:`tunelab.optimize.tune.outcome_of`: its
        split, spend, the screen's call on every knob and the confirmed gain); its row is not in ``searches``.
    """

    path: Path
    name: str
    design: Any
    design_text: str
    trials: pd.DataFrame
    tidy: dict[str, pd.DataFrame]
    targets: list[dict[str, Any]]
    git_sha: str | None = None
    tunelab_version: str | None = None
    created: str | None = None
    include_flagged: bool = False
    searches: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SEARCH_COLUMNS))
    search_batches: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=SEARCH_BATCH_COLUMNS))
    search_error: str | None = None
    tune: dict[str, Any] | None = None

    def phase_counts(self) -> pd.DataFrame:
        """Trials per phase and status (all trials, not only usable ones)."""
        if self.trials.empty:
            return pd.DataFrame(columns=["phase", "status", "trials"])
        counts = self.trials.groupby(["phase", "status"]).size().rename("trials").reset_index()
        return counts.sort_values(["phase", "status"]).reset_index(drop=True)

    def holdings(self) -> str:
        """What the store holds, e.g. ``'8 refine/ok, 16 confirm/ok'`` (empty when no trials at all)."""
        return ", ".join(f"{row.trials} {row.phase}/{row.status}" for row in self.phase_counts().itertuples())

    def has_phase(self, *phases: str) -> bool:
        """True when any of ``phases`` has at least one usable trial."""
        return any(not self.tidy.get(p, pd.DataFrame()).empty for p in phases)


@dataclass(frozen=True)
class StudyInputs(ScreenInputs):
    """The screen's inputs of a study (:class:`~tunelab.study_data.ScreenInputs`, as ``tunelab screen STUDY``
    reads them) plus the metric in focus of the report's figures and summary.

    ``data`` is what the screen gets (it may hold failed trials, which only explain untestable
    levels); :attr:`runs` holds the usable ones that figures show.
    """

    #: the metric in focus, one of :attr:`metrics`
    metric: dict[str, Any] = field(default_factory=dict)

    @property
    def runs(self) -> pd.DataFrame:
        """The usable runs (status ``ok``, or ``flagged`` when they were included)."""
        if "status" not in self.data.columns:
            return self.data
        return self.data[self.data["status"].isin(USABLE_STATUSES)]


def examples_dir() -> Path:
    """The example stores shipped with tunelab (``data/examples/`` of the checkout): where the notebooks
    look by default, so they run as shipped, before the lab has recorded anything."""
    return Path(__file__).resolve().parents[2] / "data" / "examples"


def resolve_store(study: str | os.PathLike[str], data_dir: str | os.PathLike[str] = "data") -> Path:
    """The store of ``study``: an existing path (or any ``*.sqlite`` path), else ``data_dir/<study>.sqlite``.

    Raises
    ------
    ReportError
        When no store exists there; the message lists the stores found in ``data_dir``.
    """
    path = store_path_for(study, data_dir)
    if not path.exists():   # anything else there (a directory, a damaged file) is Store's to explain
        found = sorted(p.stem for p in Path(data_dir).glob("*.sqlite")) if Path(data_dir).is_dir() else []
        hint = f"; studies in {data_dir}: {', '.join(found)}" if found else ""
        raise ReportError(f"no trial store for study {str(study)!r} at {path}{hint}. Give a study name in "
                          "--data-dir (a notebook's data_dir) or a path to a .sqlite store (run `tunelab run DESIGN` "
                          "to make one)")
    return path


def _parse_design(text: str, source: str) -> Any:
    """The stored design, or None for a store that keeps JSON instead (simulator refinements, validate stores).

    A stored YAML design that does not parse raises its :class:`DesignError` (which names the store, the key and
    the rule): a report must not go on as if the store held no design.
    """
    if not text.strip() or text.lstrip().startswith("{"):
        return None
    return load_design_text(text, source=source)


def load_study(study: str | os.PathLike[str], data_dir: str | os.PathLike[str] = "data",
               include_flagged: bool = False) -> Study:
    """Read a study's store (read-only) into a :class:`Study`.

    Parameters
    ----------
    study : str or path
        A study name (``data_dir/<study>.sqlite``) or a store path.
    data_dir : str or path
        Where study stores live.
    include_flagged : bool
        Also use trials flagged during measurement (e.g. foreign CPU load).
    """
    path = resolve_store(study, data_dir)
    with Store(path, readonly=True) as store:
        info = store.study
        trials = store.trials()
        tidy = {str(phase): store.tidy(phase, include_flagged=include_flagged) for phase in PHASES}
        targets = store.run_targets()
        searches, batches, error = _search_state(store)
    tuned = outcome_of(searches)
    searches = searches[searches["search_id"] != OUTCOME_ID] if len(searches) else searches
    text = info.design_text if info else ""
    return Study(path=path, name=info.name if info else path.stem, design=_parse_design(text, str(path)),
                 design_text=text, trials=trials, tidy=tidy, targets=targets,
                 git_sha=info.git_sha if info else None, tunelab_version=info.tunelab_version if info else None,
                 created=info.created if info else None, include_flagged=include_flagged,
                 searches=searches, search_batches=batches, search_error=error, tune=tuned)


def _search_state(store: Store) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """The store's searches and their batches, or empty frames and the reason they could not be read."""
    try:
        return store.searches(), store.search_batches(), None
    except TunelabError as exc:
        return pd.DataFrame(columns=SEARCH_COLUMNS), pd.DataFrame(columns=SEARCH_BATCH_COLUMNS), str(exc)


def require_screen(study: Study) -> None:
    """Raise :class:`ReportError` unless the study has usable screen trials and a design."""
    if study.tidy["screen"].empty:
        held = study.holdings() or "no trials at all"
        raise ReportError(f"the store {study.path} has no usable screen trials (it holds {held}); a report starts "
                          "from a screen: run `tunelab run DESIGN` for this study first")
    if study.design is None:
        raise ReportError(f"the store {study.path} holds no design file, so the screen's metrics, knobs and "
                          "baselines are unknown; screen an exported CSV with `tunelab screen FILE.csv --metric ...`")


def study_inputs(study: Study, metric: str | None = None, alpha: float | None = None,
                 correction: str | None = None, sesoi_pct: float | None = None) -> StudyInputs:
    """The screen's arguments from the study's design, as ``tunelab screen STUDY`` builds them.

    Parameters
    ----------
    metric : str, optional
        The metric in focus for figures and the summary: a design metric's name, or
        ``NAME[:max|:min][:SESOI]`` for a measured column the design does not list. Default:
        the design's first metric.
    alpha, correction : optional
        Override the design's ``analysis`` section.
    sesoi_pct : float, optional
        Override the smallest effect of interest (%) of the metric in focus.
    """
    require_screen(study)
    read = read_screen_inputs(study.path, alpha=alpha, correction=correction, include_flagged=study.include_flagged,
                              data_dir=study.path.parent, design=study.design)      # parsed once, by load_study
    data = read.data
    metrics = [dict(m) for m in read.metrics]
    focus = metrics[0]
    if metric:
        name = metric.partition(":")[0]      # the bare name picks the design's own direction and SESOI
        known = {m["name"]: m for m in metrics}
        if name in known and ":" not in metric:
            focus = known[name]
        elif name in data.columns:
            focus = Metric.parse(metric).to_json()
            metrics = [m for m in metrics if m["name"] != name] + [focus]
        else:
            raise unknown_metric(study, name, known)
    if sesoi_pct is not None:
        if not (np.isfinite(sesoi_pct) and sesoi_pct > 0):
            raise ReportError(f"sesoi_pct must be a positive percentage, got {sesoi_pct!r}")
        focus = {**focus, "sesoi_pct": float(sesoi_pct)}
        metrics = [focus if m["name"] == focus["name"] else m for m in metrics]
    shared = {f.name: getattr(read, f.name) for f in fields(ScreenInputs)}
    return StudyInputs(**{**shared, "metrics": metrics}, metric=focus)


def measured_metrics(study: Study) -> list[str]:
    """The names a metric may take in this study: the design's metrics, the stored searches' objectives and every
    numeric column measured in any phase (counters included), without knobs and bookkeeping columns."""
    knobs = set(study.design.knob_ids) if study.design is not None else set()
    for config in study.trials.get("config", pd.Series(dtype=object)):
        knobs.update(config if isinstance(config, Mapping) else ())
    names = [m.name for m in study.design.metrics] if study.design is not None else []
    names += [str(text).partition(":")[0] for settings in study.searches["settings"]
              if isinstance(settings, Mapping) for text in settings.get("objectives") or ()]
    for frame in study.tidy.values():
        names += [c for c in frame.columns if c not in BOOKKEEPING and c not in knobs
                  and pd.api.types.is_numeric_dtype(frame[c])]
    return list(dict.fromkeys(names))


#: at most this many close names suggested for a misspelt metric
SUGGESTIONS = 5


def unknown_metric(study: Study, name: str, main: Sequence[str] = (), what: str = "metric") -> ReportError:
    """The one-line error for a metric (or objective) ``name`` the study did not measure: the closest measured
    names (:mod:`difflib`, at most :data:`SUGGESTIONS`) and ``main``, the names the study is about; never the whole
    list of measured columns (a store with kernel counters has over a hundred)."""
    measured = measured_metrics(study)
    close = difflib.get_close_matches(name, measured, n=SUGGESTIONS, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    about = f"; its main metrics: {', '.join(main)}" if main else ""
    return ReportError(f"{what} {name!r} was not measured in {study.path.name}{hint}{about}; "
                       f"{len(measured)} columns were measured (`tunelab export {study.path}` lists them)")


def check_metric_names(study: Study, names: Sequence[str], what: str = "metric") -> None:
    """Raise :func:`unknown_metric` for the first of ``names`` (``NAME[:max|:min]...`` texts) the study did not
    measure."""
    measured = set(measured_metrics(study))
    main = [m.name for m in study.design.metrics] if study.design is not None else []
    for text in names:
        name = str(text).partition(":")[0]
        if name not in measured:
            raise unknown_metric(study, name, main, what)


def screen_study(study: Study, metric: str | None = None, alpha: float | None = None,
                 correction: str | None = None, sesoi_pct: float | None = None, n_boot: int = 1000,
                 seed: int = 0) -> tuple[StudyInputs, ScreenResult]:
    """Run :func:`tunelab.stats.screen` on the study's screen trials; returns ``(inputs, ScreenResult)``."""
    inputs = study_inputs(study, metric=metric, alpha=alpha, correction=correction, sesoi_pct=sesoi_pct)
    return inputs, inputs.screen(n_boot=n_boot, seed=seed)


def overview(data: pd.DataFrame, knobs: list[str], metric: str) -> pd.DataFrame:
    """Runs, mean, SD and CV (%) of ``metric`` per configuration (knob levels as text)."""
    frame = data[knobs + [metric]].copy()
    for knob in knobs:
        frame[knob] = frame[knob].map(level_label)
    table = frame.groupby(knobs, sort=False)[metric].agg(runs="count", mean="mean", sd="std").reset_index()
    table["cv_pct"] = 100 * table["sd"] / table["mean"].abs()
    return table


def first_trial(study: Study, phase: str = "screen", baseline: bool = True) -> int | None:
    """The trial id of the first usable trial of ``phase`` (a baseline run when ``baseline``)."""
    data = study.tidy.get(phase, pd.DataFrame())
    if data.empty:
        return None
    if baseline and "is_baseline" in data.columns and data["is_baseline"].fillna(False).astype(bool).any():
        data = data[data["is_baseline"].fillna(False).astype(bool)]
    return int(data.sort_values("trial_id")["trial_id"].iloc[0])


def trial_series(study: Study, trial_id: int) -> tuple[pd.DataFrame, float]:
    """The per-second series of a trial and its warm-up seconds (from the trial's provenance)."""
    rows = study.trials[study.trials["trial_id"] == trial_id]
    if rows.empty:
        raise ReportError(f"no trial {trial_id} in {study.path}")
    row = rows.iloc[0]
    series = pd.DataFrame(row["series"] or {})
    provenance = row["provenance"] or {}
    warmup = provenance.get("warmup_s")
    if warmup is None and study.design is not None:
        warmup = study.design.warmup_s
    return series, float(warmup or 0.0)


# ---- facts of the study read by the methods section and the notebooks ------------------------------

#: packages whose versions the methods section states
SOFTWARE = ("tunelab", "numpy", "scipy", "pandas", "statsmodels", "pingouin", "scikit-posthocs", "pymoo",
            "seaborn", "matplotlib", "papermill", "nbconvert")


def software_versions() -> dict[str, str]:
    """Installed versions of :data:`SOFTWARE` and Python (``'not installed'`` when absent)."""
    out = {"python": platform.python_version()}
    for name in SOFTWARE:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def machine(study: Study) -> dict[str, Any]:
    """Kernel, CPU and tool versions of the measured machine (the first run's target description,
    else the first trial's provenance)."""
    described = next((t for t in study.targets if t), None)
    if described is None:
        for provenance in study.trials.get("provenance", pd.Series(dtype=object)):
            if isinstance(provenance, Mapping) and provenance.get("target"):
                described = provenance["target"]
                break
    return dict(described or {})


def trial_provenance(study: Study, phase: str = "screen") -> dict[str, Any]:
    """The provenance of the first usable trial of ``phase`` (empty when none has one)."""
    rows = study.trials[(study.trials["phase"] == phase) & study.trials["status"].isin(("ok", "flagged"))]
    for provenance in rows["provenance"]:
        if isinstance(provenance, Mapping):
            return dict(provenance)
    return {}


def foreign_load(tidy: pd.DataFrame, n_cpus: int, trial_s: float) -> pd.Series:
    """Share of the machine (0..1) that processes other than the trial's used during each trial,
    from the runner's per-trial ``foreign_cpu_s``."""
    if "foreign_cpu_s" not in tidy.columns or not trial_s > 0:
        return pd.Series(dtype=float)
    return tidy["foreign_cpu_s"].dropna().astype(float) / (max(int(n_cpus), 1) * trial_s)


def is_synthetic(study: Study) -> bool:
    """True when the study's trials come from the simulator target (SYNTHETIC numbers, no real kernel)."""
    if study.design is not None and study.design.target.type == "simulator":
        return True
    if '"surface"' in study.design_text:
        return True
    loads = {(p or {}).get("load") for p in study.trials.get("provenance", []) if isinstance(p, Mapping)}
    return "simulated" in loads


#: columns of :func:`repeated_trials`
REPEATED_COLUMNS = ["phase", "run_key", "trial_id", "busy_pct", "reason"]


def repeated_trials(study: Study) -> pd.DataFrame:
    """The attempts set aside and measured again because other processes were busy
    (``noise.repeat_busy_pct``): phase, run key, trial id, busy % of the machine, reason."""
    trials = study.trials
    if trials.empty:
        return pd.DataFrame(columns=REPEATED_COLUMNS)
    provenance = trials["provenance"].map(lambda p: p if isinstance(p, Mapping) else {})
    rows = trials[[bool(p.get("repeated")) for p in provenance]]
    return pd.DataFrame({"phase": rows["phase"], "run_key": rows["run_key"], "trial_id": rows["trial_id"],
                         "busy_pct": [provenance[i].get("busy_pct") for i in rows.index], "reason": rows["reason"]},
                        columns=REPEATED_COLUMNS).reset_index(drop=True)


def pinning_text(study: Study) -> str | None:
    """Where the lab pinned the server and the load (``describe()["lab"]["pinning"]``), or None."""
    pinning = (machine(study).get("lab") or {}).get("pinning")
    return str(pinning.get("note")) if isinstance(pinning, Mapping) and pinning.get("note") else None


def planned_runs(study: Study) -> int | None:
    """The number of runs the study's design plans (for a sequential design: its first round); None for a store
    without a design (simulator refinements, validate stores)."""
    return None if study.design is None else len(make_plan(study.design))
