"""The alert engine and the doctor as the dashboard sees them: optional and never fatal.

The dashboard must open even where the rules are broken, so each loader returns either the working object
or a one-line reason the pane shows instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from gpuwatch.alerts import DEFAULT_RULES, AlertEngine, RuleError, load_rules
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


def watched_s(snapshots: Sequence[Snapshot]) -> float:
    """Seconds the snapshots cover, counting the first sample's own interval (30 samples 1 s apart: 30 s)."""
    if len(snapshots) < 2:
        return 0.0 if not snapshots else 1.0
    span = snapshots[-1].time - snapshots[0].time
    return span + span / (len(snapshots) - 1)


def filling_note(snapshots: Sequence[Snapshot], window_s: float) -> str:
    """``watching: 4 of 30 s`` while the doctor's window is not full yet, else ``""``: until then the
    doctor has not seen enough to say there is nothing to report."""
    seen = watched_s(snapshots)
    return "" if seen >= window_s else f"watching: {seen:.0f} of {window_s:.0f} s"


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
