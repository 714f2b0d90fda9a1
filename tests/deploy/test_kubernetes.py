"""deploy/kubernetes: a Kustomize base with overlays, each rendered with ``kubectl kustomize`` as a user would.

Every overlay's core objects validate against the Kubernetes API schema (kubernetes-validate) and its
Prometheus Operator objects against the Operator's own CRD schemas (vendored in crds/, checked with
jsonschema); the pieces fit together; kube-prometheus-stack's selectors pick the ServiceMonitor and
PrometheusRule up; the no-operator and restricted overlays apply without the Operator's CRDs; each pod is
admitted by the Pod Security level its namespace enforces; and the PrometheusRule carries the same rules as the
exported rule file."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from tools import require_tool

from deploy.crd_schema import validate_custom_resource
from deploy.kustomize import DEPLOY, OVERLAYS, by_kind, is_operator_object, overlay, render
from deploy.label_selectors import selects
from deploy.pod_security import violations
from gpuwatch.config import load_config

ROOT = DEPLOY.parents[1]
#: The oldest Kubernetes the manifests are meant for.
KUBERNETES_VERSION = "1.27"
NAMESPACE = "gpuwatch"
PROMETHEUS_RULE = DEPLOY / "components" / "prometheus-operator" / "prometheusrule.yaml"
EXPORTED_RULES = ROOT / "alerts" / "prometheus" / "gpuwatch-rules.yml"
KPS_RELEASE = "kube-prometheus-stack"


def kube_prometheus_stack_prometheus(release: str) -> dict[str, Any]:
    """The selectors of the Prometheus object kube-prometheus-stack's chart creates with its default values
    (``serviceMonitorSelectorNilUsesHelmValues`` and ``ruleSelectorNilUsesHelmValues`` true): it loads only
    ServiceMonitors and PrometheusRules labelled with the Helm release's name, from every namespace."""
    return {"serviceMonitorSelector": {"matchLabels": {"release": release}}, "serviceMonitorNamespaceSelector": {},
            "ruleSelector": {"matchLabels": {"release": release}}, "ruleNamespaceSelector": {}}


def loaded_by(prometheus: dict[str, Any], docs: Any) -> set[str]:
    """Kinds of ``docs`` that a Prometheus with these selectors loads."""
    selector = {"ServiceMonitor": "serviceMonitorSelector", "PrometheusRule": "ruleSelector"}
    return {d["kind"] for d in docs if d["kind"] in selector
            and selects(prometheus[selector[d["kind"]]], d["metadata"].get("labels", {}))}


@pytest.mark.parametrize("name", OVERLAYS)
def test_every_overlay_renders_and_validates(name: str) -> None:
    docs = overlay(name)
    kinds = by_kind(docs)
    assert {"Namespace", "DaemonSet", "ConfigMap", "Service"} <= set(kinds)
    for doc in docs:
        if is_operator_object(doc):
            validate_custom_resource(doc)
        else:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("name", OVERLAYS)
def test_every_object_is_in_the_gpuwatch_namespace(name: str) -> None:
    for doc in overlay(name):
        if doc["kind"] == "Namespace":
            assert doc["metadata"]["name"] == NAMESPACE
        else:
            assert doc["metadata"].get("namespace") == NAMESPACE, doc["kind"]


def test_the_operator_overlays_carry_both_operator_objects_and_the_others_none() -> None:
    for name in ("plain", "kube-prometheus-stack"):
        assert {d["kind"] for d in overlay(name) if is_operator_object(d)} == {"ServiceMonitor", "PrometheusRule"}
    for name in ("no-operator", "restricted"):
        # apiVersions a cluster has without any CRD: kubectl apply -k works there
        assert {d["apiVersion"] for d in overlay(name)} <= {"v1", "apps/v1"}, name


def test_a_crd_schema_violation_is_caught() -> None:
    """The CRD check is not a formality: a wrong type, an unknown field and a bad duration each fail."""
    kinds = by_kind(overlay("plain"))
    monitor, rule = json.loads(json.dumps(kinds["ServiceMonitor"])), json.loads(json.dumps(kinds["PrometheusRule"]))
    validate_custom_resource(monitor)
    monitor["spec"]["endpoints"][0]["interval"] = "15 seconds"
    with pytest.raises(jsonschema.ValidationError, match="does not match"):
        validate_custom_resource(monitor)
    rule["spec"]["groups"][0]["rules"][0]["severity"] = "warning"  # belongs under labels
    with pytest.raises(jsonschema.ValidationError, match="Additional properties"):
        validate_custom_resource(rule)
    del monitor["spec"]["selector"]
    with pytest.raises(jsonschema.ValidationError):
        validate_custom_resource(monitor)


def test_a_core_schema_violation_is_caught() -> None:
    broken = json.loads(json.dumps(by_kind(overlay("plain"))["DaemonSet"]))
    broken["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "nine"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_kube_prometheus_stack_selects_the_servicemonitor_and_the_rule() -> None:
    prometheus = kube_prometheus_stack_prometheus(KPS_RELEASE)
    assert loaded_by(prometheus, overlay("kube-prometheus-stack")) == {"ServiceMonitor", "PrometheusRule"}
    # what went wrong before: the plain objects are silently ignored by that Prometheus...
    assert loaded_by(prometheus, overlay("plain")) == set()
    # ...and are loaded by an Operator that selects everything
    assert loaded_by({"serviceMonitorSelector": {}, "ruleSelector": {}}, overlay("plain")) == {
        "ServiceMonitor", "PrometheusRule"}


def test_the_release_label_is_set_in_one_place(tmp_path: Path) -> None:
    """Changing the one line in the overlay relabels both objects, and nothing else names the release."""
    source = (DEPLOY / "overlays" / "kube-prometheus-stack" / "kustomization.yaml").read_text()
    value = re.compile(rf"^(\s+value:) {KPS_RELEASE}$", re.M)
    assert len(value.findall(source)) == 1
    others = [p for p in DEPLOY.rglob("*.yaml") if "kube-prometheus-stack" not in p.parts]
    assert not [p for p in others if re.search(r"^\s*release:", p.read_text(), re.M)]
    copy = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY, copy)
    edited = copy / "overlays" / "kube-prometheus-stack" / "kustomization.yaml"
    edited.write_text(value.sub(r"\1 monitoring", source))
    docs = render(copy / "overlays" / "kube-prometheus-stack")
    assert loaded_by(kube_prometheus_stack_prometheus("monitoring"), docs) == {"ServiceMonitor", "PrometheusRule"}
    assert loaded_by(kube_prometheus_stack_prometheus(KPS_RELEASE), docs) == set()


@pytest.mark.parametrize("name", OVERLAYS)
def test_the_namespace_enforces_a_level_that_admits_the_pod(name: str) -> None:
    kinds = by_kind(overlay(name))
    level = kinds["Namespace"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    assert violations(kinds["DaemonSet"]["spec"]["template"]["spec"], level) == []


def test_what_baseline_rejects_in_the_full_pod_and_the_restricted_pod_passes() -> None:
    """The full pod needs a "privileged" namespace: baseline rejects exactly hostPID, the hostPaths of the
    kubelet's socket and of the state on the node, and SYS_PTRACE for py-spy (the README says so); the
    restricted overlay passes "restricted", and enforces it."""
    full = by_kind(overlay("plain"))
    assert full["Namespace"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    pod = full["DaemonSet"]["spec"]["template"]["spec"]
    assert violations(pod, "baseline") == ["host namespaces (hostPID=true)", "hostPath volumes (state)",
                                           "hostPath volumes (pod-resources)",
                                           "non-default capabilities (gpuwatch: SYS_PTRACE)"]
    assert "runAsUser=0 (gpuwatch)" in violations(pod, "restricted")
    restricted = by_kind(overlay("restricted"))
    assert restricted["Namespace"]["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert violations(restricted["DaemonSet"]["spec"]["template"]["spec"], "restricted") == []


def test_the_components_combine_as_the_readme_says(tmp_path: Path) -> None:
    """The restricted pod with the Operator's objects: an overlay listing both components renders, validates,
    and its pod still passes "restricted"."""
    copy = tmp_path / "kubernetes"
    shutil.copytree(DEPLOY, copy)
    mine = copy / "overlays" / "mine"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": NAMESPACE,
        "resources": ["../../base"],
        "components": ["../../components/prometheus-operator", "../../components/restricted"]}))
    docs = render(mine)
    kinds = by_kind(docs)
    assert {"ServiceMonitor", "PrometheusRule"} <= set(kinds)
    for doc in docs:
        if is_operator_object(doc):
            validate_custom_resource(doc)
        else:
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    assert violations(kinds["DaemonSet"]["spec"]["template"]["spec"], "restricted") == []


@pytest.mark.parametrize("name", OVERLAYS)
def test_the_pieces_fit_together(name: str, tmp_path: Path) -> None:
    r = by_kind(overlay(name))
    pod = r["DaemonSet"]["spec"]["template"]
    container = pod["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert r["Service"]["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert {p["targetPort"] for p in r["Service"]["spec"]["ports"]} <= set(ports)
    if "ServiceMonitor" in r:
        monitor = r["ServiceMonitor"]["spec"]
        assert monitor["selector"]["matchLabels"].items() <= r["Service"]["metadata"]["labels"].items()
        assert {e["port"] for e in monitor["endpoints"]} <= {p["name"] for p in r["Service"]["spec"]["ports"]}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert "nvidia.com/gpu.present" in pod["spec"]["nodeSelector"]
    # the generated ConfigMap is the one mounted (kustomize renamed both with the content's hash)
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["config"]["configMap"]["name"] == r["ConfigMap"]["metadata"]["name"]
    # the config the DaemonSet mounts loads, listens on the container's port, and its paths are mounted
    config_file = tmp_path / "config.toml"
    config_file.write_text(r["ConfigMap"]["data"]["config.toml"])
    config = load_config(config_file, env={})
    assert config.listen_address()[1] == ports["metrics"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert config.daemon.state_dir in mounts
    assert any(config.daemon.token_file.startswith(m + "/") for m in mounts)  # type: ignore[union-attr]
    # the state outlives the pod on the node where the pod may use a hostPath; the restricted pod may not
    state = volumes["state"]
    if name == "restricted":
        assert state.get("emptyDir") == {} and "hostPath" not in state
    else:
        assert state["hostPath"] == {"path": config.daemon.state_dir, "type": "DirectoryOrCreate"}
    socket_mounted = any(config.sources.kubelet_socket.startswith(m + "/") for m in mounts)
    # the full pod has the kubelet's socket and the host's processes; the restricted one neither
    assert socket_mounted is (name != "restricted")
    assert bool(pod["spec"].get("hostPID")) is (name != "restricted")


def test_the_prometheus_rule_is_the_current_export_and_promtool_accepts_it(tmp_path: Path) -> None:
    promtool = require_tool("promtool")
    out = tmp_path / "rule.yaml"
    subprocess.run([sys.executable, "-m", "gpuwatch", "rules", "export", "--format", "kubernetes", "-o", str(out)],
                   check=True, capture_output=True, timeout=120)
    shipped = PROMETHEUS_RULE.read_text()
    assert shipped == out.read_text(), f"regenerate: gpuwatch rules export --format kubernetes -o " \
                                       f"{PROMETHEUS_RULE.relative_to(ROOT)}"
    rule = yaml.safe_load(shipped)
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    rules_file = tmp_path / "rules.yml"
    rules_file.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    check = subprocess.run([promtool, "check", "rules", str(rules_file)], capture_output=True, text=True,
                           timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert sum(len(g["rules"]) for g in rule["spec"]["groups"]) >= 10


@pytest.mark.parametrize("name", ["plain", "kube-prometheus-stack"])
def test_the_rendered_rule_carries_the_exported_rule_file(name: str) -> None:
    """One source of truth: the PrometheusRule a cluster gets holds exactly the groups of
    alerts/prometheus/gpuwatch-rules.yml (both are exports of the shipped rules)."""
    rendered = by_kind(overlay(name))["PrometheusRule"]["spec"]["groups"]
    assert rendered == yaml.safe_load(EXPORTED_RULES.read_text())["groups"]


def test_every_manifest_file_is_used_by_a_kustomization() -> None:
    """No stray YAML beside the layout (a file left at the old flat paths would never be applied)."""
    used: set[Path] = set()
    for kustomization in DEPLOY.rglob("kustomization.yaml"):
        k = yaml.safe_load(kustomization.read_text())
        refs = [*k.get("resources", []), *k.get("components", []),
                *(p["path"] for p in k.get("patches", []) if "path" in p),
                *(f for g in k.get("configMapGenerator", []) for f in g.get("files", []))]
        used |= {(kustomization.parent / r).resolve() for r in refs}
    files = {p.resolve() for p in DEPLOY.rglob("*") if p.is_file() and p.name not in ("kustomization.yaml",
                                                                                        "README.md")}
    assert files - used == set(), "not in any kustomization.yaml"


def test_the_readme_names_every_overlay_and_only_real_ones() -> None:
    readme = (ROOT / "README.md").read_text() + (DEPLOY / "README.md").read_text()
    named = set(re.findall(r"deploy/kubernetes/overlays/([\w-]+)", readme))
    assert named == set(OVERLAYS)
    assert {p.name for p in (DEPLOY / "overlays").iterdir()} == set(OVERLAYS)


def test_the_image_command_is_one_the_daemon_accepts(tmp_path: Path) -> None:
    """The Dockerfile's ENTRYPOINT + CMD, run with --check-config (no image build here: no container engine)."""
    lines = (ROOT / "Dockerfile").read_text().splitlines()
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
