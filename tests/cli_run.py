"""Run ``crl`` as a user would, in a subprocess with this checkout's ``src`` first on the path,
and read what it said. Shared by the tests of the commands (tests/test_cli*.py and others)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def crl(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``crl ARGS`` to completion; stdout and stderr as text."""
    return subprocess.run([sys.executable, "-m", "composition_rl.cli", *args], capture_output=True, text=True,
                          env=_env(), cwd=cwd, timeout=timeout)


def start(*args: str) -> subprocess.Popen:
    """``crl ARGS`` in the background, in its own process group as a shell's foreground job
    is, so that a signal to the group reaches every process of the run (Ctrl-C does that)."""
    return subprocess.Popen([sys.executable, "-m", "composition_rl.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(), start_new_session=True)


def one_error_line(r) -> str:
    """The one line a refused command printed on stderr (no traceback, nothing else)."""
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert "Traceback" not in r.stderr, r.stderr
    assert len(lines) == 1, r.stderr
    return lines[0]


def leftovers(out: Path) -> list[str]:
    """Temporaries and spill folders a compose run left in ``out``."""
    return sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp") or p.name.startswith((".compose-parts-", ".crl-stage-")))


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux /proc)."""
    kids = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in kids.read_text().split()] if kids.exists() else []
