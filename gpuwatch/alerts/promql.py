"""Export rules as a Prometheus rule file over the exporter's metric names, so Prometheus and
Alertmanager can do the alerting across a fleet with the same rules the daemon runs locally.

Each condition becomes the PromQL that gives the same answer on the exporter's series:
  threshold   ``metric op value`` (value scaled to the base unit: 30 % -> 0.3); with ``avg``:
              ``avg_over_time(metric[avg]) op value``, with ``quantile`` ``quantile_over_time(q, metric[avg])``;
              a rate exported as a byte counter (PCIe, storage I/O):
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
Each leaf kind's expression is a method of :class:`Leaves`, named in the kinds table; ``all``/``any``, the
rule around it and the rule file are put together in :mod:`gpuwatch.alerts.export`.
Hysteresis (``clear``, flapping's ``low``) holds while the rule's own alert is active, which Prometheus
keeps in ``ALERTS``: ``(m > value or (m > clear and ignoring(alertname, alertstate, ...) ALERTS{...}))``.
What PromQL cannot say is reported, not approximated: a metric without a series, a stale source's age.
"""

from __future__ import annotations

from gpuwatch.alerts.rules import Climb, Flapping, Jitter, Stale, Threshold, Throttle, Volatility
from gpuwatch.model.durations import format_duration
from gpuwatch.model.metrics import METRICS
from gpuwatch.model.series import CLOCK_EVENT_ACTIVE, SOURCE_UP

#: Labels that tie a process series (pid, gpu, user, command) or a host series to a GPU series: the series
#: carry no host name, Prometheus's ``instance`` (the scrape target) tells hosts apart.
JOIN_LABELS = {("process", "gpu"): "instance, gpu", ("process", "host"): "instance", ("gpu", "host"): "instance"}
#: The window ``rate()`` reads a byte counter over when a threshold gives none (four 15 s scrapes).
RATE_WINDOW = "1m"


class Unexpressible(Exception):
    """This rule has no faithful PromQL; the message says why."""


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


def _threshold_series(metric: str, avg_s: float | None, quantile: float | None = None) -> tuple[str, float]:
    """What a threshold compares: the gauge (averaged over ``avg_s``), or for a rate exported as a byte
    counter its ``rate()`` over ``avg_s`` (else :data:`RATE_WINDOW`)."""
    spec = METRICS[metric]
    if spec.integrated and spec.prom_name is not None:
        if quantile is not None:
            raise Unexpressible("a quantile of a rate exported as a byte counter needs a subquery over rate()")
        return f"rate({spec.prom_name}[{format_duration(avg_s) if avg_s else RATE_WINDOW}])", spec.prom_scale
    name, scale = _series(metric)
    if avg_s and quantile is not None:
        return f"quantile_over_time({_num(quantile)}, {name}[{format_duration(avg_s)}])", scale
    return (f"avg_over_time({name}[{format_duration(avg_s)}])" if avg_s else name), scale


def _regex(names: tuple[str, ...]) -> str:
    return "|".join(sorted(names))


class Leaves:
    """The PromQL of each leaf kind (the kinds table, :mod:`gpuwatch.alerts.kinds`, names one per kind);
    ``step`` is the subquery resolution (empty: the evaluation interval), ``latch`` the selector of the
    rule's own active alerts (``ALERTS``), which hysteresis needs. ``all``/``any`` join them in
    :func:`gpuwatch.alerts.export.to_promql`."""

    @staticmethod
    def threshold(cond: Threshold, step: str, latch: str) -> str:
        name, scale = _threshold_series(cond.metric, cond.avg_s, cond.quantile)
        expr = f"{name} {cond.op} {_num(cond.value * scale)}"
        if cond.clear is None:
            return expr
        if not latch:
            raise Unexpressible("its 'clear' level is hysteresis, which needs the rule's ALERTS state")
        return f"{expr} or ({name} {cond.op[0]} {_num(cond.clear * scale)} and {latch})"

    @staticmethod
    def jitter(cond: Jitter, step: str, latch: str) -> str:
        name, scale = _series(cond.metric)
        w = format_duration(cond.window_s)
        return (f"(max_over_time({name}[{w}]) - {name}) >= {_num(cond.fall * scale)} and "
                f"(max_over_time({name}[{w}]) - {name} offset {w}) >= {_num(cond.rise * scale)}")

    @staticmethod
    def volatility(cond: Volatility, step: str, latch: str) -> str:
        name, scale = _series(cond.metric)
        half, x = format_duration(cond.window_s / 2), _num(cond.stddev * scale)
        return f"stddev_over_time({name}[{half}]) >= {x} and stddev_over_time({name}[{half}] offset {half}) >= {x}"

    @staticmethod
    def flapping(cond: Flapping, step: str, latch: str) -> str:
        name, scale = _series(cond.metric)
        state = f"({name} {cond.op} bool {_num(cond.value * scale)})[{format_duration(cond.window_s)}:{step}]"
        pct = f"changes({state}) / (count_over_time({state}) - 1)"
        flapping = f"{pct} >= {_num(cond.high / 100)}"
        if cond.low < cond.high:
            if not latch:
                raise Unexpressible("its 'low' threshold is hysteresis, which needs the rule's ALERTS state")
            flapping = f"{flapping} or ({pct} >= {_num(cond.low / 100)} and {latch})"
        return f"({flapping}) and {name} offset {format_duration(cond.window_s)}"

    @staticmethod
    def throttle(cond: Throttle, step: str, latch: str) -> str:
        sel = f'{CLOCK_EVENT_ACTIVE.name}{{reason=~"{_regex(cond.reasons)}"}}'
        w = format_duration(cond.window_s)
        return (f"(avg_over_time((max without (reason) ({sel}))[{w}:{step}]) >= {_num(cond.percent / 100)}) "
                f"and max without (reason) ({sel} offset {w})")

    @staticmethod
    def climb(cond: Climb, step: str, latch: str) -> str:
        name, scale = _series(cond.metric)
        w, half = format_duration(cond.window_s), format_duration(cond.window_s / 2)
        part = _num(cond.rise / 2 * scale)
        return (f"({name} - {name} offset {w}) >= {_num(cond.rise * scale)} and "  # the rise is $value
                f"({name} - {name} offset {half}) >= {part} and "
                f"({name} offset {half} - {name} offset {w}) >= {part} and "
                f"predict_linear({name}[{w}], {_num(cond.within_s)}) >= {_num(cond.limit * scale)}")

    @staticmethod
    def stale(cond: Stale, step: str, latch: str) -> str:
        sel = f'{{source=~"{_regex(cond.sources)}"}}' if cond.sources else ""
        return f"{SOURCE_UP.name}{sel} == 0"
