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
from composition_rl.commands.profile import (
    add_backend_arguments,
    backend_from_args,
    chunk_from_args,
    fit_to_context,
    load_input,
    sampling_from_args,
)

HELP = "evaluate a policy on benchmarks: avg@k, pass@k, compositional analyses"
RESUMABLE = True  # a rerun continues from the finished work


def add_arguments(p: argparse.ArgumentParser) -> None:
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


def _depths(spec: str) -> list[int]:
    try:
        depths = sorted({int(x) for x in spec.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"--compositional {spec!r}: give depths like 2,3") from None
    if not depths or min(depths) < 2:
        raise UsageError(f"--compositional {spec!r}: depths must be >= 2")
    return depths


def _names(paths: list[str]) -> list[str]:
    """Benchmark names from file stems; a repeated stem gets its parent folder in front."""
    stems = [Path(p).stem for p in paths]
    return [
        f"{Path(p).parent.name}-{s}" if stems.count(s) > 1 else s for p, s in zip(paths, stems)
    ]


def build_compositional(problems, depths, args):
    """{depth: composed problems} built from a benchmark with the composition engine."""
    from composition_rl.compose.pipeline import ComposeConfig, compose_problems

    out = {1: problems}
    for d in depths:
        cfg = ComposeConfig(
            depth=d,
            pool_size=args.comp_pool_size,
            max_candidates=args.comp_max,
            seed=args.comp_seed,
        )
        res = compose_problems(problems, cfg)
        print(
            f"  depth {d}: {len(res.accepted)} composed prompts from {res.candidates} candidates"
            + (f" (rejected: {res.by_reason()})" if res.rejected else "")
        )
        out[d] = res.accepted
    return out


def run(args: argparse.Namespace) -> int:
    from composition_rl.evaluate import EvalConfig

    try:
        config = EvalConfig(n=args.n, sampling=sampling_from_args(args), template=args.template, chunk=chunk_from_args(args))
    except ValueError as e:
        raise UsageError(str(e)) from None
    from composition_rl.verify import VerifyConfig
    from composition_rl.verify.verifier import fallbacks_from_names

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
            return _evaluate(args, config, verify_config, fallbacks)
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None


def _evaluate(args: argparse.Namespace, config, verify_config, fallbacks) -> int:
    """The evaluation itself, with ``--out`` held (see :func:`run`)."""
    from composition_rl.backends.rollout import RolloutError
    from composition_rl.evaluate import evaluate_benchmarks
    from composition_rl.io.identity import run_identity
    from composition_rl.profile import RunMismatch

    depths = _depths(args.compositional) if args.compositional else []
    input_rejects: list = []
    benchmarks = {}
    for name, path in zip(_names(args.benchmark), args.benchmark):
        rejects: list = []
        benchmarks[name] = load_input(path, args, rejects)
        input_rejects += [{"benchmark": name, **r} for r in rejects]
    backend = backend_from_args(args)
    from composition_rl.verify import shared_verifier

    try:
        # the backend says what fits its context (a GGUF's is known only once it is loaded)
        for name, path in zip(_names(args.benchmark), args.benchmark):
            benchmarks[name], too_long = fit_to_context(benchmarks[name], args, where=path, backend=backend)
            input_rejects += [{"benchmark": name, **r} for r in too_long]
            if not benchmarks[name]:
                raise UsageError(f"{path}: no prompt fits the context of {args.model} ({len(too_long)} set aside)")
        compositional = None
        if depths:
            compositional = {}
            for name, probs in benchmarks.items():
                print(f"composing {name}:")
                compositional[name] = build_compositional(probs, depths, args)
        for name in compositional or {}:
            for d in depths:
                compositional[name][d], too_long = fit_to_context(compositional[name][d], args,
                                                                  where=f"{name} depth {d}", backend=backend)
                input_rejects += [{"benchmark": name, "depth": d, **r} for r in too_long]
        # The process-wide pool: one per process, closed at exit (see verify.shared_verifier).
        verifier = shared_verifier(verify_config)
        results = evaluate_benchmarks(
            benchmarks,
            backend,
            verifier,
            args.out,
            config,
            compositional=compositional,
            progress=not args.no_progress,
            extra_run_info={"benchmarks": list(args.benchmark)},
            identity=run_identity(model=args.model, backend=backend.name,
                                  inputs={f"benchmark {n}": p for n, p in zip(benchmarks, args.benchmark)},
                                  command="eval", fallbacks=list(fallbacks)),
        )
    except RunMismatch as e:
        raise UsageError(str(e)) from None
    except RolloutError as e:
        print(f"crl: generation failed: {e}\nfinished prompts are saved; rerun the same command to resume", file=sys.stderr)
        return 1
    finally:
        backend.close()
    from composition_rl.io.files import atomic_write_jsonl

    # every benchmark row is accounted for: evaluated, or here with its reason
    atomic_write_jsonl(Path(args.out) / "input_rejects.jsonl", input_rejects)
    if input_rejects:
        print(f"{len(input_rejects)} rows set aside before sampling -> {Path(args.out) / 'input_rejects.jsonl'}",
              file=sys.stderr)
    print((Path(args.out) / "results.md").read_text(encoding="utf-8"))
    print(f"wrote {Path(args.out) / 'results.json'} and per-sample responses under {Path(args.out) / 'samples'}")
    return 0 if results["benchmarks"] else 1
