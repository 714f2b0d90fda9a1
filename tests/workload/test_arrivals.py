"""Arrival processes: driven with a fake clock, the generator stamps each request with its scheduled arrival,
bursty traffic arrives only inside its on-phases at the same mean rate, and phase plans count what is late."""

from __future__ import annotations

import itertools
import statistics

import pytest

from gpuwatch.workload.arrivals import BURST_ON_S, BURST_PERIOD_S, Arrivals, in_burst, parse_mix
from gpuwatch.workload.config import WorkloadConfig
from gpuwatch.workload.frontend import Frontend, FrontendSpec
from gpuwatch.workload.phases import Control, Phase, PhaseBook, Plan, Schedule


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def drive(frontend: Frontend, clock: FakeClock, until: float, busy_s: float = 0.0) -> list[tuple[float, float]]:
    """Run the generator like a serving loop: wait when told to, spend ``busy_s`` on each request.
    Returns (stamped arrival, time the generator made it) per request."""
    made = []
    while clock.now < until:
        got = frontend.poll()
        if isinstance(got, float):
            clock.now += got
            continue
        made.append((got[0], clock.now))
        clock.now += busy_s
    return made


def frontend(traffic: str, rate: float, clock: FakeClock) -> Frontend:
    cfg = WorkloadConfig(stage="naive", traffic=traffic, rate=rate)  # type: ignore[arg-type]
    return Frontend(FrontendSpec(cfg, 0, None), clock=clock)


def test_bursty_arrivals_keep_the_mean_rate_and_none_is_stamped_in_an_off_phase() -> None:
    clock = FakeClock(1000.0)
    made = drive(frontend("bursty", 200.0, clock), clock, until=1040.0)
    arrivals = [a for a, _ in made]
    grid = 1000.0 - 1000.0 % BURST_PERIOD_S
    assert all(in_burst(a, grid) for a in arrivals)
    assert len(arrivals) / 40.0 == pytest.approx(200.0, rel=0.05)  # the same mean rate as steady traffic
    # inside the on-phase requests come twice as fast as the mean
    on_gaps = [b - a for a, b in itertools.pairwise(arrivals)
               if int((a - grid) / BURST_PERIOD_S) == int((b - grid) / BURST_PERIOD_S)]
    assert statistics.mean(on_gaps) == pytest.approx(BURST_ON_S / BURST_PERIOD_S / 200.0, rel=0.1)


@pytest.mark.parametrize("traffic", ["steady", "longtail", "bursty"])
def test_a_generator_that_falls_behind_stamps_the_scheduled_arrival_not_the_time_it_got_round_to_it(
        traffic: str) -> None:
    clock = FakeClock(50.0)
    made = drive(frontend(traffic, 100.0, clock), clock, until=60.0, busy_s=0.02)  # 50 req/s made, 100 offered
    lags = [at - a for a, at in made]
    assert min(lags) >= 0.0
    assert lags[-1] > 1.0  # the backlog grows, and every request carries it as latency
    assert all(b >= a for (a, _), (b, _) in itertools.pairwise(made))


def test_longtail_arrivals_are_poisson_at_the_rate_and_its_documents_are_mostly_short_some_long() -> None:
    clock = FakeClock(0.0)
    gen = frontend("longtail", 300.0, clock)
    made = drive(gen, clock, until=20.0)
    gaps = [b[0] - a[0] for a, b in itertools.pairwise(made)]
    assert len(made) / 20.0 == pytest.approx(300.0, rel=0.05)
    assert statistics.pstdev(gaps) == pytest.approx(statistics.mean(gaps), rel=0.1)  # exponential gaps
    longtail = sorted(gen.make(kind="longtail")[1] for _ in range(200))
    steady = sorted(gen.make(kind="steady")[1] for _ in range(200))
    assert longtail[100] < steady[100] * 0.75 and longtail[-1] == steady[-1]  # mostly short, some as long


def test_a_mixed_stream_is_the_three_shapes_superposed_at_their_weights() -> None:
    arrivals = Arrivals("mixed", 400.0, 0.0, seed=3, mix={"steady": 0.5, "longtail": 0.25, "bursty": 0.25})
    seen = [arrivals.next() for _ in range(16000)]
    span = seen[-1][0]
    kinds = {k: sum(1 for _, kind in seen if kind == k) for k in ("steady", "longtail", "bursty")}
    assert sum(kinds.values()) / span == pytest.approx(400.0, rel=0.03)
    assert kinds["steady"] / len(seen) == pytest.approx(0.5, abs=0.03)
    assert kinds["bursty"] / len(seen) == pytest.approx(0.25, abs=0.03)
    assert all(in_burst(t, 0.0) for t, kind in seen if kind == "bursty")
    assert not all(in_burst(t, 0.0) for t, kind in seen if kind == "steady")
    assert [t for t, _ in seen] == sorted(t for t, _ in seen)


@pytest.mark.parametrize(("text", "message"), [
    ("steady=1,bogus=2", "SHAPE one of steady, longtail, bursty"), ("steady", "SHAPE=WEIGHT"),
    ("steady=x", "must be a number"), ("steady=-1", "cannot be negative"), ("steady=0", "at least one positive"),
])
def test_a_bad_mix_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_mix(text)


def test_phases_follow_the_control_and_due_arrivals_never_made_count_against_their_phase() -> None:
    clock = FakeClock(10.0)
    plan = Plan((Phase("steady", 100.0, 2.0, "g"), Phase("bursty", 100.0, 2.0, "g")), settle_s=0.3, tail_s=0.25)
    control, missed = Control(), [0, 0]
    book = PhaseBook(plan, control, missed, slo_ms=100.0, clock=clock)
    schedule = Schedule(plan, control, share=1.0, seed=1, missed=missed)
    book.start()
    answered = 0
    while clock.now < 11.0:  # the first second: answer every request 10 ms after it arrives
        got = schedule.due(clock.now)
        if isinstance(got, float):
            clock.now += got
            continue
        book.answered(got[0], 0.010)
        answered += 1
    clock.now = 12.0  # then stall: the rest of phase 0's arrivals are never made
    assert book.advance() and control.read() == (1, 12.0, 14.0)
    schedule.due(clock.now)  # the generator follows the control to phase 1...
    assert schedule.index == 1
    first = book.verdict(0)
    assert first["unanswered"] == missed[0] > 50  # ...counting what was due in phase 0 and never made
    assert first["passed"] is False and first["dropped_pct"] > 1.0
    assert first["requests"] == pytest.approx(0.7 * 100, rel=0.3)  # counted from settle_s, answered at 10 ms
    assert first["p50_ms"] == pytest.approx(10.0)
    # the never-made ones count in p99 at the tail's age, a lower bound of how long they would have waited
    assert first["p99_ms"] == pytest.approx(250.0) and first["p99_is_lower_bound"] is True
    assert answered > first["requests"]  # those in the settling time are not counted


def test_a_failed_rung_ends_its_ladder_and_the_next_group_runs() -> None:
    clock = FakeClock(0.0)
    plan = Plan((Phase("steady", 10.0, 1.0, "a"), Phase("steady", 20.0, 1.0, "a"),
                 Phase("bursty", 10.0, 1.0, "b")), settle_s=0.1, tail_s=0.2)
    book = PhaseBook(plan, Control(), [0, 0, 0], slo_ms=100.0, clock=clock)
    book.start()
    book.answered(0.5, 0.5)  # one answer, 500 ms late: the rung fails
    clock.now = 1.0
    assert book.advance()
    assert [s.index for s in book.stats] == [0, 2]
    book.answered(1.5, 0.005)
    clock.now = 2.0
    assert not book.advance()
    assert [r["passed"] for r in book.results()] == [False, True]
