"""The Pod Security checker the Kubernetes tests rely on, against pods whose verdict the standard states."""

from __future__ import annotations

from typing import Any

import pytest

from deploy.pod_security import violations


def pod(**spec: Any) -> dict[str, Any]:
    container = {"name": "c", "securityContext": spec.pop("container_sc", {}), "ports": spec.pop("ports", [])}
    return {"containers": [container], **spec}


RESTRICTED_OK = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                 "seccompProfile": {"type": "RuntimeDefault"}}


@pytest.mark.parametrize(("spec", "baseline", "restricted"), [
    (pod(), [], ["allowPrivilegeEscalation", "runAsNonRoot", "seccompProfile", "unrestricted capabilities"]),
    (pod(container_sc=RESTRICTED_OK), [], []),
    (pod(hostNetwork=True, container_sc=RESTRICTED_OK), ["host namespaces"], ["host namespaces"]),
    (pod(container_sc={**RESTRICTED_OK, "privileged": True}), ["privileged"], ["privileged"]),
    (pod(container_sc={**RESTRICTED_OK, "capabilities": {"drop": ["ALL"], "add": ["SYS_ADMIN"]}}),
     ["non-default capabilities"], ["non-default capabilities", "unrestricted capabilities"]),
    (pod(container_sc={**RESTRICTED_OK, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}), [], []),
    (pod(ports=[{"containerPort": 80, "hostPort": 80}], container_sc=RESTRICTED_OK), ["hostPort"], ["hostPort"]),
    (pod(volumes=[{"name": "v", "hostPath": {"path": "/"}}], container_sc=RESTRICTED_OK),
     ["hostPath volumes"], ["hostPath volumes", "restricted volume types"]),
    (pod(volumes=[{"name": "v", "nfs": {"server": "s", "path": "/"}}], container_sc=RESTRICTED_OK),
     [], ["restricted volume types"]),
    (pod(container_sc={**RESTRICTED_OK, "runAsUser": 0}), [], ["runAsUser=0"]),
    (pod(securityContext={"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]},
         container_sc=RESTRICTED_OK), ["sysctls set"], ["sysctls set"]),
])
def test_each_level_rejects_what_the_standard_says(spec: dict[str, Any], baseline: list[str],
                                                   restricted: list[str]) -> None:
    for level, expected in (("baseline", baseline), ("restricted", restricted)):
        found = violations(spec, level)
        assert len(found) == len(expected), (level, found)
        assert all(line.startswith(prefix) for line, prefix in zip(found, expected, strict=True)), (level, found)
    assert violations(spec, "privileged") == []


def test_an_unknown_level_is_an_error() -> None:
    with pytest.raises(ValueError, match="baseline"):
        violations(pod(), "strict")
