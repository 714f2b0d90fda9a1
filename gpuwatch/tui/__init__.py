"""The Textual dashboard: ``make_app(feed)`` over an in-process sampler or connected daemons."""

from gpuwatch.tui.app import GpuWatchApp, make_app
from gpuwatch.tui.feed import LocalFeed
from gpuwatch.tui.remote import RemoteFeed

__all__ = ["GpuWatchApp", "LocalFeed", "RemoteFeed", "make_app"]
