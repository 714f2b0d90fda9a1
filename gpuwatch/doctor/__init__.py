"""The doctor: reads a window of Snapshots and says why the GPU is under-used, ranked, with evidence and
the fix the incident taught. It reads Snapshots only (no sources), so it works the same live, on a
daemon's history and on a recording."""

from gpuwatch.doctor.current import LIVE_WINDOW_S, RECENT_WINDOW_S, LiveDoctor, diagnose_current
from gpuwatch.doctor.diagnose import diagnose, top_problem
from gpuwatch.model.finding import Finding

__all__ = ["LIVE_WINDOW_S", "RECENT_WINDOW_S", "Finding", "LiveDoctor", "diagnose", "diagnose_current", "top_problem"]
