"""MIG profiles of the H100 80GB and the H200 141GB: what slice of a GPU each one gives.

From NVIDIA's MIG user guide ("Supported MIG Profiles"): a GPU splits into 7 compute slices and 8 memory
slices; a profile ``Ng.Mgb`` takes N of the 7 compute slices (its fraction of the SMs) and a fraction of
the memory. The H200's profiles carry the same fractions under names for its 141 GB. Consolidation advice
fits an owner's peaks into the smallest profile that holds them; a GPU that is not one of these (by its
memory) gets no MIG advice, only sharing by MPS.
"""

from __future__ import annotations

from typing import NamedTuple

GIB = 1024.0**3


class MigProfile(NamedTuple):
    name: str
    #: Fraction of the GPU's SMs (compute slices out of 7) and of its memory (memory slices out of 8).
    sm_fraction: float
    mem_fraction: float

    @property
    def gpu_fraction(self) -> float:
        """The share of the GPU the profile takes off the table: its larger fraction (a 3g.40gb holds half
        the memory, so no second 4g profile fits beside it)."""
        return max(self.sm_fraction, self.mem_fraction)


#: (compute slices, memory slices) of the six profiles, smallest first; the names differ per GPU only.
_SHAPES = ((1, 1), (1, 2), (2, 2), (3, 4), (4, 4), (7, 8))


class MigFamily(NamedTuple):
    gpu: str
    #: The GPU's memory as NVML reports it lies in this range (GiB): how a GPU is recognised.
    mem_gib: tuple[float, float]
    profiles: tuple[MigProfile, ...]


def _family(gpu: str, mem_gib: tuple[float, float], names: tuple[str, ...]) -> MigFamily:
    return MigFamily(gpu, mem_gib, tuple(MigProfile(n, c / 7, m / 8) for n, (c, m) in zip(names, _SHAPES,
                                                                                           strict=True)))


FAMILIES = (
    _family("H100 80GB", (76.0, 82.0), ("1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb")),
    _family("H200 141GB", (135.0, 145.0), ("1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb")),
)


def family_of(mem_total_bytes: float) -> MigFamily | None:
    """The MIG family of a GPU with this much memory (None: not an H100 80GB or an H200 141GB)."""
    gib = mem_total_bytes / GIB
    return next((f for f in FAMILIES if f.mem_gib[0] <= gib <= f.mem_gib[1]), None)
