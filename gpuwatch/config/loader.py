"""Read, override and validate the TOML config.

Order of precedence: built-in defaults < the file < ``GPUWATCH_<SECTION>_<KEY>`` environment variables
(e.g. ``GPUWATCH_DAEMON_LISTEN``) < command-line flags (applied by the CLI with :func:`override`).
Every error names the file, the line and the key, and says what a good value looks like.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from gpuwatch.config import fields as f
from gpuwatch.config.fields import day_time_offset, shown
from gpuwatch.config.model import (
    ALERTMANAGER_API,
    AM_RESEND_RANGE_S,
    DIGEST_KINDS,
    SECTIONS,
    UNSIGNED_KINDS,
    WEBHOOK_REPEAT_RANGE_S,
    Config,
    ReceiverConfig,
)
from gpuwatch.model import files
from gpuwatch.model.durations import format_duration
from gpuwatch.model.errors import InputError
from gpuwatch.model.spelling import close_matches

ENV_PREFIX = "GPUWATCH_"


# A daemon or dashboard started without a config file, as most are, parses no TOML: the parser is imported
# when there is a file to parse (see model/spelling.py for why a long-running process holds few modules).
def _toml() -> ModuleType:
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    import tomli  # pragma: no cover - Python 3.10

    return tomli  # pragma: no cover


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    toml = _toml()
    try:
        return toml.loads(text)
    except toml.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        raise ConfigError(f"{path}:{m.group(1) if m else '?'}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: arrays or tables nested too deeply to be a config") from None


#: GPUWATCH_* variables that are not config keys (the config path; the test and validation tools': a daemon
#: started by a test run that sets them must not refuse them).
OTHER_ENV = ("GPUWATCH_CONFIG", "GPUWATCH_REQUIRE_TOOLS", "GPUWATCH_TEST_TORCH", "GPUWATCH_TEST_MARK",
             "GPUWATCH_TEST_WORKERS", "GPUWATCH_TORCH_PYTHON", "GPUWATCH_FAULT_DIR")
#: A config file is a few KiB; this refuses a wrong file (a log, a binary) before parsing it.
MAX_CONFIG_BYTES = 1024 * 1024


class ConfigError(InputError):
    """A config the daemon cannot start with; the message is one line a user can act on."""


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$GPUWATCH_CONFIG``, else ``$XDG_CONFIG_HOME/gpuwatch/config.toml`` (``~/.config`` by default)."""
    env = os.environ if env is None else env
    if env.get("GPUWATCH_CONFIG"):
        return Path(env["GPUWATCH_CONFIG"]).expanduser()
    base = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "gpuwatch" / "config.toml"


class _Where:
    """Finds the line of a key in the TOML text so errors can say ``file:line``."""

    def __init__(self, path: Path | None, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def _header_line(self, header: str, nth: int = 0) -> int | None:
        pattern = re.compile(r"^\s*" + re.escape(header) + r"\s*(#.*)?$")
        seen = 0
        for i, line in enumerate(self.lines):
            if pattern.match(line):
                if seen == nth:
                    return i
                seen += 1
        return None

    def line(self, section: str | None, key: str | None, nth: int = 0) -> int | None:
        start = 0
        if section is not None:
            header = f"[[{section}]]" if section == "receivers" else f"[{section}]"
            found = self._header_line(header, nth)
            if found is None:
                return None
            start = found
            if key is None:
                return start + 1
        key_re = re.compile(r"^\s*" + re.escape(key or "") + r"\s*=")
        for i in range(start + (1 if section else 0), len(self.lines)):
            if section is not None and re.match(r"^\s*\[", self.lines[i]):
                break
            if key_re.match(self.lines[i]):
                return i + 1
        return start + 1 if section else None

    def error(self, section: str | None, key: str | None, message: str, nth: int = 0) -> ConfigError:
        line = self.line(section, key, nth) if self.path else None
        where = f"{self.path}:{line}" if line else str(self.path or "config")
        name = ".".join(p for p in (f"{section}[{nth}]" if section == "receivers" else section, key) if p)
        return ConfigError(f"{where}: {name}: {message}")


def _parse_table(cls: type, table: Mapping[str, Any], where: _Where, section: str, nth: int = 0,
                 base_dir: Path | None = None) -> Any:
    known = {fl.name: fl for fl in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, raw in table.items():
        if key not in known:
            near = close_matches(key, known, n=1)
            hint = f"did you mean '{near[0]}'?" if near else f"known keys: {', '.join(known)}"
            raise where.error(section, key, f"unknown key; {hint}", nth)
        try:
            value = known[key].metadata["parse"](raw)
        except f.FieldError as exc:
            raise where.error(section, key, str(exc), nth) from None
        if isinstance(value, list):
            value = tuple(value)
        if base_dir is not None and key in ("token_file", "secret_file", "state_dir"):
            value = str(base_dir / Path(value).expanduser())
        if base_dir is not None and key == "rule_paths":
            value = tuple(str(base_dir / Path(p).expanduser()) for p in value)
        values[key] = value
    missing = [fl.name for fl in known.values()
               if fl.name not in values and fl.default is dataclasses.MISSING
               and fl.default_factory is dataclasses.MISSING]
    if missing:
        raise where.error(section, None, f"missing {', '.join(missing)} (every receiver needs name, kind, url)",
                          nth)
    return cls(**values)


def _env_overrides(env: Mapping[str, str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    known = set(OTHER_ENV)
    for section, cls in SECTIONS.items():
        for fl in dataclasses.fields(cls):
            name = f"{ENV_PREFIX}{section.upper()}_{fl.name.upper()}"
            known.add(name)
            if name in env:
                out.setdefault(section, {})[fl.name] = env[name]
    for name in sorted(env):
        if name.startswith(ENV_PREFIX) and name not in known:  # a typo would otherwise change nothing, silently
            near = close_matches(name, sorted(known), n=1)
            hint = f"did you mean {near[0]}?" if near else f"they are named {ENV_PREFIX}<SECTION>_<KEY>"
            raise ConfigError(f"environment: {shown(name)} is not a gpuwatch setting; {hint}")
    return out


def load_config(path: Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """The config from ``path`` (or the default path, where a missing file means defaults) plus env."""
    env = os.environ if env is None else env
    explicit = path is not None or bool(env.get(f"{ENV_PREFIX}CONFIG"))  # a named file must exist
    path = Path(path) if path is not None else default_config_path(env)
    text = ""
    if path.exists() or explicit:
        try:
            text = files.read_text(path, MAX_CONFIG_BYTES)  # a regular file, never more than the limit read
        except FileNotFoundError:
            how = "--config" if path != default_config_path(env) else f"{ENV_PREFIX}CONFIG"
            raise ConfigError(f"{path}: no such config file (write one, or leave out {how})") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the config file: {files.describe(exc)}") from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: cannot read the config file: not UTF-8 text ({exc.reason} at byte "
                              f"{exc.start})") from None
    where = _Where(path if text else None, text)
    doc = _parse_toml(path, text) if text else {}
    base_dir = path.parent if text else None
    sections: dict[str, Any] = {}
    for name, table in doc.items():
        if name == "receivers":
            continue
        if name not in SECTIONS:
            near = close_matches(name, [*SECTIONS, "receivers"], n=1)
            hint = f"did you mean [{near[0]}]?" if near else f"known sections: {', '.join(SECTIONS)}, [[receivers]]"
            raise where.error(name, None, f"unknown section; {hint}")
        if not isinstance(table, dict):
            raise where.error(None, name, f"expected a [{name}] table")
        sections[name] = _parse_table(SECTIONS[name], table, where, name, base_dir=base_dir)
    env_where = _Where(None, "")
    for name, table in _env_overrides(env).items():
        current = sections.get(name) or SECTIONS[name]()
        for key, value in table.items():  # one at a time, so an error names its variable
            try:
                parsed = _parse_table(SECTIONS[name], {key: value}, env_where, name)
            except ConfigError as exc:
                raise ConfigError(f"environment {ENV_PREFIX}{name.upper()}_{key.upper()}: {exc}") from None
            current = dataclasses.replace(current, **{key: getattr(parsed, key)})
        sections[name] = current
    raw_receivers = doc.get("receivers", [])
    if not isinstance(raw_receivers, list):
        raise where.error(None, "receivers", "write receivers as [[receivers]] tables")
    receivers = tuple(_parse_table(ReceiverConfig, r, where, "receivers", i, base_dir=base_dir)
                      for i, r in enumerate(raw_receivers))
    config = Config(**sections, receivers=receivers, path=path if text else None)
    _check_receivers(config, where)
    _check_digest(config, where)
    return config


def _check_digest(config: Config, where: _Where) -> None:
    """The digest goes to receivers that exist and take text, on a schedule its ``at`` can name."""
    d = config.digest
    kinds = {r.name: r.kind for r in config.receivers}
    for name in d.receivers:
        if name not in kinds:
            raise where.error("digest", "receivers", f"no [[receivers]] is named '{name}': name one of "
                              f"{', '.join(kinds) or '(none defined)'}")
        if kinds[name] not in DIGEST_KINDS:
            raise where.error("digest", "receivers", f"'{name}' is a {kinds[name]} receiver, which takes alerts "
                              f"only: send the digest to a {' or '.join(DIGEST_KINDS)} receiver")
    if d.receivers and not config.efficiency.enabled:
        raise where.error("digest", "receivers", "the digest is read from the efficiency roll-ups: set "
                          "[efficiency] enabled = true, or receivers = []")
    if d.at:
        weekday, _ = day_time_offset(d.at)
        unit, what = (7 * 86400.0, "weeks") if weekday is not None else (86400.0, "days")
        if d.every % unit:
            raise where.error("digest", "at", f"'{d.at}' names a {'weekday' if weekday is not None else 'time of day'}"
                              f", so every must be a whole number of {what} (got {format_duration(d.every)}); "
                              f"or set at = \"\" for every interval from 1970-01-01 00:00 UTC")


def _check_receivers(config: Config, where: _Where) -> None:
    seen: set[str] = set()
    for i, r in enumerate(config.receivers):
        if r.name in seen:
            raise where.error("receivers", "name", f"'{r.name}' is used twice; give each receiver its own name", i)
        seen.add(r.name)
        if r.kind == ALERTMANAGER_API:
            _check_alertmanager_api(r, where, i)
            continue
        if r.kind not in UNSIGNED_KINDS and not r.secret_file and not r.secret_env:
            raise where.error("receivers", None, "every webhook request is signed: set secret_file = \"PATH\" or "
                              "secret_env = \"VAR\" (a secret like whsec_<base64 of 32 random bytes>)", i)
        low, high = WEBHOOK_REPEAT_RANGE_S
        if r.repeat_interval is not None and not low <= r.repeat_interval <= high:
            raise where.error("receivers", "repeat_interval", "a webhook repeats a still-firing group at most "
                              f"once a minute: write 1m to 30d (default 4h), got {format_duration(r.repeat_interval)}",
                              i)


def _check_alertmanager_api(r: ReceiverConfig, where: _Where, i: int) -> None:
    """Alertmanager ends an alert it stops hearing about, and checks no signature: say so when the config
    would let alerts lapse or suggests a protection that is not there."""
    if r.secret_file or r.secret_env:
        key = "secret_file" if r.secret_file else "secret_env"
        raise where.error("receivers", key, "Alertmanager checks no webhook signature: remove it (to keep others "
                          "from posting alerts, put Alertmanager behind an authenticating proxy)", i)
    if r.repeat_interval is not None and not AM_RESEND_RANGE_S[0] <= r.repeat_interval <= AM_RESEND_RANGE_S[1]:
        raise where.error("receivers", "repeat_interval", "Alertmanager ends a firing alert not sent again within "
                          "its resolve_timeout (5m by default): write 1s to 2m30s (default 1m), got "
                          f"{format_duration(r.repeat_interval)}", i)
    if not r.send_resolved:
        raise where.error("receivers", "send_resolved", "an alertmanager_api receiver always ends resolved alerts "
                          "(otherwise Alertmanager would show them firing for its resolve_timeout): remove it", i)


def override(config: Config, section: str, **values: Any) -> Config:
    """``config`` with some keys of one section replaced (command-line flags), re-validated."""
    current = getattr(config, section)
    table = {k: v for k, v in values.items() if v is not None}
    if not table:
        return config
    parsed = _parse_table(type(current), table, _Where(None, ""), section)
    return dataclasses.replace(config, **{section: dataclasses.replace(
        current, **{k: getattr(parsed, k) for k in table})})


def check_listen(config: Config, token: str | None) -> tuple[str, int]:
    """The listen address, refusing a remote one without ``allow_remote`` and a token."""
    where = f"{config.path}: " if config.path else ""
    try:
        host, port = config.listen_address()
    except f.FieldError as exc:
        raise ConfigError(f"{where}daemon.listen: {exc}") from None
    if not f.is_loopback(host):
        if not config.daemon.allow_remote:
            raise ConfigError(f"{where}daemon.listen: {shown(host)} is reachable from other machines; pass "
                              f"--allow-remote (or allow_remote = true in [daemon]) to mean it, with a token_file")
        if not token:
            raise ConfigError(f"{where}daemon.listen: a non-loopback address ({shown(host)}) needs a token: set "
                              f"token_file in [daemon] or pass --token-file FILE")
    return host, port
