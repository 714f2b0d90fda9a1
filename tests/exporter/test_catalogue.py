"""The catalogue is the only list of /metrics: every family a daemon serves is in it with the type it says,
everything in it is served, and the README's table is generated from it."""

from __future__ import annotations

import re
from pathlib import Path

from core.factories import full_snapshot
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.cli.rules import series_markdown
from gpuwatch.daemon.parts import DaemonCounters, daemon_families
from gpuwatch.efficiency.metrics import Totals, TotalsCollector
from gpuwatch.exporter import Exporter, SnapshotCollector, render
from gpuwatch.model.alert import Alert
from gpuwatch.model.series import CATALOGUE
from gpuwatch.notify import Outbox

README = Path(__file__).resolve().parents[2] / "README.md"


def served_families(tmp_path: Path) -> dict[str, str]:
    """family name -> type, as a scraper parses a daemon's /metrics with every kind of part present (both
    gpuwatch's and dcgm-exporter's GPU names)."""
    alert = Alert("GpuStarved", "f1", {"alertname": "GpuStarved", "gpu": "0"}, {}, "firing")
    outbox = Outbox(tmp_path / "outbox.sqlite")
    counters = DaemonCounters(notification_attempts_failed=2, snapshots_skipped=1, stream_snapshots_dropped=0,
                              stream_clients=1, rules_loaded=13)
    collector = SnapshotCollector(full_snapshot, lambda: [alert], extra=lambda: daemon_families(outbox, counters),
                                  names="both")
    exporter = Exporter(collector)
    exporter.registry.register(TotalsCollector(Totals(256)))  # what the daemon's efficiency accounting adds
    body = render(exporter.registry).decode()
    outbox.close()
    return {f.name: f.type for f in text_string_to_metric_families(body)}


def test_every_served_family_is_in_the_catalogue_with_its_type_and_everything_listed_is_served(
        tmp_path: Path) -> None:
    listed = {s.family_name: s.kind for s in CATALOGUE}
    assert served_families(tmp_path) == listed  # and no ``_created`` family beside a histogram or counter


def test_counters_and_only_counters_end_in_total() -> None:
    assert {s.name for s in CATALOGUE if s.name.endswith("_total")} == {s.name for s in CATALOGUE
                                                                         if s.kind == "counter"}


def test_the_readme_table_is_the_catalogue() -> None:
    text = README.read_text(encoding="utf-8")
    found = re.search(r"<!-- metrics table: start -->\n(.*?)\n<!-- metrics table: end -->", text, re.S)
    assert found is not None, "README.md has no generated metrics table"
    assert found.group(1) == series_markdown(), "regenerate it: gpuwatch rules metrics --all"
