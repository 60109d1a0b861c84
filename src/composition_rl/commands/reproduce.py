"""``crl reproduce --out DIR [--seeds 3] [--quick]``: the paper's mechanism at toy scale, with intervals.

Flags other than ``--out``, ``--quick`` and ``--no-progress`` are generated from
:class:`composition_rl.jobs.reproduce.ReproduceConfig`, whose fields carry their help text.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from composition_rl.cli import UsageError

HELP = "reproduce Fig. 2 and Table 1 at toy scale on CPU: seeds, 95%% intervals, figures"
# finished jobs leave seed_S/jobs/*.json; the same command continues from them
RESUMABLE = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``crl reproduce``: ``--out``, ``--quick``, ``--no-progress`` and one
    flag per :class:`ReproduceConfig` field."""
    from composition_rl.jobs.reproduce.config import ReproduceConfig

    p.add_argument("--out", required=True, help="output folder (rerun the same command to resume)")
    p.add_argument("--quick", action="store_true",
                   help="1 seed and shorter phases (about 8 min on 2 cores): a smoke run, not evidence")
    from composition_rl.progress import progress_help

    p.add_argument("--no-progress", action="store_true", help=progress_help())
    for name, default, help_ in ReproduceConfig.fields_help():
        flag = "--" + name.replace("_", "-")
        if name == "seeds":
            p.add_argument(flag, default=None, metavar="N|LIST",
                           help=f"{help_}: a count (5 = seeds 0-4) or a list (0,5,7; one seed: 7,); default 5 (--quick: 1)")
        elif isinstance(default, tuple):
            p.add_argument(flag, default=None, metavar="A,B", help=f"{help_} (default {','.join(default)})")
        else:
            p.add_argument(flag, type=type(default), default=None, metavar=type(default).__name__.upper(),
                           help=f"{help_} (default {default})")


def _config(args: argparse.Namespace):
    from composition_rl.jobs.reproduce.config import ReproduceConfig

    over = {}
    for name, default, _ in ReproduceConfig.fields_help():
        value = getattr(args, name)
        if value is None:
            continue
        if name == "seeds":
            parts = [x for x in str(value).split(",") if x.strip()]
            try:
                nums = [int(x) for x in parts]
            except ValueError:
                raise UsageError(f"--seeds {value!r}: give a count (3) or a comma list of integers (0,5,7)") from None
            # a bare number is a count; anything with a comma is a list ("7," is the one seed 7)
            value = tuple(range(nums[0])) if "," not in str(value) else tuple(nums)
        elif isinstance(default, tuple):
            value = tuple(x.strip() for x in str(value).split(",") if x.strip())
        over[name] = value
    try:
        return ReproduceConfig.quick(**over) if args.quick else ReproduceConfig(**over)
    except ValueError as e:
        raise UsageError(str(e)) from e


def run(args: argparse.Namespace) -> int:
    """Run the toy-scale reproduction for every seed (resuming finished jobs) and print the
    summary lines and where the report and numbers are; 0 on success."""
    from rich.console import Console

    from composition_rl.jobs.reproduce import run_reproduce
    from composition_rl.jobs.reproduce.report import summary_lines

    cfg = _config(args)
    con = Console()
    out = Path(args.out)
    con.print(f"reproducing with seeds {list(cfg.seeds)} on {cfg.workers} worker(s) -> {out}/")
    from composition_rl.io.runs import RunBusy, record_run, run_folder

    try:
        with run_folder(out, "reproduce", refusals=(UsageError, ValueError), work=("seed_*",)):
            record_run(out, "reproduce")
            res = run_reproduce(cfg, out, progress=not args.no_progress, log=con.print)
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from e
    for line in summary_lines(res):
        con.print(f"- {line}")
    con.print(f"report: {out / 'report.md'}; numbers: {out / 'results.json'}; wall {res['wall_s']:.0f} s")
    return 0
