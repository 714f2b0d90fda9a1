"""The weekly digest: ``report --format markdown`` per owner (allocated, lost by cause, top fix, trend against
the window before, rollouts), byte for byte against the committed sample, and the same report's other
formats unchanged."""

from __future__ import annotations

import http.server
import importlib.util
import json
import threading
from pathlib import Path
from types import ModuleType

import pytest

from efficiency import fleet
from efficiency.test_daemon import start, wait_for
from gpuwatch.cli.main import main
from gpuwatch.efficiency import digest, digest_markdown
from gpuwatch.efficiency.ledger import HOUR
from gpuwatch.efficiency.rows import GpuHour, LostKey, LostRow, Owner, SecondsRow, States
from gpuwatch.efficiency.store import Rollup

ROOT = Path(__file__).resolve().parents[2]
WEEK = 7 * 86400.0


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("digest_sample", ROOT / "scripts" / "digest_sample.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_sample_is_what_the_code_renders() -> None:
    script = _script()
    assert script.render() == script.SAMPLE.read_text(), "stale: python scripts/digest_sample.py"


@pytest.fixture(scope="module")
def fleet_digest() -> digest.Digest:
    store = fleet.build()
    rollup = store.rollup()
    store.close()
    since = fleet.UNTIL - WEEK
    return digest.build(rollup.since(since), rollup.between(since - WEEK, since), since, fleet.UNTIL, "fleet", WEEK,
                        fleet.rollouts())


def test_each_owner_gets_its_hours_its_causes_its_fix_and_its_trend(fleet_digest: digest.Digest) -> None:
    text = digest_markdown.render(fleet_digest)
    chat = next(o for o in fleet_digest.owners if o.owner == fleet.CHAT.text)
    assert chat.now.allocated == WEEK and chat.before is not None and chat.before.allocated == WEEK
    assert chat.now.lost < chat.before.lost  # the rollout lifted its SM activity
    section = text.split(f"### `{fleet.CHAT.text}`")[1].split("###")[0]
    assert f"{WEEK / 3600:.2f} GPU-h allocated" in section
    assert f"lost {chat.now.lost / 3600:.2f} GPU-h: `input_cpu_bound`" in section
    assert f"was {chat.before.lost / 3600:.2f} (−{(chat.before.lost - chat.now.lost) / 3600:.2f})" in section
    assert "Top fix (`input_cpu_bound`): Move preprocessing" in section
    assert "`registry/chat:1.4` → `registry/chat:1.5` on GPU 0" in section and "**better**" in section
    losses = [o.now.lost for o in fleet_digest.owners]
    assert losses == sorted(losses, reverse=True)  # the biggest loss first
    assert "## Consolidation" in text and "fits MIG 2g.35gb" in text


def test_without_a_window_before_or_rollouts_it_says_so() -> None:
    store = fleet.build()
    rollup = store.rollup()
    store.close()
    since = fleet.UNTIL - WEEK
    alone = digest.build(rollup.since(since), Rollup([], [], {}), since, fleet.UNTIL, "fleet", WEEK)
    text = digest_markdown.render(alone)
    assert "No data for the week before." in text and "Trend: no data for the week before" in text
    assert text.endswith("## Rollouts\n\nNone in this window.\n")


def test_a_hostile_owner_name_cannot_break_the_table() -> None:
    evil = Owner(user="x|y`z", command="a\x1b[31m*b*|")
    rollup = Rollup([SecondsRow(GpuHour(0, 0), States(HOUR, HOUR, 0.0, 0.0))],
                    [LostRow(LostKey(0, 0, "held_idle", evil), float(HOUR))], {})
    text = digest_markdown.render(digest.build(rollup, Rollup([], [], {}), 0.0, HOUR, "t", WEEK))
    row = next(line for line in text.splitlines() if line.startswith("| `x"))
    assert row.replace("\\|", "").count("|") == 7  # six cells
    assert "\x1b" not in text and "`x\\|y'z:" in row


def test_markdown_on_the_bundled_recording(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--replay", "bundled", "--since", "7d", "--by", "owner", "--format", "markdown"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# GPU digest, 2026-12-02 10:58 to 2026-12-02 11:05 UTC\n")
    assert "| `root:python3` |" in text and "No data for the week before." in text
    assert "Not enough data: have 0.1 h of roll-ups over 1 day, need 72 h" in text
    assert "None in this window." in text


def test_format_json_and_csv_are_the_old_flags(capsys: pytest.CaptureFixture[str]) -> None:
    outputs = []
    for args in (["--json"], ["--format", "json"], ["--csv"], ["--format", "csv"]):
        assert main(["report", "--replay", "bundled", *args]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and outputs[2] == outputs[3]
    assert "consolidation" in json.loads(outputs[0])
    with pytest.raises(SystemExit) as exc:
        main(["report", "--replay", "bundled", "--json", "--format", "markdown"])
    assert exc.value.code == 2 and "not allowed with" in capsys.readouterr().err


@pytest.mark.slow
def test_the_digest_from_a_daemon_compares_with_the_week_before(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A daemon whose roll-ups hold the fleet's two weeks, replaying the bundled recording after them: the
    digest asks it for both weeks and splits them."""
    fleet.build(tmp_path / "state" / "efficiency.sqlite").close()
    gw = start(tmp_path, Path(str(fleet.bundled_recording())))
    try:
        wait_for(gw.url, 1.0)
        assert main(["report", "--connect", gw.url, "--since", "7d", "--format", "markdown"]) == 0
        text = capsys.readouterr().out
    finally:
        gw.kill()
    assert text.startswith("# GPU digest, 2026-11-25 1")
    assert "No data for the week before" not in text
    assert f"| `{fleet.CHAT.text}` |" in text and "| `root:python3` |" in text
    chat = text.split(f"### `{fleet.CHAT.text}`")[1].split("###")[0]
    assert "Trend: lost" in chat and ", was " in chat
    assert "fits MIG 2g.35gb" in text


def test_roll_ups_of_the_wrong_shape_from_a_daemon_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """A server that answers /api/v1/efficiency with JSON that is not roll-ups: one line, no traceback."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps({"since": 0, "until": 1, "seconds": [], "lost": [], "owner_use": [{"hour": 1}]}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        assert main(["report", "--connect", url, "--format", "markdown"]) == 1
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert "answered roll-ups this gpuwatch cannot read (KeyError" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_rollout_is_listed_under_its_owner_only_when_no_other_owner_could_be_its_own() -> None:
    """The detector names a pod's owner ``namespace/container`` (the pod is what a rollout replaces) and a
    host process's owner by its user (the command line is what changes)."""
    assert digest.owns("ml/chat-7b-5d8f/server", "ml/server")
    assert not digest.owns("ml/chat-7b-5d8f/server", "ml/embedder")
    assert digest.owns("alice:train.py", "alice") and not digest.owns("alice:train.py", "bob")
    rollout = fleet.rollouts()[0]
    two = ["ml/chat-7b/server", "ml/chat-13b/server"]
    assert digest._rollouts_of(two[0], two, [rollout]) == []  # either deployment could have rolled out
    assert digest._rollouts_of(two[0], two[:1], [rollout]) == [rollout]
