"""Which config keys a reload applies, and which need a restart.

A reload that answered ``reloaded: true`` while a changed key went on doing the old thing would tell an
operator who closed reads (``token_for_reads = true``) that they are closed while they stay open. So every
key is one or the other: :data:`RELOADABLE` keys are handed to their owners by :meth:`Daemon.reload`
(rules, receivers and their secrets, the token and who needs it, delivery timing, /metrics process limits,
the stream client cap); a change to any other key refuses the reload, naming the key, and the running
config stays as it was.
"""

from __future__ import annotations

import dataclasses

from gpuwatch.config import Config
from gpuwatch.config.model import SECTIONS

#: ``section.key`` (``section.*``: every key of it) that a reload applies; ``receivers`` is every receiver.
RELOADABLE = frozenset({
    "alerts.rule_paths", "receivers", "notify.*",
    "daemon.token_file", "daemon.token_for_reads", "daemon.max_process_series", "daemon.process_series_min_age",
    "daemon.max_stream_clients",
})


def changed_keys(old: Config, new: Config) -> list[str]:
    """``section.key`` of every setting whose value differs (``receivers`` as one key), in file order."""
    out = []
    for section in SECTIONS:
        before, after = getattr(old, section), getattr(new, section)
        out += [f"{section}.{f.name}" for f in dataclasses.fields(before)
                if getattr(before, f.name) != getattr(after, f.name)]
    if old.receivers != new.receivers:
        out.append("receivers")
    return out


def needs_restart(old: Config, new: Config) -> list[str]:
    """The changed keys a reload cannot apply (empty: the reload may go ahead)."""
    return [k for k in changed_keys(old, new) if k not in RELOADABLE and f"{k.split('.')[0]}.*" not in RELOADABLE]


__all__ = ["RELOADABLE", "changed_keys", "needs_restart"]
