"""``crl score``: score responses against gold answers with the bounded verifier.

    crl score --input rollouts.jsonl --out scored.jsonl
    crl score --input rollouts.jsonl --out scored.jsonl --timeout 2 --response-field completion

Each input line (JSONL; a JSON array, CSV, TSV or Parquet also work, .gz/.zst too) needs a
response and a gold answer (a LaTeX string, a number, or a list of accepted forms). Each
output line is the input row plus ``outcome``, ``score`` and ``extracted``, in input order.
Rows that cannot be scored (not JSON, no response text, no usable answer) go to
``<out>.rejects.jsonl`` with the line and the reason, so input rows = scored + rejected.
Output is appended chunk by chunk: rerun the same command after an interruption and it
continues where it stopped. The options that change a score (fields, fallbacks, timeout) are
kept in ``<out>.options.json``; a rerun with other options refuses (``--fresh`` rescores).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from composition_rl.cli import UsageError

HELP = "score responses against gold answers with the bounded verifier"
RESUMABLE = True  # a rerun continues from the finished work


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``crl score``: ``--input``, ``--out``, the field names,
    ``--timeout``, ``--workers``, ``--fallback``, ``--fresh`` and ``--no-progress``."""
    p.add_argument("--input", required=True, help="JSONL (or .json array, .parquet) with response and answer fields")
    p.add_argument("--out", required=True, help="JSONL output: each row plus outcome, score, extracted")
    p.add_argument("--response-field", default="response", help="field holding the model response (default: response)")
    p.add_argument("--answer-field", default="answer", help="field holding the gold answer(s) (default: answer)")
    p.add_argument("--timeout", type=float, default=5.0, help="hard bound per item in seconds (default: 5)")
    p.add_argument("--workers", type=int, help="worker processes (default: one per usable core)")
    from composition_rl.grading.verifier import FALLBACK_HELP

    p.add_argument("--fallback", action="append", help=FALLBACK_HELP)
    p.add_argument("--fresh", action="store_true", help="discard an existing --out (and its rejects) and score again")
    from composition_rl.progress import progress_help

    p.add_argument("--no-progress", action="store_true", help=progress_help())


def run(args: argparse.Namespace) -> int:
    """Score each ``--input`` row against its gold answer, appending to ``--out`` (resuming a
    rerun), and print the accuracy and outcome counts; 1 when no row could be scored."""
    from composition_rl.grading import Verifier, VerifyConfig
    from composition_rl.grading.verifier import fallbacks_from_names

    fallbacks = fallbacks_from_names(args.fallback)
    try:
        config = VerifyConfig(timeout_s=args.timeout, workers=args.workers, fallbacks=fallbacks)
    except ValueError as e:
        from composition_rl.flags import in_flags

        raise UsageError(in_flags(e, {"timeout_s": "--timeout", "workers": "--workers", "fallbacks": "--fallback"})
                         ) from None
    from composition_rl.jobs.score import ScoreRefused, prepare_outputs, score_options, score_paths

    out, rejects_path, meta_path = score_paths(args.out)
    if not Path(args.input).is_file():
        raise UsageError(f"--input {args.input} is not a file")
    import contextlib

    from composition_rl.io.runs import RunBusy, hold_lock, refuse_foreign

    with contextlib.ExitStack() as stack:
        try:
            from composition_rl.io.files import refuse_overwrite

            refuse_overwrite({"--input": args.input}, (out, rejects_path, meta_path))  # the input first
            refuse_foreign("score", files={"--out": out, "its rejects file": rejects_path,
                                           "its options file": meta_path})
            # two runs appending to one file would write every row twice
            stack.enter_context(hold_lock(out, "score", folder=False))
        except (RunBusy, ValueError) as e:
            raise UsageError(str(e)) from None
        # a refused run leaves nothing: the output files it creates go again (with the lock held)
        new = [p for p in (out, rejects_path, meta_path) if not p.exists()]
        sizes = [p.stat().st_size if p.is_file() else 0 for p in (out, rejects_path)]
        try:
            prepare_outputs(args.input, out, rejects_path, meta_path,
                            score_options(args.input, args.response_field, args.answer_field, fallbacks, args.timeout),
                            args.fresh)
            # The workers start (Math-Verify imports, ~1-2 s) while this process reads the input.
            with Verifier(config).start() as verifier:
                return _score(args, verifier, out, rejects_path)
        except ScoreRefused as e:
            now = [p.stat().st_size if p.is_file() else 0 for p in (out, rejects_path)]
            if now == sizes:  # no row scored
                for p in new:
                    p.unlink(missing_ok=True)
            raise UsageError(str(e)) from None


def _score(args: argparse.Namespace, verifier, out: Path, rejects_path: Path) -> int:
    """Score the rows not yet in ``out`` (:mod:`composition_rl.jobs.score`) and print the tally."""
    from composition_rl.jobs.score import (
        fields_seen,
        read_input_rows,
        resume_point,
        score_rows,
        top_reasons,
    )

    rows = read_input_rows(args.input)
    start = resume_point(out, rows, rejects_path)
    if start and start == len(rows):
        print(f"all {len(rows)} rows of {args.input} are already in {out} (and its rejects), scored with the "
              "same options: nothing to do (--fresh scores again)")
        return 0
    if start:
        print(f"resuming: {start} of {len(rows)} rows already in {out} / {rejects_path.name}", file=sys.stderr)
    tally = score_rows(rows, start, verifier, out, rejects_path, args.response_field, args.answer_field,
                       progress=not args.no_progress)
    counts = tally.counts
    n = sum(counts.values())
    acc = counts["correct"] / n if n else 0.0
    summary = ", ".join(f"{k} {v}" for k, v in counts.items())
    print(f"scored {n} rows in {tally.wall:.1f}s (accuracy {100 * acc:.1f}%): {summary} -> {out}")
    print(f"slowest item {tally.slowest:.2f}s (bound {verifier.config.timeout_s:g}s)")
    if tally.rejected:
        print(f"rejected {tally.rejected} rows (reasons in {rejects_path})")
    if n == 0 and start == 0:
        print(f"crl score: error: no row of {args.input} could be scored: {top_reasons(rejects_path)}. "
              f"Fields are chosen with --response-field (now {args.response_field!r}) and --answer-field "
              f"(now {args.answer_field!r}){fields_seen(rows)}", file=sys.stderr)
        return 1
    return 0
