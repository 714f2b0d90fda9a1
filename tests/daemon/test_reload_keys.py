"""A reload applies every key it can, or is refused naming the key that needs a restart: answering
``reloaded: true`` while a changed key kept doing the old thing told an operator that reads were closed
(``token_for_reads = true``) while they stayed open. Checked on a real daemon process over HTTP."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import requests

from daemon.process import DaemonProcess
from gpuwatch.config import Config
from gpuwatch.config.model import SECTIONS
from gpuwatch.daemon.reloadable import RELOADABLE, changed_keys, needs_restart

TOKEN = "a-token-of-more-than-16-characters"


def _config(path: Path, state: Path, **daemon: str) -> Path:
    lines = [f'token_file = "{path.parent / "token"}"', f'state_dir = "{state}"',
             *(f"{k} = {v}" for k, v in daemon.items())]
    path.write_text("[daemon]\n" + "\n".join(lines) + "\n")
    return path


def test_a_reload_closes_reads_when_token_for_reads_is_turned_on_and_refuses_a_key_that_needs_a_restart(
        tmp_path: Path, recording: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    config = _config(tmp_path / "c.toml", tmp_path / "state", token_for_reads="false")
    d = DaemonProcess(config, recording, tmp_path / "daemon.log",
                      extra=("--listen", "127.0.0.1:0", "--speed", "10", "--loop"))
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    try:
        d.wait_healthy()
        assert requests.get(d.url + "/metrics", timeout=5).status_code == 200  # reads open

        _config(config, tmp_path / "state", token_for_reads="true")
        r = requests.post(d.url + "/api/v1/reload", headers=bearer, timeout=10)
        assert r.status_code == 200 and r.json()["reloaded"] is True, r.text
        assert requests.get(d.url + "/metrics", timeout=5).status_code == 401  # closed now
        assert requests.get(d.url + "/api/v1/snapshot", timeout=5).status_code == 401
        assert requests.get(d.url + "/metrics", headers=bearer, timeout=5).status_code == 200
        assert requests.get(d.url + "/healthz", timeout=5).status_code == 200  # /healthz stays open

        _config(config, tmp_path / "state", token_for_reads="false", stream_queue="7")
        r = requests.post(d.url + "/api/v1/reload", headers=bearer, timeout=10)
        assert r.status_code == 422 and r.json()["reloaded"] is False
        assert "daemon.stream_queue" in r.json()["message"] and "restart" in r.json()["message"]
        assert requests.get(d.url + "/metrics", timeout=5).status_code == 401  # nothing of it was applied

        _config(config, tmp_path / "state", token_for_reads="false")
        r = requests.post(d.url + "/api/v1/reload", headers=bearer, timeout=10)
        assert r.json()["reloaded"] is True, r.text
        assert requests.get(d.url + "/metrics", timeout=5).status_code == 200  # and open again
    finally:
        d.stop()


def test_every_key_is_either_reloaded_or_named_as_needing_a_restart() -> None:
    keys = {f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)} | {"receivers"}
    for entry in RELOADABLE:  # no typo: each names real keys
        assert entry in keys or (entry.endswith(".*") and entry[:-2] in SECTIONS), entry
    old = Config()
    changed = dataclasses.replace(old, sampler=dataclasses.replace(old.sampler, interval=5.0),
                                  daemon=dataclasses.replace(old.daemon, token_for_reads=True, listen="127.0.0.1:1"),
                                  notify=dataclasses.replace(old.notify, timeout=3.0))
    assert changed_keys(old, changed) == ["sampler.interval", "daemon.listen", "daemon.token_for_reads",
                                          "notify.timeout"]
    assert needs_restart(old, changed) == ["sampler.interval", "daemon.listen"]
    assert needs_restart(old, old) == []
