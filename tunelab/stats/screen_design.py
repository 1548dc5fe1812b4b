"""What the screen knows of a study's design beyond its runs: :class:`ScreenDesign`, one frozen view.

:func:`tunelab.study_data.design_info` builds it from a parsed design, once per call of
``tunelab screen``, a report or a round; :func:`as_screen_design` takes it, or the equivalent dict
(``{"type": "oat", "measurement": "duet"}``, as a notebook may write it), at the screen's door, so
every route reads typed fields (``runs.design.interactions``) and nothing strips keys on the way.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

from tunelab.errors import DataError
from tunelab.model import DesignType, MeasurementKind, ParseError

@dataclass(frozen=True)
class RoundLooks:
    """The looks of a design run in rounds (its ``replicates.max`` and alpha-spending function)."""

    max_replicates: int
    #: a name in :data:`tunelab.stats.rounds.SPENDING`; None: the default
    spending: str | None = None


@dataclass(frozen=True)
class ScreenDesign:
    """What the screen knows of the design beyond the runs (every field optional).

    Attributes
    ----------
    type : DesignType, optional
        The design generator (``oat``, ``latin_hypercube``, ...); a range type picks the range route.
    interactions : str or sequence of pairs
        ``analysis.interactions``: ``auto``, ``all``, ``none`` or the knob pairs the model estimates.
    guards : mapping, optional
        The guard metrics and what each metric is conditional on
        (:func:`tunelab.designs.schema.design_guards`).
    looks : RoundLooks, optional
        A design run in rounds: the screen replays its looks (:func:`tunelab.stats.screen_in_rounds`).
    profiles : tuple
        The load profiles of a profile-crossed design, in design order (the first is the reference).
    measurement : MeasurementKind
        ``SEQUENTIAL`` (one trial at a time) or ``DUET`` (each level beside its baseline).
    ranges, levels, points
        Latin hypercube and Morris designs: every knob's ``{low, high, scale}``; Morris's grid levels
        and its points (a DataFrame) in trajectory order.
    """

    type: DesignType | None = None
    interactions: Any = "auto"
    guards: Mapping[str, Any] | None = None
    looks: RoundLooks | None = None
    profiles: tuple[Any, ...] = ()
    measurement: MeasurementKind = MeasurementKind.SEQUENTIAL
    ranges: Mapping[str, Any] | None = None
    levels: int | None = None
    points: Any = None

    def __post_init__(self) -> None:
        """The type and measurement as members: a caller's text (``"oat"``, ``"duet"``) is parsed here, once."""
        try:
            if self.type is not None:
                object.__setattr__(self, "type", DesignType.parse(self.type))
            object.__setattr__(self, "measurement", MeasurementKind.parse(self.measurement))
        except ParseError as exc:
            raise DataError(f"design: {exc}") from None


#: the dict form's keys (``rounds`` holds ``{max_replicates, spending}``)
MAPPING_KEYS = tuple(field.name for field in fields(ScreenDesign) if field.name != "looks") + ("rounds",)


def as_screen_design(design: ScreenDesign | Mapping[str, Any] | None) -> ScreenDesign | None:
    """``design`` as a :class:`ScreenDesign`; None for no design (None or an empty dict). A dict's keys
    other than :data:`MAPPING_KEYS` are ignored.

    >>> as_screen_design({"type": "oat", "measurement": "duet"}).measurement is MeasurementKind.DUET
    True
    >>> as_screen_design({"rounds": {"max_replicates": 6}}).looks
    RoundLooks(max_replicates=6, spending=None)
    >>> as_screen_design({}) is None
    True
    """
    if design is None or isinstance(design, ScreenDesign):
        return design
    if not isinstance(design, Mapping):
        raise DataError(f"design must be a ScreenDesign or a dict, got {type(design).__name__}")
    if not design:
        return None
    # other keys (a design's ``aliases``, say) are not the screen's business: the model finds aliases in the runs
    values = {key: value for key, value in design.items() if key in MAPPING_KEYS and key != "rounds"}
    if "profiles" in values:
        values["profiles"] = tuple(values["profiles"] or ())
    rounds = design.get("rounds")
    if rounds:
        values["looks"] = RoundLooks(rounds["max_replicates"], rounds.get("spending"))
    return ScreenDesign(**values)
