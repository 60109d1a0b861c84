"""A server process for a test module: started on a free loopback port in its own process
group, waited for until it answers (or exits, or its deadline passes: the test fails with the
end of its log), and stopped with its whole group afterwards (SIGTERM, then SIGKILL).

The real-model jobs start one each: ``scripts/serve_real_llm.sh`` (llama.cpp's server,
tests/test_real_llm.py) and ``vllm serve`` (tests/test_vllm_cpu.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def served(argv: Sequence[str], *, log: Path, ready: Callable[[str], str | None], limit_s: float, what: str,
           env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Iterator[str]:
    """Run ``argv`` (stdout and stderr to ``log``) until ``ready(log text)`` gives its base URL;
    yield that URL, and stop the server's process group on the way out."""
    with open(log, "w") as f:
        proc = subprocess.Popen(list(argv), stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                start_new_session=True)  # its own group: the stop reaches its children

    def tail() -> str:
        return log.read_text(encoding="utf-8", errors="replace")[-4000:]

    try:
        deadline = time.monotonic() + limit_s
        while (url := ready(log.read_text(encoding="utf-8", errors="replace"))) is None:
            if proc.poll() is not None:
                pytest.fail(f"{what} exited with {proc.returncode}:\n{tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{what} did not answer in {limit_s} s:\n{tail()}")
            time.sleep(0.5)
        yield url
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
