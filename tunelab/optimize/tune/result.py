"""What ``tunelab tune`` was asked (:class:`TuneSettings`) and what it did (:class:`TuneResult`)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from tunelab.display import Displayed
from tunelab.errors import DesignError
from tunelab.formatting import fmt_config
from tunelab.model import json_value, level_to_json
from tunelab.optimize.confirm import ConfirmResult
from tunelab.optimize.driver import RefineResult, check_engine
from tunelab.optimize.tune.budget import BudgetSplit, parse_split
from tunelab.optimize.tune.screening import KnobCall

#: how refine counts the screen's measurements: ``fit`` those with every dropped knob at its baseline,
#: ``projected`` every one (the dropped knobs ignored, as the screen found they do not matter)
WARM_MODES = ("fit", "projected")


@dataclass(frozen=True)
class TuneSettings:
    """The settings that identify a tune run (a resumed run must give the same; stored with every trial).

    ``budget`` measurements in all; ``seed`` seeds the screen's run order and refine's engine; ``cv_pct`` the
    noise if known (skips the A/A calibration); ``split`` stage -> percent (:func:`~tunelab.optimize.tune.budget.
    parse_split`); ``screen_design`` ``auto``/``oat``/``plackett_burman``/``fractional_factorial``; ``engine``
    refine's; ``warm`` one of :data:`WARM_MODES`; ``alpha`` the screen's.
    """

    budget: int
    seed: int = 0
    cv_pct: float | None = None
    split: Mapping[str, float] | None = None
    screen_design: str | None = None
    engine: str = "tunelab"
    warm: str = "fit"
    alpha: float = 0.05

    def __post_init__(self) -> None:
        if isinstance(self.budget, bool) or not isinstance(self.budget, int) or self.budget <= 0:
            raise DesignError(f"--budget must be a positive number of measurements, got {self.budget!r}")
        if self.warm not in WARM_MODES:
            raise DesignError(f"--warm {self.warm}: give one of {', '.join(WARM_MODES)}")
        if self.cv_pct is not None and not (0 < float(self.cv_pct) < 100):
            raise DesignError(f"--noise {self.cv_pct}: the noise is a CV in percent, above 0 and below 100")
        if not 0 < self.alpha < 1:
            raise DesignError(f"alpha {self.alpha} must be between 0 and 1")
        object.__setattr__(self, "cv_pct", None if self.cv_pct is None else float(self.cv_pct))
        object.__setattr__(self, "alpha", float(self.alpha))
        object.__setattr__(self, "split", parse_split(self.split))
        object.__setattr__(self, "screen_design", None if self.screen_design == "auto" else self.screen_design)
        check_engine(self.engine, None, self.budget)

    def to_json(self) -> dict[str, Any]:
        return {"budget": self.budget, "seed": self.seed, "cv_pct": self.cv_pct,
                "split": dict(self.split) if self.split else None, "screen_design": self.screen_design,
                "engine": self.engine, "warm": self.warm, "alpha": self.alpha}


@dataclass
class TuneResult(Displayed):
    """One tune run: the split, what each stage spent, the screen's call on every knob, refine's result, the
    confirmation of its winner; ``stopped`` says why tune stopped after the screen, ``note`` why the winner was
    not confirmed."""

    study: str
    store: Path
    settings: TuneSettings
    split: BudgetSplit
    calls: list[KnobCall]
    spent: dict[str, int]
    refine: RefineResult | None = None
    winner: dict[str, Any] | None = None
    confirmation: ConfirmResult | None = None
    stopped: str | None = None
    note: str | None = None

    @property
    def kept(self) -> list[str]:
        return [c.knob for c in self.calls if c.kept]

    @property
    def verdict(self) -> str:
        """The confirmation's verdict, or ``stopped`` / ``unconfirmed``."""
        if self.stopped:
            return "stopped"
        return self.confirmation.verdict if self.confirmation is not None else "unconfirmed"

    def gain(self) -> dict[str, float] | None:
        """The confirmed change of the goal (percent, CI), None without a confirmation."""
        return self.confirmation.gain() if self.confirmation is not None else None

    def summary(self) -> str:
        """A few lines: the split and spend, the knobs kept, the winner and its confirmation (or why not)."""
        spent = ", ".join(f"{stage} {n}" for stage, n in self.spent.items() if n)
        screened = (f"  screen ({self.split.design}): kept {len(self.kept)} of {len(self.calls)} knobs"
                    + (f": {', '.join(self.kept)}" if self.kept else "") if self.split.screen else
                    f"  no screen (too small a budget for one): refine searched all {len(self.calls)} knobs")
        lines = [f"tune {self.study}: spent {sum(self.spent.values())} of {self.settings.budget} ({spent})", screened]
        if self.stopped:
            return "\n".join(lines + [f"  {self.stopped}"])
        lines.append(f"  winner: {fmt_config(self.refine.winner) if self.refine else '-'}")
        if self.confirmation is not None:
            lines.append(f"  confirmed: {self.confirmation.verdict} ({self.confirmation.gain_text()})")
        if self.note:
            lines.append(f"  {self.note}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        """``TuneResult:`` and the summary's lines (at most five)."""
        return "TuneResult: " + "\n".join(self.summary().splitlines()[:5])

    def to_json(self) -> dict[str, Any]:
        """Strict JSON: settings, split, spend, the screen's calls, the winner and the confirmation."""
        gain = self.gain()
        return json_value({
            "study": self.study, "store": str(self.store), "settings": self.settings.to_json(),
            "split": self.split.to_json(), "spent": dict(self.spent), "spent_total": sum(self.spent.values()),
            "knobs": [c.to_json() for c in self.calls], "kept": self.kept, "stopped": self.stopped,
            "winner": {k: level_to_json(v) for k, v in self.winner.items()} if self.winner else None,
            "refine": {"evaluations": self.refine.evaluations, "warm": self.refine.warm,
                       "engine": self.refine.engine} if self.refine else None,
            "verdict": self.verdict, "gain": gain, "note": self.note,
            "confirmation": self.confirmation.table.to_dict(orient="records") if self.confirmation else None})
