"""Fault variants where the process's own CPU limit, not the host, starves the feeding thread: the host's
cores idle while its threads wait for one.

- a cgroup quota (a Kubernetes pod's CPU limit): the process moves itself into a new cgroup allowed two cores
  (``cpu.max`` in cgroup v2, ``cpu.cfs_quota_us`` in v1; it needs root and a writable cgroup hierarchy, as a
  GPU node's test rig has), then each batch's features are a CPU matmul on torch's intra-op pool, which
  sizes itself by the host's cores: the pool uses the quota up early in each 100 ms period and waits out the rest.
- a CPU affinity (taskset, a cpuset): the process pins itself to two cores, then the same pool runs its
  numpy-free CPU reduction with as many threads as the host has cores.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuwatch.workload.fault_loop import Loop, Ready

#: The cores either limit allows: well under a GPU host's (16 and more), as a pod's limit often is.
LIMIT_CORES = 2
CGROUP_ROOT = Path("/sys/fs/cgroup")


def limit_to_quota(cores: int = LIMIT_CORES, root: Path = CGROUP_ROOT) -> Path:
    """Move this process into a new cgroup whose CFS quota is ``cores`` cores; its directory. OSError (with
    what to do) where this machine gives no writable cgroup with the cpu controller."""
    if (root / "cgroup.controllers").exists():  # v2: the controller enabled for children, then the quota
        made = root / f"gpuwatch-fault-{os.getpid()}"
        if "cpu" not in (root / "cgroup.subtree_control").read_text().split():
            (root / "cgroup.subtree_control").write_text("+cpu")
        made.mkdir()
        (made / "cpu.max").write_text(f"{cores * 100000} 100000")
    else:
        base = next((root / n for n in ("cpu,cpuacct", "cpu") if (root / n).is_dir()), None)
        if base is None:
            raise OSError(f"no cpu controller mounted under {root}: run this variant on a host with cgroups")
        made = base / f"gpuwatch-fault-{os.getpid()}"
        made.mkdir()
        (made / "cpu.cfs_period_us").write_text("100000")
        (made / "cpu.cfs_quota_us").write_text(str(cores * 100000))
    (made / "cgroup.procs").write_text(str(os.getpid()))
    return made


def featurize_on_pool(torch: Any, raw: Any, proj: Any) -> Any:
    """A batch's features: a CPU matmul on torch's intra-op thread pool (one thread per host core)."""
    return torch.tanh(raw @ proj)


def _limited_loop(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    torch.set_num_threads(os.cpu_count() or 1)  # what torch picks by itself: the host's cores, not the limit
    raw, proj = torch.randn(1536, 1536), torch.randn(1536, 1536)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    w = torch.randn(4096, 4096, device=dev, dtype=dtype)
    loop = Loop(duration, on_ready)
    for _ in loop:
        x = featurize_on_pool(torch, raw, proj)[:512, :512].to(dev, dtype)
        for _ in range(30):
            y = w @ w
        (y[:512, :512] @ x).sum().item()
    return loop.count


def cpu_quota_pool(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """The GPU loop in a cgroup allowed two cores, its CPU features on a pool of one thread per host core."""
    limit_to_quota()
    return _limited_loop(torch, dev, duration, on_ready)


def affinity_pinned_pool(torch: Any, dev: Any, duration: float, on_ready: Ready) -> int:
    """The GPU loop pinned to two cores, its CPU features on a pool of one thread per host core."""
    allowed = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, set(allowed[:LIMIT_CORES]))
    return _limited_loop(torch, dev, duration, on_ready)


BODIES: dict[str, Callable[[Any, Any, float, Ready], int]] = {
    "cpu_quota_pool": cpu_quota_pool, "affinity_pinned_pool": affinity_pinned_pool,
}
