"""Where a screen's inputs come from: a tidy CSV or a study's store (with its stored design).

:func:`screen_inputs` turns typed choices (metrics, knob columns, baseline levels by column; the
command line parses ``--metric``/``--baseline`` in :mod:`tunelab.cli.parsing`) into a
:class:`ScreenInputs`: what :func:`tunelab.stats.screen` takes, with the study's design read once
as a :class:`~tunelab.stats.screen_design.ScreenDesign` (:func:`design_info`). The CLI,
:func:`tunelab.api.screen` and the reports all call it, so they analyse the same thing.
"""
from __future__ import annotations

import csv
import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterator, Mapping, Sequence

import pandas as pd

from tunelab.counters import is_counter_column
from tunelab.designs import Design, load_design_text
from tunelab.designs.plan import OPTIONAL_PLAN_COLUMNS
from tunelab.errors import DataError
from tunelab.loads.metrics import METRICS
from tunelab.formatting import level_label
from tunelab.model import RANGE_DESIGNS, Direction, Metric
from tunelab.store import TIDY_COLUMNS, Store, store_path_for

if TYPE_CHECKING:
    from tunelab.stats import ScreenResult
    from tunelab.stats.mechanisms import CounterCells
    from tunelab.stats.screen_design import ScreenDesign

# tunelab.stats (scipy, statsmodels: about two seconds) is imported inside the functions that sort
# levels, build the design view and screen, so importing this module (as tunelab.api does) stays cheap.

#: columns of a tidy trial table that are neither knobs nor metrics (the store's own bookkeeping, and
#: the plan columns only some studies have: ``round``, the load ``profile``)
BOOKKEEPING = (*TIDY_COLUMNS, *OPTIONAL_PLAN_COLUMNS)


@dataclass(frozen=True)
class ScreenInputs:
    """What :func:`tunelab.stats.screen` takes for a CSV or a study (:func:`screen_inputs`)."""

    #: the tidy trials (a study's screen phase, failed trials included: they explain untestable levels)
    data: pd.DataFrame
    #: the metrics as ``{name, direction, sesoi_pct | sesoi_abs, scale}`` dicts
    metrics: list[dict[str, Any]]
    knobs: list[str]
    #: knob -> its baseline level (a level of the data)
    baseline: dict[str, Any]
    alpha: float
    correction: str
    #: a study's stored design as the screen reads it; None for a CSV
    design: ScreenDesign | None = None
    #: a CSV's kernel counters, summarised per cell while it was read (``data`` then holds none); None for a study
    counters: CounterCells | None = None

    def screen(self, n_boot: int = 1000, seed: int = 0) -> ScreenResult:
        """:func:`tunelab.stats.screen` of these inputs."""
        from tunelab.stats import screen   # scipy, statsmodels: ~2 s, only when screening

        return screen(self.data, self.metrics, self.knobs, self.baseline, alpha=self.alpha,
                      correction=self.correction, n_boot=n_boot, seed=seed, design=self.design, counters=self.counters)


def _metric_dicts(metrics: Sequence[Metric]) -> list[dict[str, Any]]:
    """The metrics as the dicts :func:`tunelab.stats.screen` takes; DataError for one that is not a Metric."""
    for metric in metrics:
        if not isinstance(metric, Metric):
            raise DataError(f"metrics must be tunelab.model.Metric values, got {str(metric)[:60]!r}; write "
                            "Metric.parse('qps:max:5') (the command line's --metric text)")
    return [metric.to_json() for metric in metrics]


def match_level(data: pd.DataFrame, column: str, value: Any) -> Any:
    """The level of ``column`` that ``value`` (or its text) names (``'4096'`` -> 4096, ``'True'`` -> True)."""
    from tunelab.stats import sorted_levels

    text = str(value)
    levels = sorted_levels(data[column].dropna())
    for level in levels:
        if level_label(level) == text or str(level) == text:
            return level
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None:
        for level in levels:
            if isinstance(level, (int, float)) and not isinstance(level, bool) and float(level) == number:
                return level
    raise DataError(f"--baseline {column}={text}: {text!r} is not a level of {column!r}; its levels are {levels}")


def default_baseline(data: pd.DataFrame, knob: str) -> Any:
    """The level of ``knob`` in the ``is_baseline`` rows if they agree, else the first sorted level."""
    from tunelab.stats import sorted_levels

    if "is_baseline" in data.columns:
        flags = data["is_baseline"].map(lambda v: str(v).strip().lower() in ("true", "1"))
        levels = sorted_levels(data.loc[flags, knob].dropna())
        if len(levels) == 1:
            return levels[0]
    return sorted_levels(data[knob].dropna())[0]


def _match_baselines(data: pd.DataFrame, baselines: Mapping[str, Any]) -> dict[str, Any]:
    """Column -> the level of the data that each chosen baseline names (:func:`match_level`)."""
    out = {}
    for column, value in baselines.items():
        if column not in data.columns:
            raise DataError(f"--baseline {column}={value}: unknown column {column!r}; the data has: "
                            f"{', '.join(map(str, data.columns))}")
        out[column] = match_level(data, column, value)
    return out


def _from_csv(source: str, metric: Sequence[Metric], knob: Sequence[str], baselines: Mapping[str, Any],
              alpha: float | None, correction: str | None) -> ScreenInputs:
    path = Path(source)
    names = {m.name for m in metric if isinstance(m, Metric)}
    data, counters = read_csv_summarising_counters(path, lambda columns: list(knob) or default_knobs(columns, names),
                                                   keep=names)
    if not metric:
        numeric = [c for c in data.columns if c not in BOOKKEEPING and not is_counter_column(c)
                   and pd.api.types.is_numeric_dtype(data[c])]
        raise DataError(f"name the metric(s) to analyse with --metric NAME[:max|:min][:SESOI]; numeric columns in "
                        f"{path.name}: {', '.join(numeric) or '(none)'}")
    metrics = _metric_dicts(metric)
    names = {m["name"] for m in metrics}
    # by default every column that is not bookkeeping or a metric; the metrics tunelab's loads report
    # and the kernel counters (tunelab export writes all of them) are never guessed to be knobs
    knobs = list(knob) or default_knobs(data.columns, names)
    if not knobs:
        raise DataError(f"{path.name} has no knob columns besides the metrics and bookkeeping columns; "
                        "name them with --knob COL")
    for column in knobs:
        if column not in data.columns:
            raise DataError(f"--knob {column!r} is not a column of {path.name}; columns: {', '.join(data.columns)}")
        check_level_column(data, column, path)
    for name in names & set(data.columns):
        data[name] = numeric_column(data, name, path)
    check_positive_metrics(data, metrics, path.name)
    baseline = _match_baselines(data, baselines)
    for column in knobs:
        baseline.setdefault(column, default_baseline(data, column))
    return ScreenInputs(data, metrics, knobs, baseline, 0.05 if alpha is None else alpha, correction or "holm",
                        counters=counters)


def default_knobs(columns: Sequence[str], metrics: set[str]) -> list[str]:
    """A CSV's knob columns when none are named: every column that is not bookkeeping, a metric, one of the
    metrics tunelab's loads report or a kernel counter (tunelab export writes all of them)."""
    return [c for c in columns if c not in metrics and c not in BOOKKEEPING and c not in METRICS
            and not is_counter_column(c)]


#: longest CSV cell text and column name accepted (a knob level or a metric name is short)
CSV_TEXT_MAX = 256


#: rows of a tidy CSV read at a time by :func:`read_csv_summarising_counters`
CSV_CHUNK_ROWS = 50_000


def read_csv_summarising_counters(path: Path, knobs_of: Callable[[Sequence[str]], Sequence[str]],
                                  keep: Collection[str] = ()) -> tuple[pd.DataFrame, CounterCells | None]:
    """Read a tidy CSV :data:`CSV_CHUNK_ROWS` rows at a time, its kernel counters summarised per cell of the knob
    columns (``knobs_of(header)``) and ``status`` (:func:`tunelab.stats.mechanisms.summarise_counters`) and left
    out of the frame (but for the knobs and the columns in ``keep``): a million runs with a hundred counters
    never sit in memory at once. Checks as :func:`read_csv`; the summary is None without counter columns."""
    from tunelab.stats.mechanisms import CounterCells, cell_keys, summarise_counters

    header = read_csv(path, nrows=0).columns
    keys = cell_keys(header, [k for k in knobs_of(list(header)) if k in header])
    drop = [c for c in header if is_counter_column(c) and c not in keys and c not in keep]
    frames, summaries = [], []
    with _csv_errors(path):
        for chunk in pd.read_csv(path, chunksize=CSV_CHUNK_ROWS):
            if drop:
                summaries.append(summarise_counters(chunk, keys, drop))
            frames.append(chunk.drop(columns=drop))
    data = pd.concat(frames, ignore_index=True) if frames else read_csv(path)
    if data.empty:
        raise DataError(f"{path.name} has a header but no data rows; it holds no trials to screen")
    return data, CounterCells.merge(summaries) if summaries else None


@contextmanager
def _csv_errors(path: Path) -> Iterator[None]:
    """pandas' errors reading the CSV at ``path`` as one DataError naming the file."""
    try:
        yield
    except (OSError, UnicodeDecodeError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise DataError(f"cannot read CSV {str(path)!r}: {' '.join(str(exc).split())[:200]}; give a comma-separated "
                        "file with a header row (e.g. from `tunelab export`)") from None


def read_csv(path: Path, nrows: int | None = None) -> pd.DataFrame:
    """Read a tidy CSV (its first ``nrows`` rows; 0: the header); DataError naming the file when it cannot be
    parsed, has no data rows or has a column name that is empty, overlong or holds control characters."""
    with _csv_errors(path):
        data = pd.read_csv(path, nrows=nrows)
    check_unique_header(path)
    for position, column in enumerate(data.columns, start=1):
        text = str(column)
        if len(text) > CSV_TEXT_MAX or not text.isprintable() or text.startswith("Unnamed: "):
            raise DataError(f"{path.name}: column {position} of the header has the name {text[:60]!r}; every column "
                            f"needs a name of at most {CSV_TEXT_MAX} printable characters")
    if data.empty and nrows != 0:
        raise DataError(f"{path.name} has a header but no data rows; it holds no trials to screen")
    return data


def check_unique_header(path: Path) -> None:
    """DataError when two columns of the CSV's header row have the same name.

    pandas renames the second ``qps`` to ``qps.1``, which would then be screened as a knob; the
    header is read as written (:mod:`csv`, as pandas splits it) so the repeated name is refused.
    """
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            header = next(csv.reader(fh), [])
    except (OSError, UnicodeDecodeError, csv.Error):
        return      # pandas read it, so a header it cannot split this way has no repeated name to find
    seen: dict[str, int] = {}
    for position, name in enumerate(header, start=1):
        if name in seen:
            raise DataError(f"{path.name}: the header names column {name[:60]!r} twice (columns {seen[name]} and "
                            f"{position}); give every column its own name, and keep one column per metric")
        seen[name] = position


def check_positive_metrics(data: pd.DataFrame, metrics: Sequence[dict[str, Any]], source: str) -> None:
    """DataError for a metric read as % changes or on the log scale whose values include zero or negatives.

    A metric with no explicit ``scale`` and no ``sesoi_abs`` is compared as % of its baseline mean
    (and ``auto`` models it on the log scale when it can): on a negative baseline the sign of a %
    change flips, so a rise would read as "-99.8 % worse". Such data is refused; the fix is
    ``scale: linear`` with a ``sesoi_abs`` (effects as differences in the metric's units).
    """
    for metric in metrics:
        name, scale = metric["name"], metric.get("scale", "auto")
        if name not in data.columns or scale == "linear" or (scale == "auto" and metric.get("sesoi_abs") is not None):
            continue
        values = pd.to_numeric(data[name], errors="coerce")
        bad = int((values <= 0).sum())
        if bad:
            kind = "on the log scale (scale: log)" if scale == "log" else "as % changes (no scale or sesoi_abs given)"
            raise DataError(f"{source}: metric {name!r} has {bad} value(s) <= 0 (lowest {values.min():g}), which cannot "
                            f"be compared {kind}; set `scale: linear` and a `sesoi_abs` for it (on the command line "
                            f"--metric {name}:{'min' if metric.get('direction') == Direction.MINIMIZE else 'max'}:linear:abs=N), "
                            "see designs/README.md")


def _row(index: Any) -> str:
    """How a reader finds a data row: its number and its line in the file (line 1 is the header)."""
    return f"row {int(index) + 1} (line {int(index) + 2})"


def numeric_column(data: pd.DataFrame, column: str, path: Path) -> pd.Series:
    """``data[column]`` as floats; DataError naming the first row and the column when a cell is not a
    finite number (empty cells are missing values and stay NaN)."""
    values = pd.to_numeric(data[column], errors="coerce")
    bad = (data[column].notna() & values.isna()) | values.isin([math.inf, -math.inf])
    if bad.any():
        index = bad.idxmax()
        raise DataError(f"{path.name}: {_row(index)}, column {column!r} holds {str(data.at[index, column])[:40]!r}, "
                        f"which is not a finite number ({int(bad.sum())} such cells); fix or remove those rows")
    return values.astype("float64")


def check_level_column(data: pd.DataFrame, column: str, path: Path) -> None:
    """DataError unless the knob column ``column`` has at least one value and every text level is
    at most :data:`CSV_TEXT_MAX` printable characters (they are printed and reported)."""
    values = data[column]
    if values.isna().all():
        raise DataError(f"{path.name}: knob column {column!r} is empty in every row; give its levels or leave the "
                        "column out (--knob names the knob columns)")
    for index, value in values.items():
        if isinstance(value, str) and (len(value) > CSV_TEXT_MAX or not value.isprintable()):
            raise DataError(f"{path.name}: {_row(index)}, column {column!r} holds a level that is not at most "
                            f"{CSV_TEXT_MAX} printable characters: {value[:40]!r}")


def _from_study(source: str, metric: Sequence[Metric], knob: Sequence[str], baselines: Mapping[str, Any],
                alpha: float | None, correction: str | None, include_flagged: bool,
                data_dir: str | Path, design: Design | None) -> ScreenInputs:
    path = store_path_for(source, data_dir)
    with Store(path, readonly=True) as store:
        data = store.tidy(phase="screen", include_flagged=include_flagged, include_failed=True)
        design_text = store.study.design_text if store.study else ""
    if design is None:
        if not design_text:
            raise DataError(f"the store {str(path)!r} holds no design; screen an exported CSV with --metric instead")
        design = load_design_text(design_text, source=str(path))
    metrics = _metric_dicts(metric or design.metrics)
    knobs = list(knob) or design.knob_ids
    baseline = {k: v for k, v in design.baseline.items() if k in knobs}
    baseline.update(_match_baselines(data, baselines))
    if data.empty:
        raise DataError(f"the store {str(path)!r} has no usable screen trials yet; run `tunelab run` first")
    check_positive_metrics(data, metrics, str(path))
    return ScreenInputs(data, metrics, knobs, baseline, design.analysis.alpha if alpha is None else alpha,
                        correction or design.analysis.correction, design_info(design))


def screen_inputs(source: str | Path, *, metrics: Sequence[Metric] = (), knobs: Sequence[str] = (),
                  baselines: Mapping[str, Any] | None = None, alpha: float | None = None,
                  correction: str | None = None, include_flagged: bool = False, data_dir: str | Path = "data",
                  design: Design | None = None) -> ScreenInputs:
    """What :func:`tunelab.stats.screen` needs for a CSV or a study, as ``tunelab screen``'s flags choose it.

    ``metrics`` and ``knobs`` default to a study's design (a CSV needs its metrics named);
    ``baselines`` maps a column to the level (or its text, ``"4096"``) to compare against. A study's
    design is parsed once, into :attr:`ScreenInputs.design`; a caller that has parsed it already (the report's
    :func:`tunelab.report.loading.load_study`) passes it as ``design`` and it is not parsed again. Raises :class:`DataError` naming the
    problem (no such CSV, no metric named for a CSV, unknown column, empty store).
    """
    if baselines is not None and not isinstance(baselines, Mapping):
        raise DataError(f"baselines must map a knob column to its baseline level, e.g. {{'net.core.somaxconn': 4096}}; "
                        f"got {type(baselines).__name__}")
    baselines = dict(baselines or {})
    text = str(source)
    if text.lower().endswith(".csv"):
        if not Path(text).exists():
            raise DataError(f"no such CSV file: {text!r}")
        return _from_csv(text, metrics, knobs, baselines, alpha, correction)
    return _from_study(text, metrics, knobs, baselines, alpha, correction, include_flagged, data_dir, design)


def design_info(design: Any) -> ScreenDesign:
    """What the screen knows of a study's design beyond its runs (``stats.screen(design=…)``), built once.

    The design type and ``analysis.interactions``; the guards (:func:`tunelab.designs.schema.design_guards`:
    the guard metrics and what each metric is conditional on, from the design and its load's defaults);
    for a design run in rounds its looks (``replicates.max`` and the spending: the screen replays them,
    :func:`tunelab.stats.screen_in_rounds`); for a profile-crossed design the load profiles in design
    order (the screen's ``profile`` factor); the measurement (a duet pairs each level's runs with their
    concurrent baselines); for Latin hypercube and Morris designs the generator's ranges (every knob's
    low, high and scale), and for Morris designs its points in trajectory order and grid levels. Aliases
    are not passed: the screen's model finds them in the runs themselves.
    """
    from tunelab.designs.generators import GENERATORS
    from tunelab.designs.schema import design_guards
    from tunelab.stats.screen_design import RoundLooks, ScreenDesign

    import numpy as np

    spec = design.rounds
    generated: dict[str, Any] = {}
    if design.design_type in RANGE_DESIGNS:      # building a factorial's rows would only import pyDOE3 for nothing
        generated = GENERATORS.get(design.design_type).build(design, np.random.default_rng(design.seed)).info
    return ScreenDesign(
        type=design.design_type, interactions=design.analysis.interactions, guards=design_guards(design),
        looks=RoundLooks(spec.max, spec.spending or None) if spec is not None else None,
        profiles=tuple(design.load.profiles) if design.load.crossed else (), measurement=design.measurement,
        ranges=generated.get("ranges"), levels=generated.get("levels"),
        points=pd.DataFrame(generated["points"]) if "points" in generated else None)
