"""``gpuwatch report``: GPU-hours allocated, busy and effective, and the hours lost by cause and owner."""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gpuwatch.cli.common import CliError
from gpuwatch.cli.paths import input_file, replay_file
from gpuwatch.config.model import DEFAULT_PORT
from gpuwatch.data import use_bundled_hint
from gpuwatch.model import files
from gpuwatch.model.durations import parse_duration
from gpuwatch.model.visible import visible, visible_lines

DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
FORMATS = ("text", "json", "csv", "markdown")
#: A token is a line of text; a bigger file is the wrong file.
MAX_TOKEN_BYTES = 64 * 1024
DESCRIPTION = f"""\
How many GPU-hours were allocated (a process held the GPU), busy (GPU-Util) and effective (SM activity),
and where the rest went: lost GPU-hours by cause (the doctor's finding at that moment, or held_idle,
no_process, unexplained) and by owner (pod, else user:command), the fix to try for the biggest loss, the
capacity headroom (SM activity p90 against the 70-85 % band) and, on a terminal, a chart per hour.
Consolidation advice follows: owners under-used for most of their allocated time, the MIG profile their
peaks fit or the owner to share a GPU with by MPS, and the GPU-hours a week it frees (from 72 h of
roll-ups on; below that it says what it has). --format markdown writes the weekly digest per owner
(GPU-hours allocated and lost by cause, the top fix, the trend against the window before).

It reads a daemon's hourly roll-ups (default {DEFAULT_URL}; kept [efficiency] retention, 14 days by
default), or accounts a recording here with --replay FILE. Windows are whole hours: --since 24h covers
the hours that overlap the last 24 hours before the newest sample."""


def _duration(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError("must be longer than 0 s")
    return seconds


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="GPU-hours lost by cause and owner, from a daemon or a recording",
                       description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--since", type=_duration, default=86400.0, metavar="DURATION",
                   help="how far back from the newest sample (e.g. 24h, 7d; default 24h)")
    p.add_argument("--by", choices=("cause", "owner", "gpu", "hour"), default=None,
                   help="show only this breakdown of the lost GPU-hours (default: cause and owner)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the report as JSON")
    out.add_argument("--csv", action="store_true", help="print the --by breakdown (default cause) as CSV")
    out.add_argument("--format", choices=FORMATS, default=None,
                     help="text (default), json, csv (as --json, --csv) or markdown: a digest per owner to paste "
                          "into a chat or a ticket, with the trend against the window before")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--connect", metavar="URL", default=None, help=f"the daemon to ask (default {DEFAULT_URL})")
    src.add_argument("--replay", type=replay_file, metavar="FILE",
                     help="account a recording here instead ('bundled': the H200 recording shipped with gpuwatch)")
    p.add_argument("--token-file", type=input_file, metavar="FILE",
                   help="bearer token, for a daemon that needs one for reads")
    p.add_argument("--no-chart", action="store_true", help="no chart even on a terminal")
    p.set_defaults(func=run)


class _VisibleRows:
    """A csv writer whose fields have their control characters made visible (owners are user names)."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer

    def writerow(self, row: Iterable[object]) -> None:
        self.writer.writerow([visible(v) if isinstance(v, str) else v for v in row])


def _from_daemon(url: str, window: float, token_file: Path | None) -> tuple[dict[str, object], str]:
    import requests

    from gpuwatch.model.bodies import MAX_JSON_BYTES, BodyTooLarge, read_capped, response_chunks

    headers = {}
    if token_file is not None:
        try:
            token = files.read_text(token_file, MAX_TOKEN_BYTES).strip()
        except OSError as exc:
            raise CliError(f"cannot read the token file {token_file}: {files.describe(exc)}") from None
        except UnicodeDecodeError:
            raise CliError(f"the token file {token_file} is not UTF-8 text; write the token as text") from None
        if not token or not token.isprintable() or not token.isascii():
            raise CliError(f"the token file {token_file} holds no token on one line of printable ASCII")
        headers["Authorization"] = "Bearer " + token
    endpoint = url.rstrip("/") + "/api/v1/efficiency"
    try:
        with requests.get(endpoint, params={"window": window}, headers=headers, timeout=10, stream=True) as resp:
            raw = read_capped(response_chunks(resp), MAX_JSON_BYTES, endpoint)
    except BodyTooLarge as exc:
        raise CliError(str(exc)) from None
    except requests.RequestException as exc:
        raise CliError(f"no gpuwatch daemon answers at {url} ({type(exc).__name__}): start 'gpuwatch daemon', "
                       f"pass --connect URL, or report on a recording with --replay FILE "
                       f"({use_bundled_hint()})") from None
    if resp.status_code == 404:
        raise CliError(f"{url} has no /api/v1/efficiency: the daemon is older than this gpuwatch, or "
                       f"[efficiency] enabled = false there")
    if resp.status_code in (401, 403):
        raise CliError(f"{url} needs a token for reads: pass --token-file FILE")
    try:
        body = json.loads(raw)
    except ValueError:
        raise CliError(f"{endpoint} answered {resp.status_code} with something that is not JSON") from None
    if resp.status_code != 200:
        raise CliError(f"{endpoint}: {body.get('error', resp.status_code)}")
    return body, f"daemon {url} ({body.get('origin', 'live')})"


def run(args: argparse.Namespace) -> int:
    from gpuwatch.cli import report_rollouts
    from gpuwatch.cli.report_text import render_csv, render_text
    from gpuwatch.efficiency.consolidation import consolidate
    from gpuwatch.efficiency.store import Rollup
    from gpuwatch.efficiency.summary import summarise
    from gpuwatch.model.rollout import Rollout

    fmt = args.format or ("json" if args.json else "csv" if args.csv else "text")
    # the digest compares with the window before, so it asks for both
    span = 2 * args.since if fmt == "markdown" else args.since
    if args.replay is not None:
        from gpuwatch.efficiency.offline import account_recording
        from gpuwatch.model.recording import RecordingError

        try:
            accounted = account_recording(args.replay)
        except (OSError, RecordingError) as exc:
            raise CliError(f"cannot read {args.replay}: {exc}") from None
        rollup, start, until = accounted.rollup, accounted.start, accounted.end
        source = f"recording {args.replay.name}"
    else:
        body, source = _from_daemon(args.connect or DEFAULT_URL, span, args.token_file)
        try:
            rollup = Rollup.from_dict(body)
            start, until = float(body["since"]), float(body["until"])  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CliError(f"{args.connect or DEFAULT_URL} answered roll-ups this gpuwatch cannot read "
                           f"({type(exc).__name__}: {visible(str(exc))[:80]}): is it a gpuwatch daemon?") from None
    since = max(until - args.since, start)
    window = rollup.since(since)
    summary = summarise(window, since, until, source)
    rollouts: list[Rollout] | None
    if args.replay is not None:
        rollouts = report_rollouts.from_recording(args.replay, since)
    else:
        rollouts = report_rollouts.from_daemon(args.connect or DEFAULT_URL, since, args.token_file)
    if fmt == "markdown":
        from gpuwatch.efficiency import digest, digest_markdown

        previous = rollup.between(until - 2 * args.since, since)
        sys.stdout.write(digest_markdown.render(digest.build(window, previous, since, until, source, args.since,
                                                             rollouts or ())))
    elif fmt == "json":
        print(json.dumps({**summary.to_dict(), "consolidation": consolidate(window).to_dict(),
                          "rollouts": [r.to_dict() for r in rollouts or ()]}, indent=2))
    elif fmt == "csv":
        buf = io.StringIO()
        render_csv(summary, args.by or "cause", _VisibleRows(csv.writer(buf)))
        sys.stdout.write(buf.getvalue())
    else:
        print(visible_lines(render_text(summary, args.by)))  # owners and causes come from the processes
        print("\n" + visible_lines(report_rollouts.render(rollouts)))  # command lines too
        print(visible_lines("\n" + "\n".join(consolidate(window).lines())))
        if sys.stdout.isatty() and not args.no_chart and summary.hours:
            from gpuwatch.cli.report_text import chart

            print(chart(summary))
    return 0
