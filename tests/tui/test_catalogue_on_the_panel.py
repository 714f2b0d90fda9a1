"""The GPU panel shows catalogue metrics as the catalogue defines them: their labels, their ratios, and the
colours of their warning and critical levels (``model/metrics.py``), not numbers of its own."""

from __future__ import annotations

import dataclasses
import gzip
import itertools
import json
from pathlib import Path

import pytest
from synthetic import snapshot

from gpuwatch.model.codec import snapshot_from_dict
from gpuwatch.model.metrics import METRICS
from gpuwatch.model.snapshot import GpuSample
from gpuwatch.tui.widgets import fleet_table, gpu_panel, history_plot
from gpuwatch.tui.widgets.gpu_panel import Palette, render_gpu


class Colours(Palette):
    def __init__(self) -> None:  # no app: fixed colour names
        self.primary, self.memory, self.accent = "blue", "green", "cyan"
        self.ok, self.warning, self.error = "green", "yellow", "red"


def _gpu(**fields: float) -> GpuSample:
    return dataclasses.replace(snapshot(0).gpus[0], **fields)  # type: ignore[arg-type]


def _bar_style(gpu: GpuSample, label: str) -> set[str]:
    out = render_gpu(gpu, 160, Colours())
    start = out.plain.index(label)
    end = start + 40
    return {str(s.style) for s in out.spans if s.start < end and s.end > start + len(label)} - {"bold", "dim"}


@pytest.mark.parametrize(("temperature", "colour"), [(60.0, "blue"), (85.0, "yellow"), (93.0, "red")])
def test_the_temperature_is_coloured_at_the_catalogues_levels(temperature: float, colour: str) -> None:
    spec = METRICS["gpu.temperature_c"]
    assert spec.levels is not None
    assert _bar_style(_gpu(temperature_c=temperature), spec.label) == {colour}


def test_moving_a_level_in_the_catalogue_moves_the_panels_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_panel, "TEMP", dataclasses.replace(METRICS["gpu.temperature_c"], levels=(40.0, 50.0)))
    assert _bar_style(_gpu(temperature_c=60.0), "temp") == {"red"}


def test_the_power_bar_is_the_catalogues_ratio_and_its_label() -> None:
    spec = METRICS["gpu.power_percent"]
    gpu = _gpu(power_w=700.0, power_limit_w=700.0)  # at the limit: the catalogue's critical level
    assert spec.fraction(gpu) == pytest.approx(1.0) and spec.level(100.0) == "critical"
    assert _bar_style(gpu, spec.label) == {"red"}


def test_the_dashboard_names_each_metric_by_its_catalogue_key() -> None:
    """One metric, one name: the fleet table's columns and the history plot's series are catalogue keys."""
    keys = [k for k, _, _ in fleet_table.COLUMNS if "." in k] + list(history_plot.SERIES)
    assert len(keys) == 9 and all(k in METRICS for k in keys)


def test_values_are_written_as_the_catalogue_formats_them() -> None:
    temp = METRICS["gpu.temperature_c"]
    gpu = _gpu(temperature_c=71.4, gpu_util=62.0)
    text = render_gpu(gpu, 160, Colours()).plain
    assert temp.text(71.4) == "71°C" and temp.text(71.4) in text
    assert METRICS["gpu.util"].text(62.0) == "62%" and "62%" in text
    assert temp.text(None) == "–"  # unknown: a dash, without a unit hanging on it


def test_halves_reused_from_earlier_ticks_show_what_building_them_anew_shows(bundled: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The panel keeps the halves of its lines by what they show (figures, and bars to the eighth of a cell),
    so a tick rebuilds only what changed: over an incident's minutes every line reads and is coloured as a
    panel built from nothing would draw it."""
    snaps = []
    with gzip.open(bundled, "rt") as fh:
        for line in itertools.islice(fh, 1, 400):  # after the recording's header
            snaps.append(snapshot_from_dict(json.loads(line)))
    built = []
    build = gpu_panel._build_half
    monkeypatch.setattr(gpu_panel, "_build_half", lambda *a: built.append(a) or build(*a))
    gpu_panel._HALVES.clear()
    reused = [gpu_panel.gpu_lines(s.gpus[0], 78, Colours(), s.host, 9) for s in snaps]
    assert len(built) < 9 * len(snaps) / 2  # nine halves a tick: most were reused...
    for snap, lines in zip(snaps, reused, strict=True):
        gpu_panel._HALVES.clear()
        fresh = gpu_panel.gpu_lines(snap.gpus[0], 78, Colours(), snap.host, 9)
        assert [(t.plain, t.spans) for t in lines] == [(t.plain, t.spans) for t in fresh]  # ...never stale
