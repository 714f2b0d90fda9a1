"""The one order of severities, worst first: the doctor's findings, alert rules' ``severity`` label, the
dashboard and the CLI all sort by it."""

from __future__ import annotations

from typing import Literal

Severity = Literal["critical", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("critical", "warning", "info")


def severity_rank(severity: str) -> int:
    """0 for the worst; a severity outside :data:`SEVERITIES` (or none) sorts after all of them."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)
