"""The verifier's fork server: a clean interpreter that imports Math-Verify once and forks workers.

Why not ``multiprocessing``'s forkserver: its children re-import the parent's ``__main__``
module, so a training script that imports torch would make every worker (and every
replacement after a timeout) import torch too. This process is started with
``python -m composition_rl.grading._zygote``: it imports only Math-Verify and sympy, warms
them up, freezes the heap, and then forks a worker in about a millisecond per request.

Protocol on the control socket (a Unix socketpair with the parent):
  - on start-up, after warming up, it writes its pid (8 bytes, network order);
  - the parent sends one byte with one file descriptor attached (SCM_RIGHTS): the worker's
    end of a fresh socketpair; the zygote forks a worker on it and writes the worker's pid;
  - when the control socket closes (the parent closed the pool or died), it SIGKILLs every
    worker it forked, reaps them, and exits, so nothing outlives the pool.
"""

from __future__ import annotations

import gc
import json
import os
import select
import signal
import socket
import struct
import sys

_PID = struct.Struct("!q")
_WORKER_GC_THRESHOLD = (50_000, 20, 100)  # gc.set_threshold in the workers, see _serve


def _serve(ctrl: socket.socket, settings: dict) -> None:
    from multiprocessing.connection import Connection

    from composition_rl.grading import compare

    compare.warm_up()
    gc.collect()
    gc.freeze()  # keep the warmed heap shared copy-on-write with the workers
    # Parsing allocates many short-lived objects (ANTLR configs, sympy nodes) and few cycles:
    # with the default threshold (700) the cycle collector ran often enough to take about 10%
    # of a worker's CPU (8,184 MATH pairs in one process: 7.6-7.9 s CPU, 6.95 s with this).
    # Verdicts do not depend on when garbage is collected.
    gc.set_threshold(*_WORKER_GC_THRESHOLD)
    ctrl.sendall(_PID.pack(os.getpid()))
    children: set[int] = set()
    try:
        while True:
            ready, _, _ = select.select([ctrl], [], [], 1.0)
            if not ready:
                continue
            try:
                msg, fds, _, _ = socket.recv_fds(ctrl, 1, 1)
            except OSError:
                return
            if not msg:
                return  # parent closed the pool or died
            if not fds:
                continue
            pid = os.fork()
            if pid == 0:  # worker
                code = 0
                try:
                    ctrl.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    compare.worker_loop(Connection(fds[0]), settings)
                except BaseException:
                    code = 1
                finally:
                    os._exit(code)
            os.close(fds[0])
            children.add(pid)
            ctrl.sendall(_PID.pack(pid))
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        # SIGCHLD is ignored, so the kernel reaps; wait() returns once all are gone.
        while True:
            try:
                os.wait()
            except ChildProcessError:
                break


def main() -> None:
    """Run the fork server: ``argv[1]`` is the control socket's file descriptor, ``argv[2]`` the
    workers' settings as JSON; returns when the control socket closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # auto-reap workers: no zombies
    ctrl = socket.socket(fileno=int(sys.argv[1]))
    try:
        _serve(ctrl, json.loads(sys.argv[2]))
    finally:
        ctrl.close()


if __name__ == "__main__":
    main()
