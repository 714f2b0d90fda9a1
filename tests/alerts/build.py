"""Small Snapshot builders for alert tests: only the fields a rule reads, everything else default."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from gpuwatch.alerts import AlertEngine, Transition, parse_rules
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample, Profiling, Snapshot, SourceStatus

GIB = 1024**3
T0 = 1_764_666_000.0  # 2025-12-02 09:00:00 UTC


def gpu(index: int = 0, *, util: float | None = 50.0, mem: float | None = 50.0, mask: int | None = 0,
        occupancy: float | None = None, tensor: float | None = None, sm_active: float | None = None,
        temp: float | None = 50.0) -> GpuSample:
    """A GPU with ``mem`` percent of 100 GiB used (None: memory unknown)."""
    prof = {} if occupancy is None and tensor is None and sm_active is None else {
        "gpm": Profiling(sm_occupancy=occupancy, tensor_active=tensor, sm_active=sm_active)}
    return GpuSample(index=index, uuid=f"GPU-{index:04d}", name="NVIDIA H200", gpu_util=util,
                     mem_used_bytes=None if mem is None else int(mem * GIB), mem_total_bytes=100 * GIB,
                     clock_event_mask=mask, temperature_c=temp, profiling=prof)


def proc(pid: int = 100, gpu_index: int = 0, *, thread_cpu: float | None = 99.0, name: str = "python3",
         gpu_mem: int = GIB) -> ProcessSample:
    return ProcessSample(pid=pid, gpu_index=gpu_index, user="svc", name=name, top_thread_cpu_percent=thread_cpu,
                         gpu_memory_bytes=gpu_mem)


def snap(t: float, gpus: Sequence[GpuSample] = (), procs: Sequence[ProcessSample] = (),
         sources: Sequence[SourceStatus] = (SourceStatus("nvml"),)) -> Snapshot:
    return Snapshot(time=T0 + t, host=HostSample("node-1"), gpus=tuple(gpus), processes=tuple(procs),
                    sources=tuple(sources))


def rule_yaml(condition: str, *, name: str = "R", for_: str = "0s", keep: str = "0s", extra: str = "") -> str:
    """A one-rule file; ``condition`` is the YAML flow text of the condition mapping."""
    return (f"groups:\n  - name: g\n    rules:\n      - alert: {name}\n        condition: {condition}\n"
            f"        for: {for_}\n        keep_firing_for: {keep}\n{extra}")


def engine_for(condition: str, **kw: str) -> AlertEngine:
    return AlertEngine(parse_rules(rule_yaml(condition, **kw), "test.yml"))


def run(engine: AlertEngine, snaps: Iterable[Snapshot]) -> list[Transition]:
    out: list[Transition] = []
    for s in snaps:
        out.extend(engine.evaluate(s))
    return out


def states_over(engine: AlertEngine, snaps: Iterable[Snapshot], name: str = "R") -> list[str]:
    """The state of rule ``name``'s (single) alert after each snapshot: '-' when there is none."""
    out = []
    for s in snaps:
        engine.evaluate(s)
        alerts = [a for a in engine.alerts() if a.name == name]
        out.append(alerts[0].state if alerts else "-")
    return out
