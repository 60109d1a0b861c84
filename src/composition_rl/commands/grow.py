"""``crl grow``: MagicBeanStalk, hard seeds grown into problems calibrated to a policy.

    crl grow --input seeds.jsonl --policy runs/tiny --teacher program --out runs/grow
    crl grow --input seeds.jsonl --policy runs/tiny --students runs/tiny2 --from-profile prof \\
        --teacher program --method direct --out runs/grow-direct
    crl grow --input math.json --policy Qwen3-4B@http://gpu:8000/v1 --teacher openai \\
        --teacher-base-url http://gpu2:8000/v1 --teacher-model gpt-oss-120b --out runs/grow-math

A model is a local folder (transformers) or ``NAME@URL`` for an OpenAI-compatible endpoint
(key from ``$OPENAI_API_KEY`` only). Rerun the same command to resume after a kill.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from composition_rl.cli import UsageError

HELP = "MagicBeanStalk: grow hard (solve_none) seeds into problems in the policy's Goldilocks band"
RESUMABLE = True  # profiles, trees and teacher replies are kept; a rerun continues (read by cli.main)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``crl grow``: input, output, policy, students, teacher, method,
    starting profile, rollouts, the seed profile's executor and the :class:`GrowConfig` fields."""
    from composition_rl.flags import positive_int
    from composition_rl.jobs.grow.job import add_config_flags

    p.add_argument("--input", required=True, help="seed problems with answers (json, jsonl, csv, tsv, parquet; also .gz/.zst)")
    p.add_argument("--out", required=True, help="output folder (rerun the same command to resume)")
    p.add_argument("--policy", required=True, help="target policy: a local model folder or NAME@URL")
    p.add_argument("--students", action="append", default=[],
                   help="a student model (folder or NAME@URL); repeat for more; default: the policy alone")
    p.add_argument("--teacher", default="program", help="teacher: program (exact, arithmetic chains) or openai")
    p.add_argument("--teacher-base-url", action="append", help="openai teacher: endpoint (repeat for several)")
    p.add_argument("--teacher-model", help="openai teacher: served model name")
    p.add_argument("--teacher-temperature", type=float, default=0.7, help="openai teacher: sampling temperature")
    p.add_argument("--teacher-cache", help="openai teacher: response cache file (default OUT/teacher_cache.jsonl)")
    p.add_argument("--method", choices=["mbs", "direct"], default="mbs",
                   help="mbs, or the direct-synthesis baseline (variations of the seed)")
    p.add_argument("--from-profile", help="a `crl profile` folder of the policy on --input; default: profile now")
    p.add_argument("--select", default="solve_none", help="bands of the profile to grow (default solve_none)")
    p.add_argument("--limit", type=positive_int, help="use only the first N hard seeds (N >= 1)")
    s = p.add_argument_group("rollouts (policy and students)")
    s.add_argument("-n", type=int, default=8, help="rollouts per problem for the policy profile (the band's budget)")
    from composition_rl.flags import add_flags
    from composition_rl.rollout.base import SamplingConfig

    add_flags(s, SamplingConfig, skip=("seed",))  # --temperature, --top-p, --top-k, --max-tokens
    s.add_argument("--template", default="boxed", help="prompts/rollout_<NAME>.txt or a .txt path (tiny models: plain)")
    s.add_argument("--rollout-seed", type=int, default=0, help="sampling seed of every rollout")
    s.add_argument("--batch-size", type=int, default=64, help="local models: most sequences per generate call")
    s.add_argument("--backend", choices=["hf", "vllm"], default="hf",
                   help="local models: hf (transformers) or vllm (vLLM's offline engine, in vLLM's venv); "
                        "NAME@URL is always an endpoint")
    s.add_argument("--verify-timeout", type=float, default=5.0, help="hard bound per answer check, in seconds")
    from composition_rl.executors import ExecutorConfig

    add_flags(p.add_argument_group("executor of the seed profile (qualification rounds stay in this process; "
                                   "see docs/scale.md)"), ExecutorConfig)
    g = p.add_argument_group("algorithm (defaults: the MagicBeanStalk paper's values; see docs/mbs.md)")
    add_config_flags(g)
    from composition_rl.progress import progress_help

    p.add_argument("--no-progress", action="store_true", help=progress_help())


def run(args: argparse.Namespace) -> int:
    """Grow the hard seeds into qualified problems (resuming a rerun) and print the funnel;
    1 when the policy, a student or the teacher gave no answer (finished work is kept)."""
    from composition_rl.chat.base import ChatError
    from composition_rl.flags import from_flags, in_flags
    from composition_rl.io.runs import RunBusy, run_folder
    from composition_rl.jobs.grow import GrowConfig
    from composition_rl.jobs.grow.job import grow_from_args
    from composition_rl.jobs.profile import ProfileConfig, parse_bands
    from composition_rl.rollout.base import RolloutError, SamplingConfig

    try:
        config = GrowConfig(**{f.name: getattr(args, f"cfg_{f.name}") for f in dataclasses.fields(GrowConfig)
                               if getattr(args, f"cfg_{f.name}") is not None})
        sampling = from_flags(SamplingConfig, args, skip=("seed",), seed=args.rollout_seed)
        prof_cfg = ProfileConfig(n=args.n, sampling=sampling, template=args.template)
        bands = parse_bands(args.select)
    except ValueError as e:
        raise UsageError(str(e)) from None
    from composition_rl.grading import VerifyConfig

    try:  # checked before any work, like the other settings
        VerifyConfig(timeout_s=args.verify_timeout)
    except ValueError as e:
        raise UsageError(in_flags(e, {"timeout_s": "--verify-timeout"})) from None
    try:
        with run_folder(args.out, "grow", inputs={"--input": args.input, "--from-profile": args.from_profile},
                        refusals=(UsageError, ValueError),
                        work=("seed_profile", "teacher_cache.jsonl", "trees.jsonl", "candidates.jsonl")):
            try:
                res = grow_from_args(args, config, sampling, prof_cfg, bands)
            except RolloutError as e:  # the policy or a student: finished profiles and seeds are kept
                print(f"crl grow: error: generation failed: {e}; finished work is kept in {Path(args.out)}: rerun the "
                      "same command to resume", file=sys.stderr)
                return 1
            except ChatError as e:  # transient (a refusal is a TeacherError): nothing of that seed was kept
                print(f"crl grow: error: the teacher at {e.endpoint or args.teacher_base_url} gave no answer ({e}); "
                      f"finished seeds are kept in {Path(args.out)}: rerun the same command when it answers",
                      file=sys.stderr)
                return 1
            _report(args, res)
            return 0
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None


def _report(args: argparse.Namespace, res) -> None:
    """Print the funnel of a finished grow run (see :func:`composition_rl.jobs.grow.job.grow_from_args`)."""
    st = res.stats
    y = st["qualified_yield"]
    print(f"crl grow ({args.method}): {st['hard_seeds']} hard seeds of {st['seeds_in']}, "
          f"{st['qualified_seeds']} with a qualified problem (yield {'n/a' if y is None else f'{y:.1%}'}), "
          f"{st['qualified_problems']} qualified problems -> {Path(args.out)}/qualified.jsonl")
    print("funnel: " + " -> ".join(f"{f['stage']} {f['seeds']}" for f in st["funnel"]))
    print(f"dropped: {st['dropped_by_reason']}; cost: {st['cost']}", file=sys.stderr)
