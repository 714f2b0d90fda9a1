"""The daemon samples on its own cadences where a dashboard's would cost it more than its readers gain."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuwatch.cli.common import add_sampling_args, options_from_args
from gpuwatch.cli.daemon import DAEMON_PROCESS_UTIL_S, options_from_config
from gpuwatch.config.loader import load_config
from gpuwatch.sources.nvml.processes import UTIL_MIN_PERIOD_S


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_sampling_args(parser)
    return parser.parse_args(list(argv))


def test_the_daemon_asks_per_process_utilisation_once_per_scrape_and_the_dashboard_every_five_seconds(
        tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("")
    assert options_from_args(_args()).process_util_period == UTIL_MIN_PERIOD_S == 5.0
    assert options_from_config(load_config(path), _args()).process_util_period == DAEMON_PROCESS_UTIL_S == 15.0


def test_a_daemon_sampling_slower_than_that_asks_at_each_sample(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("[sampler]\ninterval = 30\n")
    assert options_from_config(load_config(path), _args()).process_util_period == 30.0
