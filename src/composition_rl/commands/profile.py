"""``crl profile``: per-prompt pass rates of a policy, and ``--keep goldilocks`` filtering.

    crl profile --model runs/tiny --input data.jsonl -n 8 --out runs/profile
    crl profile --base-url http://localhost:8000/v1 --model Qwen3-4B --input composed.jsonl \\
        -n 8 --out runs/profile-composed --keep goldilocks --keep-out composed.goldilocks.jsonl
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from composition_rl.cli import UsageError

HELP = "measure per-prompt pass rates of a policy (solve_all / goldilocks / solve_none)"
RESUMABLE = True  # a rerun continues from the finished work


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``crl profile``: the shared model, backend and decoding flags,
    ``--input``, ``--out``, ``--confidence``, ``--keep-responses`` and the ``--keep`` filter."""
    from composition_rl.jobs.profile import add_backend_arguments

    add_backend_arguments(p)
    p.add_argument("--input", required=True,
                   help="problems file (json, jsonl, csv, tsv, parquet; also .gz/.zst), or a composed.jsonl")
    p.add_argument("--out", required=True, help="output folder (rerun the same command to resume)")
    p.add_argument("--confidence", type=float, default=0.95, help="Wilson interval level")
    p.add_argument("--keep-responses", action="store_true", help="store every response in profile.jsonl")
    p.add_argument(
        "--keep",
        help="after profiling, write the input problems in this band to --keep-out: band names (goldilocks, "
        "informative, solve_all, solve_none, stale) or a pass-rate interval LO,HI such as 0.125,0.875 or (0,1)",
    )
    p.add_argument("--keep-out", help="file for --keep (default OUT/kept.jsonl); rejects go beside it")


def run(args: argparse.Namespace) -> int:
    """Profile the policy's pass rate on each ``--input`` prompt (resuming a rerun), print the
    band counts and, with ``--keep``, write the prompts in that band; 1 when generation failed."""
    from composition_rl.jobs.profile import (
        ProfileConfig,
        chunk_from_args,
        profile_from_args,
        sampling_from_args,
    )
    from composition_rl.rollout.base import RolloutError
    from composition_rl.stats import parse_band

    if args.keep:
        try:
            parse_band(args.keep)
        except ValueError as e:
            raise UsageError(str(e)) from None
    try:
        config = ProfileConfig(
            n=args.n,
            sampling=sampling_from_args(args),
            template=args.template,
            chunk=chunk_from_args(args),
            confidence=args.confidence,
            keep_responses=args.keep_responses,
        )
    except ValueError as e:
        raise UsageError(str(e)) from None
    from composition_rl.grading import VerifyConfig
    from composition_rl.grading.verifier import fallbacks_from_names

    fallbacks = fallbacks_from_names(args.fallback)
    try:
        verify_config = VerifyConfig(timeout_s=args.verify_timeout, fallbacks=fallbacks)
    except ValueError as e:
        from composition_rl.flags import in_flags

        raise UsageError(in_flags(e, {"timeout_s": "--verify-timeout", "fallbacks": "--fallback"})) from None
    out = Path(args.out)
    keep_out = Path(args.keep_out) if args.keep_out else out / "kept.jsonl"
    keep_rejects = keep_out.with_name(keep_out.stem + ".rejects.jsonl")
    from composition_rl.io.runs import RunBusy, run_folder

    try:
        with run_folder(out, "profile", inputs={"--input": args.input},
                        files={"--keep-out": keep_out if args.keep else None,
                               "the --keep-out rejects file": keep_rejects if args.keep else None},
                        refusals=(UsageError, ValueError), work=("profile.jsonl",)):
            try:
                run = profile_from_args(args, config, out, verify_config, fallbacks, keep_out, keep_rejects)
            except RolloutError as e:
                print(f"crl: generation failed: {e}\nfinished prompts are saved; rerun the same command to resume",
                      file=sys.stderr)
                return 1
            _report(args, run, out, keep_out, keep_rejects)
            return 0
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None


def _report(args: argparse.Namespace, run, out: Path, keep_out: Path, rej_path: Path) -> None:
    """Print what the profile run did (see :func:`composition_rl.jobs.profile.profile_from_args`)."""
    from composition_rl.jobs.profile import no_answer_note

    summary, input_rejects = run.summary, run.input_rejects
    c = summary["counts"]
    print(
        f"profiled {summary['prompts']} prompts at n={summary['n']}: "
        f"solve_all {c['solve_all']} ({100 * (summary['solve_all'] or 0):.1f}%), "
        f"goldilocks {c['goldilocks']} ({100 * (summary['goldilocks'] or 0):.1f}%), "
        f"solve_none {c['solve_none']} ({100 * (summary['solve_none'] or 0):.1f}%) -> {out}"
        + (f"; {len(input_rejects)} input rows rejected -> {out / 'input_rejects.jsonl'}" if input_rejects else "")
    )
    note = no_answer_note(summary["no_answer"], summary["replies"])
    if note:
        print(note, file=sys.stderr)
    if args.keep:
        print(f"--keep {args.keep}: kept {len(run.kept)} -> {keep_out}; dropped {len(run.dropped)} -> {rej_path}")
