"""``crl demo --out DIR``: the main job end to end on the built-in default data.

1. generate the default problems with reasoning-gym (fixed seed) -> ``DIR/data/depth1.jsonl``;
2. compose depth 2 and depth 3 with the symbolic engine -> ``DIR/compose/depth{2,3}/``
   (``composed.jsonl``, ``rejected.jsonl``, ``stats.json``, ``verl.parquet``, ``trl.parquet``);
3. unless ``--compose-only``: build the tiny model offline -> ``DIR/model/``, and train a
   short depth curriculum (1 -> 2 -> 3) with GRPO and dynamic sampling on CPU ->
   ``DIR/train/`` (``metrics.jsonl``, ``solve_rates.png``, ``config.yaml``): solve_all climbs on
   the depth-1 pool until the curriculum sees it saturate, then compositions of that pool
   bring the informative groups back (see jobs/demo.py);
4. print what the run shows and write ``DIR/summary.json``.

No user data and no network are needed.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from composition_rl.cli import UsageError

HELP = "run the main job end to end on the built-in default data"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``crl demo``: ``--out``, ``--seed``, ``--compose-only``,
    ``--max-candidates`` and ``--no-progress``."""
    p.add_argument("--out", required=True, help="output folder (everything is written under it)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the data, the composition, the tiny model and training (same seed, same run)")
    p.add_argument("--compose-only", action="store_true", help="stop after composing (no model, no training)")
    p.add_argument("--max-candidates", type=int, default=4000, help="candidates per depth (default 4000)")
    from composition_rl.progress import progress_help

    p.add_argument("--no-progress", action="store_true", help=progress_help())


def run(args: argparse.Namespace) -> int:
    """Run the demo in the held ``--out`` folder (training too unless ``--compose-only``),
    printing each step and what the run shows; 0 on success."""
    from rich.console import Console

    from composition_rl.io.runs import RunBusy, record_run, run_folder

    con = Console()
    out = Path(args.out)
    t0 = time.perf_counter()
    try:
        with run_folder(out, "demo", refusals=(UsageError, ValueError)):
            record_run(out, "demo", {"seed": args.seed, "compose_only": args.compose_only,
                                     "max_candidates": args.max_candidates})
            return _demo(args, con, out, t0)
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None


def _demo(args: argparse.Namespace, con, out: Path, t0: float) -> int:
    """The demo itself, with ``--out`` held (see :func:`run`)."""
    from composition_rl.jobs.compose.job import summary_renderables
    from composition_rl.jobs.demo import demo_compose, demo_data

    con.rule("[bold]1. data: reasoning-gym numeric generators (built-in default)")
    try:
        data = demo_data(out, seed=args.seed)
    except ImportError as e:  # the demo extra is not installed: say which one, no traceback
        raise UsageError(str(e)) from e
    con.print(f"{len(data.problems)} problems from {len({p.metadata['generator'] for p in data.problems})} generators "
              f"({len(data.rejects)} duplicate rows set aside) -> {out / 'data' / 'depth1.jsonl'}")

    summary: dict[str, Any] = {"problems": len(data.problems), "compose": {}}
    for depth in (2, 3):
        con.rule(f"[bold]2. compose depth {depth}")
        stats, d = demo_compose(data, out, depth, seed=args.seed, max_candidates=args.max_candidates,
                                progress=not args.no_progress)
        paths = [d / "verl.parquet", d / "trl.parquet"]
        for part in summary_renderables(stats, d, paths, stats["elapsed_s"]):
            con.print(part)
        summary["compose"][depth] = {k: stats[k] for k in ("candidates", "accepted", "rejected_by_reason")}

    if not args.compose_only:
        from composition_rl.jobs.demo import train_demo

        con.rule("[bold]3. tiny model and curriculum training (CPU)")
        summary["train"] = train_demo(out, seed=args.seed, progress=not args.no_progress, log=print)
        mech = summary["train"]["mechanism"]
        summary["what_it_shows"] = [mech["captions"]["ratios"], mech["captions"]["reward"]]
        con.rule("[bold]what the run shows")
        for line in summary["what_it_shows"]:
            con.print(line)
        for name, ok in mech["checks"].items():
            con.print(f"[{'green' if ok else 'red'}]{'ok' if ok else 'NO'}[/] {name.replace('_', ' ')}")
        con.print(f"plot: {summary['train']['plot']}")

    summary["elapsed_s"] = round(time.perf_counter() - t0, 1)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    con.rule("[bold]done")
    con.print(f"everything is under {out}/ (summary.json), in {summary['elapsed_s']} s")
    return 0
