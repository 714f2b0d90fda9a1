"""Every stage of the reference service runs on the CPU at tiny size and reports sane numbers."""

from __future__ import annotations

import sys

import pytest

from gpuwatch.cli.main import main
from gpuwatch.workload.config import STAGES, WorkloadConfig
from gpuwatch.workload.engine import graph_sizes
from gpuwatch.workload.run import batch_caps

pytest.importorskip("torch")

from gpuwatch.workload.run import run_stage


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


def test_an_attachment_cache_removes_the_slow_store_from_the_request_path() -> None:
    slow = run_stage(quick("naive", io=True, io_latency_ms=50.0))
    # 8 attachments: the warm-up reads each once, after that the cache serves them
    cached = run_stage(quick("naive", io=True, io_latency_ms=50.0, cache=True, warmup_s=0.6))
    assert slow.p50_ms is not None and cached.p50_ms is not None
    assert slow.p50_ms >= 50.0 and cached.p50_ms < slow.p50_ms - 30.0


def test_bursty_traffic_pauses_between_bursts() -> None:
    result = run_stage(quick("naive", traffic="bursty", duration_s=0.8))
    assert result.requests > 0


@pytest.mark.parametrize(("cap", "sizes"), [(1, [1]), (16, [1, 4, 8, 16]), (128, [1, 4, 16, 64, 128]),
                                            (256, [1, 4, 16, 64, 128, 256])])
def test_cuda_graphs_are_captured_for_few_batch_sizes_with_at_most_double_padding_above_16(
        cap: int, sizes: list[int]) -> None:
    assert graph_sizes(cap) == sizes


@pytest.mark.parametrize(("size", "caps"), [("tiny", {16: 32, 32: 32, 64: 16}),
                                            ("base", {64: 256, 128: 256, 256: 128})])
def test_long_buckets_get_smaller_batches(size: str, caps: dict[int, int]) -> None:
    assert batch_caps(WorkloadConfig(size=size)) == caps


def test_cli_prints_json_for_scripts(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["workload", "--stage", "naive", "--device", "cpu", "--duration", "0.3", "--warmup", "0.1",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["stage"] == "naive" and out["requests"] > 0


def test_without_torch_the_cli_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    assert main(["workload", "--device", "cpu", "--duration", "1"]) == 2
    assert "pip install 'gpuwatch-monitor[workload]'" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["--cache"], "--cache caches the --io attachments: add --io"),
    (["--workers", "0"], "--workers must be at least 1"),
])
def test_bad_options_are_one_line_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workload", "--device", "cpu", *argv]) == 1
    assert message in capsys.readouterr().err
