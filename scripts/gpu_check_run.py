"""How ``scripts/gpu_check.py`` runs its plan's steps: each step in a process group of its
own under a deadline (the whole group ended on overrun or Ctrl-C), its output appended to the
phase's log, and the GPU's peak memory and utilisation watched while a phase runs.

Standard library only, like the plan it runs (the system's python3, before any venv exists).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # every step runs from the repository root


@dataclass
class Step:
    """One command of the plan: its words, extra environment and working folder."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def shell(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        cmd = " ".join(shlex.quote(a) for a in self.argv)
        return f"{env} {cmd}" if env else cmd



class GpuWatch:
    """Peak GPU memory (MiB) and utilisation (%) while a phase runs, from ``nvidia-smi`` every 2 s."""

    def __init__(self) -> None:
        self.peak_mib = 0
        self.peak_util = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> GpuWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                r = subprocess.run(["nvidia-smi", "--query-gpu=memory.used,utilization.gpu",
                                    "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=5)
                mem, util = (int(float(x)) for x in r.stdout.splitlines()[0].split(","))
                self.peak_mib, self.peak_util = max(self.peak_mib, mem), max(self.peak_util, util)
            except (OSError, subprocess.SubprocessError, ValueError, IndexError):
                pass
            self._stop.wait(2)


@dataclass
class Result:
    name: str
    ok: bool
    seconds: float
    detail: str
    figures: dict = field(default_factory=dict)


# the process groups of the steps running now: each step runs in a session of its own (so that
# a deadline ends all of it), which also keeps Ctrl-C from reaching it; stop_all() ends them
_RUNNING: dict[int, subprocess.Popen] = {}
# set by stop_all(); _STARTING makes "start a step and register it" one step for stop_all, so a
# background thread cannot register a step after stop_all() has looked (under load its child can
# be running before the thread's Popen returns) and keep the interrupted check waiting for it
_STOPPED = threading.Event()
_STARTING = threading.Lock()


def _end_group(proc: subprocess.Popen) -> None:
    """SIGTERM to a step's process group, SIGKILL 20 s later if any of it is still there."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        for _ in range(100):
            proc.poll()  # reap the step itself: a zombie would keep its group alive
            os.killpg(proc.pid, 0)  # raises once the whole group is gone
            time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stop_all() -> None:
    """End every running step's process group (on Ctrl-C); no step starts after it."""
    _STOPPED.set()
    with _STARTING:
        procs = list(_RUNNING.values())
    for proc in procs:
        _end_group(proc)


def run_step(step: Step, log: Path, deadline: float) -> tuple[int | None, str]:
    """Run one step to completion or its deadline (its process group is then killed); append its
    output to ``log``. Returns (exit code or None on timeout, the output's last 4,000 characters)."""
    env = {**os.environ, **step.env}
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"\n$ {step.shell()}\n")
        f.flush()
        with _STARTING:
            if _STOPPED.is_set():
                return None, "not started: the check was interrupted"
            proc = subprocess.Popen(step.argv, cwd=REPO, env=env, stdout=f,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            _RUNNING[proc.pid] = proc
        try:
            rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _end_group(proc)
            proc.wait(timeout=20)
            rc = None
        finally:
            _RUNNING.pop(proc.pid, None)
            # verl's Ray workers can outlive their driver: end whatever is left of the step's group
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    return rc, log.read_text(encoding="utf-8", errors="replace")[-4000:]
