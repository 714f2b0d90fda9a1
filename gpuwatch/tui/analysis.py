"""The alert engine and the doctor as the dashboard sees them: optional and never fatal.

The dashboard must open even where the rules are broken, so each loader returns either the working object
or a one-line reason the pane shows instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from gpuwatch.alerts import DEFAULT_RULES, AlertEngine, RuleError, load_rules
from gpuwatch.diagnosis.shared import filling_note
from gpuwatch.doctor import LiveDoctor, diagnose_current
from gpuwatch.model.finding import Finding
from gpuwatch.model.snapshot import Snapshot

log = logging.getLogger(__name__)


def load_engine(rule_paths: Sequence[Path] | None = None) -> tuple[AlertEngine | None, str]:
    """``(AlertEngine, "")`` or ``(None, reason)``; without ``rule_paths``, the shipped rules."""
    paths = list(rule_paths) if rule_paths is not None else [p for p in (DEFAULT_RULES,) if p.is_file()]
    if not paths:
        return None, "no alert rule files found (pass rules in the config)"
    try:
        return AlertEngine(load_rules(paths)), ""
    except RuleError as exc:
        return None, f"alert rules not loaded: {exc}"
    except OSError as exc:
        return None, f"alert rules not readable: {exc}"


def diagnose(snapshots: Sequence[Snapshot], window_s: float,
             doctor: LiveDoctor | None = None) -> tuple[list[Finding] | None, str]:
    """``(findings, note)`` over the last ``window_s`` of ``snapshots`` (each with since when it holds;
    ``note``: :func:`filling_note`), or ``(None, reason)``; the doctor's own failures are reported, not
    raised. ``doctor``: the caller's :class:`LiveDoctor` (of the same window), which remembers since when
    its findings hold."""
    if not snapshots:
        return [], filling_note(snapshots, window_s)
    try:
        findings = doctor(snapshots) if doctor is not None else diagnose_current(snapshots, window_s)
    except Exception as exc:  # a bug in one rule of the doctor must not take the dashboard down
        log.exception("diagnosis failed")
        return None, f"diagnosis failed: {type(exc).__name__}: {exc}"
    return findings, filling_note(snapshots, window_s)
