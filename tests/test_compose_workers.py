"""jobs/compose/workers.py: forked workers keep the input order, a killed worker ends the map at
once, and shutdown is bounded when a worker never finishes."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest


def test_forked_workers_keep_order_and_a_killed_worker_ends_the_map_at_once():
    from composition_rl.jobs.compose.workers import ForkedWorkers, WorkerDied

    with ForkedWorkers(lambda x: x * x, 2) as w:
        assert list(w.imap(range(50))) == [x * x for x in range(50)]

    def uneven(x):  # one slow task in nine: later results pile up behind it, then drain
        time.sleep(0.2 if x % 9 == 0 else 0.001)
        return x

    with ForkedWorkers(uneven, 2, ahead=1) as w:
        assert list(w.imap(range(60))) == list(range(60))

    def slow(x):
        time.sleep(0.05 if x else 30)
        return x

    t0 = time.monotonic()
    with pytest.raises(WorkerDied, match="ended"), ForkedWorkers(slow, 2, grace_s=1.0) as w:
        pids = w.pids
        it = w.imap(range(10))
        time.sleep(0.3)
        os.kill(pids[0], signal.SIGKILL)  # the worker holding task 0 dies: its result never comes
        list(it)
    assert time.monotonic() - t0 < 20  # no wait for a result that cannot come, nor for the 30 s task
    assert not any(Path(f"/proc/{p}").exists() for p in pids)  # both reaped


class _Alarm(Exception):
    pass


def test_forked_workers_shutdown_is_bounded_when_a_worker_never_finishes():
    from composition_rl.jobs.compose.workers import ForkedWorkers

    def stuck(x):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # deaf to SIGTERM: only SIGKILL ends it
        while True:
            time.sleep(1)

    def alarm(signum, frame):
        raise _Alarm

    w = ForkedWorkers(stuck, 2, grace_s=0.5, poll_s=0.1)
    w.start()
    pids = w.pids
    previous = signal.signal(signal.SIGALRM, alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.0)  # the caller gives up on the map (like Ctrl-C)
        with pytest.raises(_Alarm):
            next(w.imap([1, 2]))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    t0 = time.monotonic()
    w.close()  # the stuck workers are killed after grace_s, not waited on
    assert time.monotonic() - t0 < 5
    assert not any(Path(f"/proc/{p}").exists() for p in pids)
