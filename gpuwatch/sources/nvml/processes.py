"""The processes on one GPU: compute and graphics contexts, their GPU memory, and their SM/memory utilisation.

Per-process utilisation comes from ``nvmlDeviceGetProcessUtilization(handle, lastSeenTimeStamp)``, which
returns one sample per process that had *non-zero* utilisation since ``lastSeenTimeStamp`` (µs) and
raises NotFound when there is none. The newest timestamp is carried forward per GPU so each call returns
only new samples (nvtop PR #91: otherwise the values lag, averaged over the driver's whole buffer).

The call is the costliest of a tick: about 1.5 ms of CPU on an H200 whatever the timestamp (measured
there), against ~2 µs for a plain getter. So it is asked every ``UTIL_MIN_PERIOD_S`` whatever the tick
interval (the daemon asks every 15 s: ``util_period_s``), and each answer covers the whole span since the
last one: the process table's SM% is at most that old, and the doctor, which averages it over minutes, sees
the same means.

The process lists cost a driver call or two each per tick (on the H200: compute 47 µs through pynvml's two
calls, graphics 19 µs, and empty on a compute GPU). Both change only when a process starts, exits or changes
its GPU memory, and each of those changes the GPU's used memory, which the tick reads anyway (5.5 µs). So
the lists are asked on a tick where used memory changed to the byte, and otherwise every
``LISTS_EVERY_S``: a process that starts or exits shows on the next tick (a CUDA context holds device
memory from its creation to its end), and within ``LISTS_EVERY_S`` in the one case the signal misses (two
changes that cancel to the byte within a tick). A list that failed is asked again on the next tick; where
used memory is unknown, every tick.

What a process without a new sample shows (the choice, and why): NVML leaves idle processes out, so a
running process absent from the latest answer (no busy sample in its whole span) reads 0 (idle), as
nvitop does. Where NVML cannot give per-process utilisation at all (MIG, no permission) it stays None:
unknown, not idle.
"""

from __future__ import annotations

import time
from typing import Any

from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.sources.nvml.device import Device, once
from gpuwatch.sources.nvml.direct import Entry, process_list, pynvml_list, utilisation

#: Shortest time between per-process utilisation queries; the values are held in between.
UTIL_MIN_PERIOD_S = 5.0
#: Longest time the process lists are reused while the GPU's used memory stays put: the per-process
#: utilisation's period, so no row of the process table is older than that.
LISTS_EVERY_S = 5.0


def _with_fallback(nvml: Any, key: str, name: str) -> Any:
    """The list getter: NVML's _v3 in one call (``direct.py``), else pynvml's, with _v2 to fall back to."""
    g = once(key, process_list(nvml, name))
    if getattr(nvml, f"{name}_v2", None) is not None:  # the driver lacks _v3: pynvml raises a mismatch
        g.fallback = (pynvml_list(nvml, f"{name}_v2"), (), g.apply)
    return g


class ProcessReader:
    def __init__(self, nvml: Any, device: Device, util_period_s: float = UTIL_MIN_PERIOD_S) -> None:
        self.device = device
        self.util_period_s = util_period_s
        self.policy = device.policy
        self._compute = _with_fallback(nvml, "compute_processes", "nvmlDeviceGetComputeRunningProcesses")
        self._graphics = _with_fallback(nvml, "graphics_processes", "nvmlDeviceGetGraphicsRunningProcesses")
        self._util = once("process_utilization", utilisation(nvml))
        #: lastSeenTimeStamp for the next call; the first one asks for the last second only.
        self.last_ts = int(time.time() * 1e6) - 1_000_000
        self._util_asked = -1e9
        #: pid -> (sm %, mem %, sample timestamp µs, tick time it was seen)
        self.seen: dict[int, tuple[float, float, int, float]] = {}
        #: pid -> last tick's row: reused while nothing in it changed (a frozen dataclass costs ~1.5 µs to
        #: build, and 256 processes per GPU would spend most of the tick on that)
        self._rows: dict[int, ProcessSample] = {}
        #: The last lists (pid -> memory, pid -> kind), when they are next due, and the used memory they
        #: were read at.
        self._lists: tuple[dict[int, int | None], dict[int, str]] = ({}, {})
        self._lists_due = -1e18
        self._lists_mem: int | None = None
        self._lists_failed = False
        self._util_known = False

    def read(self, now: float, mem_used: int | None = None) -> list[ProcessSample]:
        """This tick's rows. ``mem_used``: the GPU's used memory this tick (None: unknown), the signal that
        the process lists may have changed."""
        read = now >= self._lists_due or mem_used is None or mem_used != self._lists_mem
        if read:
            self._lists = memory, kinds = self._read_lists()
            failed = self._lists_failed
            self._lists_due, self._lists_mem = (now if failed else now + LISTS_EVERY_S), mem_used
        else:
            memory, kinds = self._lists
        if not kinds:
            self.seen.clear()
            self._rows.clear()
            return []
        asked = self._util_asked
        util_known = self._update_util(now)
        if not read and asked == self._util_asked and util_known == self._util_known:
            return list(self._rows.values())  # neither the lists nor the shares changed: last tick's rows
        self._util_known = util_known
        seen = self.seen
        if len(seen) > len(kinds):
            self.seen = seen = {pid: v for pid, v in seen.items() if pid in kinds}
        index = self.device.index
        previous = self._rows
        rows: dict[int, ProcessSample] = {}
        for pid, kind in kinds.items():
            sm = mem = None
            if util_known:
                u = seen.get(pid)
                if u is not None and u[3] == self._util_asked:  # in the latest answer
                    sm, mem = u[0], u[1]
                else:
                    sm = mem = 0.0
            row = previous.get(pid)
            if (row is None or row.gpu_memory_bytes != memory[pid] or row.sm_util != sm or row.mem_util != mem
                    or row.kind != kind):
                row = ProcessSample(pid=pid, gpu_index=index, gpu_memory_bytes=memory[pid], sm_util=sm,
                                    mem_util=mem, kind=kind)
            rows[pid] = row
        self._rows = rows
        return list(rows.values())

    def _read_lists(self) -> tuple[dict[int, int | None], dict[int, str]]:
        """Both lists merged (pid -> memory, pid -> kind); ``_lists_failed`` when one gave no answer this
        time though NVML may answer it later."""
        memory: dict[int, int | None] = {}
        kinds: dict[int, str] = {}
        compute = self.device.call(self._compute)
        for p in compute or ():
            self._add(memory, kinds, p, "compute")
        graphics = self.device.call(self._graphics)
        for p in graphics or ():
            self._add(memory, kinds, p, "graphics")
        self._lists_failed = ((compute is None and self._compute.off is None)
                              or (graphics is None and self._graphics.off is None))
        return memory, kinds

    @staticmethod
    def _add(memory: dict[int, int | None], kinds: dict[int, str], p: Entry, kind: str) -> None:
        pid, used = p  # used: None where NVML cannot tell (WDDM, some MIG setups)
        if pid not in kinds:
            kinds[pid], memory[pid] = kind, used
            return
        if kinds[pid] != kind:  # one context seen as compute and graphics: the same memory, listed twice
            kinds[pid] = "compute+graphics"
            if used is not None and (memory[pid] is None or used > (memory[pid] or 0)):
                memory[pid] = used
        elif used is not None:  # listed twice in one list (one row per MIG instance): distinct memory
            memory[pid] = (memory[pid] or 0) + used

    def _update_util(self, now: float) -> bool:
        """Fold new utilisation samples into ``seen``; False where NVML cannot give them at all."""
        g = self._util
        if g.off is not None:
            return False
        if now - self._util_asked < self.util_period_s:
            return True  # asked recently: the values in ``seen`` still hold
        asked_before, self._util_asked = self._util_asked, now
        try:
            samples = g.fn(self.device.handle, self.last_ts)
        except self.device.catch as exc:
            if getattr(exc, "value", None) in self.policy.no_data_codes:
                return True  # nobody used the GPU since last_ts: everyone reads idle
            self._util_asked = asked_before  # no answer is not an idle answer: hold the last, ask next tick
            self.device.failed(g, exc)
            return g.off is None
        seen = self.seen
        newest = self.last_ts
        for pid, ts, sm, mem in samples:
            old = seen.get(pid)
            if old is None or ts >= old[2]:
                seen[pid] = (float(sm), float(mem), ts, now)
            if ts > newest:
                newest = ts
        self.last_ts = newest
        return True
