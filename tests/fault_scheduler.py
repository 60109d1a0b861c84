"""The scheduler of the fault harness's interleaved runs (``fault_harness.py``): threads that
take turns at every step of the locking code of ``io/runs.py``, switched by a seeded
scheduler, with the lock's holders checked as they go."""

from __future__ import annotations

import contextlib
import fcntl as _fcntl
import os
import random
import signal
import threading
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path


class Scheduler:
    """Runs a few callables in threads, one at a time, switched at every :meth:`point`.

    The thread with the highest priority runs; at a point it may be *demoted* below every
    other (a preemption), more often at the points where races live (its first step after
    start, and once it holds a lock), rarely elsewhere. Priorities and demotions come from the
    seeded ``rng``. A random walk over threads would need a dozen lucky picks in a row to let
    one run finish its clean-up while another sits in the lock (PCT, Burckhardt et al. 2010:
    few preemptions at random places find most concurrency bugs)."""

    HOT = {"holding": 0.6, "first": 0.6}

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.cv = threading.Condition()
        self.turn: threading.Thread | None = None
        self.waiting: list[threading.Thread] = []
        self.threads: list[threading.Thread] = []
        self.trace: list[str] = []
        self.active = False
        self.go = False
        self.prio: dict[str, float] = {}
        self.steps: dict[str, int] = {}

    def point(self, name: str) -> None:
        me = threading.current_thread()
        if not self.active or me not in self.threads:
            return
        with self.cv:
            self.steps[me.name] = self.steps.get(me.name, 0) + 1
            self.trace.append(f"{me.name}:{name}")
            self.waiting.append(me)
            if self.go:
                hot = self.HOT.get("first" if self.steps[me.name] == 2 else name, 0.05)
                if self.rng.random() < hot:
                    self.prio[me.name] = min(self.prio.values()) - 1  # preempted
                self._next()
            else:
                self.cv.notify_all()
            while self.turn is not me:
                self.cv.wait()

    def _next(self) -> None:  # with cv held, by the thread that gives up its turn
        if not self.waiting:
            self.turn = None
            return
        t = max(self.waiting, key=lambda t: self.prio[t.name])
        self.waiting.remove(t)
        self.turn = t
        self.cv.notify_all()

    def run(self, fns: list[Callable[[], None]]) -> None:
        self.threads = [threading.Thread(target=self._body, args=(fn,), name=f"t{i}") for i, fn in enumerate(fns)]
        order = list(range(len(self.threads)))
        self.rng.shuffle(order)
        self.prio = {t.name: float(order[i]) for i, t in enumerate(self.threads)}
        self.active = True
        with self.cv:
            for t in self.threads:
                t.start()
            while len(self.waiting) < len(self.threads):
                self.cv.wait()
            self.go = True
            self._next()
        for t in self.threads:
            t.join(120)
        self.active = False

    def _body(self, fn: Callable[[], None]) -> None:
        self.point("start")
        try:
            fn()
        finally:
            with self.cv:
                self._next()


class Shim:
    """A module whose named functions first give the scheduler a turn."""

    def __init__(self, module, sched: Scheduler, names: tuple[str, ...]) -> None:
        self._module, self._sched, self._names = module, sched, names

    def __getattr__(self, name: str):
        real = getattr(self._module, name)
        if name in self._names and callable(real):
            def call(*a, **k):
                self._sched.point(f"{name}")
                return real(*a, **k)
            return call
        return real


def pointed(fn, sched: Scheduler, name: str):
    """``fn`` that first gives ``sched`` a turn at the point ``name`` (None for None)."""
    if fn is None:
        return None

    def call(*a, **k):
        sched.point(name)
        return fn(*a, **k)
    return call


def thread_crl(argv: list[str]) -> tuple[int, str]:
    """``crl argv`` run in this thread: (exit status, the traceback of a crash or "")."""
    from composition_rl.cli import main

    try:
        rc = main(list(argv))
        return rc, ""
    except SystemExit as e:
        return int(e.code or 0) if not isinstance(e.code, str) else 2, ""
    except BaseException:  # noqa: BLE001 - a crash is a finding
        return -1, traceback.format_exc()


def _lock_checker(sched: Scheduler, real_hold, clash: list[str]):
    """``hold_lock`` that gives the scheduler a turn once the lock is held and after it is
    released, and notes in ``clash`` a second holder of one lock, a lock whose file is gone,
    and a lock file removed while held."""
    holders: dict[str, list[str]] = {}

    @contextlib.contextmanager
    def hold(target, command, **kw):
        with real_hold(target, command, **kw) as lock:
            key = str(Path(target).resolve())
            me = threading.current_thread().name
            if holders.get(key):
                clash.append(f"{me} took the lock of {target} while {holders[key]} held it")
            if not Path(lock).exists():
                clash.append(f"{me} holds the lock of {target}, but no lock file is at {Path(lock).name}: it "
                             "locked a file that had been removed")
            holders.setdefault(key, []).append(me)
            sched.point("holding")
            try:
                yield lock
                if not Path(lock).exists():  # (a refused run may remove its own folder, lock and all)
                    clash.append(f"the lock file of {target} was removed while {me} held it")
            finally:
                holders[key].remove(me)
        sched.point("released")

    return hold


class _Sig:
    """``signal`` for ``cli``: a handler is installed only from the main thread (the runs are
    threads here)."""

    def __getattr__(self, name):
        return getattr(signal, name)

    @staticmethod
    def signal(sig, handler):
        if threading.current_thread() is threading.main_thread():
            return signal.signal(sig, handler)
        return signal.getsignal(sig)


@contextlib.contextmanager
def scheduled_locking(sched: Scheduler, clash: list[str]) -> Iterator[None]:
    """While inside, every step of ``io/runs.py``'s locking code (``os.open``/``close``/
    ``rmdir``/``unlink``, ``flock``, the folder checks, taking and releasing the lock) gives
    ``sched`` a turn, and the lock's holders are checked into ``clash``."""
    from composition_rl import cli
    from composition_rl.io import runs
    from composition_rl.jobs.compose import run as compose_run

    hold = _lock_checker(sched, runs.hold_lock, clash)
    patches = [(runs, "os", Shim(os, sched, ("open", "close", "rmdir", "unlink"))),
               (runs, "fcntl", Shim(_fcntl, sched, ("flock",))),
               (runs, "writable_dir", pointed(runs.writable_dir, sched, "writable_dir")),
               (runs, "writable_file", pointed(runs.writable_file, sched, "writable_file")),
               (runs, "_drop_if_bare", pointed(getattr(runs, "_drop_if_bare", None), sched, "drop_if_bare")),
               (runs, "drop_made_folder", pointed(getattr(runs, "drop_made_folder", None), sched, "drop_folder")),
               (runs, "hold_lock", hold), (compose_run, "hold_lock", hold), (cli, "signal", _Sig())]
    saved = [(m, a, getattr(m, a, None)) for m, a, _ in patches]
    try:
        for m, a, v in patches:
            if v is not None:
                setattr(m, a, v)
        yield
    finally:
        for m, a, v in saved:
            if v is not None:
                setattr(m, a, v)
