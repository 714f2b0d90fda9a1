"""The Textual dashboard: ``gpuwatch.tui.app.make_app(feed)`` over an in-process sampler
(``gpuwatch.tui.feed.LocalFeed``) or connected daemons (``gpuwatch.tui.remote.RemoteFeed``: it needs requests).

Nothing is imported here: ``gpuwatch snapshot`` prints its table with ``gpuwatch.tui.format``, and importing
that must not cost it Textual's start-up (0.4-0.5 s of CPU and 21 MiB on a 2-core test machine)."""
