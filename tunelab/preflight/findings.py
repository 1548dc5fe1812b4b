"""What the pre-flight says: one :class:`Finding` per knob (or metric) and load profile, and the
:class:`Preflight` report that refuses a study unless ``--force`` is given."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from tunelab.errors import SafetyError

#: the flag that runs a study the pre-flight refuses
FORCE_FLAG = "--force"


class PreflightError(SafetyError):
    """The pre-flight found a change that cannot act, or a metric that cannot show it, under this load."""


class Severity(Enum):
    """A finding that refuses the study (``CANNOT_ACT``, ``BLIND_METRIC``) or only informs (``NOTE``)."""

    CANNOT_ACT = "cannot act"
    BLIND_METRIC = "blind metric"
    NOTE = "note"

    @property
    def refuses(self) -> bool:
        return self is not Severity.NOTE


@dataclass(frozen=True)
class Finding:
    """One thing the pre-flight found: about ``subject`` (a knob id, or ``metric NAME``) under ``profile``
    (None: every profile), and why."""

    severity: Severity
    subject: str
    profile: str | None
    reason: str

    def line(self) -> str:
        """``net.core.somaxconn [profile normal]: cannot act: ...``"""
        where = f" [profile {self.profile}]" if self.profile else ""
        return f"{self.subject}{where}: {self.severity.value}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity.value, "subject": self.subject, "profile": self.profile,
                "reason": self.reason}


@dataclass(frozen=True)
class Preflight:
    """Every finding, and whether the server was read (``facts``: False at ``--plan --offline``)."""

    findings: tuple[Finding, ...] = ()
    facts: bool = False

    @property
    def refusals(self) -> list[Finding]:
        return [f for f in self.findings if f.severity.refuses]

    @property
    def notes(self) -> list[Finding]:
        return [f for f in self.findings if not f.severity.refuses]

    def lines(self) -> list[str]:
        """The report for ``--plan``: a status line, then one line per finding."""
        where = "the design and the server" if self.facts else "the design only (offline: the server was not read)"
        if self.refusals:
            head = f"pre-flight ({where}): REFUSED, {len(self.refusals)} problem(s); {FORCE_FLAG} runs it anyway"
        else:
            head = f"pre-flight ({where}): every change can act under this load"
        return [head] + [f"  {finding.line()}" for finding in self.findings]

    def to_json(self) -> dict[str, Any]:
        return {"refused": bool(self.refusals), "server_read": self.facts,
                "findings": [f.to_json() for f in self.findings]}

    def shown(self, force: bool) -> list[str]:
        """The lines a run prints as it starts: each note, and each refusal ``--force`` overrode (so the output
        and its log say the verdict measures a change the pre-flight said cannot act)."""
        forced = [f"pre-flight: measured anyway ({FORCE_FLAG}): {f.line()}" for f in self.refusals] if force else []
        return forced + [f"pre-flight: {f.line()}" for f in self.notes]

    def check(self, force: bool) -> None:
        """Raise :class:`PreflightError` (one line, naming ``--force``) when a finding refuses and not ``force``."""
        if not self.refusals or force:
            return
        first = self.refusals[0].line()
        more = f" (and {len(self.refusals) - 1} more: `--plan` lists them)" if len(self.refusals) > 1 else ""
        raise PreflightError(f"pre-flight: {first}{more}; nothing was applied. Fix the load or the change, or pass "
                             f"{FORCE_FLAG} to measure anyway")
