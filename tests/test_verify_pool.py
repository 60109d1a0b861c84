"""The time bound and the worker pool: pathological inputs time out from any calling context,
workers that overrun or die are replaced, and nothing outlives the verifier."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from composition_rl.grading import Outcome, Verifier, VerifyConfig, shared_verifier
from composition_rl.grading.groups import classify_group, group_counts, grpo_advantages, pass_rate

BOUND = 1.0
MARGIN = 0.5  # the allowance over the bound

# Each of these hangs Math-Verify for minutes when called without a timeout.
PATHOLOGICAL = {
    "power_tower": (r"so the answer is $\boxed{10^{10^{10^{10}}}}$", "5"),
    "nested_braces": (r"\boxed{" + "{" * 5000 + "1" + "}" * 5000 + "}", "2"),
    "one_megabyte": ("reasoning " * 1000 + r"\boxed{" + "+".join(["1"] * 500_000) + "}", "5"),
}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture(scope="module")
def bounded():
    # One worker per pathological input, so the three run side by side.
    with Verifier(VerifyConfig(timeout_s=BOUND, workers=len(PATHOLOGICAL))) as v:
        assert v.score(r"\boxed{1}", "1").outcome is Outcome.CORRECT  # warm: start-up is not the bound
        yield v


def _check_all_timed_out(results, wall):
    assert len(results) == len(PATHOLOGICAL), results  # zip below would stop at the shorter
    for name, r in zip(PATHOLOGICAL, results):
        assert r.outcome is Outcome.TIMEOUT, (name, r)
        assert r.score == 0.0
        assert BOUND <= r.elapsed_s <= BOUND + MARGIN, (name, r.elapsed_s)
    assert wall <= BOUND + MARGIN, wall


def test_megabyte_response_is_a_megabyte():
    assert len(PATHOLOGICAL["one_megabyte"][0]) > 1_000_000


def test_pathological_inputs_time_out_from_main_thread(bounded):
    t = time.monotonic()
    results = bounded.score_batch(list(PATHOLOGICAL.values()))
    _check_all_timed_out(results, time.monotonic() - t)


def test_pathological_inputs_time_out_from_a_worker_thread(bounded):
    def call():
        t = time.monotonic()
        return bounded.score_batch(list(PATHOLOGICAL.values())), time.monotonic() - t

    with ThreadPoolExecutor(1) as ex:
        fut = ex.submit(call)
        results, wall = fut.result(timeout=30)
    assert threading.current_thread() is threading.main_thread()
    _check_all_timed_out(results, wall)


def test_pathological_inputs_time_out_from_asyncio_without_blocking_the_loop(bounded):
    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        tick = asyncio.create_task(ticker())
        t = time.monotonic()
        results = await asyncio.gather(*(bounded.ascore(r, g) for r, g in PATHOLOGICAL.values()))
        wall = time.monotonic() - t
        tick.cancel()
        return results, wall, ticks

    results, wall, ticks = asyncio.run(main())
    _check_all_timed_out(results, wall)
    assert ticks >= 10  # the event loop kept running while the items were bounded


# The bound for the next test: far above what a plain item takes even on a loaded machine
# (milliseconds idle; it used to be BOUND = 1 s, and under load a plain item's first parse
# in a fresh worker sometimes passed 1 s and timed out: the test was flaky), and far below
# the minutes the power tower needs, so each outcome is certain whatever the load.
REPLACE_BOUND = 4.0


def test_timeouts_replace_workers_and_scoring_goes_on():
    with Verifier(VerifyConfig(timeout_s=REPLACE_BOUND, workers=2)) as v:
        assert v.score(r"\boxed{1}", "1").outcome is Outcome.CORRECT
        pids = set(v.worker_pids()[:-1])
        r = v.score(*PATHOLOGICAL["power_tower"])
        assert r.outcome is Outcome.TIMEOUT
        assert v.stats.timeouts == 1
        # the replacement is forked before the caller hears of the timeout
        new_pids = set(v.worker_pids()[:-1])
        assert len(new_pids) == 2 and new_pids != pids
        dead = pids - new_pids
        # a SIGKILLed process is gone once the zygote reaps it: wait for that state, not a time
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in dead) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not any(_alive(p) for p in dead)
        # the rest of a task whose item timed out is requeued, not lost or misattributed
        pairs = [(r"\boxed{3}", "3"), PATHOLOGICAL["power_tower"], (r"\boxed{4}", "3"), (r"\boxed{3}", "3")]
        got = [r.outcome for r in v.score_batch(pairs)]
        assert got == [Outcome.CORRECT, Outcome.TIMEOUT, Outcome.INCORRECT, Outcome.CORRECT]
        assert v.stats.timeouts == 2


def test_a_worker_that_dies_mid_item_gives_error_and_is_replaced():
    with Verifier(VerifyConfig(timeout_s=20.0, workers=1)) as v:
        assert v.score(r"\boxed{2}", "2").outcome is Outcome.CORRECT
        (worker,) = v.worker_pids()[:-1]
        fut = v.submit(*PATHOLOGICAL["power_tower"])
        time.sleep(0.3)
        os.kill(worker, signal.SIGKILL)
        r = fut.result(timeout=10)
        assert r.outcome is Outcome.ERROR and "died" in r.detail
        assert v.stats.crashes == 1
        assert v.score(r"\boxed{2}", "2").outcome is Outcome.CORRECT
        assert v.worker_pids()[0] != worker


def test_close_leaves_no_processes_behind():
    v = Verifier(VerifyConfig(timeout_s=BOUND, workers=2))
    fut = v.submit(*PATHOLOGICAL["power_tower"])  # a worker busy in sympy at close time
    assert v.score(r"\boxed{2}", "2").outcome is Outcome.CORRECT
    pids = v.worker_pids()
    assert len(pids) == 3  # two workers and their fork server
    v.close()
    assert v.closed
    deadline = time.monotonic() + 3
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(_alive(p) for p in pids)
    assert fut.done()
    with pytest.raises(RuntimeError, match="closed"):
        v.score(r"\boxed{2}", "2")


def test_start_brings_the_workers_up_before_any_work_and_close_ends_them():
    v = Verifier(VerifyConfig(timeout_s=BOUND, workers=2))
    assert v.start() is v
    deadline = time.monotonic() + 120  # the fork server imports sympy; slow on a loaded machine
    while len(v.worker_pids()) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = v.worker_pids()
    assert len(pids) == 3 and v.stats.items == 0  # two workers and their fork server, no item yet
    assert v.score(r"\boxed{2}", "2").outcome is Outcome.CORRECT
    assert v.worker_pids() == pids and v.stats.workers_started == 2  # the same workers did it
    v.close()
    deadline = time.monotonic() + 3
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not any(_alive(p) for p in pids)
    with pytest.raises(RuntimeError, match="closed"):
        v.start()


def test_a_started_verifier_closed_unused_leaves_nothing_behind():
    v = Verifier(VerifyConfig(timeout_s=BOUND, workers=1)).start()
    v.close()  # at once, probably while the fork server is still importing
    assert v.closed and v.stats.items == 0
    assert not [p for p in v.worker_pids() if _alive(p)]


def test_workers_do_not_load_the_callers_torch():
    torch = pytest.importorskip("torch")
    assert torch.__version__
    with Verifier(VerifyConfig(workers=1)) as v:
        v.score(r"\boxed{2}", "2")
        for pid in v.worker_pids():
            with open(f"/proc/{pid}/maps") as f:
                assert "torch" not in f.read()


def test_many_threads_share_one_verifier(bounded):
    cases = [(rf"\boxed{{{i}}}", str(i if i % 3 else i + 1)) for i in range(60)]

    def one(case):
        return bounded.score(*case).outcome

    with ThreadPoolExecutor(8) as ex:
        got = list(ex.map(one, cases))
    assert got == [Outcome.CORRECT if i % 3 else Outcome.INCORRECT for i in range(60)]


def test_cancelled_items_are_skipped(bounded):
    # three slow items, one per worker, hold every worker for the bound; the next batch waits
    busy = [bounded.submit(*PATHOLOGICAL["power_tower"]) for _ in range(3)]
    futures = bounded.submit_batch([(r"\boxed{2}", "2")] * 7 + [(r"\boxed{1}", "1")] * 13)
    before = bounded.stats.items
    for f in futures[:7]:
        f.cancel()
    assert [f.cancelled() for f in futures[:7]] == [True] * 7  # still queued, so the cancel took
    assert [f.result(timeout=10).outcome for f in busy] == [Outcome.TIMEOUT] * 3
    assert [f.result(timeout=10).outcome for f in futures[7:]] == [Outcome.CORRECT] * 13
    assert bounded.stats.items - before == 3 + 13  # the cancelled seven were never scored


def test_shared_verifier_is_one_per_config_and_replaced_when_closed():
    cfg = VerifyConfig(timeout_s=3.0, workers=1)
    a = shared_verifier(cfg)
    assert shared_verifier(cfg) is a
    assert shared_verifier(VerifyConfig(timeout_s=3.0, workers=1)) is a  # equal configs
    a.close()
    b = shared_verifier(cfg)
    assert b is not a and not b.closed
    b.close()


def test_config_rejects_impossible_values():
    for bad in ({"timeout_s": 0}, {"timeout_s": -1}, {"workers": 0}, {"chunk_size": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            VerifyConfig(**bad)


# ---------------------------------------------------------------- group statistics (seed 000, Eq. 2 and 5)
GROUPS = [
    # scores, pass rate, kind, advantages (sample std, as torch.std in TRL/verl)
    ([1] * 8, 1.0, "solve_all", [0.0] * 8),
    ([0] * 8, 0.0, "solve_none", [0.0] * 8),
    ([1, 0, 0, 0], 0.25, "informative", [1.5, -0.5, -0.5, -0.5]),
    ([1, 1, 0, 0], 0.5, "informative", [0.8660254, 0.8660254, -0.8660254, -0.8660254]),
    ([1], 1.0, "solve_all", [0.0]),
]


@pytest.mark.parametrize("scores,rate,kind,adv", GROUPS)
def test_group_statistics(scores, rate, kind, adv):
    assert pass_rate(scores) == rate
    assert classify_group(scores) == kind
    assert grpo_advantages(scores) == pytest.approx(adv, abs=1e-6)


def test_advantages_are_exactly_zero_without_spread_and_sum_to_zero_with_it():
    assert grpo_advantages([1.0] * 8) == [0.0] * 8
    adv = grpo_advantages([1, 0, 1, 1, 0, 1, 1, 1])
    assert abs(sum(adv)) < 1e-12
    pop = grpo_advantages([1, 0], unbiased=False)
    assert pop == [1.0, -1.0]


def test_group_stats_read_verify_results(bounded):
    results = bounded.score_batch([(r"\boxed{2}", "2"), (r"\boxed{3}", "2"), ("nothing", "2")])
    assert pass_rate(results) == pytest.approx(1 / 3)
    assert classify_group(results) == "informative"
    assert group_counts([results, results[:1], results[1:]]) == {"solve_all": 1, "solve_none": 1, "informative": 1}
    with pytest.raises(ValueError):
        pass_rate([])
    with pytest.raises(ValueError):
        classify_group([2.0])


def test_empty_batch_and_bad_gold_need_no_workers():
    v = Verifier(VerifyConfig(workers=1))
    assert v.score_batch([]) == []
    with pytest.raises(ValueError, match="gold"):
        v.score(r"\boxed{1}", None)
    assert v.worker_pids() == []  # nothing was started
    v.close()
