"""Does every ``crl compose`` run end, and leave nothing behind, on a busy machine?

    .venv/bin/python benchmarks/compose_stress.py [--runs 50] [--busy 1] [--src SRC]

Runs the first-hour command of issue 25 again and again,

    crl compose --input ../shared/data/train/math_train.json --depth 2 --pool-size 20 --seed 0 \\
        --out OUT --export verl,trl --workers 2 --no-progress

each in its own session, with ``--busy`` busy-loop processes beside it (CPU contention makes
the shutdown races of a worker pool likely). A run counts as good when it exits 0 within
``--deadline`` seconds and its output folder holds no debris: no ``.compose-parts-*`` spill
folder and no ``.*.tmp`` temporary. A run past the deadline counts as hung; it is then killed
with its whole group (which is what leaves the debris a user found). ``--src`` runs another
checkout's ``src`` (e.g. the previous commit's, from ``git archive``), so before and after
can be compared on the same machine. ``--stop-at-first`` ends at the first bad run (to count
the runs it took to see the hang). Not a test: the hang it looks for was a race (issue 25:
4 of 17 runs), too slow to repeat in the default suite; tests/test_cli_compose.py runs a
few rounds under the ``slow`` marker.
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


def debris(out: Path) -> list[str]:
    """What a finished run must not leave in its output folder."""
    if not out.exists():
        return []
    return sorted(p.name for p in out.iterdir() if p.name.startswith(".compose-parts-") or p.name.endswith(".tmp"))


def busy_loops(n: int) -> list[subprocess.Popen]:
    """``n`` processes that spin on a core each until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def one_run(crl: list[str], env: dict[str, str], args: argparse.Namespace, out: Path) -> tuple[str, float, str]:
    """(outcome, seconds, detail): outcome is ok, hung, failed or debris."""
    cmd = [*crl, "compose", "--input", args.input, "--depth", "2", "--pool-size", "20", "--seed", "0",
           "--out", str(out), "--export", "verl,trl", "--workers", str(args.workers), "--no-progress"]
    p = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    try:
        _, err = p.communicate(timeout=args.deadline)
    except subprocess.TimeoutExpired:
        left = debris(out)
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return "hung", time.monotonic() - t0, f"no exit after {args.deadline:.0f} s; in OUT: {left}"
    wall = time.monotonic() - t0
    if p.returncode != 0:
        return "failed", wall, f"exit {p.returncode}: {err.strip().splitlines()[-1:] if err.strip() else ''}"
    left = debris(out)
    if left:
        return "debris", wall, f"left {left}"
    return "ok", wall, ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=str(ROOT.parent / "shared" / "data" / "train" / "math_train.json"))
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--busy", type=int, default=1, help="busy-loop processes beside each run")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--deadline", type=float, default=240.0, help="seconds before a run counts as hung")
    ap.add_argument("--src", default=str(ROOT / "src"), help="the package sources to run (PYTHONPATH)")
    ap.add_argument("--stop-at-first", action="store_true", help="stop at the first run that is not ok")
    args = ap.parse_args()
    crl = [sys.executable, "-c", "import sys; from composition_rl.cli import main; sys.exit(main())"]
    env = dict(os.environ, PYTHONPATH=args.src)
    spinners = busy_loops(args.busy)
    bad: dict[str, int] = {}
    times: list[float] = []
    first_bad = None
    try:
        for i in range(args.runs):
            tmp = Path(tempfile.mkdtemp(prefix="crl-stress-"))
            try:
                outcome, wall, detail = one_run(crl, env, args, tmp / "o")
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            times.append(wall)
            print(f"run {i + 1}: {outcome} in {wall:.1f} s {detail}".rstrip(), flush=True)
            if outcome != "ok":
                bad[outcome] = bad.get(outcome, 0) + 1
                first_bad = first_bad or i + 1
                if args.stop_at_first:
                    break
    finally:
        for s in spinners:
            s.kill()
            s.wait()
    n = len(times)
    med = sorted(times)[n // 2] if times else float("nan")
    print(f"{n} runs with {args.busy} busy loop(s) beside: {n - sum(bad.values())} ok, "
          f"{', '.join(f'{v} {k}' for k, v in bad.items()) or 'none bad'}"
          f"{f'; first bad run: {first_bad}' if first_bad else ''}; median {med:.1f} s ({args.src})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
