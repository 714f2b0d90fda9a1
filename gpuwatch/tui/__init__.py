"""The Textual dashboard: ``make_app(feed)`` over an in-process sampler (``LocalFeed``) or connected daemons
(``gpuwatch.tui.remote.RemoteFeed``, imported on demand: it needs requests)."""

from gpuwatch.tui.app import GpuWatchApp, make_app
from gpuwatch.tui.feed import LocalFeed

__all__ = ["GpuWatchApp", "LocalFeed", "make_app"]
