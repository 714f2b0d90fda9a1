"""``python -m gpuwatch.workload``: the workload command alone; ``gpuwatch validate`` starts each stage this
way. The CLI imports only the chosen command, so this loads nothing of the dashboard or the daemon."""

from __future__ import annotations

import sys

from gpuwatch.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["workload", *sys.argv[1:]]))
