"""The health fields of one GPU (what dcgm-exporter exports by default beyond utilisation): XID errors,
remapped memory rows, PCIe replays, memory (HBM) temperature, NVLink, fan, encoder/decoder.

They change rarely, so the NVML source reads them on a slow cadence off the sampler's tick and every
Snapshot carries the latest :class:`GpuHealth`. A field the GPU does not report is None (absent
everywhere: /metrics, the TUI's health line, alert rules), never an error.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuwatch.model.xid import describe_xid

#: An XID older than this (seconds) is no longer "recent": the health line and the XID alert let go.
XID_RECENT_S = 600.0


@dataclass(frozen=True, slots=True)
class GpuHealth:
    #: XID errors seen since gpuwatch started watching (None: this GPU cannot report XID events).
    xid_count: int | None = None
    #: The latest XID's code and when it came (Unix seconds).
    xid_last: int | None = None
    xid_last_time: float | None = None
    #: The latest XID's code while it is under :data:`XID_RECENT_S` old, else 0.
    xid_recent: int | None = None
    #: Memory rows remapped for correctable / uncorrectable errors; a remap waiting for a GPU reset;
    #: a remap that failed (the GPU needs service).
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    row_remap_pending: bool | None = None
    row_remap_failure: bool | None = None
    #: PCIe link-level retransmissions since the driver loaded.
    pcie_replays: int | None = None
    #: Memory (HBM) temperature.
    memory_temperature_c: float | None = None
    fan_speed_percent: float | None = None
    encoder_util: float | None = None
    decoder_util: float | None = None
    #: NVLink links the GPU has and how many are up; bytes sent and received over all of them (counters).
    nvlink_links: int | None = None
    nvlink_links_up: int | None = None
    nvlink_tx_bytes: int | None = None
    nvlink_rx_bytes: int | None = None

    def problems(self, now: float) -> list[str]:
        """What is wrong, worst first, in words ("" when all is well); ``now`` in Unix seconds."""
        out = []
        if self.xid_last is not None and self.xid_last_time is not None and now - self.xid_last_time < XID_RECENT_S:
            out.append(f"{describe_xid(self.xid_last)} {_ago(now - self.xid_last_time)}")
        if self.row_remap_failure:
            out.append("row remap failed")
        if self.row_remap_pending:
            out.append("row remap pending (reset the GPU)")
        if self.nvlink_links_up is not None and self.nvlink_links and self.nvlink_links_up < self.nvlink_links:
            out.append(f"NVLink {self.nvlink_links_up}/{self.nvlink_links} links up")
        return out


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s ago"
    return f"{seconds / 60:.0f} min ago"
