"""Export rules as a Prometheus rule file over the exporter's metric names, so Prometheus and
Alertmanager can do the alerting across a fleet with the same rules the daemon runs locally.

Each condition becomes the PromQL that gives the same answer on the exporter's series:
  threshold   ``metric op value`` (value scaled to the base unit: 30 % -> 0.3); with ``avg``:
              ``avg_over_time(metric[avg]) op value``; a rate exported as a byte counter (PCIe, storage I/O):
              ``rate(metric_bytes_total[avg, else 1m]) op value``
  all / any   ``and`` / ``or`` (a process joins its GPU ``on (instance, gpu)``)
  jitter      ``(max_over_time(m[w]) - m) >= fall and (max_over_time(m[w]) - m offset w) >= rise``
  volatility  ``stddev_over_time(m[w/2]) >= x and stddev_over_time(m[w/2] offset w/2) >= x`` (both halves)
  flapping    ``(changes((m op bool v)[w:s]) / (count_over_time((m op bool v)[w:s]) - 1) >= high)
              and m offset w`` (a full window of history; ``low`` as hysteresis below)
  throttle    ``avg_over_time((max without (reason) (gpuwatch_gpu_clock_event_active{reason=~".."}))[w:s]) >= p
              and max without (reason) (... offset w)`` (a full window of history)
  climb       ``(m - m offset w) >= rise and (m - m offset w/2) >= rise/2 and (m offset w/2 - m offset w)
              >= rise/2 and predict_linear(m[w], within) >= limit`` (rising in both halves)
  stale       ``gpuwatch_source_up{source=~".."} == 0``
Hysteresis (``clear``, flapping's ``low``) holds while the rule's own alert is active, which Prometheus
keeps in ``ALERTS``: ``(m > value or (m > clear and ignoring(alertname, alertstate, ...) ALERTS{...}))``.
What PromQL cannot say is reported, not approximated: a metric without a series, a stale source's age.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpuwatch.alerts.rules import (
    AllOf,
    AnyOf,
    Climb,
    Condition,
    Flapping,
    Jitter,
    Rule,
    RuleSet,
    Stale,
    Threshold,
    Throttle,
    Volatility,
    scope_of,
    value_unit,
)
from gpuwatch.alerts.templates import to_go
from gpuwatch.model.durations import format_duration
from gpuwatch.model.metrics import METRICS
from gpuwatch.model.series import CLOCK_EVENT_ACTIVE, SOURCE_UP

#: Labels that tie a process series (pid, gpu, user, command) or a host series to a GPU series: the series
#: carry no host name, Prometheus's ``instance`` (the scrape target) tells hosts apart.
JOIN_LABELS = {("process", "gpu"): "instance, gpu", ("process", "host"): "instance", ("gpu", "host"): "instance"}
#: The window ``rate()`` reads a byte counter over when a threshold gives none (four 15 s scrapes).
RATE_WINDOW = "1m"
#: A rule's ``{{ $labels.hostname }}`` reads the scrape target in Prometheus (only gpuwatch_host_info has it).
_HOSTNAME_IN_TEMPLATE = re.compile(r"\$labels\.hostname\b")


class Unexpressible(Exception):
    """This rule has no faithful PromQL; the message says why."""


@dataclass
class Export:
    text: str
    exported: list[str] = field(default_factory=list)
    #: (rule name, ``file:line``, why it cannot be exported)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)


def _num(x: float) -> str:
    return f"{x:.12g}"


def _series(metric: str) -> tuple[str, float]:
    """The series a condition reads over time (range selectors go on it): a gauge."""
    spec = METRICS[metric]
    if spec.prom_name is None:
        raise Unexpressible(f"metric '{metric}' has no Prometheus series")
    if spec.integrated:
        raise Unexpressible(f"metric '{metric}' is exported as a counter of bytes; only a threshold reads it "
                            "(through rate())")
    return spec.prom_name, spec.prom_scale


def _threshold_series(metric: str, avg_s: float | None) -> tuple[str, float]:
    """What a threshold compares: the gauge (averaged over ``avg_s``), or for a rate exported as a byte
    counter its ``rate()`` over ``avg_s`` (else :data:`RATE_WINDOW`)."""
    spec = METRICS[metric]
    if spec.integrated and spec.prom_name is not None:
        return f"rate({spec.prom_name}[{format_duration(avg_s) if avg_s else RATE_WINDOW}])", spec.prom_scale
    name, scale = _series(metric)
    return (f"avg_over_time({name}[{format_duration(avg_s)}])" if avg_s else name), scale


def _regex(names: tuple[str, ...]) -> str:
    return "|".join(sorted(names))


def to_promql(cond: Condition, step: str = "", latch: str = "") -> str:
    """PromQL for ``cond``; ``step`` is the subquery resolution (empty: the evaluation interval); ``latch``
    the selector of the rule's own active alerts (``ALERTS``), which hysteresis needs."""
    if isinstance(cond, Threshold):
        name, scale = _threshold_series(cond.metric, cond.avg_s)
        expr = f"{name} {cond.op} {_num(cond.value * scale)}"
        if cond.clear is None:
            return expr
        if not latch:
            raise Unexpressible("its 'clear' level is hysteresis, which needs the rule's ALERTS state")
        return f"{expr} or ({name} {cond.op[0]} {_num(cond.clear * scale)} and {latch})"
    if isinstance(cond, AllOf):
        scope = scope_of(cond)
        lead = next(c for c in cond.conditions if scope_of(c) == scope)
        expr = _wrap(to_promql(lead, step, latch))
        for c in cond.conditions:
            if c is lead:
                continue
            on = JOIN_LABELS.get((scope, scope_of(c)))
            expr += f" and{f' on ({on})' if on else ''} {_wrap(to_promql(c, step, latch))}"
        return expr
    if isinstance(cond, AnyOf):
        return " or ".join(_wrap(to_promql(c, step, latch)) for c in cond.conditions)
    if isinstance(cond, Jitter):
        name, scale = _series(cond.metric)
        w = format_duration(cond.window_s)
        return (f"(max_over_time({name}[{w}]) - {name}) >= {_num(cond.fall * scale)} and "
                f"(max_over_time({name}[{w}]) - {name} offset {w}) >= {_num(cond.rise * scale)}")
    if isinstance(cond, Volatility):
        name, scale = _series(cond.metric)
        half, x = format_duration(cond.window_s / 2), _num(cond.stddev * scale)
        return f"stddev_over_time({name}[{half}]) >= {x} and stddev_over_time({name}[{half}] offset {half}) >= {x}"
    if isinstance(cond, Flapping):
        name, scale = _series(cond.metric)
        state = f"({name} {cond.op} bool {_num(cond.value * scale)})[{format_duration(cond.window_s)}:{step}]"
        pct = f"changes({state}) / (count_over_time({state}) - 1)"
        flapping = f"{pct} >= {_num(cond.high / 100)}"
        if cond.low < cond.high:
            if not latch:
                raise Unexpressible("its 'low' threshold is hysteresis, which needs the rule's ALERTS state")
            flapping = f"{flapping} or ({pct} >= {_num(cond.low / 100)} and {latch})"
        return f"({flapping}) and {name} offset {format_duration(cond.window_s)}"
    if isinstance(cond, Throttle):
        sel = f'{CLOCK_EVENT_ACTIVE.name}{{reason=~"{_regex(cond.reasons)}"}}'
        w = format_duration(cond.window_s)
        return (f"(avg_over_time((max without (reason) ({sel}))[{w}:{step}]) >= {_num(cond.percent / 100)}) "
                f"and max without (reason) ({sel} offset {w})")
    if isinstance(cond, Climb):
        name, scale = _series(cond.metric)
        w, half = format_duration(cond.window_s), format_duration(cond.window_s / 2)
        part = _num(cond.rise / 2 * scale)
        return (f"({name} - {name} offset {w}) >= {_num(cond.rise * scale)} and "  # the rise is $value
                f"({name} - {name} offset {half}) >= {part} and "
                f"({name} offset {half} - {name} offset {w}) >= {part} and "
                f"predict_linear({name}[{w}], {_num(cond.within_s)}) >= {_num(cond.limit * scale)}")
    if isinstance(cond, Stale):
        sel = f'{{source=~"{_regex(cond.sources)}"}}' if cond.sources else ""
        return f"{SOURCE_UP.name}{sel} == 0"
    raise Unexpressible(f"condition '{cond.kind}' has no PromQL form")


def _wrap(expr: str) -> str:
    simple = " and " not in expr and " or " not in expr
    return expr if simple else f"({expr})"


def rule_to_prometheus(rule: Rule, step: str = "") -> dict[str, object]:
    """One Prometheus alerting rule (a mapping ready for YAML); Unexpressible when it has none."""
    unit = value_unit(rule.condition)
    ignored = ", ".join(["alertname", "alertstate", *sorted(rule.labels)])
    latch = f'ignoring ({ignored}) ALERTS{{alertname="{rule.name}"}}'
    out: dict[str, object] = {"alert": rule.name, "expr": to_promql(rule.condition, step, latch)}
    if rule.for_s:
        out["for"] = format_duration(rule.for_s)
    if rule.keep_firing_for_s:
        out["keep_firing_for"] = format_duration(rule.keep_firing_for_s)
    if rule.labels:
        out["labels"] = dict(rule.labels)
    if rule.annotations:
        if not unit.exportable and any("$value" in v for v in rule.annotations.values()):
            raise Unexpressible("its annotations use {{ $value }}, which has no Prometheus equivalent here")
        out["annotations"] = {k: _HOSTNAME_IN_TEMPLATE.sub("$labels.instance", to_go(v, unit))
                              for k, v in rule.annotations.items()}
    return out


def export_prometheus(rules: RuleSet) -> Export:
    """The whole rule file: every expressible rule, and the reasons for the others as comments."""
    export = Export(text="")
    groups = []
    for g in rules.groups:
        step = format_duration(g.interval_s) if g.interval_s else ""
        items = []
        for r in g.rules:
            try:
                items.append(rule_to_prometheus(r, step))
                export.exported.append(r.name)
            except Unexpressible as exc:
                export.skipped.append((r.name, r.origin, str(exc)))
        if items:
            group: dict[str, object] = {"name": g.name}
            if g.interval_s:
                group["interval"] = format_duration(g.interval_s)
            group["rules"] = items
            groups.append(group)
    sources = sorted({Path(g.origin.rsplit(":", 1)[0]).name for g in rules.groups if g.origin})
    head = [f"# Generated by 'gpuwatch rules export --format prometheus' from {', '.join(sources) or 'no rules'}.",
            "# Do not edit: change the gpuwatch rules and export again.",
            "# Series: the gpuwatch exporter's /metrics (gpuwatch_gpu_*{gpu,uuid,name},",
            "# gpuwatch_process_*{pid,gpu,user,command}, gpuwatch_gpu_clock_event_active{gpu,uuid,name,reason},",
            "# gpuwatch_source_up{source}); Prometheus's instance label tells hosts apart."]
    head += [f"# Not exported: {name} ({origin.rsplit('/', 1)[-1]}): {why}" for name, origin, why in export.skipped]
    body = yaml.safe_dump({"groups": groups}, sort_keys=False, allow_unicode=True, width=10_000)
    export.text = "\n".join(head) + "\n" + body
    return export
