"""Pages no exporter should send, and the source's answer to each: a field no GPU can have is dropped (not
the GPU, not the scrape), a page of thousands of GPUs is refused quickly, an unknown charset is read as UTF-8."""

from __future__ import annotations

import time

import pytest

from gpuwatch.sources.dcgm import DcgmParseError, DcgmSource
from gpuwatch.sources.dcgm.convert import to_gpu_samples
from gpuwatch.sources.dcgm.parse import MAX_GPUS, parse_body
from sources.dcgm.exporter import FakeExporter

PAGE = """\
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a"} 40
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a"} 1e308
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a"} 300
DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-b"} 41
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b"} 1024
"""


def test_one_impossible_value_drops_that_field_only() -> None:
    gpus = to_gpu_samples(parse_body(PAGE))
    assert [(g.uuid, g.temperature_c, g.mem_used_bytes) for g in gpus] == [
        ("GPU-a", 40.0, None), ("GPU-b", 41.0, 1024 * 2**20)]
    assert gpus[0].power_w == 300.0


def test_a_page_of_ten_thousand_gpus_is_refused_in_one_line_quickly() -> None:
    page = "".join(f'DCGM_FI_DEV_GPU_TEMP{{gpu="{i}",UUID="GPU-{i}"}} 40\n' for i in range(10_000))
    started = time.monotonic()
    with pytest.raises(DcgmParseError, match=f"more than {MAX_GPUS} GPUs"):
        parse_body(page)
    assert time.monotonic() - started < 1.0


def test_an_unknown_charset_is_read_as_utf8(exporter: FakeExporter) -> None:
    exporter.behave(mode="body", body=PAGE.encode(), charset="x-no-such-charset")
    gpus = DcgmSource(exporter.url).poll(0.0, ()).gpus
    assert gpus is not None and len(gpus) == 2

