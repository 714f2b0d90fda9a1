"""Kubernetes label selectors (matchLabels and matchExpressions), as the Prometheus Operator applies its
``serviceMonitorSelector`` and ``ruleSelector`` to the objects it may load."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether ``selector`` matches an object with ``labels``. None selects nothing; {} selects everything
    (the Operator's reading of a nil and an empty selector)."""
    if selector is None:
        return False
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        key, op, values = expr["key"], expr["operator"], expr.get("values", [])
        ok = {"In": key in labels and labels[key] in values,
              "NotIn": key not in labels or labels[key] not in values,
              "Exists": key in labels,
              "DoesNotExist": key not in labels}[op]
        if not ok:
            return False
    return True
