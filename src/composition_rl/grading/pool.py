"""A persistent pool of worker processes with a hard per-item time bound.

The bound works from any thread and from asyncio because nothing here uses signals: a
dispatcher thread owns the workers, callers only enqueue work and wait on futures.

- Work is sent as *tasks*: up to ``chunk_size`` items that share one gold answer, so the
  worker parses that gold once (a GRPO group of 8 is one task).
- A worker reports each item as soon as it is done, so the dispatcher knows which item is
  running and since when. An item that runs past ``timeout_s`` gets outcome ``timeout``;
  its worker is SIGKILLed and replaced, and the rest of its task goes back to the queue.
- A worker that dies mid-item (segfault, OOM kill) gives that item outcome ``error`` and is
  replaced the same way.
- Workers are forked by ``_zygote`` (a clean interpreter with Math-Verify preloaded), so a
  replacement is ready in milliseconds and never imports the caller's torch.
"""

from __future__ import annotations

import collections
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

__all__ = ["PoolStats", "RawResult", "WorkerPool"]

_PID = struct.Struct("!q")
_ZYGOTE_START_S = 120.0  # first start imports sympy; generous for a loaded CI machine


@dataclass(frozen=True)
class RawResult:
    """One item's result as the pool reports it (the verifier turns it into a VerifyResult)."""

    outcome: str
    via: str
    extracted: str | None
    detail: str
    elapsed_s: float


@dataclass
class PoolStats:
    """Counters since the pool started (read them for logs; they are not locked)."""

    items: int = 0
    timeouts: int = 0
    crashes: int = 0
    workers_started: int = 0


@dataclass
class _Task:
    golds: tuple[str, ...]
    items: list[tuple[str, Future]]
    # indices into items still to score; None until dispatched (then futures are "running")
    live: list[int] | None = None


@dataclass
class _Worker:
    pid: int
    conn: Connection
    task: _Task | None = None
    task_id: int = -1
    item_started: float = 0.0


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


class WorkerPool:
    """``n_workers`` processes scoring tasks under a per-item bound of ``timeout_s`` seconds.

    Futures resolve to ``make_result(RawResult)``.

    Start-up is lazy (first :meth:`submit`). Thread-safe: any thread or event loop may submit.
    Always :meth:`close` it (the verifier does, also at interpreter exit).
    """

    def __init__(
        self,
        n_workers: int,
        timeout_s: float,
        settings: dict,
        make_result: Callable[[RawResult], object] = lambda raw: raw,
    ) -> None:
        if n_workers < 1:
            raise ValueError(f"n_workers must be >= 1, got {n_workers}")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        self.n_workers = n_workers
        self.timeout_s = float(timeout_s)
        self.settings = dict(settings)
        self._make_result = make_result
        self.stats = PoolStats()
        self._lock = threading.Lock()
        self._init_state()

    def _init_state(self) -> None:
        self._owner_pid = os.getpid()
        self._inbox: collections.deque[_Task] = collections.deque()
        self._closed = False
        self._broken: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        # owned by the dispatcher thread only:
        self._zygote: subprocess.Popen | None = None
        self._ctrl: socket.socket | None = None
        self._workers: list[_Worker] = []
        self._pending: collections.deque[_Task] = collections.deque()
        self._next_task_id = 0
        self._start_early = False  # start() asked for the workers before any work came

    # ------------------------------------------------------------------ caller side
    @property
    def closed(self) -> bool:
        """Whether :meth:`close` has been called (no more submissions)."""
        return self._closed

    def worker_pids(self) -> list[int]:
        """Pids of the current workers (for tests and diagnostics)."""
        return [w.pid for w in list(self._workers)]

    def zygote_pid(self) -> int | None:
        """Pid of the fork server, or ``None`` before start-up and after it stopped
        (diagnostics)."""
        z = self._zygote
        return z.pid if z is not None else None

    def submit(self, golds: tuple[str, ...], responses: list[str]) -> list[Future]:
        """Queue ``responses`` (all with the same gold forms) as one task; one future per item."""
        if os.getpid() != self._owner_pid:
            self._forget_after_fork()
        futures = [Future() for _ in responses]
        task = _Task(golds, list(zip(responses, futures)))
        with self._lock:
            self._start_dispatcher()
            self._inbox.append(task)
            self._wake()
        return futures

    def start(self) -> None:
        """Start the fork server and the workers now, in the background, instead of on the
        first :meth:`submit`: a caller that has other work first (reading its input) overlaps
        the ~1-2 s start-up with it. Returns at once."""
        if os.getpid() != self._owner_pid:
            self._forget_after_fork()
        with self._lock:
            self._start_dispatcher()
            self._start_early = True
            self._wake()

    def _start_dispatcher(self) -> None:
        """Check the pool can take work and run the dispatcher thread; callers hold ``self._lock``."""
        if self._closed:
            raise RuntimeError("this verifier is closed")
        if self._broken is not None:
            raise RuntimeError(f"the verifier's worker pool failed: {self._broken!r}")
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="crl-verify-dispatch", daemon=True)
            self._thread.start()

    def close(self) -> None:
        """Stop the workers and the fork server; unfinished items fail with RuntimeError."""
        if os.getpid() != self._owner_pid:
            self._forget_after_fork()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
            self._wake()
        if thread is threading.current_thread():
            return  # called from a future's callback: the loop sees the flag and shuts down
        if thread is not None:
            thread.join()
        else:
            self._shutdown()
        with self._lock:  # wakes happen under the lock, so no write can hit a reused fd
            for fd in (self._wake_r, self._wake_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._wake_r = self._wake_w = -1

    def _forget_after_fork(self) -> None:
        # A forked child has copies of our sockets but no dispatcher thread: drop them
        # (without telling the workers anything; they belong to the parent) and start afresh.
        for w in self._workers:
            w.conn.close()
        if self._ctrl is not None:
            self._ctrl.close()
        self._lock = threading.Lock()
        self._init_state()

    def _wake(self) -> None:
        """Wake the dispatcher; callers hold ``self._lock``."""
        if self._wake_w < 0:
            return
        try:
            os.write(self._wake_w, b"\0")
        except (BlockingIOError, OSError):
            pass  # a full pipe already wakes the dispatcher; a closed one means shut down

    # ------------------------------------------------------------------ dispatcher thread
    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as e:  # never leave callers waiting forever
            with self._lock:
                self._broken = e
            self._fail_all(RuntimeError(f"verifier worker pool failed: {e!r}"))
        finally:
            self._shutdown()

    def _loop(self) -> None:
        while True:
            self._drain_wake()
            with self._lock:
                while self._inbox:
                    self._pending.append(self._inbox.popleft())
                if self._closed:
                    return
            if self._pending or self._start_early:
                self._ensure_workers()
            self._assign()
            busy = [w for w in self._workers if w.task is not None]
            now = time.monotonic()
            wait_s = None
            if busy:
                wait_s = max(0.0, min(w.item_started for w in busy) + self.timeout_s - now)
            # Idle workers are watched too: readable while idle means it died.
            ready = wait([self._wake_r, *(w.conn for w in self._workers)], timeout=wait_s)
            for w in list(self._workers):
                if w.conn in ready:
                    self._read(w)
            now = time.monotonic()
            for w in [w for w in self._workers if w.task is not None]:
                if now - w.item_started > self.timeout_s:
                    self._retire(w, "timeout", f"over the {self.timeout_s:g} s bound", now)

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def _assign(self) -> None:
        for w in list(self._workers):
            if w.task is not None:
                continue
            task = self._next_task()
            if task is None:
                return
            self._next_task_id += 1
            w.task, w.task_id = task, self._next_task_id
            w.item_started = time.monotonic()
            try:
                w.conn.send((w.task_id, task.golds, [(i, task.items[i][0]) for i in task.live]))
            except OSError:  # died while idle: nothing of this task ran, so requeue it all
                self.stats.crashes += 1
                w.task = None
                self._pending.appendleft(task)
                self._drop(w)

    def _next_task(self) -> _Task | None:
        while self._pending:
            task = self._pending.popleft()
            if task.live is None:
                # Items cancelled by their caller (an asyncio task gone) are not scored.
                task.live = [i for i, (_, f) in enumerate(task.items) if f.set_running_or_notify_cancel()]
            if task.live:
                return task
        return None

    def _read(self, w: _Worker) -> None:
        while True:
            try:
                if not w.conn.poll():
                    return
                msg = w.conn.recv()
            except (EOFError, OSError):
                self.stats.crashes += 1
                if w.task is None:
                    self._drop(w)
                    self._ensure_workers()
                else:
                    self._retire(w, "error", "worker process died", time.monotonic())
                return
            task = w.task
            task_id, index, outcome, via, extracted, detail = msg
            if task is None or task_id != w.task_id or task.live[0] != index:
                continue  # cannot happen with one task in flight; ignore rather than misassign
            now = time.monotonic()
            self._resolve(task.items[index][1], RawResult(outcome, via, extracted, detail, now - w.item_started))
            task.live.pop(0)
            w.item_started = now
            if not task.live:
                w.task, w.task_id = None, -1

    def _resolve(self, fut: Future, result: RawResult) -> None:
        self.stats.items += 1
        try:
            fut.set_result(self._make_result(result))
        except InvalidStateError:
            pass

    def _retire(self, w: _Worker, outcome: str, detail: str, now: float) -> None:
        """Kill busy ``w``; its running item gets ``outcome``; the rest of its task is requeued."""
        task = w.task
        w.task = None
        if outcome == "timeout":
            self.stats.timeouts += 1
        self._drop(w)
        first = None
        if task is not None and task.live:
            first, rest = task.live[0], task.live[1:]
            if rest:
                self._pending.appendleft(_Task(task.golds, task.items, rest))
        try:
            # Replace now (a fork takes milliseconds), before the caller hears of the timeout.
            self._ensure_workers()
        finally:
            if first is not None:
                self._resolve(task.items[first][1], RawResult(outcome, "", None, detail, now - w.item_started))

    def _drop(self, w: _Worker) -> None:
        try:
            os.kill(w.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        w.conn.close()
        self._workers.remove(w)

    # ------------------------------------------------------------------ processes
    def _ensure_workers(self) -> None:
        while len(self._workers) < self.n_workers:
            self._workers.append(self._fork_worker())

    def _start_zygote(self) -> None:
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH")) if p)
        try:
            self._zygote = subprocess.Popen(
                [sys.executable, "-m", "composition_rl.grading._zygote", str(child_end.fileno()), json.dumps(self.settings)],
                pass_fds=[child_end.fileno()],
                stdin=subprocess.DEVNULL,
                env=env,
            )
        finally:
            child_end.close()
        self._ctrl = parent_end
        parent_end.settimeout(_ZYGOTE_START_S)
        self._recv_pid("the verifier's fork server did not start")
        parent_end.settimeout(10.0)

    def _recv_pid(self, what: str) -> int:
        buf = b""
        try:
            while len(buf) < _PID.size:
                chunk = self._ctrl.recv(_PID.size - len(buf))
                if not chunk:
                    raise RuntimeError(f"{what}: it exited (code {self._zygote.poll()})")
                buf += chunk
        except TimeoutError:
            raise RuntimeError(f"{what}: no answer") from None
        return _PID.unpack(buf)[0]

    def _fork_worker(self) -> _Worker:
        for attempt in (1, 2):
            if self._zygote is None or self._zygote.poll() is not None:
                self._stop_zygote()
                self._start_zygote()
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                socket.send_fds(self._ctrl, [b"F"], [theirs.fileno()])
                pid = self._recv_pid("the verifier's fork server did not fork a worker")
            except (OSError, RuntimeError):
                mine.close()
                if attempt == 2:
                    raise
                self._stop_zygote()
                continue
            finally:
                theirs.close()
            self.stats.workers_started += 1
            return _Worker(pid=pid, conn=Connection(mine.detach()))
        raise AssertionError("unreachable")

    def _stop_zygote(self) -> None:
        if self._ctrl is not None:
            self._ctrl.close()  # the zygote kills and reaps its workers on EOF
            self._ctrl = None
        if self._zygote is not None:
            try:
                self._zygote.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._zygote.kill()
                self._zygote.wait()
            self._zygote = None

    def _shutdown(self) -> None:
        in_flight = [w.task for w in self._workers if w.task is not None]
        for w in self._workers:
            try:
                w.conn.send(None)
            except OSError:
                pass
            w.conn.close()
        self._workers = []
        self._stop_zygote()
        self._fail_all(RuntimeError("the verifier was closed before this item was scored"), in_flight)

    def _fail_all(self, exc: BaseException, in_flight: list[_Task] | None = None) -> None:
        with self._lock:
            tasks = list(self._inbox) + list(self._pending)
            self._inbox.clear()
        self._pending.clear()
        tasks += in_flight if in_flight is not None else [w.task for w in self._workers if w.task is not None]
        for task in tasks:
            for _, fut in task.items:
                if not fut.done():
                    try:
                        fut.set_exception(exc)
                    except InvalidStateError:
                        pass
