"""``crl browse RUN_DIR [--out FILE]``: one self-contained HTML page to look at a run folder
(compose, profile, eval, train, and folders that nest them such as ``crl demo``'s)."""

from __future__ import annotations

import argparse

from composition_rl.cli import UsageError

HELP = "write one self-contained HTML page to look at a run folder (no server, no network)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a run folder (crl compose / profile / eval / train / demo output)")
    p.add_argument("--out", help="the HTML file to write (default RUN_DIR/report.html)")
    p.add_argument("--max-records", type=int, default=200_000,
                   help="composed records embedded per compose run; larger runs are sampled, seeded (default 200000)")
    p.add_argument("--max-rejects", type=int, default=50_000, help="rejects embedded per compose run (default 50000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample when a run is larger than the caps")
    p.add_argument("--max-depth", type=int, default=3, help="how many folders deep to look for nested runs (default 3)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from composition_rl.browse import BrowseConfig, build_report
    from composition_rl.io.files import writable_file

    try:
        cfg = BrowseConfig(max_records=args.max_records, max_rejects=args.max_rejects, seed=args.seed,
                           max_depth=args.max_depth)
        writable_file(args.out if args.out else Path(args.run_dir) / "report.html")
        path = build_report(args.run_dir, args.out, cfg)
    except (FileNotFoundError, ValueError) as e:
        raise UsageError(str(e)) from e
    size = Path(path).stat().st_size
    print(f"wrote {path} ({size / 1e6:.1f} MB); open it in a browser (no server needed)")
    return 0
