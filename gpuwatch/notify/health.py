"""How the durable side of notifying is doing: failures counted for /metrics, the streak for /healthz,
and one log line per distinct error (a full disk fails every evaluation; the log must not say so each time)."""

from __future__ import annotations

import logging
from typing import Any

#: This many failures in a row make the daemon unhealthy (/healthz 503): notifications are not going out.
UNHEALTHY_AFTER = 3


class FailureTracker:
    def __init__(self, what: str, logger: logging.Logger) -> None:
        self.what = what
        self.log = logger
        self.failures = 0
        self.consecutive = 0
        self.last_error: str | None = None
        self._logged: set[str] = set()

    def failed(self, exc: BaseException, with_traceback: bool = False) -> None:
        """Count a failure; log it if this error has not been logged since the last success (with the
        traceback for errors that are bugs rather than the disk or the file)."""
        error = f"{type(exc).__name__}: {exc}"[:300]
        self.failures += 1
        self.consecutive += 1
        self.last_error = error
        if error not in self._logged and len(self._logged) < 100:
            self._logged.add(error)
            self.log.error("%s failed: %s (retrying; this error is logged once)", self.what, error,
                           exc_info=exc if with_traceback else None)

    def succeeded(self) -> None:
        if self.consecutive:
            self.log.warning("%s works again after %d failure(s)", self.what, self.consecutive)
            self._logged.clear()
        self.consecutive = 0

    @property
    def healthy(self) -> bool:
        return self.consecutive < UNHEALTHY_AFTER

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.healthy, "failures": self.failures, "consecutive_failures": self.consecutive,
                "last_error": self.last_error}
