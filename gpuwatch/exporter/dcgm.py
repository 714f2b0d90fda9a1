"""GPU series under dcgm-exporter's names, units and labels (``[exporter] names = "dcgm"`` or ``"both"``).

The table of fields is :mod:`gpuwatch.model.dcgm_names`; each has its entry in the catalogue
(:data:`gpuwatch.model.series.DCGM`), so this module only fills the families. A reading gpuwatch does not
have on this GPU (e.g. profiling without GPM) leaves the series out, as dcgm-exporter does.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from gpuwatch.exporter.gpu import family
from gpuwatch.model.dcgm_names import DCGM_FIELDS, dcgm_label_values
from gpuwatch.model.series import DCGM
from gpuwatch.model.snapshot import Snapshot


def dcgm_families(snap: Snapshot) -> Iterator[Metric]:
    """One family per dcgm-exporter field, one series per GPU that has the reading."""
    host = snap.host.hostname
    labelled = [(dcgm_label_values(g, host), g) for g in snap.gpus]
    for field in DCGM_FIELDS:
        fam = family(DCGM[field.name])
        for values, gpu in labelled:
            value = None if gpu.lost else field.read(gpu)
            if value is not None and value == value:
                fam.add_metric(values, value)
        yield fam
