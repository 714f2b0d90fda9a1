"""The sampler: no source can stall a tick; failing sources are marked and the others carry on."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from core.factories import full_gpu, full_snapshot
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.recording import RecordingHeader, RecordingWriter
from gpuwatch.model.snapshot import GpuSample, Profiling, Snapshot
from gpuwatch.sampler import History, Sampler
from gpuwatch.sampler.collector import LiveCollector, merge_gpu_lists
from gpuwatch.sources.base import Reading, Source
from gpuwatch.sources.replay import ReplayProducer


class ScriptedGpuSource(Source):
    """A GPU source whose behaviour each test sets: answer, raise, or hang until released."""

    def __init__(self, name: str = "nvml", deadline_s: float = 0.2) -> None:
        self.name = name
        self.deadline_s = deadline_s
        self.mode = "ok"
        self.release = threading.Event()
        self.polls = 0
        self.polls_while_hung = 0

    def poll(self, now: float, pids: Sequence[int]) -> Reading:
        self.polls += 1
        if self.mode == "hang":
            self.polls_while_hung += 1
            self.release.wait(10)
        if self.mode == "raise":
            raise RuntimeError("GPU fell off the bus")
        return Reading(gpus=(full_gpu(0),), processes=(ProcessSample(pid=4242, gpu_index=0),))


class RecordingHostSource(Source):
    name = "host"
    role = "host"

    def __init__(self) -> None:
        self.seen_pids: list[tuple[int, ...]] = []

    def poll(self, now: float, pids: Sequence[int]) -> Reading:
        self.seen_pids.append(tuple(pids))
        return Reading(process_details={pid: {"user": "svc", "cpu_percent": 99.0} for pid in pids})


class HangingHostSource(RecordingHostSource):
    """A host source that answers, or hangs until released (a /proc read stuck on a process in D state)."""

    def __init__(self, deadline_s: float = 2.0) -> None:
        super().__init__()
        self.deadline_s = deadline_s
        self.mode = "ok"
        self.release = threading.Event()
        self.polls_while_hung = 0

    def poll(self, now: float, pids: Sequence[int]) -> Reading:
        if self.mode == "hang":
            self.polls_while_hung += 1
            self.release.wait(10)
        return super().poll(now, pids)


def test_host_source_is_given_only_the_pids_on_the_gpus_and_details_are_merged() -> None:
    host = RecordingHostSource()
    collector = LiveCollector([ScriptedGpuSource(), host])
    snap = collector.collect()
    assert host.seen_pids == [(4242,)]
    assert snap.processes[0].user == "svc" and snap.processes[0].cpu_percent == 99.0
    assert [s.state for s in snap.sources] == ["ok", "ok"]
    collector.close()


@pytest.mark.serial  # bounds CPU share, wall time or RSS: measured alone, after the parallel part
def test_a_hung_source_goes_stale_without_stalling_later_ticks_and_recovers() -> None:
    gpu = ScriptedGpuSource(deadline_s=0.2)
    collector = LiveCollector([gpu, RecordingHostSource()])
    assert collector.collect().gpus[0].gpu_util == 97.0
    gpu.mode = "hang"
    t0 = time.monotonic()
    stale = collector.collect()
    second = collector.collect()  # the call is still hung: this tick must not wait again
    elapsed = time.monotonic() - t0
    assert stale.source("nvml").state == "stale" and "no answer within 0.2 s" in (stale.source("nvml").message or "")
    assert second.source("nvml").state == "stale"
    assert elapsed < 0.35, "a hung call must cost one deadline, not one per tick"
    # identity kept, measurements dropped: a stale source says nothing it does not know
    assert stale.gpus[0].uuid == full_gpu(0).uuid and stale.gpus[0].gpu_util is None
    assert stale.source("host").state == "ok"
    gpu.mode = "ok"
    gpu.release.set()
    time.sleep(0.05)
    recovered = collector.collect()
    assert recovered.source("nvml").state == "ok" and recovered.gpus[0].gpu_util == 97.0
    collector.close()


class WhereItRan(RecordingHostSource):
    def __init__(self) -> None:
        super().__init__()
        self.threads: set[str] = set()

    def poll(self, now: float, pids: Sequence[int]) -> Reading:
        self.threads.add(threading.current_thread().name)
        return super().poll(now, pids)


def _sampling(sources: list[Source]) -> tuple[Sampler, list[Snapshot]]:
    got: list[Snapshot] = []
    sampler = Sampler(LiveCollector(sources), interval=0.05)
    sampler.subscribe(got.append)
    return sampler.start(), got


def _wait_for(test: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not test() and time.monotonic() < deadline:
        time.sleep(0.01)
    return test()


def test_the_sampler_polls_its_sources_on_its_own_thread_with_no_hand_off() -> None:
    host = WhereItRan()
    sampler, got = _sampling([ScriptedGpuSource(), host])
    try:
        assert _wait_for(lambda: len(got) >= 3)
    finally:
        sampler.stop()
    assert host.threads == {"gpuwatch-sampler"}  # not a worker's: no wake-ups handing the poll over and back


@pytest.mark.parametrize("hung", ["nvml", "host"])
def test_a_poll_hung_on_the_sampler_thread_is_given_up_and_sampling_goes_on_from_a_new_thread(hung: str) -> None:
    gpu, host = ScriptedGpuSource(deadline_s=0.2), HangingHostSource(deadline_s=0.2)
    culprit = gpu if hung == "nvml" else host
    sampler, got = _sampling([gpu, host])
    try:
        assert _wait_for(lambda: len(got) >= 2)
        culprit.mode = "hang"
        hung_at = len(got)
        assert _wait_for(lambda: any(s.source(hung).state == "stale" for s in got[hung_at:])), \
            "no snapshot came with the hung source marked stale"
        stale_from = next(i for i in range(hung_at, len(got)) if got[i].source(hung).state == "stale")
        assert _wait_for(lambda: len(got) >= stale_from + 5)  # and ticks go on while the call stays hung
        other = "host" if hung == "nvml" else "nvml"
        assert all(s.source(hung).state == "stale" for s in got[stale_from:stale_from + 5])
        assert all(s.source(other).state == "ok" for s in got[stale_from:stale_from + 5])
        assert "no answer within 0.2 s" in (got[stale_from].source(hung).message or "")
        assert culprit.polls_while_hung == 1  # the hung call is not made again
        # it answers at last: the hung thread ends without publishing, the new one reads the source again
        culprit.mode = "ok"
        culprit.release.set()
        back = len(got)
        assert _wait_for(lambda: any(s.source(hung).state == "ok" for s in got[back:]))
        assert _wait_for(lambda: _sampler_threads() == 1)
    finally:
        sampler.stop()
    seqs = [s.seq for s in got]
    assert seqs == sorted(set(seqs)), "a snapshot was published twice or out of order"
    assert sampler.error is None


def _sampler_threads() -> int:
    return sum(t.name == "gpuwatch-sampler" and t.is_alive() for t in threading.enumerate())


def test_a_raising_source_is_marked_error_with_its_message_and_the_host_goes_on() -> None:
    gpu = ScriptedGpuSource()
    gpu.mode = "raise"
    snap = LiveCollector([gpu, RecordingHostSource()]).collect()
    status = snap.source("nvml")
    assert status is not None and status.state == "error" and "GPU fell off the bus" in (status.message or "")
    assert snap.source("host").state == "ok"


def test_a_second_gpu_source_fills_gaps_and_keeps_both_profiling_backends() -> None:
    nvml = (GpuSample(index=0, uuid="GPU-a", gpu_util=50.0, profiling={"gpm": Profiling(sm_active=40.0)}),)
    dcgm = (GpuSample(index=0, uuid="GPU-a", gpu_util=99.0, power_w=300.0,
                      profiling={"dcgm": Profiling(sm_active=41.0)}, labels={"pod": "p"}),)
    merged = merge_gpu_lists(nvml, dcgm)[0]
    assert merged.gpu_util == 50.0 and merged.power_w == 300.0
    assert set(merged.profiling) == {"gpm", "dcgm"} and merged.labels == {"pod": "p"}


def test_subscribers_get_every_snapshot_and_a_failing_one_does_not_stop_sampling() -> None:
    got: list[int] = []

    def broken(_: object) -> None:
        raise ValueError("consumer bug")

    sampler = Sampler(LiveCollector([ScriptedGpuSource(), RecordingHostSource()]), interval=0.05)
    sampler.subscribe(broken)
    sampler.subscribe(lambda s: got.append(s.seq))
    with sampler:
        deadline = time.monotonic() + 3
        while len(got) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert got[:4] == [1, 2, 3, 4]
    assert len(sampler.history) >= 4


def test_intervals_below_50_ms_are_refused() -> None:
    with pytest.raises(ValueError, match=r"at least 0\.05"):
        Sampler(LiveCollector([]), interval=0.01)


def test_history_keeps_a_fixed_number_of_snapshots() -> None:
    history = History(capacity=3)
    for i in range(10):
        history.append(full_snapshot(t=float(i), seq=i))
    assert [s.seq for s in history] == [7, 8, 9]
    assert [s.time for s in history.since(8.0)] == [8.0, 9.0]


def _recording(tmp_path: Path, n: int = 4, interval: float = 1.0) -> Path:
    path = tmp_path / "r.ndjson.gz"
    with RecordingWriter(path, RecordingHeader(created=0.0, interval_s=interval)) as w:
        for i in range(n):
            w.write(full_snapshot(t=1000.0 + i * interval, seq=i))
    return path


def test_replay_at_full_speed_ends_after_the_last_snapshot(tmp_path: Path) -> None:
    rp = ReplayProducer(_recording(tmp_path), speed=0)
    snaps = []
    while (s := rp.collect()) is not None:
        snaps.append(s)
        assert rp.delay_after(s) == 0.0
    assert len(snaps) == 4 and all(s.origin == "recording:r.ndjson.gz" and s.is_recording for s in snaps)


def test_replay_paces_by_recorded_time_divided_by_speed(tmp_path: Path) -> None:
    rp = ReplayProducer(_recording(tmp_path, interval=2.0), speed=4)
    delays = [rp.delay_after(s) for s in (rp.collect(), rp.collect(), rp.collect()) if s is not None]
    assert delays == [0.5, 0.5, 0.5]


def test_a_looping_replay_keeps_time_moving_forward(tmp_path: Path) -> None:
    rp = ReplayProducer(_recording(tmp_path, n=3), speed=0, loop=True)
    times = [s.time for s in (rp.collect() for _ in range(7)) if s is not None]
    assert times == sorted(times) and len(set(times)) == 7
    assert times[3] - times[2] == 1.0
