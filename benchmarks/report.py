"""Results -> one table (console and Markdown) and BENCHMARKS.md.

BENCHMARKS.md is generated: the H200 results (results-h200.json) first, the GPU-less local results
(results-local.json) after them, then the hand-written analysis in benchmarks/analysis.md. Regenerate
with ``python3 benchmarks/report.py`` after copying new results in.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
Row = tuple[str, str, str, str, str]  # what, gpuwatch, beside it, target, verdict

GROWTH_LIMIT_MIB = 1.0


def _f(value: Any, unit: str = "", digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def _ms(r: dict[str, Any], key: str) -> str:
    med, p90 = r.get(key), r.get(key.replace("_ms", "_p90_ms"))
    return "n/a" if med is None else f"{med:.2f} / {_f(p90)} ms"


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "MISSED")


def _cmp(a: Any, b: Any, test: Callable[[float, float], bool]) -> bool | None:
    return None if a is None or b is None else bool(test(float(a), float(b)))


def rows(r: dict[str, Any]) -> list[Row]:
    """The table: one row per measured thing, our number beside the anchors'."""
    out: list[Row] = []
    if r.get("tick_ms") is not None:
        anchors = ", ".join(f"{name} {_ms(r, key)}" for name, key in (
            ("nvitop", "nvitop_refresh_ms"), ("gpustat", "gpustat_query_ms"), ("nvidia-smi", "nvidia_smi_ms"))
            if r.get(key) is not None) or "none here"
        out.append(("tick, median / p90", _ms(r, "tick_ms"), anchors, "<= nvitop / 15",
                    _verdict(_cmp(r.get("tick_ms"), r.get("nvitop_refresh_ms"), lambda a, b: a * 15 <= b))))
        out.append(("raw floor: NVML calls / + host reads", _ms(r, "raw_nvml_ms"), _ms(r, "raw_nvml_host_ms"),
                    "tick <= 1.5x floor", _verdict(_cmp(r.get("tick_ms"), r.get("raw_nvml_host_ms"),
                                                        lambda a, b: a <= 1.5 * b))))
        out.append(("tick / floor (NVML+host), tick / NVML", _f(r.get("tick_over_raw_nvml_host"), "x"),
                    _f(r.get("tick_over_raw_nvml"), "x"), "", ""))
    if r.get("sampling_cpu_pct_100ms") is not None:
        out.append(("sampling alone at 0.1 s: CPU of one core", _f(r["sampling_cpu_pct_100ms"], "%"),
                    "every cadence included", "<= 3 %",
                    _verdict(_cmp(r["sampling_cpu_pct_100ms"], 3.0, lambda a, b: a <= b))))
    if r.get("daemon_cpu_pct_1s") is not None:
        beside = "; ".join(f"{name} {_f(r.get(k + '_cpu_pct'), '%')} {_f(r.get(k + '_rss_mib'), ' MiB', 1)}"
                           for name, k in (("nvidia-smi -l 1", "nvidia_smi_loop"),
                                           ("nvitop-exporter 1 s", "nvitop_exporter"))
                           if r.get(k + "_cpu_pct") is not None)
        out.append(("daemon at 1 s, scraped every 15 s: CPU of one core",
                    _f(r.get("daemon_cpu_pct_1s"), "%"), beside or "-", "<= 0.4x nvitop-exporter",
                    _verdict(_cmp(r.get("daemon_cpu_pct_1s"), r.get("nvitop_exporter_cpu_pct"),
                                  lambda a, b: a <= 0.4 * b))))
        out.append(("daemon at 1 s: RSS", _f(r.get("daemon_rss_mib"), " MiB", 1),
                    f"nvitop-exporter {_f(r.get('nvitop_exporter_rss_mib'), ' MiB', 1)}", "<= 1.1x nvitop-exporter",
                    _verdict(_cmp(r.get("daemon_rss_mib"), r.get("nvitop_exporter_rss_mib"),
                                  lambda a, b: a <= 1.1 * b))))
        out.append(("daemon at 0.1 s: CPU, RSS",
                    f"{_f(r.get('daemon_cpu_pct_100ms'), '%')} {_f(r.get('daemon_rss_mib_100ms'), ' MiB', 1)}",
                    "", "", ""))
    live = r.get("doctor_live")
    if isinstance(live, dict) and live.get("stacks"):
        out.append((f"gpuwatch doctor live beside {live.get('fault')}: CPU per second of watching",
                    _f(live["stacks"].get("added_pct_of_core"), "%"),
                    f"--no-stacks {_f((live.get('no_stacks') or {}).get('added_pct_of_core'), '%')}"
                    + (f"; a {live['stacks'].get('wall_long_s', 0):.0f} s watch, start-up and report included: "
                       f"{_f(live['stacks'].get('long_run_pct_of_core'), '%')} (stacks add "
                       f"{_f(live.get('stacks_over_no_stacks_long_pct_of_core'), '%')})"
                       if live.get("stacks_over_no_stacks_long_pct_of_core") is not None else ""), "<= 1 %",
                    _verdict(_cmp(live["stacks"].get("added_pct_of_core"), 1.0, lambda a, b: a <= b))))
    if r.get("alerts_eval_ms_1s") is not None:
        out.append(("alert rules with full windows, 1 GPU: per snapshot, CPU",
                    f"1 s: {_f(r.get('alerts_eval_ms_1s'), ' ms')}, {_f(r.get('alerts_cpu_pct_1s'), '%', 3)}",
                    f"0.1 s: {_f(r.get('alerts_eval_ms_100ms'), ' ms')}, {_f(r.get('alerts_cpu_pct_100ms'), '%')}",
                    "(part of the daemon's)", ""))
    if r.get("tui_cpu_pct") is not None:
        beside = "; ".join(f"{name} {_f(r.get(k + '_cpu_pct'), '%')} {_f(r.get(k + '_rss_mib'), ' MiB', 1)}"
                           for name, k in (("nvitop -i 1", "nvitop_tui"), ("nvitop", "nvitop_default_tui"),
                                           ("gpustat -i 1", "gpustat_tui")) if r.get(k + "_cpu_pct") is not None)
        out.append(("dashboard at 1 s, 160x50 pty: CPU, RSS",
                    f"{_f(r.get('tui_cpu_pct'), '%')} {_f(r.get('tui_rss_mib'), ' MiB', 1)}", beside or "-",
                    "CPU <= nvitop -i 1", _verdict(_cmp(r.get("tui_cpu_pct"), r.get("nvitop_tui_cpu_pct"),
                                                         lambda a, b: a <= b))))
        out.append(("dashboard at 1 s: RSS", _f(r.get("tui_rss_mib"), " MiB", 1),
                    f"nvitop -i 1 {_f(r.get('nvitop_tui_rss_mib'), ' MiB', 1)}", "<= 1.1x nvitop -i 1",
                    _verdict(_cmp(r.get("tui_rss_mib"), r.get("nvitop_tui_rss_mib"), lambda a, b: a <= 1.1 * b))))
    if r.get("tui_tty_bytes_per_s") is not None:
        nvitop = r.get("nvitop_tty_bytes_per_s")
        out.append(("dashboard at 1 s: bytes written to the terminal", _f(r["tui_tty_bytes_per_s"], " B/s", 0),
                    "-" if nvitop is None else f"nvitop -i 1 {_f(nvitop, ' B/s', 0)}", "<= nvitop -i 1",
                    _verdict(_cmp(r["tui_tty_bytes_per_s"], nvitop, lambda a, b: a <= b))))
    if r.get("scrape_ms_8x256") is not None:
        out.append(("/metrics scrape, 8 GPUs x 256 procs (fake NVML)",
                    f"{_f(r.get('scrape_ms_8x256'), ' ms')} / p90 {_f(r.get('scrape_p90_ms_8x256'), ' ms')}",
                    f"{_f(r.get('scrape_bytes_8x256'))} bytes", "", ""))
    if r.get("leak_ticks") is not None:
        growth = r.get("rss_growth_mib_100k", r.get("rss_growth_mib_partial"))
        warm = r.get("rss_growth_mib_10k_to_end")
        out.append((f"daemon RSS growth, tick {r.get('leak_ticks_base')} -> {r.get('leak_ticks')}",
                    _f(growth, " MiB"), f"RSS {_f(r.get('leak_rss_mib_1k'), ' MiB')} -> "
                                        f"{_f(r.get('leak_rss_mib_10k'), ' MiB')} at 10k -> "
                                        f"{_f(r.get('leak_rss_mib_end'), ' MiB')}",
                    f"<= {GROWTH_LIMIT_MIB:g} MiB", _verdict(_cmp(growth, GROWTH_LIMIT_MIB, lambda a, b: a <= b))))
        out.append(("  of which after tick 10 000 (warm)", _f(warm, " MiB"), "", f"<= {GROWTH_LIMIT_MIB:g} MiB",
                    _verdict(_cmp(warm, GROWTH_LIMIT_MIB, lambda a, b: a <= b))))
    return out


def console_table(r: dict[str, Any]) -> str:
    table = [("measure", "gpuwatch", "beside it", "target", "verdict"), *rows(r)]
    widths = [min(60, max(len(row[i]) for row in table)) for i in range(5)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in table)


def markdown_table(r: dict[str, Any]) -> str:
    lines = ["| measure | gpuwatch | beside it | target | verdict |", "| --- | --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows(r)]
    return "\n".join(lines)


def _meta(r: dict[str, Any]) -> str:
    m = r.get("meta", {})
    versions = ", ".join(f"{k} {v}" for k, v in sorted(m.get("versions", {}).items()))
    return "\n".join(f"- **{k}**: {v}" for k, v in (
        ("date (UTC)", m.get("date")), ("machine", m.get("machine")), ("GPU", m.get("gpu")),
        ("driver / NVML", m.get("driver")), ("python", m.get("python")), ("versions", versions),
        ("load", m.get("load")), ("command", m.get("command"))) if v)


def current_notes(notes: list[str]) -> list[str]:
    """The notes that describe measured results: a merged report keeps each run's notes, and a run in
    which a phase did not run (values None) or failed where a later run measured it says nothing current."""
    kept = [n for n in notes if "None" not in n]
    measured = {n.split(":", 1)[0].lower() for n in kept if not n.startswith("Phase ")}
    out: list[str] = []
    for n in kept:
        phase = n.split()[1].lower() if n.startswith("Phase ") else None
        if (phase is None or phase not in measured) and n not in out:
            out.append(n)
    return out


def section(title: str, r: dict[str, Any]) -> str:
    notes = current_notes(r.get("notes", []))
    parts = [f"## {title}", "", _meta(r), "", markdown_table(r), ""]
    if notes:
        parts += ["Notes from the run:", "", *[f"- {n}" for n in notes], ""]
    if r.get("scale_grid"):
        from benchmarks.scale_grid import markdown as grid_markdown

        parts += ["Scale: one tick and one /metrics rendering by GPUs and processes per GPU:", "",
                  *grid_markdown(r["scale_grid"]), ""]
    if r.get("memory_steps"):
        from benchmarks.memory import markdown as memory_markdown

        parts += ["Where the memory goes: RSS of a fresh interpreter after each step, measured in this run:", "",
                  *memory_markdown(r["memory_steps"], r.get("memory_mappings") or {}), ""]
    if r.get("profiles_summary"):
        parts += ["Where the time goes (profiles from this run, top frames by own samples):", "", "```",
                  r["profiles_summary"].rstrip(), "```", ""]
    return "\n".join(parts)


def write_benchmarks_md(path: Path, results: dict[str, dict[str, Any]]) -> None:
    parts = ["# Benchmarks", "",
             "Generated by `python3 benchmarks/run.py` (`bash benchmarks/gpu_run.sh` on the GPU machine; "
             "no GPU: `--local`) and `python3 benchmarks/report.py`. Do not edit by hand: the analysis lives "
             "in `benchmarks/analysis.md`, the raw numbers in `benchmarks/results-*.json`.", ""]
    if "h200" in results:
        gpu = str(results["h200"].get("meta", {}).get("gpu", "")).split(",")[0].removeprefix("1 x ")
        parts.append(section(f"GPU machine{': ' + gpu if gpu else ''} (the run that counts)", results["h200"]))
    if "local" in results:
        parts.append(section("Local, no GPU (fake NVML and replayed recordings; 2-core shared machine)",
                             results["local"]))
    analysis = HERE / "analysis.md"
    if analysis.exists():
        parts += [analysis.read_text().rstrip(), ""]
    path.write_text("\n".join(parts))


def load_results(folder: Path) -> dict[str, dict[str, Any]]:
    found = {}
    for name in ("h200", "local"):
        f = folder / f"results-{name}.json"
        if f.exists():
            found[name] = json.loads(f.read_text())
    return found


def main(argv: list[str]) -> int:
    folder = Path(argv[1]) if len(argv) > 1 else HERE
    results = load_results(folder)
    if not results:
        print(f"no results-h200.json or results-local.json in {folder}", file=sys.stderr)
        return 1
    write_benchmarks_md(HERE.parent / "BENCHMARKS.md", results)
    for name, r in results.items():
        print(f"== {name}\n{console_table(r)}\n")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE.parent))  # run as a script: the lazy imports of benchmarks.* need the root
    sys.exit(main(sys.argv))
