"""A rollout end to end: a real daemon replays a recording in which a serving process is replaced by a
slower one; a real signed webhook receiver on 127.0.0.1 gets exactly one rollout notification, verdict
``worse``; ``GET /api/v1/rollouts`` lists it, and lists it again after a restart."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import requests
from daemon.process import DaemonProcess
from notify.receiver import Received, Receiver

from gpuwatch.notify import new_secret
from gpuwatch.notify.signing import parse_secret, verify

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).parent / "fixtures"
SLOWER = FIXTURES / "rollout-slower.ndjson.gz"
#: The same rollout recorded on an H200 by scripts/gpu_rollout_recording.sh (bf16 stage, then naive).
REAL = FIXTURES / "rollout-h200.ndjson.gz"


def write_config(tmp_path: Path, receiver: Receiver, secret: str) -> Path:
    (tmp_path / "secret").write_text(secret)
    config = tmp_path / "gpuwatch.toml"
    config.write_text(f"""\
[daemon]
listen = "127.0.0.1:0"
state_dir = "{tmp_path / 'state'}"
[notify]
initial_backoff = "200ms"
max_backoff = "1s"
[efficiency]
rollout_settle = "10s"
rollout_window = "60s"
[[receivers]]
name = "ops"
kind = "generic"
url = "{receiver.url}"
secret_file = "{tmp_path / 'secret'}"
""")
    return config


def wait_finished(gw: DaemonProcess, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while gw.healthz().json().get("sampler") != "finished":
        assert time.monotonic() < deadline, "the replay did not finish"
        time.sleep(0.1)


def rollout_notes(receiver: Receiver) -> list[Received]:
    """The rollout notifications delivered (the default alert rules send their own alerts beside them)."""
    return [r for r in receiver.delivered() if any(a["name"] == "GpuRollout" for a in r.json()["alerts"])]


def rollouts(url: str, **params: Any) -> list[dict[str, Any]]:
    resp = requests.get(url + "/api/v1/rollouts", params=params, timeout=5)
    assert resp.status_code == 200, resp.text
    found: list[dict[str, Any]] = resp.json()["rollouts"]
    return found


@pytest.mark.parametrize("recording", [SLOWER, REAL], ids=["from-bundled-samples", "h200"])
def test_a_process_replaced_by_a_slower_one_sends_one_worse_rollout_and_the_api_lists_it(
        tmp_path: Path, recording: Path) -> None:
    if not recording.exists():
        pytest.skip(f"{recording.name} not recorded yet (scripts/gpu_rollout_recording.sh)")
    receiver, secret = Receiver(), new_secret()
    gw = DaemonProcess(write_config(tmp_path, receiver, secret), recording, tmp_path / "gw.log",
                       extra=("--speed", "0"))
    try:
        wait_finished(gw)
        deadline = time.monotonic() + 30
        while not rollout_notes(receiver) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.5)  # whatever else the replay caused has been judged and sent by now
        got = rollout_notes(receiver)
        assert len(got) == 1, [r.json() for r in got]
        note = got[0]
        assert verify(parse_secret(secret), note.headers, note.body, now=int(note.at)), "the notification is signed"
        body = note.json()
        [alert] = body["alerts"]
        assert alert["name"] == "GpuRollout" and alert["labels"]["verdict"] == "worse"
        sent = alert["rollout"]
        assert sent["verdict"] == "worse" and sent["before"] != sent["after"]
        assert any(r["verdict"] == "worse" for r in sent["rows"]) or sent["finding_after"] != sent["finding_before"]
        listed = rollouts(gw.url)
        assert [r["changed_at"] for r in listed] == [sent["changed_at"]]
        assert listed[0]["verdict"] == "worse" and listed[0]["summary"] == sent["summary"]
        assert rollouts(gw.url, since=sent["judged_at"] + 1) == []
        health = gw.healthz().json()
        assert (health["rollouts_pending"], health["rollouts_dropped"]) == (0, 0)  # judged; none skipped
        assert requests.get(gw.url + "/api/v1/rollouts", params={"since": "soon"}, timeout=5).status_code == 400
        # gpuwatch report reads it from the daemon (as the text's section and the JSON's key)
        report = subprocess.run([sys.executable, "-m", "gpuwatch", "report", "--connect", gw.url, "--json"],
                                capture_output=True, text=True, timeout=60, check=False)
        assert report.returncode == 0, report.stderr
        assert [r["verdict"] for r in json.loads(report.stdout)["rollouts"]] == ["worse"]
    finally:
        assert gw.stop() == 0, gw.log.read_text()
        receiver.close()
    # A restart keeps the verdict; the replay run again judges the same change, and neither keeps nor sends
    # it a second time.
    second = Receiver()
    again = DaemonProcess(write_config(tmp_path, second, secret), recording, tmp_path / "gw2.log",
                          extra=("--speed", "0"))
    try:
        assert [r["changed_at"] for r in rollouts(again.url)] == [sent["changed_at"]]
        wait_finished(again)
        time.sleep(1.5)
        assert [r["changed_at"] for r in rollouts(again.url)] == [sent["changed_at"]]
        assert rollout_notes(second) == []
    finally:
        assert again.stop() == 0
        second.close()
