"""Builders of realistic Snapshots for tests: every field populated, so round trips prove losslessness."""

from __future__ import annotations

from gpuwatch.model.health import GpuHealth
from gpuwatch.model.process_sample import ProcessSample
from gpuwatch.model.snapshot import GpuSample, HostSample, Profiling, Snapshot, SourceStatus


def full_gpu(index: int = 0, util: float = 97.0) -> GpuSample:
    return GpuSample(
        index=index, uuid=f"GPU-{index:08d}-aaaa-bbbb-cccc-dddddddddddd", name="NVIDIA H200",
        pci_bus_id=f"00000000:00:0{6 + index}.0", driver_version="580.159.04", gpu_util=util, mem_util=41.0,
        mem_used_bytes=1_782_579_200, mem_total_bytes=150_754_820_096, mem_reserved_bytes=645_922_816,
        temperature_c=44.0, power_w=512.25, power_limit_w=700.0, energy_j=4069.296, sm_clock_mhz=1950.0,
        sm_clock_max_mhz=1980.0, mem_clock_mhz=3201.0, pstate=0, clock_event_mask=0x4,
        clock_events=("power_cap",), pcie_link_gen=5, pcie_link_width=16, pcie_tx_bytes_s=1.2e7,
        pcie_rx_bytes_s=7.8e7, ecc_corrected=0, ecc_uncorrected=0, mig_mode=False,
        profiling={"gpm": Profiling(sm_active=87.5, sm_occupancy=51.6, tensor_active=27.1, dram_active=32.5,
                                    graphics_active=96.5, fp64_active=0.0, fp32_active=15.2, fp16_active=3.0,
                                    pcie_tx_bytes_s=1.35e7, pcie_rx_bytes_s=7.85e7),
                   "dcgm": Profiling(sm_active=88.0, sm_occupancy=50.0)},
        extra={"DCGM_FI_DEV_XID_ERRORS": 0.0}, labels={"pod": "infer-0", "namespace": "serving"},
        health=full_health(),
    )


def full_health() -> GpuHealth:
    """A healthy GPU with every health field filled: one application XID (13) an hour before the snapshot."""
    return GpuHealth(xid_count=1, xid_last=13, xid_last_time=1_764_662_652.0, xid_recent=0,
                     remapped_rows_correctable=2, remapped_rows_uncorrectable=0, row_remap_pending=False,
                     row_remap_failure=False, pcie_replays=3, memory_temperature_c=52.0, fan_speed_percent=0.0,
                     encoder_util=0.0, decoder_util=1.0, nvlink_links=18, nvlink_links_up=18,
                     nvlink_tx_bytes=123_456_789_504, nvlink_rx_bytes=98_765_432_832)


def full_process(pid: int = 471, gpu_index: int = 0) -> ProcessSample:
    return ProcessSample(
        pid=pid, gpu_index=gpu_index, gpu_memory_bytes=1_126_170_624, sm_util=96.0, mem_util=32.0,
        kind="compute", ppid=1, user="svc", name="python3", cmdline="python3 serve.py --port 8000",
        cpu_percent=104.5, top_thread_cpu_percent=99.7, top_thread_id=pid, num_threads=57,
        threads_in_io_wait=0, rss_bytes=3_221_225_472, state="R", io_read_bytes_s=0.0,
        io_write_bytes_s=4096.0, container_id="0123456789ab" * 5 + "cdef", create_time=1764666252.5,
    )


def full_snapshot(t: float = 1_764_666_252.0, seq: int = 1) -> Snapshot:
    return Snapshot(
        time=t, seq=seq,
        host=HostSample(hostname="gpu-node-1", cpu_count=16, cpu_percent=12.5,
                        iowait_percent=0.25, load1=1.5, load5=1.2, load15=0.9, mem_total_bytes=137_438_953_472,
                        mem_used_bytes=21_474_836_480, mem_available_bytes=115_964_116_992),
        gpus=(full_gpu(0), full_gpu(1, util=3.0)),
        processes=(full_process(471, 0), full_process(472, 1)),
        sources=(SourceStatus("nvml"), SourceStatus("host"), SourceStatus("dcgm", "stale", "timed out", 4.5)),
    )
