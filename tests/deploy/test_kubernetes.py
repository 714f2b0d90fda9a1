"""deploy/kubernetes: every core resource validates against the Kubernetes API schema (kubernetes-validate),
the pieces fit together (Service -> pods, ServiceMonitor -> Service port, probes -> the daemon's port, the
ConfigMap's config loads as gpuwatch's), and the PrometheusRule is what ``gpuwatch rules export --format
kubernetes`` writes today, with rules promtool accepts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from tools import require_tool

from gpuwatch.config import load_config

DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
#: The oldest Kubernetes the manifests are meant for.
KUBERNETES_VERSION = "1.27"
#: Prometheus Operator kinds: no schema in kubernetes-validate; checked by the tests below instead.
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}


def resources() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                out[doc["kind"]] = doc
    return out


def test_core_resources_validate_against_the_kubernetes_schema() -> None:
    found = resources()
    assert {"DaemonSet", "ConfigMap", "Service", "ServiceMonitor", "PrometheusRule"} <= set(found)
    for kind, doc in found.items():
        if kind not in OPERATOR_KINDS:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_a_schema_violation_is_caught() -> None:
    """The validator is not a formality: a wrong type in the DaemonSet fails."""
    broken = resources()["DaemonSet"]
    broken["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "nine"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_the_pieces_fit_together(tmp_path: Path) -> None:
    r = resources()
    pod = r["DaemonSet"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert r["Service"]["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert {p["targetPort"] for p in r["Service"]["spec"]["ports"]} <= set(ports)
    monitor = r["ServiceMonitor"]["spec"]
    assert monitor["selector"]["matchLabels"].items() <= r["Service"]["metadata"]["labels"].items()
    assert {e["port"] for e in monitor["endpoints"]} <= {p["name"] for p in r["Service"]["spec"]["ports"]}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert "nvidia.com/gpu.present" in pod["spec"]["nodeSelector"]
    # the config the DaemonSet mounts loads, listens on the container's port, and finds the mounted socket
    config_file = tmp_path / "config.toml"
    config_file.write_text(r["ConfigMap"]["data"]["config.toml"])
    config = load_config(config_file, env={})
    assert config.listen_address()[1] == ports["metrics"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert any(config.sources.kubelet_socket.startswith(m + "/") for m in mounts)
    assert config.daemon.state_dir in mounts
    assert any(config.daemon.token_file.startswith(m + "/") for m in mounts)  # type: ignore[union-attr]


def test_the_prometheus_rule_is_the_current_export_and_promtool_accepts_it(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    out = tmp_path / "rule.yaml"
    subprocess.run([sys.executable, "-m", "gpuwatch", "rules", "export", "--format", "kubernetes", "-o", str(out)],
                   check=True, capture_output=True, timeout=120)
    shipped = (DEPLOY / "prometheusrule.yaml").read_text()
    assert shipped == out.read_text(), "regenerate: gpuwatch rules export --format kubernetes -o " \
                                       "deploy/kubernetes/prometheusrule.yaml"
    rule = yaml.safe_load(shipped)
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    check = subprocess.run([promtool, "check", "rules", str(rules_file)], capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert sum(len(g["rules"]) for g in rule["spec"]["groups"]) >= 10


def test_the_image_command_is_one_the_daemon_accepts(tmp_path: Path) -> None:
    """The Dockerfile's ENTRYPOINT + CMD, run with --check-config (no image build here: no container engine)."""
    lines = (DEPLOY.parents[1] / "Dockerfile").read_text().splitlines()
    entry = json.loads(next(line for line in lines if line.startswith("ENTRYPOINT "))[len("ENTRYPOINT "):])
    cmd = json.loads(next(line for line in lines if line.startswith("CMD "))[len("CMD "):])
    assert entry == ["gpuwatch"]
    token = tmp_path / "token"
    token.write_text("t" * 32)
    args = [a.replace("/etc/gpuwatch-token/token", str(token)) for a in cmd]
    done = subprocess.run([sys.executable, "-m", "gpuwatch", *args, "--check-config", "--state-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, env={"HOME": str(tmp_path), "PATH": "/usr/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "listen 0.0.0.0:19464" in done.stdout
