"""A documented example config, generated from the typed sections so it always matches what the loader
accepts: ``gpuwatch daemon --print-config > ~/.config/gpuwatch/config.toml``."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from gpuwatch.config.model import SECTIONS, ReceiverConfig

RECEIVER_EXAMPLE = {
    "name": "ops", "kind": "alertmanager", "url": "https://alerts.example.com/hook",
    "secret_file": "/etc/gpuwatch/ops.secret",
}


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def render_example() -> str:
    """Every key with its help; active lines hold the defaults, so the file as printed changes nothing."""
    out = ["# gpuwatch daemon config (TOML). Durations as in alert rules: seconds, \"30s\", \"5m\", \"1h30m\", \"1d\".",
           "# Any [section] key can be overridden with the environment variable GPUWATCH_<SECTION>_<KEY>.", ""]
    for name, cls in SECTIONS.items():
        out.append(f"[{name}]")
        for f in dataclasses.fields(cls):
            out.append(f"# {f.metadata['help']}")
            default = _default(f)
            out.append(f"# {f.name} = ..." if default is None else f"{f.name} = {_toml(default)}")
        out.append("")
    out.append("# One [[receivers]] table per webhook or Alertmanager. Webhook requests (generic, alertmanager) are")
    out.append("# signed (Standard Webhooks) with the secret from secret_file or secret_env, e.g.")
    out.append("#   python3 -c 'from gpuwatch.notify import new_secret; print(new_secret())'")
    out.append("# Slack checks no signature (no secret needed). kind = \"alertmanager_api\" pushes alerts into an")
    out.append("# Alertmanager (url = its base URL): re-sent every minute while firing, ended when resolved.")
    out.append("# [[receivers]]")
    for f in dataclasses.fields(ReceiverConfig):
        default = RECEIVER_EXAMPLE.get(f.name, _default(f))
        line = f"{f.name} = ..." if default in (None, dataclasses.MISSING) else f"{f.name} = {_toml(default)}"
        out.append(f"# {line:<48} # {f.metadata['help']}")
    return "\n".join(out) + "\n"
