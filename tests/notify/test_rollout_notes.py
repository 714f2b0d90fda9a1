"""A rollout as a notification: every receiver kind gets it in the body it already understands, once per
matching receiver, queued in the outbox like an alert."""

from __future__ import annotations

import json
from pathlib import Path

from gpuwatch.model.rollout import Rollout, RolloutRow
from gpuwatch.notify import Outbox
from gpuwatch.notify.rollouts import enqueue_rollout
from notify.test_notifier import queued, receiver

WORSE = Rollout(gpu="GPU-1234", gpu_index=3, owner="ml/server", before="server-7d9f", after="server-5c21",
                changed_at=1000.0, judged_at=1200.0, verdict="worse",
                rows=(RolloutRow("tensor_active", "tensor activity", "%", 31.9, 0.4, "worse"),),
                finding_before="healthy", finding_after="input_cpu_bound",
                summary="worse: tensor activity 31.9 -> 0.4 %")


def test_each_receiver_kind_gets_the_rollout_in_its_own_body(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox.sqlite")
    kinds = ("generic", "alertmanager", "slack", "alertmanager_api")
    receivers = [receiver(kind, kind=kind) for kind in kinds]
    assert enqueue_rollout(outbox, receivers, WORSE, "node-1", "http://gw:19464") == len(kinds)
    rows = outbox.conn.execute("SELECT receiver, body FROM outbox ORDER BY id").fetchall()
    bodies = {name: json.loads(body) for name, body in rows}
    [generic] = bodies["generic"]["alerts"]
    assert generic["name"] == "GpuRollout" and generic["state"] == "firing"
    assert generic["labels"] == {"alertname": "GpuRollout", "hostname": "node-1", "gpu": "3", "uuid": "GPU-1234",
                                 "owner": "ml/server", "verdict": "worse", "severity": "warning"}
    assert Rollout.from_dict(generic["rollout"]) == WORSE
    [am] = bodies["alertmanager"]["alerts"]
    assert am["labels"]["verdict"] == "worse" and "server-7d9f -> server-5c21" in am["annotations"]["description"]
    assert "GpuRollout" in bodies["slack"]["attachments"][0]["title"]
    [pushed] = bodies["alertmanager_api"]
    assert pushed["labels"]["alertname"] == "GpuRollout" and "endsAt" not in pushed


def test_a_receiver_that_matches_other_labels_gets_nothing(tmp_path: Path) -> None:
    outbox = Outbox(tmp_path / "outbox.sqlite")  # generic bodies only: queued() reads them
    pager = receiver("pager", match={"verdict": "worse"})
    quiet = receiver("quiet", match={"owner": "someone/else"})
    assert enqueue_rollout(outbox, [pager, quiet], WORSE, "node-1", "http://x") == 1
    assert [q["receiver"] for q in queued(outbox)] == ["pager"]
    better = Rollout(**{**WORSE.to_dict(), "rows": WORSE.rows, "verdict": "better", "changed_at": 2000.0})
    assert enqueue_rollout(outbox, [pager], better, "node-1", "http://x") == 0
