"""``crl eval``: avg@k and unbiased pass@k on benchmarks, and the compositional analyses.

    crl eval --model runs/tiny --benchmark ../shared/data/eval/aime24.json \\
        --benchmark ../shared/data/eval/math500.parquet -n 8 --out runs/eval
    crl eval --base-url http://localhost:8000/v1 --model Qwen3-4B \\
        --benchmark ../shared/data/eval/math500.parquet --compositional 2,3 -n 8 --out runs/eval-comp
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from composition_rl.cli import UsageError

HELP = "evaluate a policy on benchmarks: avg@k, pass@k, compositional analyses"
RESUMABLE = True  # a rerun continues from the finished work


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``crl eval``: the shared model, backend and decoding flags,
    ``--benchmark`` (repeatable), ``--out`` and the compositional analyses (``--compositional``,
    ``--comp-*``)."""
    from composition_rl.jobs.profile import add_backend_arguments

    add_backend_arguments(p)
    p.add_argument(
        "--benchmark",
        action="append",
        required=True,
        metavar="FILE",
        help="benchmark file (json, jsonl, csv, tsv, parquet; also .gz/.zst); repeat for several",
    )
    p.add_argument("--out", required=True, help="output folder (rerun the same command to resume)")
    c = p.add_argument_group("compositional analyses (Composition-RL, Section 5.2)")
    c.add_argument(
        "--compositional",
        metavar="DEPTHS",
        help="also build depth-K test sets from each benchmark (e.g. 2,3) and compare side by side",
    )
    c.add_argument("--comp-max", type=int, default=200, help="most composed prompts per benchmark and depth")
    c.add_argument("--comp-pool-size", type=int, default=20, help="|D_k| for the earlier positions")
    c.add_argument("--comp-seed", type=int, default=0, help="seed of the composed test sets")


def run(args: argparse.Namespace) -> int:
    """Evaluate the policy on every ``--benchmark`` (resuming a rerun) and print the results
    table; 1 when generation failed or no benchmark was evaluated."""
    from composition_rl.jobs.evaluate import EvalConfig, evaluate_from_args
    from composition_rl.jobs.profile import chunk_from_args, sampling_from_args
    from composition_rl.rollout.base import RolloutError

    try:
        config = EvalConfig(n=args.n, sampling=sampling_from_args(args), template=args.template, chunk=chunk_from_args(args))
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
    from composition_rl.io.runs import RunBusy, run_folder

    try:
        with run_folder(args.out, "eval", inputs={f"--benchmark {b}": b for b in args.benchmark},
                        refusals=(UsageError, ValueError), work=("samples",)):
            try:
                run = evaluate_from_args(args, config, verify_config, fallbacks)
            except RolloutError as e:
                print(f"crl: generation failed: {e}\nfinished prompts are saved; rerun the same command to resume",
                      file=sys.stderr)
                return 1
            return _report(args, run)
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None


def _report(args: argparse.Namespace, run) -> int:
    """Print the results table and where the files are (see
    :func:`composition_rl.jobs.evaluate.evaluate_from_args`); 1 when no benchmark was evaluated."""
    if run.input_rejects:
        print(f"{len(run.input_rejects)} rows set aside before sampling -> {Path(args.out) / 'input_rejects.jsonl'}",
              file=sys.stderr)
    print((Path(args.out) / "results.md").read_text(encoding="utf-8"))
    print(f"wrote {Path(args.out) / 'results.json'} and per-sample responses under {Path(args.out) / 'samples'}")
    return 0 if run.results["benchmarks"] else 1
