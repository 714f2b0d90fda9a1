"""The score of each class: ``base + per_point * figure``, named once here with where it came from.

A score ranks findings about one GPU (roughly: the percent of the GPU's capacity the problem costs) and,
through the top finding, decides which cause the accounting charges a block's lost seconds to. The bases
order the classes where several fire on one window (the more specific cause above the more general
one); the slopes make a worse figure rank higher within a class. They were set on the fit half of the H200
fault variants (docs/doctor-accuracy-h200.md) so that the variant's own class ranks first, and hold on the
check half.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Score:
    base: float
    #: Per point of the rule's figure (the GPU's idle percent unless the entry says otherwise).
    per_point: float = 0.0

    def __call__(self, points: float = 0.0) -> float:
        return self.base + self.per_point * points


#: Per GB/s moved, capped at COPY_CAP: a copy-bound GPU outranks a pegged thread that only stages it.
COPY = Score(60.0, 3.0)
COPY_CAP = 30.0
#: Per point of empty SMs: above input-bound (the pegged thread launches; it is not preprocessing).
LAUNCH = Score(70.0, 0.2)
#: Per idle point, times how pegged the thread is (a full core: 1): up to 90 with the GPU idle.
INPUT = Score(50.0, 0.4)
#: Below input-bound at the same idle share: a pegged feeding thread is the nearer cause than its workers.
DATALOADER = Score(45.0, 0.4)
#: A process asleep on storage outranks the loader and input rules it may look like.
OFF_CPU = Score(55.0, 0.4)
#: Host iowait without any GPU process to name: weaker evidence, lower.
OFF_CPU_HOST = Score(40.0, 0.3)
#: The host's fault outranks the program's: starved of a core, the thread would look input-bound.
HOST_CONTENTION = Score(75.0, 0.2)
GIL = Score(55.0, 0.4)
#: Info: ranks under every warning about the same GPU.
DEMAND = Score(10.0, 0.3)
#: Per point of empty SMs on a busy GPU: under the feeding classes, which explain more idle time.
SMALL_KERNELS = Score(30.0, 0.4)
#: Per point of SM activity: the busier the SMs on FP32, the more tensor cores would give.
FP32 = Score(20.0, 0.5)
#: Per point of DRAM activity.
BANDWIDTH = Score(30.0, 0.5)
#: Per point of GPU busy, plus TIME_SLICE_PER_PROCESS for each process taking turns.
TIME_SLICING = Score(50.0, 0.2)
TIME_SLICE_PER_PROCESS = 5.0
#: Per point of clock lost (percent of the maximum) times the share of samples throttled.
THROTTLED = Score(20.0, 1.0)
#: A leak ends the job: above every feeding class. Per unit of urgency (0 when full in 1.5x the critical horizon
#: or never, 0.5 at the horizon, 1 at half of it): the score moves smoothly through the severity's cut, so the
#: live doctor's 2-point band is a fifth of the horizon (2 minutes of time to full).
LEAK = Score(80.0, 10.0)
CHURN = Score(65.0)
#: Per percent of the GPU's memory the idle process holds.
MEMORY_IDLE = Score(35.0, 0.3)
#: Memory occupied while compute idles (no process to name): per percent occupied, times the idle share.
MEMORY_OCCUPIED = Score(0.0, 0.5)
#: Per point of empty SMs: a kernel that does not finish outranks the look-alikes it hides behind.
LONG_KERNELS = Score(70.0, 0.2)
#: Above input-bound and the loader: named feeders are the more specific cause.
FEEDER = Score(60.0, 0.4)
#: The general finding: under every class that explains idle time, above infos.
IDLE_BREAKDOWN = Score(30.0, 0.2)
