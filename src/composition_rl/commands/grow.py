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
import re
import sys
from pathlib import Path
from typing import Any

from composition_rl.cli import UsageError

HELP = "MagicBeanStalk: grow hard (solve_none) seeds into problems in the policy's Goldilocks band"
RESUMABLE = True  # profiles, trees and teacher replies are kept; a rerun continues (read by cli.main)


def field_help() -> dict[str, str]:
    """Each GrowConfig field's help, taken from its docstring (declared once, there)."""
    from composition_rl.mbs.config import GrowConfig

    doc = GrowConfig.__doc__ or ""
    out: dict[str, str] = {}
    for m in re.finditer(r"^\s{8}(\w+): (.*?)(?=^\s{8}\w+: |\Z)", doc, re.S | re.M):
        out[m.group(1)] = " ".join(m.group(2).split()).replace("%", "%%")
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    from composition_rl.flags import positive_int, switch
    from composition_rl.mbs.config import GrowConfig

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
    from composition_rl.backends.rollout import SamplingConfig
    from composition_rl.flags import add_flags

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
    helps = field_help()
    for f in dataclasses.fields(GrowConfig):
        flag = "--" + f.name.replace("_", "-")
        kw: dict[str, Any] = {"default": None, "help": helps.get(f.name, "") + f" (default {f.default})"}
        if isinstance(f.default, bool):
            kw["type"] = switch
        elif isinstance(f.default, (int, float, str)):
            kw["type"] = type(f.default)
        g.add_argument(flag, dest=f"cfg_{f.name}", **kw)
    from composition_rl.progress import progress_help

    p.add_argument("--no-progress", action="store_true", help=progress_help())


def _rollout_spec(spec: str, args: argparse.Namespace):
    """The backend a model argument names: NAME@URL is an endpoint, a folder a local model."""
    from composition_rl.executors import BackendSpec

    if "@" in spec and "://" in spec.split("@", 1)[1]:
        name, url = spec.split("@", 1)
        return BackendSpec("openai", {"base_url": url, "model": name})
    from composition_rl.backends.hf_model import is_local_model

    if not is_local_model(spec):
        raise UsageError(f"model {spec!r} is neither a local model folder, a GGUF nor NAME@URL")
    if getattr(args, "backend", "hf") == "vllm":
        return BackendSpec("vllm", {"model": spec})
    return BackendSpec("hf", {"model": spec, "max_batch_sequences": args.batch_size})


def teacher_from_args(args: argparse.Namespace, seed: int, out: Path):
    """The teacher the flags ask for, and its response cache (None for the program teacher)."""
    from composition_rl.mbs import build_teacher

    teacher_kw: dict[str, Any] = {"seed": seed}
    cache = None
    if args.teacher == "openai":
        if not args.teacher_base_url or not args.teacher_model:
            raise UsageError("--teacher openai needs --teacher-base-url and --teacher-model")
        from composition_rl.backends.cache import ResponseCache

        cache = ResponseCache(args.teacher_cache or out / "teacher_cache.jsonl")
        teacher_kw.update(base_url=args.teacher_base_url, model=args.teacher_model,
                          temperature=args.teacher_temperature, cache=cache)
    try:
        return build_teacher(args.teacher, **teacher_kw), cache
    except (KeyError, ValueError) as e:
        raise UsageError(str(e).strip('"')) from None


def run(args: argparse.Namespace) -> int:
    from composition_rl.backends.rollout import SamplingConfig
    from composition_rl.flags import from_flags, in_flags
    from composition_rl.io.runs import RunBusy, run_folder
    from composition_rl.mbs import GrowConfig
    from composition_rl.profile import ProfileConfig, parse_bands

    try:
        config = GrowConfig(**{f.name: getattr(args, f"cfg_{f.name}") for f in dataclasses.fields(GrowConfig)
                               if getattr(args, f"cfg_{f.name}") is not None})
        sampling = from_flags(SamplingConfig, args, skip=("seed",), seed=args.rollout_seed)
        prof_cfg = ProfileConfig(n=args.n, sampling=sampling, template=args.template)
        bands = parse_bands(args.select)
    except ValueError as e:
        raise UsageError(str(e)) from None
    from composition_rl.verify import VerifyConfig

    try:  # checked before any work, like the other settings
        VerifyConfig(timeout_s=args.verify_timeout)
    except ValueError as e:
        raise UsageError(in_flags(e, {"timeout_s": "--verify-timeout"})) from None
    try:
        with run_folder(args.out, "grow", inputs={"--input": args.input, "--from-profile": args.from_profile},
                        refusals=(UsageError, ValueError),
                        work=("seed_profile", "teacher_cache.jsonl", "trees.jsonl", "candidates.jsonl")):
            return _grow(args, config, sampling, prof_cfg, bands)
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None


def _grow(args: argparse.Namespace, config, sampling, prof_cfg, bands) -> int:
    """The grow run itself, with ``--out`` held (see :func:`run`)."""
    from composition_rl.backends.base import ChatError
    from composition_rl.backends.rollout import RolloutError
    from composition_rl.executors import ExecutorConfig, build_executor
    from composition_rl.flags import from_flags
    from composition_rl.io.export import clear_exports, export
    from composition_rl.io.files import atomic_write_jsonl
    from composition_rl.io.identity import (
        RunMismatch,
        claim_run,
        model_content,
        model_identity,
        run_identity,
    )
    from composition_rl.io.readers import InputError, load_problems
    from composition_rl.io.runs import LOCK_FILE, RUN_FILE
    from composition_rl.mbs import Students, grow
    from composition_rl.mbs.grow import profile_qualify
    from composition_rl.profile import (
        load_profile,
        profile_problems,
    )
    from composition_rl.verify import VerifyConfig, shared_verifier

    out = Path(args.out)
    had_work = any(f.name not in (RUN_FILE, LOCK_FILE) for f in out.iterdir())  # before this run writes anything
    # bad rows (no answer, no question) are kept with their reason, never silently lost
    try:
        loaded = load_problems(args.input)
    except (InputError, OSError) as e:
        raise UsageError(str(e)) from None
    problems = loaded.problems
    if not problems:
        raise UsageError(f"{args.input}: no usable problems ({len(loaded.rejects)} rows rejected)")
    from composition_rl.commands.profile import fit_to_context

    # a seed whose prompt fills the policy's context can only be solve_none: set it aside, said
    problems, too_long = fit_to_context(problems, args, model=args.policy, where=args.input)
    loaded.rejects.extend(too_long)
    if not problems:
        raise UsageError(f"{args.input}: no seed fits the context of {args.policy} ({len(too_long)} set aside)")
    if loaded.rejects:
        print(loaded.rejected_note(args.input) + " (each in OUT/input_rejects.jsonl)", file=sys.stderr)
    teacher, cache = teacher_from_args(args, config.seed, out)
    # a seed the teacher cannot read never grows: find out now, before any rollout is spent on it
    unreadable = getattr(teacher, "unreadable", None)
    skipped: dict[str, int] = {}
    if unreadable is not None:
        why = {p.id: unreadable(p.question) for p in problems}
        for reason in why.values():
            if reason:
                skipped[reason] = skipped.get(reason, 0) + 1
        readable = [p for p in problems if not why[p.id]]
        if not readable:
            top = ", ".join(f"{k} {v}" for k, v in skipped.items())
            raise UsageError(f"--teacher {args.teacher} cannot read any of the {len(problems)} seeds of {args.input} "
                             f"({top}): it grows the arithmetic chains of docs/mbs.md (X=5+3. Y=X-2. Y-4=?); "
                             "use --teacher openai for other problems")
        if skipped:
            print(f"--teacher {args.teacher} cannot read {len(problems) - len(readable)} of {len(problems)} seeds "
                  f"({', '.join(f'{k} {v}' for k, v in skipped.items())}): they are dropped before profiling",
                  file=sys.stderr)
    else:
        readable = list(problems)
    # --from-profile decides which seeds are hard: its folder is an input, by content
    identity = run_identity(inputs={"input": args.input, "from_profile": args.from_profile}, method=args.method,
                            config=config.to_dict(),
                            teacher=args.teacher, teacher_model=args.teacher_model,
                            policy=model_identity(args.policy), students=[model_identity(m) for m in args.students],
                            models_content=[model_content(m) for m in [args.policy, *args.students]],
                            command="grow",
                            profile=prof_cfg.run_record(), select=sorted(bands))
    try:
        claim_run(out / RUN_FILE, identity, info={"input": str(args.input), "from_profile": args.from_profile},
                  what="a grow run", has_work=had_work)
    except RunMismatch as e:
        raise UsageError(str(e)) from None

    try:
        executor_config = from_flags(ExecutorConfig, args)
    except ValueError as e:
        raise UsageError(str(e)) from None
    verifier = shared_verifier(VerifyConfig(timeout_s=args.verify_timeout))
    policy_spec = _rollout_spec(args.policy, args)
    policy = policy_spec.build()
    student_specs = args.students or [args.policy]
    backends = {args.policy: policy}
    for spec in student_specs:
        if spec not in backends:
            backends[spec] = _rollout_spec(spec, args).build()
    students = Students([(spec, backends[spec]) for spec in student_specs], verifier, n=config.student_n,
                        sampling=sampling, template=args.template)
    try:
        # the seeds' bands: a given profile, or a profile of the policy made now (resumable)
        if args.from_profile:
            classes = {r["id"]: r["class"] for r in load_profile(args.from_profile)}
        else:
            # the whole input at once: the profile worth placing on an executor; the in-process
            # policy is handed over so the local executor does not load it twice
            try:
                seed_runner = build_executor(executor_config, policy_spec, backend=policy)
            except (ImportError, ValueError) as e:
                raise UsageError(f"cannot start the {args.executor} executor: {e}") from None
            try:
                profile_problems(readable, seed_runner, verifier, out / "seed_profile", prof_cfg,
                                 progress=not args.no_progress, identity=run_identity(model=args.policy))
            finally:
                seed_runner.close()
            classes = {r["id"]: r["class"] for r in load_profile(out / "seed_profile")}
        hard = [p for p in readable if classes.get(p.id) in bands]
        pre = dict(skipped)
        not_hard = sum(1 for p in readable if p.id in classes and classes[p.id] not in bands)
        not_profiled = sum(1 for p in readable if p.id not in classes)
        if not_hard:
            pre["not_hard"] = not_hard
        if not_profiled:
            pre["not_profiled"] = not_profiled
        if args.limit and len(hard) > args.limit:
            pre["over_limit"] = len(hard) - args.limit
            hard = hard[: args.limit]

        # a candidate too long for the policy's context is a prompt_too_long reject, not solve_none
        qualify = profile_qualify(policy, verifier, prof_cfg, name=args.policy, progress=not args.no_progress,
                                  identity=run_identity(model=args.policy))
        res = grow(hard, [teacher], students, verifier, out, config, method=args.method, qualify=qualify,
                   seeds_in=len(problems), pre_dropped=pre, input_rejects=loaded.rejects,
                   progress=not args.no_progress)
    except RolloutError as e:  # the policy or a student: finished profiles and seeds are kept
        print(f"crl grow: error: generation failed: {e}; finished work is kept in {out}: rerun the same "
              "command to resume", file=sys.stderr)
        return 1
    except ChatError as e:  # transient (a refusal is a TeacherError): nothing of that seed was kept
        print(f"crl grow: error: the teacher at {e.endpoint or args.teacher_base_url} gave no answer ({e}); "
              f"finished seeds are kept in {out}: rerun the same command when it answers", file=sys.stderr)
        return 1
    finally:
        for b in backends.values():
            b.close()
        if cache is not None:
            cache.close()
    clear_exports(out)  # an export of an earlier run must not sit beside this run's qualified.jsonl
    if res.qualified:
        for name in ("verl", "trl"):
            export(res.qualified, name, out)
    atomic_write_jsonl(out / "input_rejects.jsonl", loaded.rejects)
    st = res.stats
    y = st["qualified_yield"]
    print(f"crl grow ({args.method}): {st['hard_seeds']} hard seeds of {st['seeds_in']}, "
          f"{st['qualified_seeds']} with a qualified problem (yield {'n/a' if y is None else f'{y:.1%}'}), "
          f"{st['qualified_problems']} qualified problems -> {out}/qualified.jsonl")
    print("funnel: " + " -> ".join(f"{f['stage']} {f['seeds']}" for f in st["funnel"]))
    print(f"dropped: {st['dropped_by_reason']}; cost: {st['cost']}", file=sys.stderr)
    return 0
