"""Where the symbolic compose time goes: the MATH depth-2 job in one process, timed whole and
with one part switched off at a time, side by side in one run.

    .venv/bin/python benchmarks/compose_breakdown.py [--input ../shared/data/train/math_train.json] [--stages]

Each variant runs ``run_compose`` with ``workers=1`` into a scratch directory, in a fresh
process of its own (the value caches are module-level, so a second run in one process would
start warm):
  * full: the real job (its output is what ``crl compose`` writes);
  * no checks: ``run_checks`` replaced by a pass (measures checks 1-4 by difference);
  * no JSON: the engine's ``record_json`` and ``Rejection.row_json`` replaced by a
    constant (measures serialization).
The variants with a part switched off write meaningless files; they exist only to attribute
time.

``--stages`` instead runs the full job once in this process (``workers=1``) with a timer
around each stage and prints its seconds and calls: the serial start in the parent (load,
pools), the per-problem analysis of a later problem (constants with their roles and flaws,
check 5's dependence, the symbols it uses; the calls show that each runs once per problem,
not once per pair), the per-record work (checks, JSON) and the ordered write of
composed.jsonl. The timers cost about a microsecond a call. Nothing here changes the library.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

from composition_rl.io.readers import load_problems
from composition_rl.jobs.compose import ComposeConfig, run_compose
from composition_rl.spc import symbolic
from composition_rl.spc.base import Rejection

DEFAULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "train" / "math_train.json"


def _timed(problems, cfg: ComposeConfig, out: Path) -> float:
    t0 = time.perf_counter()
    run_compose(problems, cfg, out, progress=False)
    return time.perf_counter() - t0


VARIANTS = ("full", "no_checks", "no_json")


def run_variant(name: str, path: Path) -> float:
    problems = load_problems(path).problems
    cfg = ComposeConfig(depth=2, pool_size=20, seed=0, workers=1)
    patches = {
        "full": contextlib.nullcontext(),
        "no_checks": mock.patch.object(symbolic, "run_checks", lambda *a, **k: None),
        "no_json": [
            mock.patch.object(symbolic.SymbolicComposer, "record_json", lambda self, rec, chain: "{}"),
            mock.patch.object(Rejection, "row_json", lambda self, cid, chain: "{}"),  # the rejected rows
        ],
    }
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        for p in patches[name] if isinstance(patches[name], list) else [patches[name]]:
            stack.enter_context(p)
        return _timed(problems, cfg, Path(tmp) / name)


def stages(path: Path) -> None:
    """The full job once, in this process, with a timer around each stage (``--stages``)."""
    from composition_rl.jobs.compose import run as run_mod
    from composition_rl.jobs.compose.spill import SpillIndex

    seconds: dict[str, float] = {}
    calls: dict[str, int] = {}

    def timed(label, fn):
        def wrapper(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                seconds[label] = seconds.get(label, 0.0) + time.perf_counter() - t
                calls[label] = calls.get(label, 0) + 1
        return wrapper

    timers = [  # (where, name, label): none of them runs inside another
        (run_mod, "engine_pools", "parent: pools (eligibility, v1 of every problem)"),
        (symbolic, "find_constants", "per problem: constants, roles, flaws"),
        (symbolic, "decide", "per problem and constant: check 5 dependence"),
        (symbolic, "symbols_used", "per problem: symbols used"),
        (symbolic, "run_checks", "per record: checks 1-5"),
        (symbolic.SymbolicComposer, "record_json", "per record: JSON of an accepted record"),
        (Rejection, "row_json", "per record: JSON of a rejection"),
        (SpillIndex, "write_in_order", "parent: composed.jsonl in output order"),
    ]
    t0 = time.perf_counter()
    problems = load_problems(path).problems
    seconds["parent: load"], calls["parent: load"] = time.perf_counter() - t0, 1
    cfg = ComposeConfig(depth=2, pool_size=20, seed=0, workers=1)
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        for where, name, label in timers:
            stack.enter_context(mock.patch.object(where, name, timed(label, getattr(where, name))))
        t1 = time.perf_counter()
        st = run_compose(problems, cfg, Path(tmp) / "stages", progress=False)
        total = time.perf_counter() - t1 + seconds["parent: load"]
    print(f"{st['candidates']:,} candidates, {st['accepted']:,} accepted; pools {st['pools']} "
          f"(the last position holds {st['pools'][-1]:,} problems)")
    print(f"{'stage':<52}{'seconds':>8}{'share':>7}{'calls':>10}")
    for label, sec in sorted(seconds.items(), key=lambda kv: -kv[1]):
        print(f"{label:<52}{sec:8.2f}{sec / total:7.0%}{calls[label]:10,}")
    rest = total - sum(seconds.values())
    print(f"{'per record: the rest (choice, text, record, ids)':<52}{rest:8.2f}{rest / total:7.0%}")
    print(f"{'whole job, one process':<52}{total:8.2f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, default=DEFAULT)
    ap.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # one child run
    ap.add_argument("--stages", action="store_true", help="time each stage of one in-process run instead")
    args = ap.parse_args()
    if not args.input.exists():
        print(f"input not found: {args.input}", file=sys.stderr)
        return 2
    if args.stages:
        stages(args.input)
        return 0
    if args.variant:
        print(run_variant(args.variant, args.input))
        return 0
    t = {}
    for v in VARIANTS:
        cmd = [sys.executable, __file__, "--input", str(args.input), "--variant", v]
        t[v] = float(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()[-1])
    full = t["full"]
    print(f"full job, one process   {full:6.2f} s")
    for v, what in (("no_checks", "checks 1-4"), ("no_json", "JSON encoding")):
        print(f"without {what:<16}{t[v]:6.2f} s  -> {what} ~{full - t[v]:.2f} s ({(full - t[v]) / full:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
