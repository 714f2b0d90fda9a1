"""Alert rules over Snapshots: load rule files, evaluate them, export them to Prometheus.

    rules = load_rules([DEFAULT_RULES])                     # RuleError names file:line, rule and problem
    engine = AlertEngine(rules)
    for snap in snapshots:                                 # in time order
        for t in engine.evaluate(snap): ...                # Transitions: pending / firing / resolved
    engine.alerts()                                        # pending + firing + recently resolved
"""

from gpuwatch.alerts.engine import AlertEngine
from gpuwatch.alerts.loader import DEFAULT_RULES, load_rules, parse_rules
from gpuwatch.alerts.rules import Rule, RuleError, RuleSet
from gpuwatch.model.alert import Alert, AlertState, Transition, fingerprint

__all__ = ["DEFAULT_RULES", "Alert", "AlertEngine", "AlertState", "Rule", "RuleError", "RuleSet", "Transition",
           "fingerprint", "load_rules", "parse_rules"]
