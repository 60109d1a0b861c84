"""``crl browse RUN_DIR [--out FILE]``: one self-contained HTML page to look at a run folder
(compose, profile, eval, train, and folders that nest them such as ``crl demo``'s)."""

from __future__ import annotations

import argparse

from composition_rl.cli import UsageError

HELP = "write one self-contained HTML page to look at a run folder (no server, no network)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``crl browse``: the run folder, ``--out``, and the caps, seed and
    depth of what the page embeds."""
    p.add_argument("run_dir", help="a run folder (crl compose / profile / eval / train / demo output)")
    p.add_argument("--out", help="the HTML file to write (default RUN_DIR/report.html)")
    p.add_argument("--max-records", type=int, default=200_000,
                   help="composed records embedded per compose run; larger runs are sampled, seeded (default 200000)")
    p.add_argument("--max-rejects", type=int, default=50_000, help="rejects embedded per compose run (default 50000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample when a run is larger than the caps")
    p.add_argument("--max-depth", type=int, default=3, help="how many folders deep to look for nested runs (default 3)")


def report_path(run_dir: str, out: str | None):
    """Where the page goes: ``--out`` as given, inside it when it names a folder (an existing
    one, or one written with a trailing slash), else ``RUN_DIR/report.html``."""
    import os
    from pathlib import Path

    if not out:
        return Path(run_dir) / "report.html"
    if out.endswith((os.sep, "/")) or Path(out).is_dir():
        return Path(out) / "report.html"
    return Path(out)


def run(args: argparse.Namespace) -> int:
    """Write the run folder's self-contained HTML page (to :func:`report_path`, locked while it
    is written) and print where it went and its size; 0 on success."""
    from pathlib import Path

    from composition_rl.io.files import writable_file
    from composition_rl.io.runs import RunBusy, hold_lock, refuse_foreign
    from composition_rl.jobs.browse import BrowseConfig, build_report

    if not Path(args.run_dir).is_dir():  # before anything is made for the page
        raise UsageError(f"{args.run_dir} is not a folder: give a run folder (or a folder of runs)")
    out = report_path(args.run_dir, args.out)
    try:
        cfg = BrowseConfig(max_records=args.max_records, max_rejects=args.max_rejects, seed=args.seed,
                           max_depth=args.max_depth)
        # the page never replaces a file of the run it shows, or of any other run
        refuse_foreign("browse", files={"--out": out}, inputs={"RUN_DIR": args.run_dir})
        writable_file(out)
        with hold_lock(out, "browse", folder=False):
            path = build_report(args.run_dir, out, cfg)
    except (FileNotFoundError, ValueError, RunBusy) as e:
        raise UsageError(str(e)) from e
    size = Path(path).stat().st_size
    print(f"wrote {path} ({size / 1e6:.1f} MB); open it in a browser (no server needed)")
    return 0
