"""Validate a custom resource against its CustomResourceDefinition's OpenAPI v3 schema, offline.

The CRDs are vendored under ``crds/`` (the Prometheus Operator's own files). The API server prunes unknown
fields, and ``kubectl apply`` (strict field validation, the default since Kubernetes 1.27) rejects them, so
:func:`strict` closes every object the schema lists properties for, as that validation does; the
``x-kubernetes-*`` extensions and ``format`` carry no extra check here."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

CRDS = Path(__file__).resolve().parent / "crds"
#: ObjectMeta's fields a manifest sets, as the API server types them (the CRD schema says only "object").
METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
                 "maxLength": 253},
        "namespace": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "additionalProperties": False,
}


def strict(schema: Any) -> Any:
    """The schema with ``additionalProperties: false`` on every object that lists its properties."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out \
            and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@cache
def crd_schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) -> the strict schema of every served version of every vendored CRD."""
    out = {}
    for path in sorted(CRDS.glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd:
                continue
            group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
            for version in crd["spec"]["versions"]:
                if version["served"]:
                    schema = strict(version["schema"]["openAPIV3Schema"])
                    schema["properties"]["metadata"] = METADATA
                    schema["properties"]["apiVersion"]["enum"] = [f"{group}/{version['name']}"]
                    schema["properties"]["kind"]["enum"] = [kind]
                    schema.setdefault("required", []).extend(["apiVersion", "kind", "metadata"])
                    out[(f"{group}/{version['name']}", kind)] = schema
    return out


def validate_custom_resource(doc: dict[str, Any]) -> None:
    """Raise :class:`jsonschema.ValidationError` where ``doc`` breaks its CRD's schema; KeyError where no CRD
    for its apiVersion and kind is vendored."""
    schema = crd_schemas()[(doc["apiVersion"], doc["kind"])]
    jsonschema.Draft7Validator(schema).validate(doc)
