"""Compose throughput on the real MATH train set, side by side with the I/O floor.

    .venv/bin/python benchmarks/compose_throughput.py [--input ../shared/data/train/math_train.json] [--repeat 3]

Prints, from one run on one machine:
  * candidates per second of ``crl compose --depth 2 --pool-size 20 --seed 0`` (load included);
  * peak RSS of the compose parent and of the largest worker;
  * the CPU seconds of the parent and of the workers during compose: on a shared machine
    the wall time swings with the other jobs, the CPU time much less;
  * the ratio of the compose time to the I/O floor: load the same file and write the same
    number of records unchanged (each chain's last problem, serialized the same way),
    measured right after each compose;
  * for context, a second floor that writes input records until the file holds as many
    bytes as composed.jsonl (a composed record carries two problems, so the headline floor
    writes about half the bytes).
With ``--repeat N`` the compose/floor pair runs N times back to back and the median ratio is
the headline: on a shared machine one pair can be off by 2x either way.

Each compose runs in a fresh Python process of its own (this script with ``--one``), as
``crl compose`` does: its peak RSS is what a compose parent needs, and nothing else. Before
issue 28's third round the composes ran in this process, after a probe that built the pools
and beside the floor's loaded problems, and ``RUSAGE_SELF`` counted those too (and the
module caches and the previous pair's problems, growing by a few MB with each repeat: 91 MB
after one pair, 98 MB after two). The clock and the CPU counters start after the imports,
as before, so the times compare with the older figures. ``PYTHONPATH`` reaches the child,
so the same harness measures another checkout's code (``PYTHONPATH=/tmp/base/src``).

With ``--baseline-src DIR`` (another checkout's ``src/``, e.g. from ``git archive BASE src``)
each round also composes with that code in a fresh process of its own (``PYTHONPATH=DIR``), the
two composes in turn (this checkout first in odd rounds, the baseline first in even ones), and
the ratio of this checkout's compose time and CPU to the baseline's is printed, round by round
and as the median: the side-by-side figure of a change's cost.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from composition_rl.io.files import atomic_open, dumps
from composition_rl.io.readers import load_problems

try:
    from composition_rl.jobs.compose import ComposeConfig, run_compose
except ImportError:  # a --baseline-src tree from before the layout of issue 55
    from composition_rl.compose import ComposeConfig, run_compose

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


def io_floor_bytes(path: Path, n_bytes: int, out: Path) -> float:
    """Seconds to load ``path`` and write input records unchanged until the file holds
    ``n_bytes`` (as many bytes as the compose's composed.jsonl): context for the headline
    floor, which writes as many records as there are chains, each half a composed record's size."""
    t0 = time.perf_counter()
    problems = load_problems(path).problems
    with atomic_open(out / "floor_bytes.jsonl", "wb") as f:
        m = len(problems)
        i = written = 0
        while m and written < n_bytes:
            line = (dumps(problems[i % m].to_dict()) + "\n").encode()
            f.write(line)
            written += len(line)
            i += 1
    return time.perf_counter() - t0


def _cpu() -> tuple[float, float]:
    """User + system seconds of this process and of its reaped children (the workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def one_compose(args: argparse.Namespace, out: Path) -> dict:
    """Load and compose once in this (fresh) process; the figures of this process alone."""
    cfg = ComposeConfig(depth=args.depth, pool_size=args.pool_size, seed=args.seed, workers=args.workers)
    cpu0 = _cpu()
    t0 = time.perf_counter()
    problems = load_problems(args.input).problems
    stats = run_compose(problems, cfg, out, progress=False)
    compose_s = time.perf_counter() - t0
    cpu = [b - a for a, b in zip(cpu0, _cpu())]
    return {
        "compose_s": compose_s, "cpu_parent": cpu[0], "cpu_workers": cpu[1],
        # ru_maxrss in KiB: RUSAGE_SELF is this process alone, RUSAGE_CHILDREN the largest worker
        "rss_parent_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "rss_worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "problems": len(problems), "size_mb": (out / "composed.jsonl").stat().st_size / 1e6,
        "code": str(Path(sys.modules[run_compose.__module__].__file__).resolve().parents[1]),  # which checkout ran
        **{k: stats[k] for k in ("candidates", "accepted", "acceptance", "pools")},
    }


def _print_summary(args, runs: list[dict], pairs: list, bytes_pairs: list, base_runs: list, n_upper: int,
                   floor_mb: float) -> None:
    """The medians over the rounds: compose time against the I/O floor, CPU, peak RSS, and the
    baseline's ratio with ``--baseline-src``."""
    last = runs[-1]
    n = last["candidates"]
    compose_s = statistics.median(c for c, _ in pairs)
    floor = statistics.median(f for _, f in pairs)
    ratio = statistics.median(c / f for c, f in pairs)
    print(f"input            {args.input.name}: {last['problems']} problems, depth {args.depth}, pools {last['pools']}")
    print(f"candidates       {n:,} (accepted {last['accepted']:,} = {last['acceptance']:.1%}; composed.jsonl {last['size_mb']:.0f} MB)")
    workers = args.workers or os.cpu_count()
    print(f"compose          {compose_s:.2f} s  -> {n / compose_s:,.0f} candidates/s (median; load + compose + check + write, {workers} worker(s), {os.cpu_count()} cores)")
    print(f"I/O floor        {floor:.2f} s  (median; load + write {n_upper:,} records unchanged, {floor_mb:.0f} MB)")
    print(f"ratio            {ratio:.2f}x the I/O floor (median of {len(pairs)} pairs; range {min(c / f for c, f in pairs):.2f}-{max(c / f for c, f in pairs):.2f})")
    print(f"same-bytes floor {statistics.median(f for _, f in bytes_pairs):.2f} s  (median; load + write input records "
          f"unchanged up to composed.jsonl's {last['size_mb']:.0f} MB): {statistics.median(c / f for c, f in bytes_pairs):.2f}x "
          "(context only: the headline ratio is the one above)")
    print(f"CPU              parent {statistics.median(r['cpu_parent'] for r in runs):.2f} s, workers {statistics.median(r['cpu_workers'] for r in runs):.2f} s (median; the workers' sum)")
    worker_rss = max(r["rss_worker_mb"] for r in runs)
    print(f"peak RSS         compose parent {max(r['rss_parent_mb'] for r in runs):.0f} MB (the largest of {len(runs)} runs, "
          "each a fresh process), largest worker " + (f"{worker_rss:.0f} MB" if worker_rss else "- (none forked)"))
    if base_runs:
        wall = [a["compose_s"] / b["compose_s"] for a, b in base_runs]
        cpu = [(a["cpu_parent"] + a["cpu_workers"]) / (b["cpu_parent"] + b["cpu_workers"]) for a, b in base_runs]
        print(f"vs baseline      {args.baseline_src}: compose time {statistics.median(wall):.3f}x (median of {len(wall)} "
              f"rounds, in turn; range {min(wall):.3f}-{max(wall):.3f}), CPU {statistics.median(cpu):.3f}x; "
              f"accepted {base_runs[-1][0]['accepted']:,} vs {base_runs[-1][1]['accepted']:,}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", type=Path, default=DEFAULT)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--pool-size", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="compose/floor pairs to run (median ratio reported)")
    ap.add_argument("--baseline-src", type=Path, metavar="DIR",
                    help="another checkout's src/: compose with it too, in turn, and print the ratio")
    ap.add_argument("--one", type=Path, metavar="OUT", help=argparse.SUPPRESS)  # the child: one compose into OUT
    args = ap.parse_args()
    if not args.input.exists():
        print(f"input not found: {args.input}", file=sys.stderr)
        return 2
    if args.one:
        print(json.dumps(one_compose(args, args.one)))
        return 0
    if args.baseline_src is not None and not (args.baseline_src / "composition_rl").is_dir():
        print(f"--baseline-src {args.baseline_src}: give the other checkout's src/ (the folder that holds "
              "composition_rl/); anything else would import this checkout and compare it with itself", file=sys.stderr)
        return 2
    child = [sys.executable, __file__, "--input", str(args.input), "--depth", str(args.depth), "--pool-size",
             str(args.pool_size), "--seed", str(args.seed), "--workers", str(args.workers)]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        pairs = []
        bytes_pairs = []  # (compose, the floor that writes as many bytes)
        runs = []
        base_runs = []  # (this checkout's run, the baseline's run), with --baseline-src

        def compose_once(src: Path | None) -> dict:
            env = dict(os.environ)
            if src is not None:
                env["PYTHONPATH"] = os.pathsep.join(p for p in (str(src.resolve()), env.get("PYTHONPATH", "")) if p)
            done = subprocess.run([*child, "--one", str(tmp / ("base" if src else "out"))], check=True,
                                  stdout=subprocess.PIPE, text=True, env=env)
            return json.loads(done.stdout.strip().splitlines()[-1])

        for r in range(max(1, args.repeat)):
            if args.baseline_src is not None and r % 2:  # the baseline first in even rounds
                base = compose_once(args.baseline_src)
                run = compose_once(None)
            else:
                run = compose_once(None)
                base = compose_once(args.baseline_src) if args.baseline_src is not None else None
            if base is not None:
                if Path(base["code"]) != args.baseline_src.resolve() / "composition_rl":
                    print(f"the baseline imported {base['code']}, not {args.baseline_src}", file=sys.stderr)
                    return 2
                base_runs.append((run, base))
                print(f"round {r + 1} vs base  compose {run['compose_s']:.2f} s vs {base['compose_s']:.2f} s -> "
                      f"{run['compose_s'] / base['compose_s']:.3f}x; CPU {run['cpu_parent'] + run['cpu_workers']:.2f} s vs "
                      f"{base['cpu_parent'] + base['cpu_workers']:.2f} s; accepted {run['accepted']:,} vs {base['accepted']:,}")
            n_upper = math.prod(run["pools"])  # the chains the floor writes as many records for
            floor = io_floor(args.input, n_upper, tmp)
            floor_mb = (tmp / "floor.jsonl").stat().st_size / 1e6
            floor_b = io_floor_bytes(args.input, int(run["size_mb"] * 1e6), tmp)
            compose_s = run["compose_s"]
            pairs.append((compose_s, floor))
            bytes_pairs.append((compose_s, floor_b))
            runs.append(run)
            print(f"pair {r + 1}           compose {compose_s:.2f} s, floor {floor:.2f} s -> {compose_s / floor:.2f}x; "
                  f"same-bytes floor {floor_b:.2f} s ({compose_s / floor_b:.2f}x); "
                  f"CPU parent {run['cpu_parent']:.2f} s, workers {run['cpu_workers']:.2f} s; "
                  f"peak RSS parent {run['rss_parent_mb']:.0f} MB, largest worker {run['rss_worker_mb']:.0f} MB")

    _print_summary(args, runs, pairs, bytes_pairs, base_runs, n_upper, floor_mb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
