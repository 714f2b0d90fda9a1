"""The JSON form of a Snapshot is lossless, strict about versions and clear about what is wrong."""

from __future__ import annotations

import json
import math

import pytest

from core.factories import full_snapshot
from gpuwatch.model.codec import SnapshotFormatError, dumps, loads, snapshot_from_dict, snapshot_to_dict
from gpuwatch.model.snapshot import GpuSample, HostSample, Snapshot


def test_a_snapshot_with_every_field_survives_a_json_round_trip() -> None:
    snap = full_snapshot()
    assert loads(dumps(snap)) == snap


def test_the_json_has_the_documented_top_level_keys() -> None:
    data = json.loads(dumps(full_snapshot()))
    assert {"time", "host", "gpus", "processes", "sources"} <= set(data)
    assert data["schema"] == 1


def test_nan_becomes_null_so_the_output_is_valid_json() -> None:
    snap = Snapshot(time=1.0, host=HostSample("h"), gpus=(GpuSample(index=0, uuid="u", gpu_util=math.nan),))
    text = dumps(snap)
    assert json.loads(text)["gpus"][0]["gpu_util"] is None


def test_unknown_keys_from_a_newer_writer_are_ignored() -> None:
    data = snapshot_to_dict(full_snapshot())
    data["gpus"][0]["future_field"] = 1
    data["future_top"] = {}
    assert snapshot_from_dict(data) == full_snapshot()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema=99), "schema 99 is not supported"),
        (lambda d: d.pop("host"), "no 'host'"),
        (lambda d: d["gpus"][0].pop("uuid"), "gpus[0]"),
        (lambda d: d.update(processes=[3]), "processes[0]: expected an object"),
        (lambda d: d["gpus"][0]["health"].update(xid_count="two"), "gpus[0].health.xid_count: expected a whole"),
        (lambda d: d["gpus"][1].update(health=[]), "gpus[1].health: expected an object"),
    ],
)
def test_a_malformed_document_names_the_bad_part(mutate, message) -> None:  # type: ignore[no-untyped-def]
    data = snapshot_to_dict(full_snapshot())
    mutate(data)
    with pytest.raises(SnapshotFormatError, match=message.replace("[", r"\[").replace("]", r"\]")):
        snapshot_from_dict(data)


@pytest.mark.parametrize("old", [lambda g: g.pop("health"), lambda g: g.update(health=None)],
                         ids=["no health key", "health null"])
def test_a_recording_made_before_health_fields_loads_with_health_unknown(old) -> None:  # type: ignore[no-untyped-def]
    data = snapshot_to_dict(full_snapshot())
    for g in data["gpus"]:
        old(g)
    snap = snapshot_from_dict(data)
    assert [g.health for g in snap.gpus] == [None, None]
    assert snap.gpus[0].gpu_util == full_snapshot().gpus[0].gpu_util


def test_health_survives_the_round_trip_field_for_field() -> None:
    health = loads(dumps(full_snapshot())).gpus[0].health
    assert health is not None and health == full_snapshot().gpus[0].health
    assert (health.xid_last, health.row_remap_pending, health.nvlink_tx_bytes) == (13, False, 123_456_789_504)


def test_profiling_prefers_gpm_and_says_where_a_value_came_from() -> None:
    gpu = full_snapshot().gpus[0]
    assert gpu.sm_active == 87.5 and gpu.prof_source("sm_active") == "gpm"
    dcgm_only = GpuSample(index=0, uuid="u", profiling={"dcgm": gpu.profiling["dcgm"]})
    assert dcgm_only.sm_active == 88.0 and dcgm_only.prof_source("sm_active") == "dcgm"
