"""Does a 2-worker ``crl compose`` end promptly when a signal reaches its whole process group?

    .venv/bin/python benchmarks/compose_interrupt.py [--runs 16] [--signal TERM] [--src SRC]

Each run starts ``crl compose --workers 2`` on MATH train in a new session, waits until the
workers have spilled output, sends the signal to the group (as ``kill -TERM -PGID`` or Ctrl-C
does), and times the exit. A run that has not ended 30 s later counts as hung and is killed.
``--src`` runs another checkout's ``src`` (e.g. the previous commit's, from ``git archive``),
so before/after can be compared on the same machine. Not a test: the hang it looks for was a
race (about 1 in 8 to 16 runs), too slow to repeat in the suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=str(ROOT.parent / "shared" / "data" / "train" / "math_train.json"))
    ap.add_argument("--runs", type=int, default=16)
    ap.add_argument("--signal", default="TERM", choices=("TERM", "INT"))
    ap.add_argument("--src", default=str(ROOT / "src"), help="the package sources to run (PYTHONPATH)")
    args = ap.parse_args()
    sig = getattr(signal, f"SIG{args.signal}")
    crl = [sys.executable, "-c", "import sys; from composition_rl.cli import main; sys.exit(main())"]
    env = dict(os.environ, PYTHONPATH=args.src)
    hung, times = 0, []
    for i in range(args.runs):
        tmp = Path(tempfile.mkdtemp(prefix="crl-interrupt-"))
        out = tmp / "o"
        p = subprocess.Popen([*crl, "compose", "--input", args.input, "--out", str(out), "--workers", "2",
                              "--no-progress"], env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120 and p.poll() is None:
            parts = list(out.glob(".compose-parts-*/*.part")) if out.exists() else []
            if any(q.stat().st_size for q in parts):
                break
            time.sleep(0.05)
        time.sleep(0.01 * (i % 10))  # land the signal at different points of the work
        os.killpg(p.pid, sig)
        t1 = time.monotonic()
        try:
            p.communicate(timeout=30)
            times.append(time.monotonic() - t1)
            print(f"run {i + 1}: exit {p.returncode} after {times[-1]:.2f} s", flush=True)
        except subprocess.TimeoutExpired:
            hung += 1
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            print(f"run {i + 1}: HUNG (no exit 30 s after SIG{args.signal}; killed)", flush=True)
        shutil.rmtree(tmp, ignore_errors=True)
    med = sorted(times)[len(times) // 2] if times else float("nan")
    print(f"SIG{args.signal} to the group: {hung} of {args.runs} runs hung; median exit {med:.2f} s ({args.src})")
    return 1 if hung else 0


if __name__ == "__main__":
    sys.exit(main())
