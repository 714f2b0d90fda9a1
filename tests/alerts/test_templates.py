"""Annotation templates render the same text locally and on Prometheus: ``$value`` humanised in the metric's
unit here, and the Go pipeline that prints the same from the exporter's base unit there."""

from __future__ import annotations

import pytest

from gpuwatch.alerts.templates import (
    ValueUnit,
    check_template,
    format_value,
    humanize,
    humanize1024,
    humanize_percentage,
    render,
    to_go,
)


@pytest.mark.parametrize(("value", "unit", "text", "go"), [
    (12.5, ValueUnit("percent", 0.01), "12.5%", "{{ $value | humanizePercentage }}"),
    (80 * 1024**3, ValueUnit("bytes"), "80GiB", "{{ $value | humanize1024 }}B"),
    (2.5e6, ValueUnit("bytes/s"), "2.384MiB/s", "{{ $value | humanize1024 }}B/s"),
    (1980.0, ValueUnit("MHz", 1e6), "1.98GHz", "{{ $value | humanize }}Hz"),
    (84.0, ValueUnit("celsius"), "84°C", '{{ $value | printf "%.4g" }}°C'),
    (612.25, ValueUnit("watts"), "612.2W", '{{ $value | printf "%.4g" }}W'),
    (3.0, ValueUnit("errors"), "3 errors", '{{ $value | printf "%.4g" }} errors'),
])
def test_value_renders_in_its_unit_and_exports_as_the_matching_go_pipeline(
        value: float, unit: ValueUnit, text: str, go: str) -> None:
    assert format_value(value, unit) == text
    assert to_go("{{ $value }}", unit) == go


@pytest.mark.parametrize(("fn", "value", "expected"), [
    (humanize, 0.0, "0"), (humanize, 1234.0, "1.234k"), (humanize, 0.0012, "1.2m"), (humanize, 5e9, "5G"),
    (humanize1024, 1.0, "1"), (humanize1024, 1536.0, "1.5ki"), (humanize1024, 3 * 1024**4, "3Ti"),
    (humanize_percentage, 0.1234567, "12.35%"), (humanize_percentage, 0.7000000000000001, "70%"),
])
def test_humanize_functions_match_prometheus(fn: object, value: float, expected: str) -> None:
    assert fn(value) == expected  # type: ignore[operator]


def test_labels_render_and_missing_labels_render_empty_as_in_prometheus() -> None:
    text = "GPU {{ $labels.gpu }} on {{$labels.hostname}}{{ $labels.nope }}: {{ $value }}"
    assert render(text, {"gpu": "1", "hostname": "n1"}, 12.0, ValueUnit("percent", 0.01)) == "GPU 1 on n1: 12%"
    assert render("{{ $value }}", {}, None, ValueUnit()) == ""


@pytest.mark.parametrize(("text", "ok"), [
    ("plain", True), ("{{ $labels.gpu }} {{ $value }}", True), ("{{ $value | humanize }}", False),
    ("{{ .Labels.gpu }}", False), ("{{ $labels.gpu", False),
])
def test_only_labels_and_value_are_accepted(text: str, ok: bool) -> None:
    assert (check_template(text) is None) == ok


def test_the_template_check_is_linear_in_unclosed_braces() -> None:
    import time

    from gpuwatch.alerts.templates import MAX_TEMPLATE

    text = "{{" * (MAX_TEMPLATE // 2)
    started = time.perf_counter()
    assert check_template(text) == "unbalanced '{{' in template"
    assert check_template("{{ $value }}" + "{{" * 2000)
    assert time.perf_counter() - started < 0.05
    assert "too long" in (check_template("x" * (MAX_TEMPLATE + 1)) or "")
