"""The live doctor as a service: one evaluation per refresh, shared by every reader (``/metrics``, the API,
remote dashboards through it, the local dashboard's pane and ``gpuwatch doctor``)."""

from gpuwatch.diagnosis.shared import Evaluation, SharedDiagnosis, judge

__all__ = ["Evaluation", "SharedDiagnosis", "judge"]
