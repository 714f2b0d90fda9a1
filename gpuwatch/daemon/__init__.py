"""``gpuwatch daemon``: the sampler, alert rules and notifier behind the standard library's HTTP server on
127.0.0.1:19464.

Parts: :mod:`~gpuwatch.daemon.runner` (lifecycle, signals, systemd), :mod:`~gpuwatch.daemon.pipeline`
(snapshots from the sampler thread to the loop and the alert worker), :mod:`~gpuwatch.daemon.app`
(routes), :mod:`~gpuwatch.daemon.server` (threads, keep-alive, streaming), :mod:`~gpuwatch.daemon.connections`
(limits and deadlines), :mod:`~gpuwatch.daemon.stream` (per-client bounded queues), :mod:`~gpuwatch.daemon.sd_notify`.
"""
