"""``gpuwatch report``'s rollouts: read from a daemon (``GET /api/v1/rollouts``) or found in a recording by
running the detector over it, and shown as a "Rollouts" section (text) or the ``rollouts`` key (JSON)."""

from __future__ import annotations

import json
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

from gpuwatch.cli.common import CliError
from gpuwatch.model import files
from gpuwatch.model.rollout import Rollout

MAX_TOKEN_BYTES = 64 * 1024
#: Rows a text section shows per rollout: the ones the verdict rests on, then the doctor's verdicts.
JUDGED = ("better", "worse")


def from_recording(path: Path, since: float) -> list[Rollout]:
    """The rollouts in the recording at ``path`` judged at or after ``since``, with the daemon's defaults."""
    from gpuwatch.efficiency.rollouts import detect
    from gpuwatch.model.recording import iter_snapshots

    return [r for r in detect(iter_snapshots(path)) if r.judged_at >= since]


def from_daemon(url: str, since: float, token_file: Path | None) -> list[Rollout] | None:
    """The daemon's rollouts judged since ``since`` (Unix seconds); None when it serves none (an older
    daemon, or ``[efficiency] rollouts = false`` there)."""
    import requests

    from gpuwatch.model.bodies import MAX_JSON_BYTES, BodyTooLarge, read_capped, response_chunks

    headers = {}
    if token_file is not None:
        try:
            headers["Authorization"] = "Bearer " + files.read_text(token_file, MAX_TOKEN_BYTES).strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"cannot read the token file {token_file}: {exc}") from None
    endpoint = url.rstrip("/") + "/api/v1/rollouts"
    try:
        with requests.get(endpoint, params={"since": since}, headers=headers, timeout=10, stream=True) as resp:
            raw = read_capped(response_chunks(resp), MAX_JSON_BYTES, endpoint)
    except (BodyTooLarge, requests.RequestException) as exc:
        raise CliError(f"{endpoint}: {exc}") from None
    if resp.status_code == 404:
        return None
    try:
        body = json.loads(raw)
        if resp.status_code != 200:
            raise CliError(f"{endpoint}: {body.get('error', resp.status_code)}")
        return [Rollout.from_dict(r) for r in body["rollouts"]]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise CliError(f"{endpoint} answered {resp.status_code} with something that is not its JSON") from None


def render(rollouts: Sequence[Rollout] | None) -> str:
    """The "Rollouts" section: one block per rollout, newest last."""
    lines = ["Rollouts (a GPU owner's workload replaced: before against after)"]
    if rollouts is None:
        return "\n".join([*lines, "  not served by this daemon ([efficiency] rollouts = false, or an older gpuwatch)"])
    if not rollouts:
        return "\n".join([*lines, "  none"])
    for r in rollouts:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.judged_at))
        where = f"GPU {r.gpu_index}" if r.gpu_index is not None else r.gpu
        lines.append(f"  {when} UTC  {where}  {r.owner}: {r.verdict.upper()}")
        lines.append(f"    before: {r.before}")
        lines.append(f"    after:  {r.after}")
        for row in r.rows:
            if row.verdict in JUDGED and row.before is not None and row.after is not None:
                lines.append(f"    {row.label}: {row.before:.3g} -> {row.after:.3g} {row.unit} ({row.verdict})")
        if r.finding_before or r.finding_after:
            lines.append(f"    doctor: {r.finding_before or '-'} -> {r.finding_after or '-'}")
        if r.verdict == "inconclusive":
            lines += textwrap.wrap(r.summary, 100, initial_indent="    ", subsequent_indent="    ")
    return "\n".join(lines)
