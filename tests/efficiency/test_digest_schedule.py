"""The digest on a schedule: fixed UTC slots, the last slot kept in the outbox so a restart neither resends
nor skips, one digest (not a backlog) after downtime, a real daemon delivering it to a real receiver, and
``[digest]`` mistakes named with their file, line and fix."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sqlite3
import time
from pathlib import Path

import pytest
from daemon.process import DaemonProcess
from daemon.test_prometheus import free_port
from notify.receiver import Receiver

from efficiency import fleet
from gpuwatch.config import ConfigError, load_config
from gpuwatch.config.model import DigestConfig, ReceiverConfig
from gpuwatch.daemon import digest as schedule
from gpuwatch.daemon.digest import DigestSender, offset, slot_at_or_before
from gpuwatch.efficiency.service import Accounting
from gpuwatch.notify import new_secret
from gpuwatch.notify.outbox import Outbox
from gpuwatch.notify.signing import parse_secret, verify

DAY = 86400.0
WEEK = 7 * DAY
HOOK = ReceiverConfig(name="team", kind="generic", url="http://127.0.0.1:9/hook", secret_env="S")
CHAT = ReceiverConfig(name="chat", kind="slack", url="http://127.0.0.1:9/slack")


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _sender(tmp_path: Path, clock: Clock, cfg: DigestConfig | None = None) -> DigestSender:
    store = fleet.build(tmp_path / "efficiency.sqlite")
    accounting = Accounting(store, 1.0, 256)
    accounting.last_time = float(fleet.UNTIL)  # as if the daemon had accounted up to the fleet's last hour
    cfg = cfg or DigestConfig(receivers=("team", "chat"))
    return DigestSender(cfg, Outbox(tmp_path / "outbox.sqlite"), accounting, lambda: [HOOK, CHAT], clock=clock)


def _queued(outbox: Outbox) -> list[tuple[str, bytes]]:
    with outbox.transaction() as conn:
        return [(r, bytes(b)) for r, b in conn.execute("SELECT receiver, body FROM outbox ORDER BY id")]


def test_the_default_slot_is_monday_nine_utc() -> None:
    slot = slot_at_or_before(fleet.UNTIL, WEEK, offset("mon 09:00"))
    assert time.gmtime(slot).tm_wday == 0 and time.gmtime(slot).tm_hour == 9 and time.gmtime(slot).tm_min == 0
    assert fleet.UNTIL - WEEK < slot <= fleet.UNTIL
    assert offset("") == 0.0 and time.gmtime(slot_at_or_before(fleet.UNTIL, DAY, offset("09:00"))).tm_hour == 9


def test_a_first_start_waits_for_the_next_slot_and_a_restart_does_not_resend(tmp_path: Path) -> None:
    clock = Clock(fleet.UNTIL + 100.0)
    sender = _sender(tmp_path, clock)
    slot = slot_at_or_before(clock.t, WEEK, offset("mon 09:00"))
    assert sender.next_due() == slot + WEEK  # not at once
    clock.t = slot + WEEK + 5
    assert sender.send()
    queued = _queued(sender.outbox)
    assert [r for r, _ in queued] == ["team", "chat"]
    body = json.loads(queued[0][1])
    assert body["kind"] == "digest" and body["format"] == "markdown" and body["text"].startswith("# GPU digest")
    assert "fits MIG 2g.35gb" in body["text"] and "Trend: lost" in body["text"]
    assert json.loads(queued[1][1]) == {"text": body["text"]}  # Slack: the Markdown as the message
    sender.outbox.close()
    clock.t += 60
    # a restart: a new sender on the same outbox file
    again = DigestSender(sender.cfg, Outbox(tmp_path / "outbox.sqlite"), sender.accounting, lambda: [HOOK], clock=clock)
    assert again.last_slot() == slot + WEEK and again.next_due() == slot + 2 * WEEK


def test_after_downtime_one_digest_goes_out_for_the_newest_slot(tmp_path: Path) -> None:
    clock = Clock(fleet.UNTIL)
    sender = _sender(tmp_path, clock, DigestConfig(receivers=("team",), every=3600.0, at="", format="json"))
    clock.t = slot_at_or_before(clock.t, 3600.0, 0.0) + 3600.0
    assert sender.send()
    clock.t += 3.5 * 3600  # down over three slots
    assert sender.next_due() < clock.t  # due at once: never skipped
    assert sender.send()
    assert sender.last_slot() == slot_at_or_before(clock.t, 3600.0, 0.0) and sender.next_due() > clock.t
    queued = _queued(sender.outbox)
    assert len(queued) == 2
    report = json.loads(queued[1][1])["report"]
    assert "text" not in json.loads(queued[1][1])
    # the window is the interval, an hour: too little for advice, and the report says so
    assert report["consolidation"]["status"] == "not_enough_data" and report["consolidation"]["have_s"] == 3600


def test_nothing_is_sent_before_anything_is_accounted(tmp_path: Path) -> None:
    sender = _sender(tmp_path, Clock(fleet.UNTIL))
    sender.accounting.last_time = None
    assert not sender.send() and sender.last_slot() is None and _queued(sender.outbox) == []


@pytest.mark.parametrize(("digest", "message"), [
    ('receivers = ["nobody"]', r"config.toml:\d+: digest.receivers: no \[\[receivers\]\] is named 'nobody': "
                               r"name one of team, am"),
    ('receivers = ["am"]', r"digest.receivers: 'am' is a alertmanager_api receiver, which takes alerts only: "
                           r"send the digest to a generic or slack receiver"),
    ('receivers = ["team"]\nevery = "1d"', r"config.toml:\d+: digest.at: 'mon 09:00' names a weekday, so every must "
                                           r"be a whole number of weeks \(got 1d\)"),
    ('at = "monday 9am"', r"digest.at: expected a UTC time such as \"09:00\""),
])
def test_digest_mistakes_name_the_line_and_the_fix(tmp_path: Path, digest: str, message: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[digest]\n{digest}\n[[receivers]]\nname = "team"\nkind = "generic"\nurl = "http://x"\n'
                    f'secret_env = "S"\n[[receivers]]\nname = "am"\nkind = "alertmanager_api"\nurl = "http://x"\n')
    with pytest.raises(ConfigError, match=message):
        load_config(path, env={})


@pytest.mark.slow
def test_a_daemon_sends_the_digest_to_a_real_receiver_on_a_short_schedule(tmp_path: Path) -> None:
    fleet.build(tmp_path / "state" / "efficiency.sqlite").close()
    secret = new_secret()
    (tmp_path / "secret").write_text(secret)
    receiver = Receiver()
    config = tmp_path / "gpuwatch.toml"
    config.write_text(f"""\
[daemon]
listen = "127.0.0.1:{free_port()}"
state_dir = "{tmp_path / 'state'}"
[digest]
receivers = ["team"]
every = "2s"
at = ""
window = "7d"
[[receivers]]
name = "team"
kind = "generic"
url = "{receiver.url}"
secret_file = "{tmp_path / 'secret'}"
""")
    gw = DaemonProcess(config, fleet.bundled_recording(), tmp_path / "gw.log", extra=("--speed", "0"))
    try:
        deadline = time.monotonic() + 30
        while not (digests := [r for r in receiver.delivered() if r.json().get("kind") == "digest"]):
            assert time.monotonic() < deadline, f"no digest arrived: {gw.log.read_text()}"
            time.sleep(0.1)
        got = digests[0]
    finally:
        gw.kill()
        receiver.close()
    assert verify(parse_secret(secret), got.headers, got.body, int(time.time()))
    body = got.json()
    assert body["receiver"] == "team" and body["format"] == "markdown"  # beside the incident's alerts
    text = body["text"]
    assert f"| `{fleet.CHAT.text}` |" in text and "| `root:python3` |" in text  # the fleet's and the replay's
    assert "No data for the week before" not in text and "fits MIG 2g.35gb" in text
    with sqlite3.connect(tmp_path / "state" / "outbox.sqlite") as db:
        (slot,) = db.execute("SELECT slot FROM digest_sent").fetchone()
    assert slot % 2 == 0 and slot <= time.time()


def test_an_outbox_that_refuses_the_write_is_said_once_and_the_digest_goes_out_when_it_takes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(schedule, "RETRY_S", 0.01)
    clock = Clock(fleet.UNTIL)
    sender = _sender(tmp_path, clock, DigestConfig(receivers=("team",), every=3600.0, at=""))
    assert sender.send()  # a slot sent; the next is due at once after "downtime"
    clock.t += 2 * 3600
    sender.outbox.conn.close()  # every write now fails
    woken = asyncio.Event()

    async def scenario() -> None:
        task = asyncio.create_task(sender.run(woken.set))
        while sum("cannot queue the digest" in r.message for r in caplog.records) < 1 or not sender.failing:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # several more failed attempts
        sender.outbox = Outbox(tmp_path / "outbox.sqlite")  # the disk takes writes again
        await asyncio.wait_for(woken.wait(), 5)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    with caplog.at_level(logging.INFO, logger=schedule.__name__):
        asyncio.run(scenario())
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "cannot queue the digest" in errors[0].message
    assert any("queued again" in r.message for r in caplog.records) and not sender.failing
    assert len(_queued(sender.outbox)) == 2 and sender.last_slot() == slot_at_or_before(clock.t, 3600.0, 0.0)
