"""The alert engine and the doctor as the dashboard sees them: optional, imported lazily, never fatal.

The dashboard must open even where the rules are broken or a part is missing, so each loader returns
either the working object or a one-line reason the pane shows instead.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gpuwatch
from gpuwatch.model.snapshot import Snapshot

log = logging.getLogger(__name__)


def default_rule_paths() -> list[Path]:
    """The shipped rule files: what ``gpuwatch.alerts`` names as defaults, else ``alerts/*.yml``."""
    try:
        import gpuwatch.alerts as alerts_mod
    except ImportError:
        return []
    shipped = getattr(alerts_mod, "DEFAULT_RULES", None)
    if shipped is not None and Path(shipped).is_file():
        return [Path(shipped)]
    folder = Path(gpuwatch.__file__).resolve().parents[1] / "alerts"
    return sorted(p for p in folder.glob("*.yml") if p.is_file())


def load_engine(rule_paths: Sequence[Path] | None = None) -> tuple[Any | None, str]:
    """``(AlertEngine, "")`` or ``(None, reason)``."""
    try:
        alerts_mod = importlib.import_module("gpuwatch.alerts")
        AlertEngine, RuleError, load_rules = alerts_mod.AlertEngine, alerts_mod.RuleError, alerts_mod.load_rules
    except (ImportError, AttributeError) as exc:
        return None, f"alert engine not available ({exc})"
    paths = list(rule_paths) if rule_paths is not None else default_rule_paths()
    if not paths:
        return None, "no alert rule files found (pass rules in the config)"
    try:
        return AlertEngine(load_rules(paths)), ""
    except RuleError as exc:
        return None, f"alert rules not loaded: {exc}"
    except OSError as exc:
        return None, f"alert rules not readable: {exc}"


def diagnose(snapshots: Sequence[Snapshot], window_s: float) -> tuple[list[Any] | None, str]:
    """``(findings, "")`` over the last ``window_s`` of ``snapshots`` (each with since when it holds), or
    ``(None, reason)``; the doctor's own failures are reported, not raised."""
    try:
        doctor_diagnose = importlib.import_module("gpuwatch.doctor").diagnose_current
    except (ImportError, AttributeError) as exc:
        return None, f"doctor not available ({exc})"
    if not snapshots:
        return [], ""
    try:
        return list(doctor_diagnose(snapshots, window_s)), ""
    except Exception as exc:  # a bug in one rule of the doctor must not take the dashboard down
        log.exception("diagnosis failed")
        return None, f"diagnosis failed: {type(exc).__name__}: {exc}"


def field(obj: Any, name: str, default: Any = None) -> Any:
    """Read ``name`` from a dataclass or from its ``to_dict()`` form (remote daemons send dicts)."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)
