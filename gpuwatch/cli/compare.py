"""``gpuwatch compare``: two runs side by side, better/same/worse per row; exits 1 on a regression."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuwatch.cli.common import CliError

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
(use it as a CI gate), 2 bad input. Thresholds: --threshold p99_ms=5% (of the base value) or
--threshold mem_peak_gib=2 (in the row's unit); keys:
{keys}.

--stages FILE cuts a 'gpuwatch validate' recording into its stage runs and judges each step against the one
before on what it sets out to improve, at one offered load (--rate; --details gives the workload's numbers)."""


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
    p.add_argument("runs", nargs="*", type=Path, metavar="RECORDING", help="BASE and NEW recordings")
    p.add_argument("--baseline", type=Path, metavar="FILE", help="compare a live window against this recording")
    p.add_argument("--connect", metavar="URL", default="http://127.0.0.1:19464",
                   help="with --baseline: the daemon whose stream is the new run (default %(default)s)")
    p.add_argument("--for", dest="duration", type=float, default=60.0, metavar="S",
                   help="with --baseline: seconds of the daemon's stream to take (default 60)")
    p.add_argument("--stages", type=Path, metavar="FILE", help="a 'gpuwatch validate' recording: judge every step")
    p.add_argument("--details", type=Path, metavar="JSON", help="with --stages: validate's validation-details.json")
    p.add_argument("--rate", type=float, default=None, metavar="R",
                   help="with --stages: the offered rate to compare at (default: the highest in the recording)")
    p.add_argument("--out", type=Path, metavar="DIR", help="with --stages: also write each stage run as a recording "
                   "there (STAGE[@RATE].ndjson.gz, the workload's numbers in its header)")
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
    from gpuwatch.model.codec import snapshot_from_dict

    snaps = []
    end = time.monotonic() + seconds
    try:
        with requests.get(url.rstrip("/") + "/api/v1/stream", stream=True, timeout=10) as resp:
            resp.raise_for_status()
            for line in resp.iter_lines():
                if line:
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

    return draw([Panel(f"{which} {run.name}: GPU-Util and SM activity (%) over seconds", run.series["t"],
                       {"GPU-Util": run.series["gpu_util"], "SM activity": run.series["sm_active"]}, ylim=(0, 100))
                 for which, run in (("BASE", base), ("NEW", new))])


def _stages(args: argparse.Namespace) -> int:
    from gpuwatch.efficiency.compare import step_table
    from gpuwatch.efficiency.runstats import run_stats
    from gpuwatch.efficiency.stages import STEP_TARGETS, at_rate, cut_stages
    from gpuwatch.model.recording import RecordingError, load

    try:
        runs = cut_stages(load(args.stages), json.loads(args.details.read_text()) if args.details else None)
    except (OSError, RecordingError, ValueError) as exc:
        raise CliError(f"cannot read {args.stages} or --details: {exc}", exit_code=2) from None
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
    print(f"Does every step help? {args.stages.name}, at {where}")
    for s in table:
        r = s.row
        print(f"  {s.previous:>9} -> {s.stage:<9} {r.metric.label:<16} {_fmt(r.base):>8} -> {_fmt(r.new):<8} "
              f"{r.verdict}" + (f" (margin ±{r.threshold:.3g})" if r.threshold is not None else ""))
    return 0 if all(s.helps for s in table) else 1


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
        print(render(base, new, rows))
        bad = [r.metric.key for r in regressions(rows)] + [f"alert {a}" for a in new_alerts]
        print("\n" + (f"REGRESSION: {', '.join(bad)}" if bad else "no regression beyond the thresholds"))
        if sys.stdout.isatty() and not args.no_chart:
            print(_chart(base, new))
    return 1 if failed else 0
