"""Run the run-folder fault-injection harness (tests/fault_harness.py) for long.

    python scripts/fault_harness.py --seed 7 --ops 1000

Prints each invariant violation with a reproduction as it is found, then a summary line
(seed, operations by kind, wall time, violations). Exit status 1 when any invariant broke.
Runs the ``composition_rl`` on the path (PYTHONPATH=src for a checkout).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fault_harness import main_loop  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ops", type=int, default=1000)
    p.add_argument("--kill-share", type=float, default=0.06, help="share of operations that kill a subprocess run")
    p.add_argument("--stop", action="store_true", help="stop at the first violation")
    a = p.parse_args()
    return 1 if main_loop(a.seed, a.ops, kill_share=a.kill_share, stop_at_first=a.stop) else 0


if __name__ == "__main__":
    raise SystemExit(main())
