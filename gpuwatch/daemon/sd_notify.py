"""The systemd notify protocol (sd_notify(3)), without libsystemd: one datagram per message to the
unix socket named by ``$NOTIFY_SOCKET`` (a path, or ``@name`` for the abstract namespace).

Outside systemd ``$NOTIFY_SOCKET`` is unset and every call is a no-op, so the daemon runs the same way
from a shell, a container or a unit with ``Type=notify``.

The watchdog (``WatchdogSec=``) is pinged only while the daemon is healthy: sampling delivers snapshots
and the outbox takes writes, the alert evaluation, the /metrics render and the roll-up writes do not fail
(what /healthz reports, less the receivers: a receiver that is down is not
mended by restarting us, and /healthz still says so). A start-up grace of :data:`WATCHDOG_STARTUP_GRACE_S`
covers the time before the first snapshot (opening NVML or a DCGM endpoint can take seconds); sampling that
fails within it ends the grace at once, so systemd restarts a daemon that never got going.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping

log = logging.getLogger(__name__)

#: Seconds after start during which the watchdog is pinged before the first snapshot has arrived.
WATCHDOG_STARTUP_GRACE_S = 30.0


def watchdog_may_ping(healthy: bool, since_start_s: float, has_snapshot: bool, sampling_failed: bool) -> bool:
    """Ping only a healthy daemon, or one still starting: within the grace, with no snapshot yet and
    sampling not failed."""
    if healthy:
        return True
    return since_start_s < WATCHDOG_STARTUP_GRACE_S and not has_snapshot and not sampling_failed


class SystemdNotifier:
    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.address = env.get("NOTIFY_SOCKET") or None
        self._watchdog_usec = env.get("WATCHDOG_USEC")
        self._watchdog_pid = env.get("WATCHDOG_PID")

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, *fields: str) -> bool:
        """Send ``KEY=VALUE`` lines in one datagram; False (logged once at debug) when it could not be sent."""
        if self.address is None:
            return False
        addr = self.address
        if addr.startswith("@"):
            addr = "\0" + addr[1:]
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(addr)
                sock.sendall("\n".join(fields).encode("utf-8"))
            return True
        except OSError as exc:
            log.debug("sd_notify to %s failed: %s", self.address, exc)
            return False

    def ready(self, status: str = "") -> bool:
        return self.notify("READY=1", f"MAINPID={os.getpid()}", *( [f"STATUS={status}"] if status else []))

    def status(self, text: str) -> bool:
        return self.notify(f"STATUS={text}")

    def reloading(self) -> bool:
        return self.notify("RELOADING=1")

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")

    def watchdog_interval(self) -> float | None:
        """Seconds between WATCHDOG=1 pings (half of ``WatchdogSec``), None when no watchdog is armed for us."""
        if not self._watchdog_usec:
            return None
        if self._watchdog_pid and self._watchdog_pid != str(os.getpid()):
            return None
        try:
            usec = int(self._watchdog_usec)
        except ValueError:
            return None
        return usec / 2e6 if usec > 0 else None
