"""The injected fault classes and the finding the doctor should rank first for each (no torch here:
the CLI, validate and the tests read it)."""

from __future__ import annotations

#: fault -> (the finding code the doctor should rank first, what the fault does)
FAULTS: dict[str, tuple[str, str]] = {
    "python_preprocess": ("input_cpu_bound", "the thread that owns the GPU tokenises in Python between batches"),
    "launch_bound": ("launch_bound", "one thread launches thousands of tiny kernels"),
    "pageable_h2d": ("h2d_copies", "large host-to-device copies from pageable memory, little compute"),
    "off_cpu_wait": ("off_cpu_wait", "each batch waits on slow storage reads (sleeping, not computing)"),
    "dataloader_workers": ("dataloader_bound", "two DataLoader workers, each saturated, feed an idle GPU"),
    "memory_leak": ("memory_leak", "GPU memory grows about 1 GiB/s and is never freed"),
    "memory_churn": ("memory_churn", "large allocations rise and fall every few seconds (empty_cache)"),
    "fp32_matmul": ("fp32_no_tensor", "large FP32 matmuls with TF32 off: tensor cores idle"),
    "dram_bound": ("memory_bandwidth_bound", "large elementwise passes: DRAM bandwidth is the limit"),
    "idle_memory": ("memory_idle", "a process holds a fifth of GPU memory and does nothing"),
    "time_slicing": ("time_slicing", "three processes share one GPU, each saturating it alone"),
    "healthy": ("healthy", "large BF16 matmuls: tensor cores busy, nothing to fix"),
}
