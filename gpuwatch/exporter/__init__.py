"""Prometheus exposition of Snapshots: a custom collector built fresh on every scrape."""

from gpuwatch.exporter.collector import CONTENT_TYPE, Exporter, SnapshotCollector, render

__all__ = ["CONTENT_TYPE", "Exporter", "SnapshotCollector", "render"]
