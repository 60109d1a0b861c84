"""Compose throughput on the real MATH train set, side by side with the I/O floor.

    .venv/bin/python benchmarks/compose_throughput.py [--input ../shared/data/train/math_train.json] [--repeat 3]

Prints, from one run on one machine:
  * candidates per second of ``crl compose --depth 2 --pool-size 20 --seed 0`` (load included);
  * peak RSS of the parent and of the largest worker;
  * the CPU seconds of the parent and of the workers during compose: on a shared machine
    the wall time swings with the other jobs, the CPU time much less;
  * the ratio of the compose time to the I/O floor: load the same file and write the same
    number of records unchanged (each chain's last problem, serialized the same way),
    measured in the same process just before.
With ``--repeat N`` the floor/compose pair runs N times back to back and the median ratio is
the headline: on a shared machine one pair can be off by 2x either way.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from composition_rl.compose import ComposeConfig, run_compose
from composition_rl.compose.pools import build_pools, count_candidates
from composition_rl.compose.symbolic import SymbolicComposer
from composition_rl.io.files import atomic_open, dumps
from composition_rl.io.readers import load_problems

DEFAULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "train" / "math_train.json"


def io_floor(path: Path, n_records: int, out: Path) -> float:
    """Seconds to load ``path`` and write ``n_records`` input records unchanged."""
    t0 = time.perf_counter()
    problems = load_problems(path).problems
    with atomic_open(out / "floor.jsonl") as f:
        m = len(problems)
        for i in range(n_records):
            f.write(dumps(problems[i % m].to_dict()) + "\n")
    return time.perf_counter() - t0


def _cpu() -> tuple[float, float]:
    """User + system seconds of this process and of its reaped children (the workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, default=DEFAULT)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--pool-size", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="floor/compose pairs to run (median ratio reported)")
    args = ap.parse_args()
    if not args.input.exists():
        print(f"input not found: {args.input}", file=sys.stderr)
        return 2
    cfg = ComposeConfig(depth=args.depth, pool_size=args.pool_size, seed=args.seed, workers=args.workers)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        # how many candidates the run will see (pools are cheap to build)
        probe = load_problems(args.input).problems
        eng = SymbolicComposer(seed=args.seed)
        pools = build_pools([probe] * cfg.depth, cfg.sizes, cfg.seed, lambda p, k: eng.eligible(p, k, cfg.depth))
        n_upper = count_candidates(pools)
        del probe, pools

        pairs = []
        cpus = []
        for r in range(max(1, args.repeat)):
            floor = io_floor(args.input, n_upper, tmp)
            floor_mb = (tmp / "floor.jsonl").stat().st_size / 1e6
            cpu0 = _cpu()
            t0 = time.perf_counter()
            problems = load_problems(args.input).problems
            stats = run_compose(problems, cfg, tmp / "out", progress=False)
            compose_s = time.perf_counter() - t0
            cpu = [b - a for a, b in zip(cpu0, _cpu())]
            size_mb = (tmp / "out" / "composed.jsonl").stat().st_size / 1e6
            pairs.append((compose_s, floor))
            cpus.append(cpu)
            print(f"pair {r + 1}           compose {compose_s:.2f} s, floor {floor:.2f} s -> {compose_s / floor:.2f}x; "
                  f"CPU parent {cpu[0]:.2f} s, workers {cpu[1]:.2f} s")

    self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    child_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    n = stats["candidates"]
    compose_s = statistics.median(c for c, _ in pairs)
    floor = statistics.median(f for _, f in pairs)
    ratio = statistics.median(c / f for c, f in pairs)
    print(f"input            {args.input.name}: {len(problems)} problems, depth {cfg.depth}, pools {stats['pools']}")
    print(f"candidates       {n:,} (accepted {stats['accepted']:,} = {stats['acceptance']:.1%}; composed.jsonl {size_mb:.0f} MB)")
    workers = args.workers or os.cpu_count()
    print(f"compose          {compose_s:.2f} s  -> {n / compose_s:,.0f} candidates/s (median; load + compose + check + write, {workers} worker(s), {os.cpu_count()} cores)")
    print(f"I/O floor        {floor:.2f} s  (median; load + write {n_upper:,} records unchanged, {floor_mb:.0f} MB)")
    print(f"ratio            {ratio:.2f}x the I/O floor (median of {len(pairs)} pairs; range {min(c / f for c, f in pairs):.2f}-{max(c / f for c, f in pairs):.2f})")
    print(f"CPU              parent {statistics.median(c[0] for c in cpus):.2f} s, workers {statistics.median(c[1] for c in cpus):.2f} s (median; the workers' sum)")
    print(f"peak RSS         parent {self_rss:.0f} MB, largest worker " + (f"{child_rss:.0f} MB" if child_rss else "- (none forked)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
