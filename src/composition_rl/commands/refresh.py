"""``crl refresh``: a stale prompt set made informative for a checkpoint, in one resumable run.

    crl refresh --input data.jsonl --model qwen-0.5b --backend llama --out runs/refresh \\
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
    from composition_rl.commands.profile import add_backend_arguments
    from composition_rl.flags import add_flags
    from composition_rl.refresh import DecontamConfig, RefreshConfig

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
    import dataclasses

    from composition_rl.commands.grow import field_help
    from composition_rl.flags import switch
    from composition_rl.mbs.config import GrowConfig

    g.add_argument("--teacher", help="teacher of --grow: program (exact, arithmetic chains) or openai")
    g.add_argument("--teacher-base-url", action="append", help="openai teacher: endpoint (repeat for several)")
    g.add_argument("--teacher-model", help="openai teacher: served model name")
    g.add_argument("--teacher-temperature", type=float, default=0.7, help="openai teacher: sampling temperature")
    g.add_argument("--teacher-cache", help="openai teacher: response cache file (default OUT/teacher_cache.jsonl)")
    helps = field_help()
    for f in dataclasses.fields(GrowConfig):
        kw = {"default": None, "help": helps.get(f.name, "") + f" (default {f.default})"}
        if isinstance(f.default, bool):
            kw["type"] = switch
        elif isinstance(f.default, (int, float, str)):
            kw["type"] = type(f.default)
        g.add_argument("--grow-" + f.name.replace("_", "-"), dest=f"grow_{f.name}", **kw)


def grow_config_from_args(args: argparse.Namespace):
    """The :class:`~composition_rl.mbs.GrowConfig` of the ``--grow-NAME`` flags; ``--grow`` and
    ``--teacher`` go together (refused in one line otherwise)."""
    import dataclasses

    from composition_rl.mbs.config import GrowConfig

    given = [f.name for f in dataclasses.fields(GrowConfig) if getattr(args, f"grow_{f.name}") is not None]
    if args.grow and not args.teacher:
        raise UsageError("--grow needs --teacher (program or openai, as `crl grow` takes it; docs/refresh.md, "
                         "'Growing')")
    if not args.grow and (args.teacher or given):
        raise UsageError(f"{'--teacher' if args.teacher else '--grow-' + given[0].replace('_', '-')} goes with "
                         "--grow (grow the solve_none prompts)")
    return GrowConfig(**{k: getattr(args, f"grow_{k}") for k in given})


def benchmark_paths(args: argparse.Namespace) -> list[str]:
    return [b.strip() for item in args.benchmarks for b in item.split(",") if b.strip()]


def load_benchmarks(paths: list[str]) -> list[tuple[str, list]]:
    """``(path, problems)`` of each benchmark file; an unreadable one is refused in one line."""
    from composition_rl.io.readers import InputError, load_problems

    out = []
    for b in paths:
        try:
            res = load_problems(b)
        except (InputError, OSError) as e:
            raise UsageError(f"--benchmarks {b}: {e}") from None
        if not res.problems:
            raise UsageError(f"--benchmarks {b}: no usable problem ({res.why_empty(b)})")
        out.append((b, res.problems))
    return out


def run(args: argparse.Namespace) -> int:
    from composition_rl.commands.profile import chunk_from_args, sampling_from_args
    from composition_rl.flags import from_flags
    from composition_rl.io.export import EXPORTERS
    from composition_rl.profile import ProfileConfig
    from composition_rl.refresh import DecontamConfig, RefreshConfig
    from composition_rl.verify import VerifyConfig
    from composition_rl.verify.verifier import fallbacks_from_names

    exports = [e.strip() for e in args.export.split(",") if e.strip()]
    try:
        for e in exports:
            EXPORTERS.get(e)
        pcfg = ProfileConfig(n=args.n, sampling=sampling_from_args(args), template=args.template,
                             chunk=chunk_from_args(args), confidence=args.confidence)
        config = from_flags(RefreshConfig, args, profile=pcfg, mbs=grow_config_from_args(args),
                            decontam=from_flags(DecontamConfig, args, prefix="decontam_"))
        fallbacks = fallbacks_from_names(args.fallback)
        verify_config = VerifyConfig(timeout_s=args.verify_timeout, fallbacks=fallbacks)
    except (ValueError, KeyError) as e:
        raise UsageError(str(e).strip("'\"")) from None
    out = Path(args.out)
    marks = benchmark_paths(args)
    from composition_rl.io.runs import RunBusy, run_folder

    try:
        with run_folder(out, "refresh", inputs={"--input": args.input, **{f"--benchmarks {b}": b for b in marks}},
                        refusals=(UsageError, ValueError), work=("profile", "decontaminate", "grow")):
            return _refresh(args, config, out, marks, exports, verify_config, fallbacks)
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None


def _refresh(args, config, out: Path, marks: list[str], exports: list[str], verify_config, fallbacks) -> int:
    from composition_rl.backends.base import ChatError
    from composition_rl.backends.rollout import RolloutError
    from composition_rl.commands.profile import backend_from_args, fit_to_context, load_input
    from composition_rl.io.files import atomic_write_jsonl
    from composition_rl.io.identity import RunMismatch, run_identity
    from composition_rl.refresh import refresh_problems
    from composition_rl.verify import shared_verifier

    input_rejects: list = []
    problems = load_input(args.input, args, input_rejects)
    problems, too_long = fit_to_context(problems, args, where=args.input)
    input_rejects += too_long
    if not problems:
        raise UsageError(f"{args.input}: no prompt fits the context of {args.model} ({len(too_long)} set aside)")
    benchmarks = load_benchmarks(marks)
    teacher, cache = None, None
    if config.grow:  # as crl grow builds it (an openai teacher caches its replies in OUT/teacher_cache.jsonl)
        from composition_rl.commands.grow import teacher_from_args

        teacher, cache = teacher_from_args(args, config.mbs.seed, out)
    backend = backend_from_args(args)
    try:
        res = refresh_problems(
            problems, backend, shared_verifier(verify_config), out, config, benchmarks=benchmarks,
            identity=run_identity(model=args.model, backend=backend.name,
                                  inputs={"input": args.input, **{f"benchmark {b}": b for b in marks}},
                                  fallbacks=list(fallbacks)),
            progress=not args.no_progress, exports=exports, teacher=teacher)
    except RunMismatch as e:
        raise UsageError(str(e)) from None
    except ChatError as e:  # the teacher gave no answer (a refusal is a reject): finished seeds are kept
        print(f"crl refresh: error: the teacher at {e.endpoint or args.teacher_base_url} gave no answer ({e}); "
              "finished work is kept: rerun the same command when it answers", file=sys.stderr)
        return 1
    except RolloutError as e:
        print(f"crl: generation failed: {e}\nfinished samples are saved; rerun the same command to resume",
              file=sys.stderr)
        return 1
    finally:
        backend.close()
        if cache is not None:
            cache.close()
    atomic_write_jsonl(out / "input_rejects.jsonl", input_rejects)
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
