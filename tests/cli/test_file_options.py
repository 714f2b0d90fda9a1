"""Every option of every command that names a file or directory refuses what it cannot use: ``/dev/zero``
(a device that never ends), a FIFO nobody writes to (a read would block for ever), and a directory where a
file is due (or a file where a directory is due). The list of options is taken from the parsers themselves,
so an option added tomorrow is checked by this test too, and one added without a checked type fails it."""

from __future__ import annotations

import argparse
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuwatch.cli.main import build_parser, main
from gpuwatch.cli.paths import KINDS

#: What a file-naming option looks like in --help: the type is what matters, the metavar catches an option
#: declared without one.
FILE_METAVARS = {"FILE", "PATH", "DIR", "TRACE", "RECORDING"}


def _options(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                                             argparse.Action]]:
    """(command words, action) of every argument of every command and subcommand."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, (*prefix, name))
        elif prefix:
            yield prefix, action


def _file_options() -> list[tuple[tuple[str, ...], argparse.Action]]:
    return [(cmd, a) for cmd, a in _options(build_parser())
            if a.type in KINDS or a.type is Path or a.metavar in FILE_METAVARS]


def _id(item: tuple[tuple[str, ...], argparse.Action]) -> str:
    cmd, action = item
    return " ".join(cmd) + " " + (action.option_strings[-1] if action.option_strings else action.dest)


OPTIONS = _file_options()


def test_the_parsers_name_files_in_many_places_and_each_has_a_checked_type() -> None:
    unchecked = [_id(o) for o in OPTIONS if o[1].type not in KINDS]
    assert unchecked == [], "these options name a file without a type from gpuwatch.cli.paths"
    named = {_id(o) for o in OPTIONS}
    # the options a user met unchecked before are among them
    assert {"validate --from-details", "report --token-file", "compare --details", "compare runs",
            "daemon --config", "rules check paths"} <= named
    assert len(OPTIONS) >= 20


@pytest.fixture(scope="module")
def specials(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("specials")
    os.mkfifo(d / "fifo")
    (d / "adir").mkdir()
    (d / "afile").write_text("{}\n")
    return {"device": "/dev/zero", "fifo": str(d / "fifo"), "directory": str(d / "adir"),
            "file": str(d / "afile")}


def _wrong_things(kind: str) -> tuple[str, ...]:
    return {"file": ("device", "fifo", "directory"), "directory": ("device", "fifo", "file"),
            "file-or-directory": ("device", "fifo")}[kind]


def _argv(cmd: tuple[str, ...], action: argparse.Action, value: str) -> list[str]:
    if not action.option_strings:  # a positional: compare's two recordings, rules check's paths
        return [*cmd, value, value] if action.nargs == "*" else [*cmd, value]
    return [*cmd, action.option_strings[-1], value]


class _Hung(Exception):
    pass


def _on_alarm(signum: int, frame: object) -> None:
    raise _Hung


@pytest.mark.parametrize("option", OPTIONS, ids=[_id(o) for o in OPTIONS])
def test_each_file_option_refuses_a_device_a_fifo_and_the_wrong_kind_of_path_in_one_line(
        option: tuple[tuple[str, ...], argparse.Action], specials: dict[str, str],
        capsys: pytest.CaptureFixture[str]) -> None:
    cmd, action = option
    kind = KINDS[action.type]  # type: ignore[index]
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        for wrong in _wrong_things(kind):
            path = specials[wrong]
            signal.alarm(10)  # a FIFO opened for reading would block here for ever
            try:
                with pytest.raises(SystemExit) as exit_:
                    main(_argv(cmd, action, path))
            finally:
                signal.alarm(0)
            err = capsys.readouterr().err
            message = [line for line in err.splitlines() if "error:" in line]
            assert exit_.value.code == 2, err
            assert len(message) == 1 and path in message[0] and "not a" in message[0], err
            assert "Traceback" not in err
    finally:
        signal.signal(signal.SIGALRM, previous)


def test_a_path_that_does_not_exist_yet_is_left_to_the_command(tmp_path: Path) -> None:
    """An output is created, an input's absence is said by the command: the type only refuses what is there."""
    for kind_type in KINDS:
        assert str(kind_type(str(tmp_path / "new"))) == str(tmp_path / "new")
