"""``python tests/hwm.py ARGS``: gpuwatch's command line, writing the process's own peak RSS in KiB (``VmHWM``) to
the file named by ``$HWM_FILE`` at exit. ``ru_maxrss`` is no measure of a child: Linux carries the parent's
peak across fork and exec, so a child of a 300 MB test runner reads 300 MB however little it used."""

from __future__ import annotations

import atexit
import os
import sys


def _write() -> None:
    path = os.environ.get("HWM_FILE")
    if not path:
        return
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                with open(path, "w") as out:
                    out.write(line.split()[1])


def peak_mib(path: str | os.PathLike[str]) -> float:
    with open(path) as f:
        return int(f.read()) / 1024


if __name__ == "__main__":
    atexit.register(_write)
    from gpuwatch.cli.main import main

    sys.exit(main(sys.argv[1:]))
