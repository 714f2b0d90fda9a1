"""Which notifications an alert's life causes: firing once, resolved once, repeats, groups, restarts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuwatch.alerts import Alert, Transition, fingerprint
from gpuwatch.config import ReceiverConfig
from gpuwatch.notify import Notifier, Outbox


def alert(name: str, state: str, gpu: str = "0", t: float = 100.0, **labels: str) -> Alert:
    ls = {"alertname": name, "gpu": gpu, "severity": "warning", **labels}
    return Alert(name=name, fingerprint=fingerprint(ls), labels=ls, annotations={"summary": f"{name} on {gpu}"},
                 state=state,  # type: ignore[arg-type]
                 active_since=t - 10, fired_at=t if state != "pending" else None,
                 resolved_at=t if state == "resolved" else None, value=12.0)


def fire(a: Alert, t: float) -> Transition:
    return Transition(a, "pending", t)


def resolve(a: Alert, t: float) -> Transition:
    return Transition(a, "firing", t)


def receiver(name: str = "ops", **kw: object) -> ReceiverConfig:
    base: dict = {"name": name, "kind": "generic", "url": "http://127.0.0.1:1/hook", "secret_env": "X",
                  "repeat_interval": 3600.0, "group_by": ("alertname",)}
    base.update(kw)
    return ReceiverConfig(**base)


def queued(outbox: Outbox) -> list[dict]:
    rows = outbox.conn.execute("SELECT receiver, body FROM outbox ORDER BY id").fetchall()
    return [{"receiver": r, **json.loads(b)} for r, b in rows]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "outbox.sqlite"


def test_firing_then_resolved_queues_one_notification_each(db: Path) -> None:
    n = Notifier(Outbox(db), [receiver()], "http://127.0.0.1:19464")
    starved = alert("GpuStarved", "firing")
    assert n.handle([fire(starved, 100)], [starved], 100) == 1
    assert n.handle([fire(starved, 101)], [starved], 101) == 0  # still firing: nothing new
    done = alert("GpuStarved", "resolved", t=150)
    assert n.handle([resolve(done, 150)], [], 150) == 1
    statuses = [(q["status"], [a["state"] for a in q["alerts"]]) for q in queued(n.outbox)]
    assert statuses == [("firing", ["firing"]), ("resolved", ["resolved"])]


def test_alerts_of_one_group_share_a_notification_and_other_groups_get_their_own(db: Path) -> None:
    n = Notifier(Outbox(db), [receiver(group_by=("alertname",))], "http://x")
    a0, a1, b0 = alert("GpuStarved", "firing", "0"), alert("GpuStarved", "firing", "1"), alert("Hot", "firing")
    assert n.handle([fire(a0, 100), fire(a1, 100), fire(b0, 100)], [a0, a1, b0], 100) == 2
    bodies = {q["group_labels"]["alertname"]: len(q["alerts"]) for q in queued(n.outbox)}
    assert bodies == {"GpuStarved": 2, "Hot": 1}


def test_a_resolved_alert_is_sent_with_the_groups_still_firing_alerts(db: Path) -> None:
    n = Notifier(Outbox(db), [receiver()], "http://x")
    a0, a1 = alert("GpuStarved", "firing", "0"), alert("GpuStarved", "firing", "1")
    n.handle([fire(a0, 100), fire(a1, 100)], [a0, a1], 100)
    gone = alert("GpuStarved", "resolved", "1", t=120)
    n.handle([resolve(gone, 120)], [a0], 120)
    last = queued(n.outbox)[-1]
    assert last["status"] == "firing"
    assert sorted((a["labels"]["gpu"], a["state"]) for a in last["alerts"]) == [("0", "firing"), ("1", "resolved")]


@pytest.mark.parametrize(("times", "expected"), [
    ([100, 200, 3699], 1),  # inside repeat_interval: the first notification only
    ([100, 3700], 2),  # repeat_interval passed: sent again
    ([100, 3700, 3800, 7300], 3),
])
def test_a_still_firing_group_is_repeated_after_repeat_interval(db: Path, times: list[float], expected: int) -> None:
    n = Notifier(Outbox(db), [receiver(repeat_interval=3600.0)], "http://x")
    a = alert("GpuStarved", "firing")
    for t in times:
        n.handle([fire(a, t)] if t == times[0] else [], [a], t)
    assert len(queued(n.outbox)) == expected


def test_receivers_see_only_matching_alerts_and_resolved_only_when_asked(db: Path) -> None:
    n = Notifier(Outbox(db), [receiver("pager", match={"severity": "critical"}),
                              receiver("chat", kind="slack", send_resolved=False)], "http://x")
    warn = alert("GpuStarved", "firing")
    n.handle([fire(warn, 100)], [warn], 100)
    n.handle([resolve(alert("GpuStarved", "resolved", t=110), 110)], [], 110)
    assert [(q["receiver"], "text" in q) for q in queued(n.outbox)] == [("chat", True)]


def test_after_a_restart_a_re_fired_alert_is_not_sent_twice(db: Path) -> None:
    a = alert("GpuStarved", "firing")
    Notifier(Outbox(db), [receiver()], "http://x").handle([fire(a, 100)], [a], 100)
    again = Notifier(Outbox(db), [receiver()], "http://x")  # the daemon restarted; the engine starts empty
    assert again.handle([fire(a, 105)], [a], 105) == 0
    assert again.handle([resolve(alert("GpuStarved", "resolved", t=130), 130)], [], 130) == 1


def test_an_alert_that_ended_while_the_daemon_was_down_resolves_after_the_grace(db: Path) -> None:
    a = alert("GpuStarved", "firing")
    Notifier(Outbox(db), [receiver()], "http://x").handle([fire(a, 100)], [a], 100)
    again = Notifier(Outbox(db), [receiver()], "http://x", resolve_grace_s=60)
    assert again.handle([], [], 500) == 0  # engine has no history yet: wait
    assert again.handle([], [], 559) == 0
    assert again.handle([], [], 560) == 1
    assert queued(again.outbox)[-1]["status"] == "resolved"


@pytest.mark.parametrize("kind", ["generic", "alertmanager", "slack"])
def test_every_kind_builds_its_documented_body(db: Path, kind: str) -> None:
    n = Notifier(Outbox(db), [receiver(kind=kind)], "http://gpu-node-1:19464")
    a = alert("GpuStarved", "firing", t=1764666252.0)
    n.handle([fire(a, 100)], [a], 100)
    body = queued(n.outbox)[0]
    if kind == "alertmanager":
        assert body["version"] == "4" and body["status"] == "firing" and body["receiver"] == "ops"
        assert body["groupLabels"] == {"alertname": "GpuStarved"}
        assert body["commonLabels"]["severity"] == "warning"
        item = body["alerts"][0]
        assert item["startsAt"] == "2025-12-02T09:04:12.000Z" and item["endsAt"] == "0001-01-01T00:00:00Z"
        assert item["fingerprint"] == a.fingerprint
    elif kind == "slack":
        assert body["text"].startswith("[FIRING:1] alertname=GpuStarved")
        assert body["attachments"][0]["title"] == "[FIRING] GpuStarved gpu=0"
    else:
        assert body["alerts"][0] == a.to_dict() and body["group_labels"] == {"alertname": "GpuStarved"}


def test_a_quiet_evaluation_writes_nothing(db: Path) -> None:
    n = Notifier(Outbox(db), [receiver(repeat_interval=3600.0)], "http://x")
    a = alert("GpuStarved", "firing")
    n.handle([fire(a, 100)], [a], 100)
    writes = n.outbox.conn.total_changes
    for t in range(101, 200):  # still firing, nothing due: no transaction at all
        assert n.handle([], [a], t) == 0
    assert n.outbox.conn.total_changes == writes
    assert n.handle([], [a], 3700) == 1  # but the repeat still comes when due


def test_a_receiver_added_by_a_reload_hears_of_alerts_already_firing(db: Path) -> None:
    n = Notifier(Outbox(db), [receiver("ops")], "http://x")
    a = alert("GpuStarved", "firing")
    n.handle([fire(a, 100)], [a], 100)
    n.set_receivers([receiver("ops"), receiver("pager")])
    assert n.handle([], [a], 101) == 1
    assert [q["receiver"] for q in queued(n.outbox)] == ["ops", "pager"]


def test_an_alertmanager_api_receiver_gets_alertmanagers_postable_alerts(db: Path) -> None:
    n = Notifier(Outbox(db), [receiver(kind="alertmanager_api", secret_env=None, repeat_interval=None)],
                 "http://gpu-node-1:19464")
    a = alert("GpuStarved", "firing", t=1764666252.0, pod="")
    n.handle([fire(a, 100)], [a], 100)
    done = alert("GpuStarved", "resolved", t=1764666312.0, pod="")
    n.handle([resolve(done, 160)], [], 160)
    firing, resolved = (json.loads(b) for (b,) in n.outbox.conn.execute("SELECT body FROM outbox ORDER BY id"))
    assert firing == [{"labels": {"alertname": "GpuStarved", "gpu": "0", "severity": "warning"},
                       "annotations": {"summary": "GpuStarved on 0"}, "startsAt": "2025-12-02T09:04:12.000Z",
                       "generatorURL": "http://gpu-node-1:19464/api/v1/alerts"}]  # no endsAt: resolve_timeout
    assert resolved[0]["endsAt"] == "2025-12-02T09:05:12.000Z" and resolved[0]["labels"] == firing[0]["labels"]


def test_an_alertmanager_api_receiver_hears_of_a_firing_alert_every_minute_by_default(db: Path) -> None:
    n = Notifier(Outbox(db), [receiver(kind="alertmanager_api", secret_env=None, repeat_interval=None)], "http://x")
    a = alert("GpuStarved", "firing")
    sent = []
    for t in range(100, 400):
        if n.handle([fire(a, t)] if t == 100 else [], [a], t):
            sent.append(t)
            n.outbox.conn.execute("UPDATE outbox SET status='delivered'")  # Alertmanager took it
    assert sent == [100, 160, 220, 280, 340]


def test_re_sends_to_alertmanager_wait_while_a_request_to_it_is_pending(db: Path) -> None:
    n = Notifier(Outbox(db), [receiver(kind="alertmanager_api", secret_env=None, repeat_interval=None)], "http://x")
    a, b = alert("GpuStarved", "firing"), alert("Hot", "firing")
    n.handle([fire(a, 100)], [a], 100)
    assert [n.handle([], [a], t) for t in (160, 220, 280)] == [0, 0, 0]  # Alertmanager down: one row waits
    assert n.handle([fire(b, 281)], [a, b], 281) == 1  # a change is queued all the same
    n.outbox.conn.execute("UPDATE outbox SET status='delivered'")  # Alertmanager is back and took both
    assert n.handle([], [a, b], 340) == 1  # the next re-send goes out on time
