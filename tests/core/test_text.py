"""Names that are not UTF-8 (a byte like \\xe9 in an executable's name) are made visible where a Snapshot is
built or decoded, so every consumer can encode them: /metrics, SQLite, JSON."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence

from fakes.fake_pynvml import make_fake_nvml
from prometheus_client.parser import text_string_to_metric_families

from core.factories import full_gpu, full_process, full_snapshot
from gpuwatch.exporter import Exporter, SnapshotCollector, render
from gpuwatch.model import text
from gpuwatch.model.codec import dumps, loads, snapshot_to_dict
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import HostSample, SourceStatus
from gpuwatch.sampler.collector import LiveCollector
from gpuwatch.sources.base import Reading, Source
from gpuwatch.sources.nvml import NvmlSource

LATIN1_NAME = os.fsdecode(b"caf\xe9-serve")  # what psutil gives for that executable: a lone surrogate


def test_a_byte_that_is_not_utf8_stays_visible_and_everything_else_is_kept() -> None:
    assert LATIN1_NAME == "caf\udce9-serve"
    assert text.clean(LATIN1_NAME) == "caf\\xe9-serve"
    assert text.clean("naïve 日本") == "naïve 日本"
    assert text.clean("x\ud800y") == "x\\ud800y"  # a surrogate no byte maps to (JSON "\ud800")
    for s in (LATIN1_NAME, "x\ud800y", "a\udcff\ud83d"):
        text.clean(s).encode("utf-8")


def test_a_clean_record_is_returned_as_it_is() -> None:
    snap = full_snapshot()
    assert text.record(snap) is snap


def test_a_record_with_text_that_is_utf8_but_not_ascii_is_returned_as_it_is() -> None:
    snap = dataclasses.replace(full_snapshot(), processes=(dataclasses.replace(full_process(), name="naïve-日本"),))
    assert text.record(snap) is snap


def test_one_string_that_is_not_utf8_anywhere_in_a_snapshot_is_cleaned_and_the_rest_kept() -> None:
    """Each place a string can sit (a field, a tuple, a dict key or value, a nested record) alone holds the
    one bad string; the record that comes back differs exactly there."""
    snap = full_snapshot()
    proc, gpu = full_process(), full_gpu(0)
    cases = {
        "a field": dataclasses.replace(snap, processes=(dataclasses.replace(proc, user="u\udce9"),)),
        "a tuple": dataclasses.replace(snap, processes=(dataclasses.replace(proc, thread_waits=("lock", "x\udce9")),)),
        "a dict key": dataclasses.replace(snap, gpus=(dataclasses.replace(gpu, labels={"k\udce9": "v"}),)),
        "a dict value": dataclasses.replace(snap, gpus=(dataclasses.replace(gpu, extra={"k": "v\udce9"}),)),
        "a nested record": dataclasses.replace(snap, host=HostSample(hostname="h\udce9")),
    }
    for where, bad in cases.items():
        cleaned = text.record(bad)
        assert cleaned is not bad, where
        assert "\\xe9" in repr(cleaned) and "\\udce9" not in repr(cleaned), where
        assert encodes(snapshot_to_dict(cleaned)), where  # type: ignore[arg-type]


def bad_snapshot() -> object:
    snap = full_snapshot()
    gpu = dataclasses.replace(full_gpu(0), name="H200\udce9", labels={"pod\udce9": "p\udce9"},
                              clock_events=("x\udce9",))
    proc = dataclasses.replace(full_process(), name=LATIN1_NAME, cmdline=f"./{LATIN1_NAME} --x", user="u\udce9")
    return dataclasses.replace(snap, gpus=(gpu,), processes=(proc,), host=HostSample(hostname="h\udce9"),
                               sources=(SourceStatus("nvml", "error", "OSError: \udce9"),))


def encodes(obj: object) -> bool:
    json.dumps(obj, ensure_ascii=False).encode("utf-8")
    return True


def test_every_string_of_a_snapshot_is_cleaned() -> None:
    snap = text.record(bad_snapshot())
    assert snap.processes[0].name == "caf\\xe9-serve"  # type: ignore[attr-defined]
    assert snap.gpus[0].labels == {"pod\\xe9": "p\\xe9"}  # type: ignore[attr-defined]
    assert encodes(snapshot_to_dict(snap))  # type: ignore[arg-type]


def test_a_decoded_snapshot_is_clean() -> None:
    line = dumps(bad_snapshot())  # type: ignore[arg-type]
    assert "\\udce9" in line  # JSON carries the surrogate as an escape
    snap = loads(line)
    assert snap.processes[0].command == "caf\\xe9-serve"
    assert encodes(snapshot_to_dict(snap))


class LatinSource(Source):
    name = "nvml"

    def poll(self, now: float, pids: Sequence[int]) -> Reading:
        return Reading(gpus=(full_gpu(0),), processes=(ProcessSample(pid=4242, gpu_index=0, name=LATIN1_NAME),))


class LatinHost(Source):
    name = "host"
    role = "host"

    def poll(self, now: float, pids: Sequence[int]) -> Reading:
        return Reading(host=HostSample(hostname="h"),
                       process_details={pid: {"cmdline": f"/opt/{LATIN1_NAME} --port 1"} for pid in pids})


def test_the_live_collector_cleans_what_the_sources_read_and_metrics_render() -> None:
    collector = LiveCollector([LatinSource(), LatinHost()], hostname="h")
    try:
        snap = collector.collect()
    finally:
        collector.close()
    proc = snap.processes[0]
    assert (proc.name, proc.cmdline) == ("caf\\xe9-serve", "/opt/caf\\xe9-serve --port 1")
    body = render(Exporter(SnapshotCollector(lambda: snap, lambda: (), max_process_series=8)).registry).decode()
    commands = {s.labels.get("command") for f in text_string_to_metric_families(body) for s in f.samples}
    assert "caf\\xe9-serve" in commands


def test_a_gpu_name_from_nvml_that_is_not_utf8_reaches_the_snapshot_visible() -> None:
    """pynvml hands some strings over as bytes; a strict decode failed the whole NVML source every tick."""
    fake = make_fake_nvml(processes_per_gpu=0)
    fake.gpus[0].name = b"NVIDIA H200 \xe9"  # type: ignore[assignment]
    collector = LiveCollector([NvmlSource(nvml=fake)], hostname="h")
    try:
        snap = collector.collect()
    finally:
        collector.close()
    assert snap.source("nvml").state == "ok"  # type: ignore[union-attr]
    assert [g.name for g in snap.gpus] == ["NVIDIA H200 \\xe9"]
