"""Builds the daemon's parts from a Config: rules, outbox, receivers with their secrets, the exporter.

Everything that can fail on a user's mistake (a rule file, a secret, the state directory) fails here,
at start or at reload, with a :class:`StartError` naming what to fix, before anything is replaced.
"""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from prometheus_client.core import Metric

from gpuwatch.alerts import DEFAULT_RULES, RuleError, RuleSet, load_rules
from gpuwatch.config import Config
from gpuwatch.exporter.gpu import family
from gpuwatch.model import files, series
from gpuwatch.notify import Outbox, SecretError, Target, load_secret, salvage

log = logging.getLogger(__name__)
OUTBOX_FILE = "outbox.sqlite"
#: A token is a line of text; a bigger file is the wrong file.
MAX_TOKEN_BYTES = 64 * 1024


class StartError(RuntimeError):
    """The daemon cannot start (or reload) with this config; one line that says what to fix."""


def rule_paths(config: Config) -> list[Path]:
    if config.alerts.rule_paths:
        return [Path(p) for p in config.alerts.rule_paths]
    return [DEFAULT_RULES] if DEFAULT_RULES.exists() else []


def build_rules(config: Config) -> RuleSet:
    paths = rule_paths(config)
    if not paths:
        return RuleSet()
    try:
        return load_rules(paths)
    except RuleError as exc:
        raise StartError(f"alert rules: {exc}") from None
    except OSError as exc:
        raise StartError(f"alert rules: cannot read {exc.filename}: {exc.strerror}") from None


def no_rules_warning(rules: RuleSet, config: Config) -> str | None:
    """The loud line for a daemon that would evaluate nothing: without it, a misplaced rule file means
    a daemon that runs for months and never alerts."""
    if len(rules):
        return None
    where = ", ".join(str(p) for p in rule_paths(config)) or "no rule file"
    return (f"no alert rules loaded from {where}: no alert can fire (check [alerts] rule_paths; "
            f"'gpuwatch rules show' prints the shipped rules)")


def state_dir(config: Config, env: Mapping[str, str] | None = None) -> Path:
    """``[daemon] state_dir``, else systemd's ``$STATE_DIRECTORY``, else ``$XDG_STATE_HOME/gpuwatch``."""
    env = os.environ if env is None else env
    if config.daemon.state_dir:
        return Path(config.daemon.state_dir).expanduser()
    if env.get("STATE_DIRECTORY"):
        return Path(env["STATE_DIRECTORY"].split(":")[0])
    base = Path(env.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return base / "gpuwatch"


def open_outbox(config: Config, env: Mapping[str, str] | None = None) -> Outbox:
    """Open the outbox; a damaged one is moved aside, loudly, its readable pending rows saved into a fresh
    one (:mod:`gpuwatch.notify.salvage`): notifying must not stop, nor forget, because of one bad page."""
    path = state_dir(config, env) / OUTBOX_FILE
    try:
        return salvage.open_outbox(path)
    except (OSError, sqlite3.Error) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise StartError(f"cannot open the outbox {path}: {why} (set state_dir in [daemon] to a writable "
                         f"directory)") from None


def build_targets(config: Config, env: Mapping[str, str] | None = None) -> dict[str, Target]:
    targets = {}
    for r in config.receivers:
        try:
            signed = bool(r.secret_file or r.secret_env)
            targets[r.name] = Target(r, load_secret(r.secret_file, r.secret_env, env) if signed else None)
        except SecretError as exc:
            where = f"{config.path}: " if config.path else ""
            raise StartError(f"{where}receiver '{r.name}': {exc}") from None
    return targets


def read_token(config: Config) -> str | None:
    if not config.daemon.token_file:
        return None
    path = Path(config.daemon.token_file)
    where = f"{config.path}: " if config.path else ""
    try:
        token = files.read_text(path, MAX_TOKEN_BYTES).strip()
    except OSError as exc:
        raise StartError(f"{where}daemon.token_file {path}: cannot read it ({files.describe(exc)})") from None
    except UnicodeDecodeError:
        raise StartError(f"{where}daemon.token_file {path}: not UTF-8 text; write the token as text") from None
    if len(token) < 16:
        raise StartError(f"{where}daemon.token_file {path}: the token is shorter than 16 characters; make one with "
                         f"'head -c 32 /dev/urandom | base64 > {path}'")
    return token


def external_url(config: Config, port: int) -> str:
    return config.daemon.external_url or f"http://{socket.gethostname()}:{port}"


@dataclass(frozen=True)
class DaemonCounters:
    """The daemon's own counts at one scrape (each has its series in :mod:`gpuwatch.model.series`)."""

    notification_attempts_failed: int
    snapshots_skipped: int
    stream_snapshots_dropped: int
    stream_clients: int
    rules_loaded: int
    outbox_write_failures: int = 0


def daemon_families(outbox: Outbox, now: DaemonCounters) -> Iterator[Metric]:
    """The daemon's own series for /metrics: notification queue by state, and internal counters."""
    queue = family(series.NOTIFICATIONS)
    try:
        counts = outbox.counts()
    except sqlite3.Error:  # a damaged or locked file: the notifier's health says so; /metrics goes on
        counts = {}
    for (receiver, state), n in sorted(counts.items()):
        queue.add_metric([receiver, state], n)
    yield queue
    for spec, value in ((series.NOTIFICATION_ATTEMPTS_FAILED, now.notification_attempts_failed),
                        (series.OUTBOX_WRITE_FAILURES, now.outbox_write_failures),
                        (series.SNAPSHOTS_SKIPPED, now.snapshots_skipped),
                        (series.STREAM_SNAPSHOTS_DROPPED, now.stream_snapshots_dropped),
                        (series.STREAM_CLIENTS, now.stream_clients),
                        (series.RULES_LOADED, now.rules_loaded)):
        fam = family(spec)
        fam.add_metric([], float(value))
        yield fam
