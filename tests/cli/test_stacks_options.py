"""Stacks are on by default on every road that samples live, and one flag or one config key turns them off."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gpuwatch.cli.common import add_sampling_args, options_from_args
from gpuwatch.cli.daemon import options_from_config
from gpuwatch.config.loader import ConfigError, load_config
from gpuwatch.runtime.build import SamplingOptions


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_sampling_args(parser)
    return parser.parse_args(list(argv))


def test_stacks_are_on_unless_no_stacks_is_given() -> None:
    assert SamplingOptions().stacks
    assert options_from_args(_args()).stacks
    assert not options_from_args(_args("--no-stacks")).stacks


@pytest.mark.parametrize(("toml", "flag", "on"), [
    ("", False, True),
    ("[sources]\nstacks = false\n", False, False),
    ("[sources]\nstacks = true\n", True, False),
])
def test_the_daemon_takes_stacks_from_its_config_and_the_flag(tmp_path: Path, toml: str, flag: bool, on: bool) -> None:
    path = tmp_path / "config.toml"
    path.write_text(toml)
    args = _args(*(["--no-stacks"] if flag else []))
    assert options_from_config(load_config(path), args).stacks is on


def test_a_wrong_value_for_the_key_is_one_clear_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[sources]\nstacks = "sometimes"\n')
    with pytest.raises(ConfigError, match=r"config.toml:2: sources.stacks: expected true or false"):
        load_config(path)
