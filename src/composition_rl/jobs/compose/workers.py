"""Forked worker processes for the batch executor, with a shutdown that always ends.

A named seam of :mod:`composition_rl.jobs.compose.run`. ``multiprocessing.Pool`` was used here
before, and its shutdown could hang for good (4 of 17 runs of the MATH depth-2
command on a busy machine): its workers share one task queue guarded by one lock, and
``Pool.terminate()`` takes that lock, kills the workers and then joins them without a
deadline, so a worker left waiting on the lock (held by the parent, or by a worker killed
while it held it) kept the parent in ``join`` forever, with a 122 MB spill folder left
behind. Here nothing is shared:

* each worker has its own pipe (a socket pair) to the parent; it reads one task, runs it,
  and writes one result. No lock exists that a dead or stuck worker could hold;
* the parent waits on the pipes with a timeout (``poll_s``), so a signal's handler runs
  in the main thread promptly, and a worker that dies shows up as end-of-file on its pipe:
  the run then fails with :class:`WorkerDied` instead of waiting for a result that never
  comes (a ``Pool`` silently replaced the worker and lost its task);
* :meth:`ForkedWorkers.close` tells idle workers to stop, closes every pipe, waits at most
  ``grace_s`` for them to exit, then SIGKILLs what is left and reaps it (bounded again).
  After an error or an interrupt the busy workers are killed at once: their work is lost
  with the run anyway.

Workers are forked, so they share the parent's loaded problems and pools copy-on-write and
``fn`` is never pickled; only tasks and results cross the pipes.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection, wait
from typing import Any

__all__ = ["ForkedWorkers", "WorkerDied"]


class WorkerDied(RuntimeError):
    """A worker process ended before it returned the result of its task."""


class _Failure:
    """An exception raised by ``fn`` in a worker, carried back with its traceback text."""

    def __init__(self, exc: BaseException) -> None:
        self.text = "".join(traceback.format_exception(exc)).rstrip()
        try:
            import pickle

            pickle.dumps(exc)
            self.exc: BaseException | None = exc
        except Exception:
            self.exc = None

    def raise_(self) -> None:
        if self.exc is not None:
            raise self.exc from RuntimeError(f"in a worker process:\n{self.text}")
        raise RuntimeError(f"a worker process failed:\n{self.text}")


def _serve(conn: Connection, fn: Callable[[Any], Any], parent_ends: list[Connection]) -> None:
    """A worker's life: read a task, run ``fn``, send the result; end on None or a closed pipe."""
    # Ctrl-C reaches the whole process group: the parent alone reports it and stops the
    # workers. SIGTERM kills a worker outright: it holds nothing another process waits for.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for c in parent_ends:  # the parent's ends of every pipe, inherited by the fork
        c.close()
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return  # the parent is gone or closed the pipe
        if task is None:
            return
        index, payload = task
        try:
            out: tuple[int, Any] = (index, fn(payload))
        except Exception as e:
            out = (index, _Failure(e))
        try:
            conn.send(out)
        except (BrokenPipeError, ConnectionResetError, OSError):
            return


class ForkedWorkers:
    """``n`` forked processes that run ``fn`` on tasks; :meth:`imap` yields results in task order.

    Use as a context manager: the workers start on entry and are stopped, within a bounded
    time, on exit (see the module docstring).

    >>> with ForkedWorkers(abs, 2) as w:
    ...     list(w.imap([-3, 1, -2]))
    [3, 1, 2]
    """

    def __init__(self, fn: Callable[[Any], Any], n: int, grace_s: float = 5.0, poll_s: float = 0.5,
                 ahead: int = 4) -> None:
        if n < 1:
            raise ValueError(f"n={n}: need at least one worker")
        if grace_s <= 0 or poll_s <= 0:
            raise ValueError(f"grace_s={grace_s}, poll_s={poll_s}: both must be > 0")
        self.fn = fn
        self.n = n
        self.grace_s = grace_s
        self.poll_s = poll_s
        self.ahead = ahead  # finished results held out of order, per worker, before feeding pauses
        self._procs: list[Any] = []
        self._conns: list[Connection] = []
        self._busy: dict[Connection, int] = {}

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> ForkedWorkers:
        self.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(abort=exc_type is not None)

    def start(self) -> None:
        """Fork the ``n`` workers; if starting one fails, those started are killed and the error
        re-raised."""
        ctx = multiprocessing.get_context("fork")
        try:
            for _ in range(self.n):
                parent, child = ctx.Pipe(duplex=True)
                p = ctx.Process(target=_serve, args=(child, self.fn, [*self._conns, parent]), daemon=True)
                p.start()
                child.close()  # only the worker holds its end: its death reads as end-of-file here
                self._procs.append(p)
                self._conns.append(parent)
        except BaseException:
            self.close(abort=True)
            raise

    @property
    def pids(self) -> list[int]:
        """The worker processes' pids, in start order."""
        return [p.pid for p in self._procs]

    def close(self, abort: bool = False) -> None:
        """Stop every worker and reap it; returns within about ``2 * grace_s`` whatever they do.

        ``abort``: kill the busy workers now instead of letting them finish their task.
        """
        procs, conns, busy = self._procs, self._conns, self._busy
        self._procs, self._conns, self._busy = [], [], {}
        for c, p in zip(conns, procs):
            if abort and c in busy and p.is_alive():
                with contextlib.suppress(OSError):
                    os.kill(p.pid, signal.SIGKILL)
            elif c not in busy:
                with contextlib.suppress(OSError, ValueError):
                    c.send(None)  # an idle worker reads it at once; a pipe holds it without blocking
            with contextlib.suppress(OSError):
                c.close()  # a busy worker that finishes now fails to send its result and ends
        deadline = time.monotonic() + self.grace_s
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        late = [p for p in procs if p.exitcode is None]
        for p in late:
            with contextlib.suppress(OSError):
                os.kill(p.pid, signal.SIGKILL)
        deadline = time.monotonic() + self.grace_s
        for p in late:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.exitcode is not None:
                with contextlib.suppress(ValueError):
                    p.close()

    # -- work ----------------------------------------------------------------------------------
    def imap(self, tasks: Iterable[Any]) -> Iterator[Any]:
        """``fn(task)`` for each task, in order. Raises :class:`WorkerDied` when a worker ends
        without its result, or the worker's own exception when ``fn`` raised."""
        if not self._conns:
            raise RuntimeError("ForkedWorkers.imap before start() or after close()")
        it = iter(tasks)
        sent = 0
        want = 0
        done: dict[int, Any] = {}
        idle = list(reversed(self._conns))
        exhausted = False
        limit = self.ahead * self.n
        pid = dict(zip(self._conns, (p.pid for p in self._procs)))

        while True:
            # keep every idle worker busy (one task each, so no pipe ever fills both ways),
            # unless finished results already pile up behind a slow one
            while idle and not exhausted and len(done) < limit:
                try:
                    payload = next(it)
                except StopIteration:
                    exhausted = True
                    break
                c = idle.pop()
                try:
                    c.send((sent, payload))
                except OSError:  # its worker is gone (the pipe is broken)
                    proc = self._procs[self._conns.index(c)]
                    proc.join(1.0)
                    raise WorkerDied(f"compose worker {pid[c]} ended (exit code {proc.exitcode}) "
                                     f"before it could take task {sent}") from None
                self._busy[c] = sent
                sent += 1
            if want in done:
                while want in done:
                    r = done.pop(want)
                    want += 1
                    yield r
                continue  # room again for tasks: feed the idle workers first
            if not self._busy:
                if exhausted:
                    return
                raise RuntimeError(f"result {want} was never computed")  # cannot happen: a bug
            for c in wait(list(self._busy), timeout=self.poll_s):
                assert isinstance(c, Connection)
                try:
                    index, result = c.recv()
                except (EOFError, OSError):
                    task = self._busy.pop(c)
                    proc = self._procs[self._conns.index(c)]
                    proc.join(1.0)
                    raise WorkerDied(f"compose worker {pid[c]} ended (exit code {proc.exitcode}) "
                                     f"before returning task {task}") from None
                del self._busy[c]
                if isinstance(result, _Failure):
                    result.raise_()
                done[index] = result
                idle.append(c)
