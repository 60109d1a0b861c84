"""``crl refresh``: a stale prompt set made informative for a checkpoint, in one resumable run.

    crl refresh --input data.jsonl --model qwen2.5-coder-0.5b-instruct-awq-q4_k_m --backend llama --out runs/refresh \\
        --benchmarks ../shared/data/eval/math500.parquet,../shared/data/eval/aime24.json

Profile, confirm the n/n prompts, compose the confirmed solve_all ones (depth 2, then 3 where
2 stays solve_all), keep what lands in the band, set aside what overlaps a benchmark, write
``refreshed.jsonl`` with its provenance and the verl/TRL exports, re-profile it with another
seed, and write ``report.md`` (docs/refresh.md). Rerun the same command to resume.
``--grow --teacher T`` also grows the solve_none prompts with MagicBeanStalk (``crl grow``'s
teacher flags; docs/refresh.md, "Growing").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from composition_rl.cli import UsageError

HELP = "make a stale prompt set informative for a checkpoint: profile, compose, keep the band, report"
RESUMABLE = True  # every stage resumes (profiles per chunk); read by cli.main


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``crl refresh``: model, backend and decoding, ``--input``, ``--out``,
    :class:`RefreshConfig`, decontamination, ``--export`` and the ``--grow`` teacher."""
    from composition_rl.flags import add_flags
    from composition_rl.jobs.profile import add_backend_arguments
    from composition_rl.jobs.refresh import DecontamConfig, RefreshConfig

    add_backend_arguments(p)
    p.add_argument("--input", required=True,
                   help="the stale prompt set (json, jsonl, csv, tsv, parquet; also .gz/.zst), or a composed.jsonl")
    p.add_argument("--out", required=True, help="the run folder (rerun the same command to resume)")
    p.add_argument("--confidence", type=float, default=0.95, help="Wilson interval level")
    add_flags(p.add_argument_group("refresh (docs/refresh.md)"), RefreshConfig)
    d = p.add_argument_group("decontamination (docs/refresh.md, 'Decontamination')")
    d.add_argument("--benchmarks", action="append", default=[],
                   help="benchmark files to decontaminate against, comma-separated or repeated (any format the "
                        "reader takes)")
    add_flags(d, DecontamConfig, prefix="decontam_")
    p.add_argument("--export", default="verl,trl", help="trainer datasets of the refreshed set: verl,trl")
    add_grow_arguments(p.add_argument_group("grow (--grow: MagicBeanStalk on the solve_none prompts; docs/refresh.md, "
                                            "'Growing')"))


def add_grow_arguments(g) -> None:
    """The teacher flags of ``crl grow`` (same names), and its algorithm's settings as ``--grow-NAME``."""
    from composition_rl.jobs.grow.job import add_config_flags

    g.add_argument("--teacher", help="teacher of --grow: program (exact, arithmetic chains) or openai")
    g.add_argument("--teacher-base-url", action="append", help="openai teacher: endpoint (repeat for several)")
    g.add_argument("--teacher-model", help="openai teacher: served model name")
    g.add_argument("--teacher-temperature", type=float, default=0.7, help="openai teacher: sampling temperature")
    g.add_argument("--teacher-cache", help="openai teacher: response cache file (default OUT/teacher_cache.jsonl)")
    add_config_flags(g, flag_prefix="--grow-", dest_prefix="grow_")


def grow_config_from_args(args: argparse.Namespace):
    """The :class:`~composition_rl.jobs.grow.GrowConfig` of the ``--grow-NAME`` flags; ``--grow`` and
    ``--teacher`` go together (refused in one line otherwise)."""
    import dataclasses

    from composition_rl.jobs.grow.config import GrowConfig

    given = [f.name for f in dataclasses.fields(GrowConfig) if getattr(args, f"grow_{f.name}") is not None]
    if args.grow and not args.teacher:
        raise UsageError("--grow needs --teacher (program or openai, as `crl grow` takes it; docs/refresh.md, "
                         "'Growing')")
    if not args.grow and (args.teacher or given):
        raise UsageError(f"{'--teacher' if args.teacher else '--grow-' + given[0].replace('_', '-')} goes with "
                         "--grow (grow the solve_none prompts)")
    return GrowConfig(**{k: getattr(args, f"grow_{k}") for k in given})


def run(args: argparse.Namespace) -> int:
    """Refresh the stale set in the held run folder and print its outcome; 1 when the
    refreshed set is empty or the policy or teacher gave no answer (finished work is kept)."""
    from composition_rl.flags import from_flags
    from composition_rl.grading import VerifyConfig
    from composition_rl.grading.verifier import fallbacks_from_names
    from composition_rl.jobs.export import EXPORTERS
    from composition_rl.jobs.profile import ProfileConfig, chunk_from_args
    from composition_rl.jobs.refresh import DecontamConfig, RefreshConfig

    exports = [e.strip() for e in args.export.split(",") if e.strip()]
    try:
        for e in exports:
            EXPORTERS.get(e)
        pcfg = ProfileConfig(n=args.n, sampling=_sampling(args), template=args.template,
                             chunk=chunk_from_args(args), confidence=args.confidence)
        config = from_flags(RefreshConfig, args, profile=pcfg, mbs=grow_config_from_args(args),
                            decontam=from_flags(DecontamConfig, args, prefix="decontam_"))
        fallbacks = fallbacks_from_names(args.fallback)
        verify_config = VerifyConfig(timeout_s=args.verify_timeout, fallbacks=fallbacks)
    except (ValueError, KeyError) as e:
        raise UsageError(str(e).strip("'\"")) from None
    out = Path(args.out)
    from composition_rl.jobs.decontaminate import benchmark_paths

    marks = benchmark_paths(args.benchmarks)
    from composition_rl.io.runs import RunBusy, run_folder

    try:
        with run_folder(out, "refresh", inputs={"--input": args.input, **{f"--benchmarks {b}": b for b in marks}},
                        refusals=(UsageError, ValueError), work=("profile", "decontaminate", "grow")):
            return _refresh(args, config, out, marks, exports, verify_config, fallbacks)
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None


def _sampling(args: argparse.Namespace):
    """The decoding flags' sampling config; a bad value is a usage error as it is."""
    from composition_rl.jobs.profile import sampling_from_args

    try:
        return sampling_from_args(args)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _refresh(args, config, out: Path, marks: list[str], exports: list[str], verify_config, fallbacks) -> int:
    """Run the job (:func:`composition_rl.jobs.refresh.run.refresh_from_args`) and print its outcome."""
    from composition_rl.chat.base import ChatError
    from composition_rl.jobs.refresh.run import refresh_from_args
    from composition_rl.rollout.base import RolloutError

    try:
        res, input_rejects = refresh_from_args(args, config, out, marks, exports, verify_config, fallbacks)
    except ChatError as e:  # the teacher gave no answer (a refusal is a reject): finished seeds are kept
        print(f"crl refresh: error: the teacher at {e.endpoint or args.teacher_base_url} gave no answer ({e}); "
              "finished work is kept: rerun the same command when it answers", file=sys.stderr)
        return 1
    except RolloutError as e:
        print(f"crl: generation failed: {e}\nfinished samples are saved; rerun the same command to resume",
              file=sys.stderr)
        return 1
    r = res.report
    s = r["informative_share"]

    def share(x) -> str:
        if not x or x["share"] is None:
            return "n/a"
        return f"{x['share']:.1%} [{x['wilson'][0]:.1%}, {x['wilson'][1]:.1%}]"

    print(f"refreshed {r['input']['prompts']} prompts -> {len(res.refreshed)} ({r['refreshed']['originals']} "
          f"informative originals, {r['refreshed']['composed']} compositions"
          + (f", {r['refreshed']['grown']} grown" if "grow" in r else "") + "); informative share: stale "
          f"{share(s['stale'])}, refreshed re-profiled {share(s['refreshed_reprofiled'])}; "
          f"{len(res.set_aside)} set aside -> {out / 'set_aside.jsonl'}; report {out / 'report.md'}"
          + (f"; {len(input_rejects)} input rows rejected -> {out / 'input_rejects.jsonl'}" if input_rejects else ""))
    if not res.refreshed:
        print("crl refresh: error: the refreshed set is empty (nothing in the band); no trainer export written",
              file=sys.stderr)
        return 1
    return 0
