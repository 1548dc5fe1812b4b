"""How ``tunelab tune`` splits one budget of measurements between its stages.

The stages, in order: an A/A calibration of the baseline (only when the noise is not given), the screen
(a design chosen for the knob count, :func:`screen_design_for`, replicated as the noise needs), refine over the
knobs that matter, and a confirmation against the baseline in ABBA blocks (4 measurements a block).

:func:`split_budget` is the one rule (shown by ``tunelab tune --plan``), stated in its constants:

* calibration: :data:`AA_RUNS` baseline measurements unless the noise (CV %) is given or cannot change the split
  (:func:`noise_sets_split`);
* screen: the design's runs times the replicates that detect the SESOI at the noise
  (:func:`tunelab.stats.noise.replicates_to_detect`, spread over the half of the runs at each level of a
  two-level design), at least :data:`MIN_REPLICATES` of the design, the calibration and screen together at most
  :data:`SCREEN_SHARE` of the budget and leaving refine at least :data:`MIN_REFINE`;
* confirmation: :data:`CONFIRM_SHARE` of the budget in whole ABBA blocks, between :data:`MIN_BLOCKS` and
  :data:`MAX_BLOCKS`;
* refine: the rest (at least :data:`MIN_REFINE`).

An override (``--split screen=40,refine=40,confirm=20``, percent of the budget) replaces the shares: the screen's
percent (calibration included) sets its replicates, the confirmation's its blocks, refine takes the rest.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from tunelab.errors import DesignError
from tunelab.model import DesignType

#: baseline measurements of the A/A calibration when the noise is not given
AA_RUNS = 4
#: where the split's noise came from when no calibration was needed (:func:`noise_sets_split`)
NOT_CALIBRATED = "noise not measured: the screen gets the same replicates at any noise, so no A/A calibration"
#: where the noise came from in a split without a screen
NOT_SCREENED = "noise not measured: no screen, so no A/A calibration"
#: the noise (CV %) the plan assumes before the calibration measured it
ASSUMED_CV_PCT = 5.0
#: most of the budget the calibration and the screen take together (unless overridden)
SCREEN_SHARE = 0.5
#: share of the budget for the confirmation (unless overridden), in ABBA blocks of 4 measurements
CONFIRM_SHARE = 0.15
MIN_BLOCKS, MAX_BLOCKS = 2, 8
#: fewest measurements left for refine
MIN_REFINE = 4
#: the largest share of the budget the screen's least replicates may take; above it tune does not screen and refine
#: searches every knob (bench_pipeline, 27 knobs at 60: a 32-run screen left refine 20 and hit 0-10 %; refine
#: over every knob hit 30 % on wide27)
SCREEN_AT_MOST = 0.4
#: the design of a split without a screen
NO_SCREEN = "none"
#: refine's measurements per knob it searches: its width (how many knobs the screen keeps at most by rank)
MEASUREMENTS_PER_KNOB = 1
#: the narrowest width
MIN_WIDTH = 3
#: knob count from which a two-level design screens (below it: one at a time)
TWO_LEVEL_FROM = 8
#: degrees of freedom a two-level screen keeps for its residual (a saturated design could test nothing)
RESIDUAL_DF = 4
#: fewest replicates of each screening design (one-at-a-time needs two to see the noise within a level)
MIN_REPLICATES = {DesignType.OAT: 2, DesignType.PLACKETT_BURMAN: 1, DesignType.FRACTIONAL_FACTORIAL: 1}
STAGES = ("screen", "refine", "confirm")


@dataclass(frozen=True)
class BudgetSplit:
    """The measurements each stage may spend (they sum to at most ``budget``) and why.

    ``screen_runs`` is one replicate of the screening design, ``replicates`` how many it gets; ``cv_pct`` the
    noise the split was made for and ``cv_source`` where it came from; ``notes`` say what the budget cut short.
    """

    budget: int
    knobs: int
    design: str
    screen_runs: int
    replicates: int
    calibrate: int
    screen: int
    refine: int
    confirm: int
    cv_pct: float
    cv_source: str
    sesoi_pct: float
    overridden: bool = False
    notes: tuple[str, ...] = ()

    @property
    def blocks(self) -> int:
        """ABBA blocks of the confirmation."""
        return self.confirm // 4

    @property
    def width(self) -> int:
        """How many knobs refine's measurements can search (:data:`MEASUREMENTS_PER_KNOB` each, at least
        :data:`MIN_WIDTH`, at most the knob count): the screen keeps the knobs it finds to matter, then fills the
        width with the undecided ones of largest estimated change."""
        return min(self.knobs, max(MIN_WIDTH, self.refine // MEASUREMENTS_PER_KNOB))

    @property
    def spendable(self) -> int:
        """What the stages may spend together (at most the budget)."""
        return self.calibrate + self.screen + self.refine + self.confirm

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "notes": list(self.notes), "blocks": self.blocks, "width": self.width}

    def text(self) -> str:
        """One line per stage, as ``tunelab tune --plan`` prints it."""
        noise = (self.cv_source if self.cv_source in (NOT_CALIBRATED, NOT_SCREENED)
                 else f"noise CV {self.cv_pct:.1f} %, {self.cv_source}")
        lines = [f"budget {self.budget} measurements for {self.knobs} knobs ({noise}; SESOI {self.sesoi_pct:g} %)"]
        if self.calibrate:
            lines.append(f"  calibrate  {self.calibrate:4d}  A/A runs of the baseline (they set the noise)")
        lines += [f"  screen     {self.screen:4d}  {self.design}: {self.screen_runs} runs x {self.replicates} "
                  f"replicate{'s' if self.replicates != 1 else ''}" if self.screen else
                  "  screen        0  none: refine searches every knob (note below)",
                  f"  refine     {self.refine:4d}  " + (f"over the knobs the screen finds to matter (up to {self.width}: "
                                                   "filled by the largest estimated changes)" if self.screen
                                                   else "over every knob"),
                  f"  confirm    {self.confirm:4d}  {self.blocks} ABBA blocks against the baseline"]
        if self.overridden:
            lines.append("  (split given by --split)")
        return "\n".join(lines + [f"  note: {note}" for note in self.notes])


def screen_design_for(knobs: int, requested: str | None = None) -> DesignType:
    """The screening design for ``knobs`` knobs: one at a time below :data:`TWO_LEVEL_FROM`, else Plackett–Burman
    (fewest runs); ``requested`` (``oat``, ``plackett_burman``, ``fractional_factorial``) overrides it.

    >>> screen_design_for(5).value, screen_design_for(20).value
    ('oat', 'plackett_burman')
    """
    if requested not in (None, "auto"):
        chosen = DesignType.parse(requested)
        if chosen not in MIN_REPLICATES:
            raise DesignError(f"--screen-design {requested}: tune screens with oat, plackett_burman or "
                              "fractional_factorial")
        return chosen
    return DesignType.OAT if knobs < TWO_LEVEL_FROM else DesignType.PLACKETT_BURMAN


def parse_split(text: str | Mapping[str, float] | None) -> dict[str, float] | None:
    """``screen=40,refine=40,confirm=20`` (percent of the budget, summing to 100) as a dict; None stays None.

    >>> parse_split("screen=40,refine=40,confirm=20")
    {'screen': 40.0, 'refine': 40.0, 'confirm': 20.0}
    """
    if text is None:
        return None
    pairs = dict(text) if isinstance(text, Mapping) else dict(_pair(item) for item in str(text).split(",") if item)
    unknown = sorted(set(pairs) - set(STAGES))
    if unknown or set(pairs) != set(STAGES):
        raise DesignError(f"--split {_shown(text)}: give each of screen, refine, confirm once as percent of the "
                          "budget, e.g. --split screen=40,refine=40,confirm=20")
    shares = {stage: float(pairs[stage]) for stage in STAGES}
    if any(not math.isfinite(v) or v < 0 for v in shares.values()) or abs(sum(shares.values()) - 100) > 1e-6:
        raise DesignError(f"--split {_shown(text)}: the percents must be >= 0 and sum to 100")
    return shares


def _pair(item: str) -> tuple[str, float]:
    name, sep, value = item.partition("=")
    try:
        return name.strip(), float(value) if sep else math.nan
    except ValueError:
        raise DesignError(f"--split: {item[:40]!r} is not STAGE=PERCENT, e.g. screen=40") from None


def _shown(text: Any) -> str:
    return str(text)[:80]


def design_runs(design: DesignType, knobs: int) -> int:
    """Runs in one replicate of ``design`` for ``knobs`` knobs (one-at-a-time: the baseline and one level a knob;
    Plackett–Burman: the multiple of 4 that leaves :data:`RESIDUAL_DF` for the residual; fractional factorial: the
    power of two that does)."""
    if design == DesignType.OAT:
        return knobs + 1
    if design == DesignType.PLACKETT_BURMAN:
        return 4 * math.ceil((knobs + 1 + RESIDUAL_DF) / 4)
    return 1 << math.ceil(math.log2(knobs + 1 + RESIDUAL_DF))


def noise_replicates(design: DesignType, runs: int, cv_pct: float, sesoi_pct: float) -> int:
    """Replicates of the screening design that detect a ``sesoi_pct`` change at noise ``cv_pct`` (80 % power,
    alpha 0.05): a one-at-a-time level gets them itself, a two-level design's knob sees half its runs at each level.
    """
    from tunelab.stats.noise import replicates_to_detect     # deferred: scipy

    per_level = replicates_to_detect(max(cv_pct, 0.1), sesoi_pct)
    if design == DesignType.OAT:
        return per_level
    return max(1, math.ceil(per_level / (runs / 2)))


def split_budget(budget: int, knobs: int, sesoi_pct: float, *, cv_pct: float | None = None,
                 cv_source: str | None = None, calibrated: bool = False, design: str | None = None,
                 override: Mapping[str, float] | None = None) -> BudgetSplit:
    """The budget split of ``tunelab tune`` (module docstring).

    Parameters
    ----------
    budget : measurements in all, every attempt counted (failed ones too)
    knobs : how many knobs the screen starts with
    sesoi_pct : the goal's smallest effect of interest (percent)
    cv_pct : the noise; None: not known yet (the plan assumes :data:`ASSUMED_CV_PCT` and keeps the A/A runs)
    cv_source : where ``cv_pct`` came from (shown)
    calibrated : the A/A calibration measured ``cv_pct`` (its runs stay in the split)
    design : the screening design (:func:`screen_design_for`'s ``requested``)
    override : stage -> percent of the budget (:func:`parse_split`)

    Examples
    --------
    >>> s = split_budget(100, 20, 5.0, cv_pct=3.0, cv_source="given")
    >>> s.design, s.calibrate, s.screen, s.refine, s.confirm
    ('plackett_burman', 0, 28, 56, 16)
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise DesignError(f"--budget must be a positive number of measurements, got {budget!r}")
    chosen = screen_design_for(knobs, design)
    runs = design_runs(chosen, knobs)
    calibrate = AA_RUNS if (cv_pct is None or calibrated) else 0
    cv = float(cv_pct) if cv_pct is not None else ASSUMED_CV_PCT
    source = cv_source or ("assumed until the A/A calibration measures it" if cv_pct is None else "given")
    needed = noise_replicates(chosen, runs, cv, sesoi_pct)
    least = MIN_REPLICATES[chosen]
    if (override["screen"] == 0) if override is not None else runs * least > SCREEN_AT_MOST * budget:
        return _unscreened(budget, knobs, chosen, runs * least, float(sesoi_pct), override)
    replicates, blocks = _shares(budget, runs, calibrate, needed, least, override)
    screen, confirm = runs * replicates, 4 * blocks
    refine = budget - calibrate - screen - confirm
    if refine < MIN_REFINE:
        def left(total: int) -> int:
            more_replicates, more_blocks = _shares(total, runs, calibrate, needed, least, override)
            return total - calibrate - runs * more_replicates - 4 * more_blocks

        enough = next((b for b in range(budget + 1, 20 * budget + 1000) if left(b) >= MIN_REFINE), None)
        advice = f"give --budget {enough} or more (or fewer knobs)" if enough else "give refine a larger --split"
        raise DesignError(f"--budget {budget} is too small for {knobs} knobs: the {chosen.value} screen takes "
                          f"{screen} measurements and the confirmation {confirm}, leaving {max(refine, 0)} for "
                          f"refine (at least {MIN_REFINE}); {advice}")
    assumed = "an assumed " if cv_pct is None or source == NOT_CALIBRATED else ""
    plural = "s" if replicates != 1 else ""
    notes = () if replicates >= needed else (
        f"the screen gets {replicates} replicate{plural}; {needed} would detect a {sesoi_pct:g} % change at "
        f"{assumed}CV {cv:.1f} % with 80 % power (a larger budget screens more surely)",)
    return BudgetSplit(budget, knobs, chosen.value, runs, replicates, calibrate, screen, refine, confirm, cv, source,
                       float(sesoi_pct), override is not None, notes)


def _unscreened(budget: int, knobs: int, design: DesignType, screen: int, sesoi_pct: float,
                override: Mapping[str, float] | None) -> BudgetSplit:
    """The split without a screen: the confirmation's blocks, refine the rest over every knob (and why)."""
    blocks = (math.floor(override["confirm"] / 100 * budget / 4) if override is not None
              else min(MAX_BLOCKS, max(MIN_BLOCKS, round(CONFIRM_SHARE * budget / 4))))
    refine = budget - 4 * blocks
    if refine < MIN_REFINE:
        raise DesignError(f"--budget {budget} is too small: the confirmation takes {4 * blocks} measurements, leaving "
                          f"{max(refine, 0)} for refine (at least {MIN_REFINE}); give --budget "
                          f"{4 * blocks + MIN_REFINE} or more")
    why = ("--split gives the screen nothing" if override is not None else
           f"one {design.value} replicate for {knobs} knobs ({screen} runs) would take more than "
           f"{100 * SCREEN_AT_MOST:g} % of the budget; a budget of {math.ceil(screen / SCREEN_AT_MOST)} or more screens first")
    return BudgetSplit(budget, knobs, NO_SCREEN, 0, 0, 0, 0, refine, 4 * blocks, ASSUMED_CV_PCT, NOT_SCREENED,
                       sesoi_pct, override is not None, (f"no screen: {why}; refine searches every knob",))


def noise_sets_split(budget: int, knobs: int, sesoi_pct: float, *, design: str | None = None,
                     override: Mapping[str, float] | None = None) -> bool:
    """Whether the noise can change the split: the screen's replicates differ between the least and the most
    noise an A/A calibration could measure. When they do not (a two-level screen the budget gives its least
    replicates either way), tune skips the calibration and refine gets its :data:`AA_RUNS` measurements.

    >>> noise_sets_split(100, 27, 5.0), noise_sets_split(60, 5, 5.0)
    (False, True)
    """
    quiet, loud = (split_budget(budget, knobs, sesoi_pct, cv_pct=cv, design=design, override=override).replicates
                   for cv in (0.1, 99.0))
    return quiet != loud


def _shares(budget: int, runs: int, calibrate: int, needed: int, least: int,
            override: Mapping[str, float] | None) -> tuple[int, int]:
    """The screen's replicates and the confirmation's blocks out of ``budget`` (module docstring)."""
    if override is not None:
        room = math.floor(override["screen"] / 100 * budget) - calibrate
        return max(least, room // runs), math.floor(override["confirm"] / 100 * budget / 4)
    blocks = min(MAX_BLOCKS, max(MIN_BLOCKS, round(CONFIRM_SHARE * budget / 4)))
    room = min(math.floor(SCREEN_SHARE * budget) - calibrate, budget - calibrate - 4 * blocks - MIN_REFINE)
    return max(least, min(needed, room // runs)), blocks
