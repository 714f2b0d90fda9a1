"""Every stage of the reference service runs on the CPU at tiny size and reports sane numbers."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest
from tools import require_torch

torch = require_torch()

from gpuwatch.cli.main import main  # noqa: E402
from gpuwatch.workload.config import SIZES, STAGES, WorkloadConfig  # noqa: E402
from gpuwatch.workload.engine import GraphEngine, graph_sizes  # noqa: E402
from gpuwatch.workload.model import build_model  # noqa: E402
from gpuwatch.workload.run import run_stage  # noqa: E402

pytestmark = pytest.mark.torch  # CI's second pass, with torch's CPU build


def quick(stage: str, **kw: object) -> WorkloadConfig:
    base: dict[str, object] = {"stage": stage, "device": "cpu", "size": "tiny", "duration_s": 0.4,
                               "warmup_s": 0.1, "workers": 1}
    return WorkloadConfig(**{**base, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_serves_requests_and_reports_latency_percentiles(stage: str) -> None:
    result = run_stage(quick(stage))
    assert result.stage == stage and result.requests > 0 and result.req_per_s > 0
    assert result.p50_ms is not None and result.p95_ms is not None and result.p99_ms is not None
    assert 0 < result.p50_ms <= result.p95_ms <= result.p99_ms
    if stage in ("naive", "workers"):
        assert result.mean_batch == 1.0  # one request at a time
    if stage == "bf16":
        check = result.notes["bf16_check"]
        assert 0 < check["max_rel_err"] < 0.05 and check["top1_agreement"] >= 0.9
    if stage == "compiled":
        assert result.notes["compiler"] == "eager"  # CUDA graphs need a GPU; the CPU falls back cleanly


def test_batched_stage_batches() -> None:
    result = run_stage(quick("batched", duration_s=0.6))
    assert result.mean_batch is not None and result.mean_batch > 1.5


@pytest.mark.serial  # latency and rates against a bound: alone, not beside other tests
def test_an_attachment_cache_removes_the_slow_store_from_the_request_path() -> None:
    slow = run_stage(quick("naive", io=True, io_latency_ms=50.0))
    # 8 attachments: the warm-up reads each once, after that the cache serves them
    cached = run_stage(quick("naive", io=True, io_latency_ms=50.0, cache=True, warmup_s=0.6))
    assert slow.p50_ms is not None and cached.p50_ms is not None
    assert slow.p50_ms >= 50.0 and cached.p50_ms < slow.p50_ms - 30.0


def test_bursty_traffic_pauses_between_bursts() -> None:
    result = run_stage(quick("naive", traffic="bursty", duration_s=0.8))
    assert result.requests > 0


@pytest.mark.serial  # latency and rates against a bound: alone, not beside other tests
def test_bursty_open_loop_latency_measures_the_server_not_the_off_phase() -> None:
    # 40 req/s with a lot of headroom: arrivals come only in the 200 ms on-phases, so no request waits
    # through an off-phase (a generator that held off-phase arrivals until the next burst showed ~200 ms)
    result = run_stage(quick("batched", traffic="bursty", rate=40.0, duration_s=2.0, warmup_s=0.3, workers=2))
    assert result.requests > 40 and result.p99_ms is not None
    assert result.p99_ms < 100.0, result


@pytest.mark.parametrize(("cap", "sizes"), [
    (1, [1]), (16, [1, 2, 4, 8, 16]), (64, [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]),
    (256, [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64, 96, 128, 160, 192, 224, 256])])
def test_cuda_graphs_are_captured_for_sizes_that_waste_at_most_7_rows_up_to_64(
        cap: int, sizes: list[int]) -> None:
    assert graph_sizes(cap) == sizes
    for n in range(1, cap + 1):
        padded = next(s for s in sizes if s >= n)
        assert (padded - n <= 7 if n <= 64 else padded < n * 1.5)


@pytest.mark.parametrize(("size", "caps"), [("tiny", {16: 32, 32: 32, 64: 16}),
                                            ("base", {64: 256, 128: 128, 256: 64})])
def test_long_buckets_get_smaller_batches(size: str, caps: dict[int, int]) -> None:
    assert WorkloadConfig(size=size).caps() == caps


def test_cli_prints_json_for_scripts(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["workload", "--stage", "naive", "--device", "cpu", "--duration", "0.3", "--warmup", "0.1",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stage"] == "naive" and out["requests"] > 0


@pytest.mark.parametrize(("argv", "message"), [
    (["--cache"], "--cache caches the --io attachments: add --io"),
    (["--workers", "0"], "--workers must be at least 1"),
    (["--plan", "{}"], "--plan: not a phase plan (KeyError: 'phases')"),
    (["--plan", '{"phases":[{"shape":"calm","rate":5,"seconds":2}]}'], "--plan: bad phase"),
])
def test_bad_options_are_one_line_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workload", "--device", "cpu", *argv]) == 1
    assert message in capsys.readouterr().err


def eager_capture(fn: Callable[[], torch.Tensor], pool: object) -> tuple[Callable[[], object], torch.Tensor]:
    """A stand-in for a CUDA graph on the CPU: replay recomputes into the same static output."""
    out = fn()
    return (lambda: out.copy_(fn())), out


def test_graph_engine_pads_to_a_captured_size_and_returns_only_the_real_rows() -> None:
    model = build_model(SIZES["tiny"], "cpu")
    engine = GraphEngine(model, torch.device("cpu"), {16: 8, 32: 4}, capture=eager_capture)
    assert sorted(engine.graphs) == [(16, 1), (16, 2), (16, 4), (16, 8), (32, 1), (32, 2), (32, 4)]
    torch.manual_seed(1)
    for n in (3, 2, 8):  # 3 rows run in the 4-row graph, then 2 rows in it reuse 2 stale (valid) rows
        ids = torch.randint(4, 100, (n, 16), dtype=torch.int32)
        lengths = torch.randint(1, 17, (n,), dtype=torch.int32)
        logits, done = engine.submit(ids, lengths)
        done.synchronize()
        with torch.inference_mode():
            expected = model(ids, lengths)
        assert logits.shape == (n, 16) and torch.allclose(logits, expected, atol=1e-5)


@pytest.mark.serial  # latency and rates against a bound: alone, not beside other tests
def test_open_loop_rate_sets_the_offered_load() -> None:
    result = run_stage(quick("naive", rate=40.0, duration_s=1.0))
    assert 20 <= result.req_per_s <= 60  # Poisson arrivals at 40/s: well within three standard deviations
    assert result.notes["offered_rate"] == 40.0


def test_the_workload_command_runs_in_its_own_process_and_says_when_it_is_ready() -> None:
    import json
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "gpuwatch", "workload", "--stage", "naive", "--device", "cpu",
                           "--duration", "0.3", "--warmup", "0.1", "--json"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["requests"] > 0
    assert "gpuwatch-workload: ready" in proc.stderr
