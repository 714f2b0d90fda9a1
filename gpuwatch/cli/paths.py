"""The argparse types of every option that names a file or directory, so each is checked as it is parsed.

A path can name a FIFO that never delivers a byte (or never takes one), a device that never ends
(``/dev/zero``), a directory where a file is due, or a file where a directory is due. Each option says
which of these it takes through its ``type``; the check is a ``stat`` (which never blocks, even on a FIFO),
and the refusal is argparse's one line ("argument --details: /dev/zero: a character device, not a regular
file"). A path that does not exist yet passes: the command says what is missing (or creates an output).
The reads themselves go through :mod:`gpuwatch.model.files` as well, which also bounds their size.

``tests/cli/test_file_options.py`` walks every parser and fails on any option that names a file without
one of these types, so a new option cannot skip the check.
"""

from __future__ import annotations

import argparse
import os
import stat
from collections.abc import Callable
from pathlib import Path

from gpuwatch.data import BUNDLED_ALIAS, replay_path
from gpuwatch.model import files
from gpuwatch.model.visible import visible


def _mode(text: str) -> int | None:
    """``st_mode`` of the path (links followed), None when there is nothing there (or it cannot be seen)."""
    try:
        return os.stat(text).st_mode
    except (OSError, ValueError):  # missing, no permission, a NUL byte: the command's own read says why
        return None


def _refuse(text: str, mode: int, wanted: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(f"{visible(text)}: {files.kind(mode)}, not {wanted}")


def _regular(text: str) -> str:
    mode = _mode(text)
    if mode is not None and not stat.S_ISREG(mode):
        raise _refuse(text, mode, "a regular file")
    return text


def _directory(text: str) -> str:
    mode = _mode(text)
    if mode is not None and not stat.S_ISDIR(mode):
        raise _refuse(text, mode, "a directory")
    return text


def _file_or_directory(text: str) -> str:
    mode = _mode(text)
    if mode is not None and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise _refuse(text, mode, "a regular file or a directory")
    return text


def input_file(text: str) -> Path:
    """A file to read (a recording, a token, a JSON report): a regular file, or nothing there yet."""
    return Path(_regular(text))


def replay_file(text: str) -> Path:
    """A recording to play: ``bundled`` (the recording shipped with gpuwatch), else as :func:`input_file`."""
    return replay_path(text) if text == BUNDLED_ALIAS else input_file(text)


def input_file_name(text: str) -> str:
    """:func:`input_file` kept as text (for options that override a config key of type text)."""
    return _regular(text)


def rule_path(text: str) -> Path:
    """A rule file or a directory of them."""
    return Path(_file_or_directory(text))


def input_dir(text: str) -> Path:
    """A directory to read files from."""
    return Path(_directory(text))


def output_file(text: str) -> Path:
    """A file to write: a regular file (replaced) or a new one. A FIFO would block the open for ever and a
    device would swallow the output, so both are refused like a directory."""
    return Path(_regular(text))


def output_dir(text: str) -> Path:
    """A directory to write into: an existing directory or a new one."""
    return Path(_directory(text))


def output_dir_name(text: str) -> str:
    """:func:`output_dir` kept as text (``daemon --state-dir`` overrides a config key of type text)."""
    return _directory(text)


#: Every path type, with what it must be: the test of every parser looks options up here.
KINDS: dict[Callable[[str], object], str] = {
    input_file: "file", replay_file: "file", input_file_name: "file", rule_path: "file-or-directory",
    input_dir: "directory",
    output_file: "file", output_dir: "directory", output_dir_name: "directory",
}

__all__ = ["KINDS", "input_dir", "input_file", "input_file_name", "output_dir", "output_dir_name", "output_file",
           "replay_file", "rule_path"]
