"""``gpuwatch compare``: two runs side by side, better/same/worse per row; exits 1 on a regression."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuwatch.cli.common import CliError
from gpuwatch.cli.paths import input_file, output_dir, replay_file
from gpuwatch.model import files
from gpuwatch.model.visible import visible, visible_lines

if TYPE_CHECKING:
    from gpuwatch.efficiency.compare import Row
    from gpuwatch.efficiency.runstats import RunStats

DESCRIPTION = """\
Compare two runs of the same load: GPU-Util, SM, tensor and DRAM activity, memory peak and jitter, PCIe,
the feeding process's CPU, the doctor's top finding, the alerts that fired (shipped rules) and, where the
recordings' headers carry them, throughput, p50 and p99. Each row is better, same (within its noise
margin) or worse; rows without a direction (GPU-Util, SM and DRAM activity, PCIe, CPU: at one load, more
GPU time for the same work is not better by itself) say only "changed". On a terminal the two
runs' GPU-Util and SM activity are drawn one above the other.

Exit status: 0 no regression, 1 a row worse beyond its threshold or an alert the base run did not fire
(use it as a CI gate), or a NEW run that measured too little to judge (no samples, no GPU in them, fewer
than 3 with a GPU, or under a quarter of BASE's samples or seconds), 2 bad input (an empty BASE too).
Thresholds: --threshold p99_ms=5% (of the base value) or
--threshold mem_peak_gib=2 (in the row's unit); keys:
{keys}.

--stages FILE cuts a 'gpuwatch validate' recording into its stage runs and judges each step against the one
before on what it sets out to improve, at one offered load (--rate; --details gives the workload's numbers)."""


#: validate's details are a few hundred KiB; a bigger file is the wrong file (and must not fill memory).
MAX_DETAILS_BYTES = 16 * 1024 * 1024


def _threshold(text: str) -> tuple[str, str]:
    from gpuwatch.efficiency.compare import BY_KEY

    key, sep, value = text.partition("=")
    if not sep or key not in BY_KEY:
        raise argparse.ArgumentTypeError(f"write KEY=VALUE with KEY one of {', '.join(BY_KEY)}, got {text!r}")
    try:
        float(value.removesuffix("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number or a percentage (e.g. 5 or 10%)") from None
    return key, value


def register(sub: argparse._SubParsersAction) -> None:
    keys = "  gpu_util, sm_active, tensor_active, dram_active, mem_peak_gib, mem_jitter_gib,\n" \
           "  pcie_rx_gb_s, pcie_tx_gb_s, feed_cpu_percent, req_per_s, p50_ms, p99_ms"
    p = sub.add_parser("compare", help="two runs side by side; exit 1 on a regression (a CI gate)",
                       description=DESCRIPTION.format(keys=keys), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="*", type=replay_file, metavar="RECORDING",
                   help="BASE and NEW recordings ('bundled': the H200 recording shipped with gpuwatch)")
    p.add_argument("--baseline", type=replay_file, metavar="FILE", help="compare a live window against this recording")
    p.add_argument("--connect", metavar="URL", default="http://127.0.0.1:19464",
                   help="with --baseline: the daemon whose stream is the new run (default %(default)s)")
    p.add_argument("--for", dest="duration", type=float, default=60.0, metavar="S",
                   help="with --baseline: seconds of the daemon's stream to take (default 60)")
    p.add_argument("--stages", type=input_file, metavar="FILE",
                   help="a 'gpuwatch validate' recording: judge every step")
    p.add_argument("--details", type=input_file, metavar="JSON",
                   help="with --stages: validate's validation-details.json")
    p.add_argument("--rate", type=float, default=None, metavar="R",
                   help="with --stages: the offered rate to compare at (default: the highest in the recording)")
    p.add_argument("--out", type=output_dir, metavar="DIR",
                   help="with --stages: also write each stage run as a recording there "
                   "(STAGE[@RATE].ndjson.gz, the workload's numbers in its header)")
    p.add_argument("--threshold", type=_threshold, action="append", default=[], metavar="KEY=VALUE",
                   help="regression threshold for one row (repeatable)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--no-chart", action="store_true", help="no chart even on a terminal")
    p.set_defaults(func=run)


def _load(path: Path) -> RunStats:
    from gpuwatch.efficiency.runstats import run_stats
    from gpuwatch.model.recording import RecordingError, load, read_header

    try:
        return run_stats(path.name, load(path), read_header(path).meta)
    except (OSError, RecordingError) as exc:
        raise CliError(f"cannot read {path}: {exc}", exit_code=2) from None


def _live(url: str, seconds: float) -> RunStats:
    import time

    import requests

    from gpuwatch.efficiency.runstats import run_stats
    from gpuwatch.model.bodies import MAX_LINE_BYTES, capped_lines, response_chunks
    from gpuwatch.model.codec import snapshot_from_dict

    snaps = []
    end = time.monotonic() + seconds
    try:
        with requests.get(url.rstrip("/") + "/api/v1/stream", stream=True, timeout=10) as resp:
            resp.raise_for_status()
            for line in capped_lines(response_chunks(resp), MAX_LINE_BYTES, f"{url}/api/v1/stream"):
                snaps.append(snapshot_from_dict(json.loads(line)))
                if time.monotonic() >= end:
                    break
    except requests.RequestException as exc:
        raise CliError(f"cannot read {url}/api/v1/stream: {exc}", exit_code=2) from None
    return run_stats(f"live {url}", snaps)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


def load_lines(base: RunStats, new: RunStats) -> list[str]:
    """What the comparison stands on: the runs' offered loads, said before any verdict."""
    from gpuwatch.efficiency.compare import load_mismatch

    why = load_mismatch(base, new)
    if why is not None:
        return [f"NOT AT ONE LOAD: {why}. Throughput, latency and GPU activity follow the load, so those rows "
                f"are shown, not judged; compare at one load ('gpuwatch compare --stages FILE --rate R' on a "
                f"validate recording, or record both runs at the same --rate)."]
    if base.offered is None or new.offered is None:
        return [f"Offered load: BASE {base.load_text}, NEW {new.load_text}: the rows assume one load."]
    return [f"Offered load: {base.load_text}, both runs."]


def render(base: RunStats, new: RunStats, rows: list[Row]) -> str:
    lines = [f"BASE {base.name} ({base.seconds:.0f} s)  ->  NEW {new.name} ({new.seconds:.0f} s)",
             *load_lines(base, new), "",
             f"  {'':<34}{'base':>10}{'new':>10}{'change':>10}  verdict (margin)"]
    for r in rows:
        change = "-" if r.base is None or r.new is None else f"{r.new - r.base:+.3g}"
        margin = f" (±{r.threshold:.3g})" if r.threshold is not None else ""
        mark = "  REGRESSION" if r.regression else ""
        lines.append(f"  {r.metric.label + ' ' + r.metric.unit:<34}{_fmt(r.base):>10}{_fmt(r.new):>10}{change:>10}"
                     f"  {r.verdict}{margin}{mark}")
    same = base.top_finding == new.top_finding
    lines.append(f"  {'doctor top finding':<34}{base.top_finding:>20}  ->  {new.top_finding}  "
                 f"{'same' if same else 'changed'}")
    new_alerts = sorted(set(new.alerts_fired) - set(base.alerts_fired))
    lines.append(f"  {'alerts fired':<34}{', '.join(base.alerts_fired) or '-':>20}  ->  "
                 f"{', '.join(new.alerts_fired) or '-'}  {'worse  REGRESSION' if new_alerts else 'same or fewer'}")
    return "\n".join(lines)


def _chart(base: RunStats, new: RunStats) -> str:
    from gpuwatch.cli.charts import Panel
    from gpuwatch.cli.charts import render as draw

    return draw([Panel(f"{which} {visible(run.name)}: GPU-Util and SM activity (%) over seconds", run.series["t"],
                       {"GPU-Util": run.series["gpu_util"], "SM activity": run.series["sm_active"]}, ylim=(0, 100))
                 for which, run in (("BASE", base), ("NEW", new))])


def _stages(args: argparse.Namespace) -> int:
    from gpuwatch.efficiency.compare import step_table
    from gpuwatch.efficiency.runstats import run_stats
    from gpuwatch.efficiency.stages import STEP_TARGETS, at_rate, cut_stages
    from gpuwatch.model.recording import RecordingError, load

    details = None
    if args.details is not None:
        try:
            details = files.read_json(args.details, MAX_DETAILS_BYTES)
        except OSError as exc:
            raise CliError(f"--details {args.details}: cannot read it ({files.describe(exc)})", exit_code=2) from None
        except ValueError as exc:  # not UTF-8, not JSON, nested too deep
            raise CliError(f"--details {args.details}: not a validation-details.json ({str(exc)[:200]})",
                           exit_code=2) from None
    try:
        runs = cut_stages(load(args.stages), details)
    except (OSError, RecordingError, ValueError, TypeError, AttributeError, KeyError) as exc:
        raise CliError(f"cannot read {args.stages} or --details: {str(exc)[:300]}", exit_code=2) from None
    rates = sorted({r.rate for r in runs if r.rate is not None})
    rate = args.rate if args.rate is not None else (rates[-1] if rates else None)
    if args.out is not None:
        from gpuwatch.efficiency.stages import write_run

        for stage_run in runs:
            write_run(stage_run, args.out / f"{stage_run.name}-{stage_run.pid}.ndjson.gz", args.stages.name)
    chosen = at_rate(runs, rate)
    if len(chosen) < 2:
        raise CliError(f"{args.stages} has {len(chosen)} stage run(s) at rate {rate}: nothing to compare "
                       f"(rates in it: {rates or 'none'})", exit_code=2)
    stats = [run_stats(r.stage, r.snapshots, {"workload": r.workload}) for r in chosen]
    table = step_table(stats, STEP_TARGETS)
    where = "full load" if rate is None else f"{rate:g} req/s offered"
    print(visible(f"Does every step help? {args.stages.name}, at {where}"))
    for s in table:
        r = s.row
        margin = f" (margin ±{r.threshold:.3g})" if r.threshold is not None else ""
        print(visible(f"  {s.previous:>9} -> {s.stage:<9} {r.metric.label:<16} {_fmt(r.base):>8} -> "
                      f"{_fmt(r.new):<8} {r.verdict}{margin}"))
    return 0 if all(s.helps for s in table) else 1


def _too_little(base: RunStats, new: RunStats, as_json: bool) -> int | None:
    """The exit status of a comparison with nothing to judge, said first; None when both runs can be judged.
    An empty BASE is bad input (2); an empty, GPU-less or much shorter NEW fails the gate (1)."""
    from gpuwatch.efficiency.compare import too_little

    why = too_little(base)
    if why is not None:
        raise CliError(f"BASE {why}: nothing to compare against", exit_code=2)
    why = too_little(new, base)
    if why is None:
        return None
    if as_json:
        print(json.dumps({"base": base.name, "new": new.name, "regression": True, "reason": f"NEW {why}",
                          "rows": []}, indent=2))
    print(f"gpuwatch: REGRESSION: NEW {visible(why)}: too little to judge, so the gate fails", file=sys.stderr)
    return 1


def run(args: argparse.Namespace) -> int:
    from gpuwatch.efficiency.compare import compare, load_mismatch, regressions

    if args.stages is not None:
        return _stages(args)
    if args.baseline is not None:
        if args.runs:
            raise CliError("give BASE NEW, or --baseline FILE for a live window, not both", exit_code=2)
        base, new = _load(args.baseline), _live(args.connect, args.duration)
    elif len(args.runs) == 2:
        base, new = _load(args.runs[0]), _load(args.runs[1])
    else:
        raise CliError("give two recordings (BASE NEW), --baseline FILE, or --stages FILE", exit_code=2)
    short = _too_little(base, new, args.json)
    if short is not None:
        return short
    rows = compare(base, new, dict(args.threshold))
    new_alerts = sorted(set(new.alerts_fired) - set(base.alerts_fired))
    failed = bool(regressions(rows) or new_alerts)
    if args.json:
        out: dict[str, Any] = {"base": base.name, "new": new.name, "regression": failed, "rows": [
            {"metric": r.metric.key, "base": r.base, "new": r.new, "verdict": r.verdict, "threshold": r.threshold,
             "regression": r.regression} for r in rows],
            "top_finding": {"base": base.top_finding, "new": new.top_finding},
            "offered_load": {"base": base.offered, "new": new.offered,
                             "matched": load_mismatch(base, new) is None, "note": " ".join(load_lines(base, new))},
            "alerts_fired": {"base": list(base.alerts_fired), "new": list(new.alerts_fired)}}
        print(json.dumps(out, indent=2))
    else:
        print(visible_lines(render(base, new, rows)))  # run names, findings and alert names from the files
        bad = [r.metric.key for r in regressions(rows)] + [f"alert {a}" for a in new_alerts]
        print("\n" + (f"REGRESSION: {', '.join(bad)}" if bad else "no regression beyond the thresholds"))
        if sys.stdout.isatty() and not args.no_chart:
            print(_chart(base, new))
    return 1 if failed else 0
