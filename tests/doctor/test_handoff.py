"""A GPU loop that blocks handing its results to a slower consumer (a post-processing thread or process behind
a bounded queue) waits on what comes after it. Its stacks say so (a queue's put, not its get): the finding names
the consumer and a fix downstream, never a data loader to widen, feeders to speed up, or an idle server."""

from __future__ import annotations

from gpuwatch.doctor import diagnose, top_problem
from gpuwatch.doctor.mechanisms import classify, hands_off
from gpuwatch.model.feeders import FeederSample

from .synthetic import SITE, STDLIB, Load, native, py, thread, window

#: The GPU thread: a launch now and then, and most samples waiting to put its results on a full queue.
LAUNCH = thread(native("libcuda.so.1", "cuLaunchKernel"), py(f"{SITE}/torch/nn/functional.py", "linear"),
                py("serve.py", "step"), count=2)
PUT = thread(native("libc.so.6", "futex_wait"), py(f"{STDLIB}/threading.py", "Condition.wait"),
             py(f"{STDLIB}/queue.py", "Queue.put"), py("serve.py", "publish"), py("serve.py", "loop"), idle=True,
             count=18)
MP_PUT = thread(native("libc.so.6", "sem_wait"), py(f"{STDLIB}/multiprocessing/queues.py", "Queue.put"),
                py("serve.py", "publish"), py("serve.py", "loop"), idle=True, count=18)
#: Its consumer thread, busy detokenising in Python.
DETOKENISE = thread(py("post.py", "detokenise"), py("post.py", "postprocess"),
                    py(f"{STDLIB}/threading.py", "Thread.run"), tid=472, count=20)
#: The same loop waiting on its input instead: a queue's get.
GET = thread(native("libc.so.6", "futex_wait"), py(f"{STDLIB}/threading.py", "Condition.wait"),
             py(f"{STDLIB}/queue.py", "Queue.get"), py("serve.py", "next_batch"), py("serve.py", "loop"), idle=True,
             count=18)


def test_a_put_on_a_queue_is_a_hand_off_and_a_get_is_not() -> None:
    assert classify(PUT) == classify(MP_PUT) == classify(GET) == "lock"  # a queue either way
    assert hands_off(PUT) and hands_off(MP_PUT) and not hands_off(GET)


def test_a_loop_blocked_handing_results_to_a_busy_thread_names_that_thread() -> None:
    f = top_problem(diagnose(window(Load(util=8.0, sm=5.0, thread=10.0, cpu=110.0,
                                         stacks=(LAUNCH, PUT, DETOKENISE)))))
    assert f is not None and f.code == "idle_breakdown", f
    assert "serve.py:publish" in f.title and "handing its results to a full queue" in f.title
    assert any(e.startswith("the threads that take its results") and "post.py:detokenise" in e for e in f.evidence)
    assert "consumer" in f.fix and "num_workers" not in f.fix


def test_a_loop_blocked_handing_results_to_a_busy_child_is_not_data_loader_bound() -> None:
    post = FeederSample(pid=940, feeds=471, relation="child", name="python3", cpu_percent=99.0,
                        top_thread_cpu_percent=99.0, cmdline="python3 post.py")
    findings = diagnose(window(Load(util=8.0, sm=5.0, thread=2.0, workers=1, workers_cpu=99.0,
                                    stacks=(LAUNCH, MP_PUT), feeders=(post,))))
    assert [f.code for f in findings if f.code in ("dataloader_bound", "feeder_bound", "demand_bound")] == []
    f = top_problem(findings)
    assert f is not None and f.code == "idle_breakdown" and "handing its results" in f.title, f
    assert any(e.startswith("its consumer: child pid 940") for e in f.evidence), f.evidence


def test_the_same_loop_waiting_on_its_input_from_a_busy_child_is_still_fed_by_it() -> None:
    post = FeederSample(pid=940, feeds=471, relation="child", name="python3", cpu_percent=99.0,
                        top_thread_cpu_percent=99.0, cmdline="python3 loader.py")
    findings = diagnose(window(Load(util=8.0, sm=5.0, thread=2.0, workers=1, workers_cpu=99.0,
                                    stacks=(LAUNCH, GET), feeders=(post,))))
    assert any(f.code in ("dataloader_bound", "feeder_bound") for f in findings), [f.code for f in findings]
