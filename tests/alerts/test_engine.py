"""The alert lifecycle: inactive -> pending -> firing -> resolved, as Prometheus runs ``for`` and
``keep_firing_for``, with time taken only from the Snapshots.

State patterns: one letter per snapshot (10 s apart unless said): ``-`` no alert, ``p`` pending,
``F`` firing, ``r`` resolved.
"""

from __future__ import annotations

import math

import pytest

from alerts.build import engine_for, gpu, proc, rule_yaml, run, snap, states_over
from gpuwatch.alerts import Alert, AlertEngine, Transition, parse_rules
from gpuwatch.model.snapshot import Snapshot

LOW = '{threshold: {metric: gpu.util, op: "<", value: 30}}'
LETTER = {"-": "-", "pending": "p", "firing": "F", "resolved": "r"}


def utils(values: list[float | None], step: float = 10.0) -> list[Snapshot]:
    return [snap(i * step, [gpu(util=v)]) for i, v in enumerate(values)]


def lifecycle(values: list[float | None], **kw: str) -> str:
    return "".join(LETTER[s] for s in states_over(engine_for(LOW, **kw), utils(values)))


@pytest.mark.parametrize(("case", "values", "kw", "expected"), [
    ("for 0 fires at the first true evaluation", [50, 10, 10, 50], {}, "-FFr"),
    ("for 20s: pending until 20 s have passed", [10, 10, 10, 10, 50], {"for_": "20s"}, "ppFFr"),
    ("a pending alert that clears goes away without firing", [10, 10, 50, 10], {"for_": "30s"}, "pp-p"),
    ("keep_firing_for holds a firing alert through a dip", [10, 50, 10, 50, 50, 50], {"keep": "20s"}, "FFFFFr"),
    ("keep_firing_for ends the hold after its time", [10, 50, 50, 50, 10, 50, 50], {"keep": "15s"}, "FFFrFFF"),
    ("keep_firing_for restarts when the condition comes back", [10, 50, 10, 50, 50, 50], {"keep": "15s"}, "FFFFFr"),
    ("None and NaN are no data: the alert resolves", [10, None, math.nan, 10], {}, "FrrF"),
    ("a resolved alert that comes back is pending again", [10, 10, 50, 10, 10], {"for_": "10s"}, "pFrpF"),
])
def test_lifecycle(case: str, values: list[float | None], kw: dict[str, str], expected: str) -> None:
    assert lifecycle(values, **kw) == expected


def test_transitions_name_the_state_left_and_carry_snapshot_times() -> None:
    got = run(engine_for(LOW, for_="10s"), utils([10, 10, 50, 10, 50]))
    assert [(t.previous, t.alert.state, t.time - got[0].time) for t in got] == [
        ("inactive", "pending", 0), ("pending", "firing", 10), ("firing", "resolved", 20),
        ("inactive", "pending", 30), ("pending", "inactive", 40)]
    fired = got[1].alert
    assert (fired.active_since, fired.fired_at) == (got[0].time, got[1].time)
    assert got[2].alert.resolved_at == got[2].time


def test_one_alert_per_label_set_with_stable_fingerprints() -> None:
    e1, e2 = engine_for(LOW), engine_for(LOW)
    s = snap(0, [gpu(0, util=10), gpu(1, util=10), gpu(2, util=90)])
    a1, a2 = run(e1, [s]), run(e2, [s])
    assert sorted(t.alert.labels["gpu"] for t in a1) == ["0", "1"]
    assert [t.alert.fingerprint for t in a1] == [t.alert.fingerprint for t in a2]
    assert len({t.alert.fingerprint for t in a1}) == 2
    assert a1[0].alert.labels == {"alertname": "R", "gpu": "0", "uuid": "GPU-0000", "name": "NVIDIA H200",
                                  "hostname": "node-1"}


def test_a_process_alert_resolves_at_once_when_the_process_is_gone() -> None:
    cond = '{threshold: {metric: process.top_thread_cpu_percent, op: ">=", value: 90}}'
    engine = engine_for(cond, keep="10m")
    snaps = [snap(0, [gpu()], [proc(100), proc(200)]), snap(10, [gpu()], [proc(200, thread_cpu=5)]),
             snap(20, [gpu()], [])]
    got = run(engine, snaps)
    assert [(t.alert.labels["pid"], t.previous, t.alert.state) for t in got] == [
        ("100", "inactive", "firing"), ("200", "inactive", "firing"),
        ("100", "firing", "resolved"),  # pid 100 exited: no keep_firing_for for the dead
        ("200", "firing", "resolved")]  # pid 200 exited after its CPU dropped, inside keep_firing_for
    assert got[2].time - snaps[0].time == 10 and got[3].time - snaps[0].time == 20


def test_clock_stepping_back_counts_as_one_interval_and_keeps_for_running() -> None:
    snaps = [snap(t, [gpu(util=10)]) for t in (0, 10, 20, -3580, -3570)]  # an hour back after t=20
    engine = engine_for(LOW, for_="40s")
    states = [LETTER[s] for s in states_over(engine, snaps)]
    assert "".join(states) == "ppppF"
    alert = engine.alerts()[0]
    assert alert.fired_at == snaps[-1].time  # reported on the new clock
    assert alert.active_since == snaps[-1].time - 40


def test_a_snapshot_without_a_usable_time_is_skipped() -> None:
    engine = engine_for(LOW, for_="20s")
    states = [LETTER[s] for s in states_over(engine, [snap(0, [gpu(util=10)]), snap(math.nan, [gpu(util=10)]),
                                                      snap(math.inf, [gpu(util=50)]), snap(20, [gpu(util=10)])])]
    assert states == ["p", "p", "p", "F"]


def test_a_long_gap_restarts_for_but_keeps_a_firing_alert() -> None:
    pending = engine_for(LOW, for_="60s")
    assert [LETTER[s] for s in states_over(pending, [*utils([10, 10, 10, 10]), snap(1000, [gpu(util=10)])])] \
        == list("ppppp")
    assert pending.alerts()[0].active_since == snap(1000).time
    firing = engine_for(LOW)
    assert [LETTER[s] for s in states_over(firing, [snap(0, [gpu(util=10)]), snap(1000, [gpu(util=10)])])] \
        == ["F", "F"]


def test_resolved_alerts_are_listed_for_the_retention_then_dropped() -> None:
    engine = AlertEngine(parse_rules(f"groups:\n- name: g\n  rules:\n  - alert: R\n    condition: {LOW}\n"),
                         resolved_retention_s=60)
    states_over(engine, utils([10, 50]))
    assert [a.state for a in engine.alerts()] == ["resolved"]
    engine.evaluate(snap(70, [gpu(util=50)]))
    assert [a.state for a in engine.alerts()] == ["resolved"]
    engine.evaluate(snap(80, [gpu(util=50)]))
    assert engine.alerts() == []


def test_annotations_render_labels_and_the_value_in_its_unit() -> None:
    extra = '        annotations: {summary: "GPU {{ $labels.gpu }} at {{ $value }}"}\n'
    got = run(engine_for(LOW, extra=extra), [snap(0, [gpu(3, util=12.5)])])
    assert got[0].alert.annotations == {"summary": "GPU 3 at 12.5%"}
    assert got[0].alert.value == 12.5


def test_alerts_are_listed_in_rule_order_then_label_order() -> None:
    text = (f"groups:\n- name: g\n  rules:\n  - alert: B\n    condition: {LOW}\n"
            f"  - alert: A\n    condition: {LOW}\n")
    engine = AlertEngine(parse_rules(text))
    engine.evaluate(snap(0, [gpu(1, util=1), gpu(0, util=1)]))
    assert [(a.name, a.labels["gpu"]) for a in engine.alerts()] == [("B", "0"), ("B", "1"), ("A", "0"), ("A", "1")]


def test_replace_rules_keeps_state_of_surviving_rules_and_drops_the_rest() -> None:
    engine = engine_for(LOW, for_="20s")
    states_over(engine, utils([10, 10]))
    since = engine.alerts()[0].active_since
    engine.replace_rules(parse_rules(
        f"groups:\n- name: g\n  rules:\n  - alert: R\n    condition: {LOW}\n    for: 20s\n"
        f"  - alert: New\n    condition: {LOW}\n"))
    got = run(engine, [snap(20, [gpu(util=10)])])
    assert {(t.alert.name, t.previous, t.alert.state) for t in got} == {("R", "pending", "firing"),
                                                                         ("New", "inactive", "firing")}
    assert engine.alerts()[0].active_since == since
    engine.replace_rules(parse_rules(f"groups:\n- name: g\n  rules:\n  - alert: New\n    condition: {LOW}\n"))
    assert [a.name for a in engine.alerts()] == ["New"]


@pytest.mark.parametrize("state", ["pending", "firing", "resolved"])
def test_alerts_and_transitions_round_trip_through_json_dicts(state: str) -> None:
    import json

    a = Alert(name="R", fingerprint="abc", labels={"gpu": "0"}, annotations={"summary": "s"}, state=state,  # type: ignore[arg-type]
              active_since=1.0, fired_at=None if state == "pending" else 2.0, resolved_at=None, value=3.5,
              group="g", origin="f.yml:3")
    assert Alert.from_dict(json.loads(json.dumps(a.to_dict()))) == a
    t = Transition(a, "inactive", 5.0)
    assert Transition.from_dict(json.loads(json.dumps(t.to_dict()))) == t


def test_alerts_and_transitions_can_be_kept_in_sets() -> None:
    got = run(engine_for(LOW), utils([10, 50]))
    assert len(set(got)) == 2 and len({t.alert for t in got}) == 2


def test_alert_from_dict_rejects_unknown_states() -> None:
    with pytest.raises(ValueError, match="unknown alert state"):
        Alert.from_dict({"name": "R", "state": "exploded"})


def test_the_listed_alerts_follow_every_change_of_value_text_and_state() -> None:
    """What alerts() lists is the engine's state after each snapshot: a new value re-renders its text, the
    same value keeps it, a resolved alert is listed resolved, and a reload that changes only a rule's text
    shows the new text at the next snapshot."""
    extra = '        annotations: {summary: "at {{ $value }}"}\n'
    engine = engine_for(LOW, extra=extra)

    def listed() -> list[tuple[str, str, float | None]]:
        return [(a.state, a.annotations["summary"], a.value) for a in engine.alerts()]

    engine.evaluate(snap(0, [gpu(util=12.5)]))
    assert listed() == [("firing", "at 12.5%", 12.5)]
    engine.evaluate(snap(10, [gpu(util=20.0)]))
    assert listed() == [("firing", "at 20%", 20.0)]
    engine.evaluate(snap(20, [gpu(util=20.0)]))
    assert listed() == [("firing", "at 20%", 20.0)]
    engine.replace_rules(parse_rules(rule_yaml(LOW, extra=extra.replace("at ", "now at ")), "test.yml"))
    engine.evaluate(snap(30, [gpu(util=20.0)]))
    assert listed() == [("firing", "now at 20%", 20.0)]
    engine.evaluate(snap(40, [gpu(util=90.0)]))
    assert listed() == [("resolved", "now at 20%", 20.0)]
    engine.evaluate(snap(50, [gpu(util=90.0)]))
    assert listed() == [("resolved", "now at 20%", 20.0)]
