"""On Kubernetes the process table names each process's pod (a POD column, and the filter finds it); off
Kubernetes the table is unchanged."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from conftest import replay_app
from synthetic import write_recording

from gpuwatch.model.recording import RecordingHeader, RecordingWriter, iter_snapshots
from gpuwatch.tui.widgets.process_table import ProcessTable

SIZE = (160, 50)


def shown(app: object) -> list[str]:
    return [c.key for c in app.query_one(ProcessTable).columns_shown]  # type: ignore[attr-defined]


def pids(table: ProcessTable) -> list[int]:
    return [int(k.split(":")[0]) for k in table.keys]


async def test_processes_in_pods_get_a_pod_column_and_the_filter_finds_them(tmp_path: Path) -> None:
    src = write_recording(tmp_path / "plain.ndjson.gz", 20)
    path = tmp_path / "pods.ndjson.gz"
    out = RecordingWriter(path, RecordingHeader(created=0.0, interval_s=1.0, hostname="h200-node-1"))
    for snap in iter_snapshots(src):
        out.write(dataclasses.replace(snap, processes=tuple(
            dataclasses.replace(p, namespace="inference", pod="llama-0", container="vllm") if p.pid == 4101 else p
            for p in snap.processes)))
    out.close()
    app = replay_app(path, 5)
    async with app.run_test(size=SIZE) as pilot:
        assert "pod" in shown(app)
        table = app.query_one(ProcessTable)
        row = table.cells[next(k for k in table.keys if k.startswith("4101:"))]
        assert "inference/llama-0" in [str(c) for c in row]
        await pilot.press("slash", *list("llama"), "enter")
        assert pids(table) == [4101]


async def test_off_kubernetes_there_is_no_pod_column(tmp_path: Path) -> None:
    app = replay_app(write_recording(tmp_path / "plain.ndjson.gz", 20), 5)
    async with app.run_test(size=SIZE):
        assert "pod" not in shown(app)
