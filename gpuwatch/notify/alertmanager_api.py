"""Pushing alerts into an existing Alertmanager, the way Prometheus does: ``POST /api/v2/alerts``.

Alertmanager keeps an alert active while it keeps hearing about it: a firing alert is sent without
``endsAt``, so Alertmanager ends it by itself ``resolve_timeout`` (5m by default) after the last send
unless it is sent again. gpuwatch re-sends firing alerts every ``repeat_interval`` (1m by default, at most
2m30s), and a resolved alert is sent once more with ``endsAt`` set to when it resolved,
which ends it at once. Alertmanager checks no signature, so these requests carry none.
"""

from __future__ import annotations

API_PATH = "/api/v2/alerts"


def post_url(url: str) -> str:
    """Alertmanager's base URL (``http://am:9093``, also behind a path prefix) -> its alerts endpoint.
    A URL that already ends in ``/api/v2/alerts`` is kept as it is."""
    base = url.rstrip("/")
    return base if base.endswith(API_PATH) else base + API_PATH

