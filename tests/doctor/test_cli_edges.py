"""``gpuwatch doctor`` at its edges, run as a user runs it (a real process, its output piped): it ends, it
says when a pid is unknown, it takes -v after the command, and piped output keeps its lines whole."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from gpuwatch.data import bundled_recording

ROOT = Path(__file__).resolve().parents[2]


def gpuwatch(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuwatch", *argv], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def test_loop_over_a_recording_without_a_duration_is_refused_instead_of_running_forever() -> None:
    done = gpuwatch("doctor", "--replay", str(bundled_recording()), "--loop", timeout=30)
    assert done.returncode == 2
    assert "--loop it would never end" in done.stderr and "--duration" in done.stderr


def test_loop_with_a_duration_reads_that_much_of_the_looped_recording_and_ends() -> None:
    done = gpuwatch("doctor", "--replay", str(bundled_recording()), "--loop", "--duration", "900", "--speed", "0")
    assert done.returncode == 0, done.stderr
    assert "902 samples" in done.stdout  # 426 a pass: more than twice round


def test_an_unknown_pid_exits_non_zero_and_says_which_processes_were_seen() -> None:
    done = gpuwatch("doctor", "--replay", str(bundled_recording()), "--pid", "99999")
    assert done.returncode == 1
    assert "process 99999 was not seen on any GPU" in done.stderr and "558, 603" in done.stderr


def test_a_known_pid_still_exits_0() -> None:
    assert gpuwatch("doctor", "--replay", str(bundled_recording()), "--pid", "558").returncode == 0


def test_verbose_is_accepted_after_the_command_as_before_it() -> None:
    after = gpuwatch("doctor", "-v", "--replay", str(bundled_recording()), "--json")
    before = gpuwatch("-v", "doctor", "--replay", str(bundled_recording()), "--json")
    assert after.returncode == before.returncode == 0, after.stderr
    assert after.stdout == before.stdout


def test_piped_text_output_is_not_wrapped_at_80_columns() -> None:
    done = gpuwatch("doctor", "--replay", str(bundled_recording()))
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) > 100  # the fix lines are long sentences
    assert all(line.startswith(("gpuwatch doctor", "1.", "2.", "3.", "4.", "5.", "   ")) or not line
               for line in lines), done.stdout  # no sentence broken onto a line of its own
