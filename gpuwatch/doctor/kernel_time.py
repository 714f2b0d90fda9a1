"""CPU time the kernel spends on the feeding thread's behalf: the thread is on a core, yet its time goes to
the kernel, not to its code.

``/proc/PID/stat`` splits a process's CPU into user and system time, and counts its minor page faults (pages
mapped on first touch, which the kernel zeroes). A thread that allocates a large buffer afresh each step
(a new numpy array, ``torch.empty`` on the CPU, a bytes object of hundreds of MB) takes a fault per 4 KiB page
every time, because glibc hands blocks that large back to the kernel when they are freed: its stacks show the
line that allocates, under numpy or Python frames, and its CPU is mostly system time. A thread making many
small system calls (one-byte reads, a stat per item, yield loops) is also in the kernel, without the faults.
Either way the fix is not to move "preprocessing" elsewhere but to stop asking the kernel: reuse the buffer,
batch the calls. The frames cannot say it; the kernel's counters do (``mechanisms``' ``kernel_only`` entries).
"""

from __future__ import annotations

from gpuwatch.doctor.process_window import ProcessWindow

#: Share of the process's CPU spent in the kernel from which the kernel's work, not the code's, keeps the
#: feeding thread busy (a Python or numpy loop spends a few percent there).
KERNEL_SHARE = 0.5
#: Share of the process's CPU that the feeding thread must use for the process's system time to be its own.
FEEDING_SHARE = 0.5
#: Percent of a core the kernel must spend on the process for its work to be what holds the feeding thread.
KERNEL_BUSY = 25.0
#: Minor page faults per second from which the kernel's work is mapping and zeroing fresh memory. A process
#: that reuses its buffers takes a few hundred, one in a storm of small system calls none; one allocating a
#: 256 MiB numpy array per step took 590 000 with 4 KiB pages and 29 000 where transparent huge pages back
#: large arrays (each fault then zeroes 2 MiB), so the count, not a byte rate, is the sign.
FRESH_FAULTS_S = 5_000.0
#: What the stacks may show while the kernel does the work: computing frames (the line that allocates or
#: calls). Frames that name a kernel-heavy mechanism of their own (the allocator's pinning, storage, a
#: child's fork) keep it.
COMPUTING_FRAMES = (None, "python", "host_op", "serialization")


def kernel_mechanism(p: ProcessWindow) -> str | None:
    """``fresh_memory`` or ``syscalls`` when most of the feeding process's CPU is system time and its stacks
    (where sampled) show only computing frames; else None."""
    cpu, system = p.cpu or 0.0, p.system_cpu
    if system is None or system < KERNEL_BUSY or system < KERNEL_SHARE * cpu \
            or (p.top_thread_cpu or 0.0) < FEEDING_SHARE * cpu:
        return None
    if p.stacks is not None and p.stacks.mechanism not in COMPUTING_FRAMES:
        return None
    return "fresh_memory" if (p.minor_faults_s or 0.0) >= FRESH_FAULTS_S else "syscalls"


def kernel_line(p: ProcessWindow, mech: str) -> str:
    """"pid 4123 (python3): 92% of its CPU time in the kernel (system time), 29,000 minor page faults/s (pages
    mapped and zeroed on first touch)", for the kernel's work ``mech`` (:func:`kernel_mechanism`)."""
    line = f"{p.label}: {100 * (p.system_cpu or 0.0) / (p.cpu or 1.0):.0f}% of its CPU time in the kernel (system time)"
    if mech == "fresh_memory":
        line += f", {p.minor_faults_s or 0.0:,.0f} minor page faults/s (pages mapped and zeroed on first touch)"
    if p.stacks is not None:
        line += ": its frames show where it asks, the kernel does the work"
    return line
