"""Kubernetes Pod Security Standards, the checks a namespace label ``pod-security.kubernetes.io/enforce``
applies to a pod template (kubernetes.io/docs/concepts/security/pod-security-standards, policy version 1.27+).

Each returned line names the control, as the admission controller's message does, so a test can say what a
level rejects. AppArmor, SELinux and sysctls are not modelled: a pod that sets any of them gets a line saying
so (fail closed), so a gap here cannot pass a pod the admission controller would refuse."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

LEVELS = ("privileged", "baseline", "restricted")
#: Capabilities "baseline" lets a container add.
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
#: Volume types "restricted" allows.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}


def _containers(spec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key, [])


def _baseline(spec: dict[str, Any]) -> Iterator[str]:
    for ns in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(ns):
            yield f"host namespaces ({ns}=true)"
    for v in spec.get("volumes", []):
        if "hostPath" in v:
            yield f"hostPath volumes ({v['name']})"
    pod_sc = spec.get("securityContext", {})
    if pod_sc.get("seccompProfile", {}).get("type") == "Unconfined":
        yield "seccompProfile (pod Unconfined)"
    for key in ("sysctls", "seLinuxOptions", "appArmorProfile"):
        if key in pod_sc or any(key in c.get("securityContext", {}) for c in _containers(spec)):
            yield f"{key} set: not modelled here, check it by hand"
    if pod_sc.get("windowsOptions", {}).get("hostProcess"):
        yield "hostProcess"
    for c in _containers(spec):
        sc = c.get("securityContext", {})
        if sc.get("privileged"):
            yield f"privileged ({c['name']})"
        added = set(sc.get("capabilities", {}).get("add", [])) - BASELINE_CAPABILITIES
        if added:
            yield f"non-default capabilities ({c['name']}: {', '.join(sorted(added))})"
        if any(p.get("hostPort") for p in c.get("ports", [])):
            yield f"hostPort ({c['name']})"
        if sc.get("procMount", "Default") != "Default":
            yield f"procMount ({c['name']})"
        if sc.get("seccompProfile", {}).get("type") == "Unconfined":
            yield f"seccompProfile ({c['name']} Unconfined)"


def _restricted(spec: dict[str, Any]) -> Iterator[str]:
    for v in spec.get("volumes", []):
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            yield f"restricted volume types ({v['name']}: {', '.join(sorted(kinds))})"
    pod_sc = spec.get("securityContext", {})
    for c in _containers(spec):
        sc = c.get("securityContext", {})
        if sc.get("allowPrivilegeEscalation") is not False:
            yield f"allowPrivilegeEscalation != false ({c['name']})"
        if not sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot", False)):
            yield f"runAsNonRoot != true ({c['name']})"
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            yield f"runAsUser=0 ({c['name']})"
        profile = sc.get("seccompProfile", pod_sc.get("seccompProfile", {})).get("type")
        if profile not in ("RuntimeDefault", "Localhost"):
            yield f"seccompProfile ({c['name']} must be RuntimeDefault or Localhost)"
        caps = sc.get("capabilities", {})
        if "ALL" not in caps.get("drop", []):
            yield f"unrestricted capabilities ({c['name']} must drop ALL)"
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            yield f"unrestricted capabilities ({c['name']} adds more than NET_BIND_SERVICE)"


def violations(pod_spec: dict[str, Any], level: str) -> list[str]:
    """What ``level`` rejects in ``pod_spec`` (a pod's or a pod template's ``spec``); empty: admitted."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    out: list[str] = []
    if level in ("baseline", "restricted"):
        out += _baseline(pod_spec)
    if level == "restricted":
        out += _restricted(pod_spec)
    return out
