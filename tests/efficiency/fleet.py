"""Two weeks of hourly roll-ups of a small H200 fleet, written through the real store: the input of the
committed digest sample (``docs/samples/digest.md``) and of the consolidation and digest tests.

Four owners, one GPU each, with the shapes consolidation advice is about:

* ``ml/chat-7b/server`` (GPU 0): held all week, SM activity 14-20 % (peaks 24 %), 30 GiB; a rollout at the
  start of the second week lifted it from 10-16 %;
* ``ml/embed/server`` (GPU 1): held all week, 6-10 % (peaks 12 %), 9 GiB;
* ``alice:train.py`` (GPU 2): busy, 72-80 % (peaks 95 %), 120 GiB: nothing to consolidate;
* ``bob:jupyter`` (GPU 3): held 09:00-17:00 on weekdays at 3 % (peaks 40 %), 60 GiB; nobody the rest of
  the time.

The fix text per cause is what the doctor wrote for it on the bundled recording (the accounting's own text
for ``held_idle`` and ``no_process``).
"""

from __future__ import annotations

from pathlib import Path

from gpuwatch.data import bundled_recording
from gpuwatch.efficiency.ledger import BIN_PCT, HOUR, OWN_FIXES, Increment
from gpuwatch.efficiency.offline import account_recording
from gpuwatch.efficiency.rows import (
    NO_OWNER,
    UNDERUSED_PCT,
    GpuHour,
    HistKey,
    LostKey,
    Owner,
    OwnerKey,
    OwnerUse,
    States,
)
from gpuwatch.efficiency.store import Store
from gpuwatch.model.causes import HELD_IDLE, NO_PROCESS
from gpuwatch.model.rollout import Rollout, RolloutRow

GIB = 1024**3
H200_MEMORY = 150_754_820_096
#: The fleet's last hour ends here (2026-12-02 10:00 UTC, just before the bundled recording starts).
UNTIL = 1_796_205_600
DAYS = 14
CHAT = Owner("ml", "chat-7b", "server")
EMBED = Owner("ml", "embed", "embedder")
TRAIN = Owner(user="alice", command="train.py")
NOTEBOOK = Owner(user="bob", command="jupyter")


def _shape(owner: Owner, hour: int) -> tuple[float, float, float, str] | None:
    """(mean SM %, peak SM %, peak memory GiB, cause) of ``owner`` in ``hour``; None: not held."""
    day_hour = hour % 86400 // HOUR
    wave = abs(12 - day_hour) / 12.0  # 1 at midnight, 0 at noon: busier by day
    second_week = hour >= UNTIL - 7 * 86400
    if owner == CHAT:
        low = 14.0 if second_week else 10.0
        return low + 6 * (1 - wave), low + 10, 30.0, "input_cpu_bound"
    if owner == EMBED:
        return 6 + 4 * (1 - wave), 12.0, 9.0, "fp32_no_tensor"
    if owner == TRAIN:
        return 72 + 8 * (1 - wave), 95.0, 120.0, "idle_breakdown"
    weekday = (hour // 86400 + 3) % 7 < 5  # 1970-01-01 was a Thursday
    if owner == NOTEBOOK and weekday and 9 <= day_hour < 17:
        return 3.0, 40.0, 60.0, HELD_IDLE
    return None


def _hour(hour: int, fixes: dict[str, tuple[str, str]]) -> Increment:
    inc = Increment(until=float(hour + HOUR))
    for gpu, owner in enumerate((CHAT, EMBED, TRAIN, NOTEBOOK)):
        shape = _shape(owner, hour)
        if shape is None:
            inc.seconds[GpuHour(hour, gpu)] = States(HOUR, 0.0, 0.0, 0.0)
            inc.lost[LostKey(hour, gpu, NO_PROCESS, NO_OWNER)] = float(HOUR)
            continue
        sm, peak, mem, cause = shape
        effective = HOUR * sm / 100
        inc.seconds[GpuHour(hour, gpu)] = States(HOUR, HOUR, min(HOUR, 1.2 * effective), effective)
        inc.lost[LostKey(hour, gpu, cause, owner)] = HOUR - effective
        inc.hist[HistKey(hour, gpu, int(sm) // BIN_PCT)] = float(HOUR)
        inc.owners[OwnerKey(hour, gpu, owner)] = OwnerUse(
            HOUR, effective, HOUR if sm < UNDERUSED_PCT else 0.0, peak, mem * GIB, H200_MEMORY)
    inc.fixes = fixes
    return inc


def fixes() -> dict[str, tuple[str, str]]:
    """The fix text per cause: the doctor's on the bundled recording, the accounting's own for the rest."""
    out = dict(account_recording(bundled_recording()).rollup.fixes)
    out.update({c: (c.replace("_", " "), text) for c, text in OWN_FIXES.items()})
    return out


def build(path: Path | None = None) -> Store:
    """The fleet's two weeks in a store at ``path`` (None: in memory)."""
    store = Store(path, (DAYS + 1) * 86400.0)
    text = fixes()
    for hour in range(UNTIL - DAYS * 86400, UNTIL, HOUR):
        store.commit(_hour(hour, text), "live")
    return store


def rollouts() -> list[Rollout]:
    """The chat server's rollout at the start of the second week, owned as the detector names a pod's owner
    (``namespace/container``: the pod changes with the rollout)."""
    at = UNTIL - 7 * 86400 + 2 * HOUR
    rows = (RolloutRow("sm_active", "SM activity", "%", 13.0, 17.0, "better"),)
    owner = f"{CHAT.namespace}/{CHAT.container}"
    return [Rollout("GPU-0a1b2c3d", owner, "registry/chat:1.4", "registry/chat:1.5", at - 1800, at, "better",
                    rows, "input_cpu_bound", "input_cpu_bound", "SM activity 13 → 17 %, better", 0)]
