"""``gpuwatch rules``: check rule files, backtest them over a recording, export them to Prometheus."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from gpuwatch.alerts import DEFAULT_RULES, RuleError, RuleSet, load_rules
from gpuwatch.alerts.backtest import format_timeline, run_backtest
from gpuwatch.alerts.export import export_prometheus
from gpuwatch.alerts.kinds import kinds_markdown
from gpuwatch.alerts.loader import lint
from gpuwatch.cli.common import CliError
from gpuwatch.cli.paths import output_file, replay_file, rule_path
from gpuwatch.data import bundled_recording
from gpuwatch.model.metrics import METRICS
from gpuwatch.model.recording import RecordingError, iter_snapshots
from gpuwatch.model.series import CATALOGUE
from gpuwatch.model.visible import visible, visible_lines

DEFAULT_DIR = DEFAULT_RULES.parent


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rules", help="check, backtest and export alert rules",
                       description="Alert rules are YAML files shaped like Prometheus rule files "
                       f"(the shipped ones: {DEFAULT_RULES}).")
    rsub = p.add_subparsers(dest="rules_command", metavar="ACTION", required=True)
    c = rsub.add_parser("check", help="validate rule files; exit 1 naming file:line for each problem",
                        description="Validate rule files (directories: their *.yml and *.yaml). Every problem "
                        "is printed as file:line: rule 'X': what is wrong.")
    c.add_argument("paths", nargs="*", type=rule_path, metavar="PATH",
                   help=f"files or directories (default {DEFAULT_DIR})")
    c.set_defaults(func=run_check)
    t = rsub.add_parser("test", help="backtest rules over a recording: when each alert went pending/firing/resolved",
                        description="Run the rules over a recording (made by 'gpuwatch record') as fast as it "
                        "reads and print each alert's transitions with their times.")
    t.add_argument("--replay", type=replay_file, metavar="TRACE",
                   help="the recording to replay (default, or 'bundled': the bundled H200 recording)")
    t.add_argument("--json", action="store_true", help="print the transitions as NDJSON, one per line")
    t.add_argument("--rules", type=rule_path, action="append", metavar="PATH",
                   help=f"rule file or directory; repeatable (default {DEFAULT_DIR})")
    t.set_defaults(func=run_test)
    e = rsub.add_parser("export", help="write the rules as a Prometheus rule file",
                        description="Write a Prometheus rule file over the exporter's metric names for every rule "
                        "PromQL can express; the others are listed on stderr with the reason.")
    e.add_argument("--format", choices=["prometheus", "kubernetes"], default="prometheus",
                   help="prometheus: a rule file; kubernetes: a PrometheusRule for the Prometheus Operator")
    e.add_argument("-o", "--output", type=output_file, metavar="FILE", help="write here instead of standard output")
    e.add_argument("--recording", action="store_true", help="the efficiency recording rules (GPU-hours lost by "
                   "cause and owner, efficiency per GPU) instead of the alert rules")
    e.add_argument("--rules", type=rule_path, action="append", metavar="PATH",
                   help=f"rule file or directory; repeatable (default {DEFAULT_DIR})")
    e.set_defaults(func=run_export)
    m = rsub.add_parser("metrics", help="list the metric keys rules can use, or every series /metrics serves",
                        description="The metric catalogue: the keys rules can use with their units and /metrics "
                        "names; with --all, every series the exporter serves, with its type and labels.")
    m.add_argument("--all", action="store_true",
                   help="every series /metrics serves, as the README's markdown table")
    m.set_defaults(func=run_metrics)
    k = rsub.add_parser("kinds", help="list the kinds of condition a rule can use (alerts/README.md's table)",
                        description="Every kind of condition, its fields (? = optional) and when it holds, as the "
                        "markdown table of alerts/README.md.")
    k.set_defaults(func=run_kinds)
    s = rsub.add_parser("show", help="print the shipped rules (a starting point for your own file)",
                        description="Print the shipped rule file, to copy and edit: "
                        "'gpuwatch rules show > my-rules.yml', then point [alerts] rule_paths at it.")
    s.set_defaults(func=run_show)


def _load(paths: list[Path] | None) -> RuleSet:
    try:
        return load_rules(paths or [DEFAULT_DIR])
    except RuleError as exc:
        for line in exc.shown:  # each kind of problem a few times, then counted
            print(visible(line), file=sys.stderr)
        n = len(exc.errors)
        raise CliError(f"{n} problem{'s' if n != 1 else ''} in the rule files") from None


def run_check(args: argparse.Namespace) -> int:
    rules = _load(args.paths)
    for warning in lint(rules):
        print(f"warning: {visible(warning)}", file=sys.stderr)
    export = export_prometheus(rules)
    print(f"OK: {len(rules)} rules in {len(rules.groups)} groups "
          f"({len(export.exported)} expressible in PromQL)")
    return 0


def run_test(args: argparse.Namespace) -> int:
    rules = _load(args.rules)
    trace = args.replay or bundled_recording()
    if args.replay is None and not trace.exists():
        raise CliError(f"no bundled recording at {trace}; give one with --replay FILE", exit_code=2)
    try:
        bt = run_backtest(rules, iter_snapshots(trace))
    except RecordingError as exc:
        raise CliError(str(exc), exit_code=2) from None
    if args.json:
        for tr in bt.transitions:
            sys.stdout.write(json.dumps(tr.to_dict(), sort_keys=True) + "\n")
    else:
        sys.stdout.write(visible_lines(format_timeline(bt, str(trace))))  # alert labels quote process names
    return 0


def prometheus_rule(rule_file: str, name: str = "gpuwatch") -> str:
    """A Prometheus rule file as a Prometheus Operator ``PrometheusRule`` called ``name`` (what its
    ServiceMonitor's Prometheus picks up in a cluster), with the rule file's header comments kept."""
    header = [line for line in rule_file.splitlines() if line.startswith("#")]
    if header:
        header[0] = header[0].replace("--format prometheus", "--format kubernetes").replace(
            "--recording'", "--recording --format kubernetes'")
    resource = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
                "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "gpuwatch"}},
                "spec": {"groups": yaml.safe_load(rule_file)["groups"]}}
    body = yaml.safe_dump(resource, sort_keys=False, allow_unicode=True, width=10_000)
    return "\n".join(header) + "\n" + body


def run_export(args: argparse.Namespace) -> int:
    if args.recording:
        from gpuwatch.efficiency.recording_rules import RULES, rule_file

        text = rule_file()
        if args.format == "kubernetes":  # beside the alerts' PrometheusRule, under its own name
            text = prometheus_rule(text, name="gpuwatch-efficiency")
        _write(text, args.output, f"wrote {len(RULES)} recording rules to {args.output}")
        return 0
    export = export_prometheus(_load(args.rules))
    if args.format == "kubernetes":
        export.text = prometheus_rule(export.text)
    if args.output:
        args.output.write_text(export.text, encoding="utf-8")
        print(f"wrote {len(export.exported)} rules to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(export.text)
    for name, origin, why in export.skipped:
        print(f"not exported: {name} ({origin}): {why}", file=sys.stderr)
    return 0


def _write(text: str, output: Path | None, message: str) -> None:
    if output:
        output.write_text(text, encoding="utf-8")
        print(message, file=sys.stderr)
    else:
        sys.stdout.write(text)


def run_metrics(args: argparse.Namespace) -> int:
    if args.all:
        print(series_markdown())
        return 0
    width = max(len(k) for k in METRICS)
    for key, spec in METRICS.items():
        print(f"{key:<{width}}  {spec.unit or '-':<8}  {spec.prom_name or '(not exported)':<48}  {spec.help}")
    return 0


def series_markdown() -> str:
    """The README's table of /metrics, one row per series, generated from the catalogue."""
    rows = ["| series | type | labels | meaning |", "|---|---|---|---|"]
    rows += [f"| `{s.name}` | {s.kind} | {', '.join(s.labels) or '-'} | {s.help.replace('|', '/')} |"
             for s in CATALOGUE]
    return "\n".join(rows)


def run_kinds(args: argparse.Namespace) -> int:
    print(kinds_markdown())
    return 0


def run_show(args: argparse.Namespace) -> int:
    sys.stdout.write(DEFAULT_RULES.read_text(encoding="utf-8"))
    print(f"# {DEFAULT_RULES}", file=sys.stderr)
    return 0
