"""The ``crl grow`` job: read the seeds, pick the hard ones, grow them, write the run folder.

:func:`grow_from_args` runs it with the run folder held (``commands/grow.py`` parses the
flags and prints); the teacher and algorithm flags are shared with ``crl refresh --grow``
(:func:`field_help`, :func:`add_config_flags`, :func:`teacher_from_args`).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import re
from pathlib import Path
from typing import Any

from composition_rl.jobs.grow.config import GrowConfig
from composition_rl.records import Problem

log = logging.getLogger(__name__)


def field_help() -> dict[str, str]:
    """Each GrowConfig field's help, taken from its docstring (declared once, there).

    >>> field_help()["alpha_leaf"].split("(")[-1]
    'paper: 0.8).'
    """
    doc = GrowConfig.__doc__ or ""
    out: dict[str, str] = {}
    for m in re.finditer(r"^\s{8}(\w+): (.*?)(?=^\s{8}\w+: |\Z)", doc, re.S | re.M):
        out[m.group(1)] = " ".join(m.group(2).split()).replace("%", "%%")
    return out


def add_config_flags(g, flag_prefix: str = "--", dest_prefix: str = "cfg_") -> None:
    """One flag per :class:`GrowConfig` field (``--alpha-leaf`` for ``crl grow``, ``--grow-alpha-leaf``
    for ``crl refresh``), default None (the field's own default), help from its docstring."""
    from composition_rl.flags import switch

    helps = field_help()
    for f in dataclasses.fields(GrowConfig):
        kw: dict[str, Any] = {"default": None, "help": helps.get(f.name, "") + f" (default {f.default})"}
        if isinstance(f.default, bool):
            kw["type"] = switch
        elif isinstance(f.default, (int, float, str)):
            kw["type"] = type(f.default)
        g.add_argument(flag_prefix + f.name.replace("_", "-"), dest=dest_prefix + f.name, **kw)


def rollout_spec(spec: str, args: argparse.Namespace):
    """The backend a model argument names: NAME@URL is an endpoint, a folder a local model
    (ValueError for anything else)."""
    from composition_rl.executors import BackendSpec

    if "@" in spec and "://" in spec.split("@", 1)[1]:
        name, url = spec.split("@", 1)
        return BackendSpec("openai", {"base_url": url, "model": name})
    from composition_rl.io.hf_model import is_local_model

    if not is_local_model(spec):
        raise ValueError(f"model {spec!r} is neither a local model folder, a GGUF nor NAME@URL")
    if getattr(args, "backend", "hf") == "vllm":
        return BackendSpec("vllm", {"model": spec})
    return BackendSpec("hf", {"model": spec, "max_batch_sequences": args.batch_size})


def teacher_from_args(args: argparse.Namespace, seed: int, out: Path):
    """The teacher the flags ask for, and its response cache (None for the program teacher);
    a ValueError names what is missing or unknown."""
    from composition_rl.jobs.grow import build_teacher

    teacher_kw: dict[str, Any] = {"seed": seed}
    cache = None
    if args.teacher == "openai":
        if not args.teacher_base_url or not args.teacher_model:
            raise ValueError("--teacher openai needs --teacher-base-url and --teacher-model")
        from composition_rl.chat.cache import ResponseCache

        cache = ResponseCache(args.teacher_cache or out / "teacher_cache.jsonl")
        teacher_kw.update(base_url=args.teacher_base_url, model=args.teacher_model,
                          temperature=args.teacher_temperature, cache=cache)
    try:
        return build_teacher(args.teacher, **teacher_kw), cache
    except (KeyError, ValueError) as e:
        raise ValueError(str(e).strip('"')) from None


def _load_seeds(args: argparse.Namespace):
    """The seeds of ``--input`` that fit the policy's context, and the load result whose
    ``rejects`` hold every row set aside (with its reason)."""
    from composition_rl.io.readers import InputError, load_problems
    from composition_rl.jobs.profile import fit_to_context

    # bad rows (no answer, no question) are kept with their reason, never silently lost
    try:
        loaded = load_problems(args.input)
    except (InputError, OSError) as e:
        raise ValueError(str(e)) from None
    problems = loaded.problems
    if not problems:
        raise ValueError(f"{args.input}: no usable problems ({len(loaded.rejects)} rows rejected)")
    # a seed whose prompt fills the policy's context can only be solve_none: set it aside, said
    problems, too_long = fit_to_context(problems, args, model=args.policy, where=args.input)
    loaded.rejects.extend(too_long)
    if not problems:
        raise ValueError(f"{args.input}: no seed fits the context of {args.policy} ({len(too_long)} set aside)")
    if loaded.rejects:
        log.warning(loaded.rejected_note(args.input) + " (each in OUT/input_rejects.jsonl)")
    return problems, loaded


def _readable(teacher, problems: list[Problem], args: argparse.Namespace) -> tuple[list[Problem], dict[str, int]]:
    """The seeds the teacher can read, and the others counted by reason: a seed the teacher
    cannot read never grows, so it is dropped before any rollout is spent on it."""
    unreadable = getattr(teacher, "unreadable", None)
    skipped: dict[str, int] = {}
    if unreadable is None:
        return list(problems), skipped
    why = {p.id: unreadable(p.question) for p in problems}
    for reason in why.values():
        if reason:
            skipped[reason] = skipped.get(reason, 0) + 1
    readable = [p for p in problems if not why[p.id]]
    if not readable:
        top = ", ".join(f"{k} {v}" for k, v in skipped.items())
        raise ValueError(f"--teacher {args.teacher} cannot read any of the {len(problems)} seeds of {args.input} "
                         f"({top}): it grows the arithmetic chains of docs/mbs.md (X=5+3. Y=X-2. Y-4=?); "
                         "use --teacher openai for other problems")
    if skipped:
        log.warning(f"--teacher {args.teacher} cannot read {len(problems) - len(readable)} of {len(problems)} seeds "
                    f"({', '.join(f'{k} {v}' for k, v in skipped.items())}): they are dropped before profiling")
    return readable, skipped


def _claim(args: argparse.Namespace, out: Path, config: GrowConfig, prof_cfg, bands, had_work: bool) -> None:
    """Claim ``out`` for this run's settings; a folder grown with other ones is refused."""
    from composition_rl.io.identity import claim_run, model_content, model_identity, run_identity
    from composition_rl.io.runs import RUN_FILE

    # --from-profile decides which seeds are hard: its folder is an input, by content
    identity = run_identity(inputs={"input": args.input, "from_profile": args.from_profile}, method=args.method,
                            config=config.to_dict(),
                            teacher=args.teacher, teacher_model=args.teacher_model,
                            policy=model_identity(args.policy), students=[model_identity(m) for m in args.students],
                            models_content=[model_content(m) for m in [args.policy, *args.students]],
                            command="grow",
                            profile=prof_cfg.run_record(), select=sorted(bands))
    claim_run(out / RUN_FILE, identity, info={"input": str(args.input), "from_profile": args.from_profile},
              what="a grow run", has_work=had_work)


def _seed_classes(args: argparse.Namespace, readable: list[Problem], out: Path, policy_spec, policy, verifier,
                  prof_cfg, executor_config) -> dict[str, str]:
    """{seed id: band}: of a given ``--from-profile``, or of a profile of the policy made now
    (resumable, in ``out/seed_profile``)."""
    from composition_rl.executors import build_executor
    from composition_rl.io.identity import run_identity
    from composition_rl.jobs.profile import load_profile, profile_problems

    if args.from_profile:
        return {r["id"]: r["class"] for r in load_profile(args.from_profile)}
    # the whole input at once: the profile worth placing on an executor; the in-process
    # policy is handed over so the local executor does not load it twice
    try:
        seed_runner = build_executor(executor_config, policy_spec, backend=policy)
    except (ImportError, ValueError) as e:
        raise ValueError(f"cannot start the {args.executor} executor: {e}") from None
    try:
        profile_problems(readable, seed_runner, verifier, out / "seed_profile", prof_cfg,
                         progress=not args.no_progress, identity=run_identity(model=args.policy))
    finally:
        seed_runner.close()
    return {r["id"]: r["class"] for r in load_profile(out / "seed_profile")}


def _hard_seeds(args: argparse.Namespace, readable: list[Problem], classes: dict[str, str], bands,
                skipped: dict[str, int]) -> tuple[list[Problem], dict[str, int]]:
    """The seeds in ``bands`` (at most ``--limit``), and every other seed counted by reason."""
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
    return hard, pre


def grow_from_args(args: argparse.Namespace, config: GrowConfig, sampling, prof_cfg, bands):
    """The ``crl grow`` run with ``--out`` held: seeds, their bands, the growth, then the
    trainer exports of the qualified problems and ``input_rejects.jsonl``.

    Returns:
        The :class:`~composition_rl.jobs.grow.GrowResult`.

    Raises:
        ValueError: unusable seeds or flags, or a folder grown with other settings.
        RolloutError: the policy or a student failed (finished profiles and seeds are kept).
        ChatError: the teacher gave no answer (finished seeds are kept).
    """
    from composition_rl.executors import ExecutorConfig
    from composition_rl.flags import from_flags
    from composition_rl.grading import VerifyConfig, shared_verifier
    from composition_rl.io.files import atomic_write_jsonl
    from composition_rl.io.identity import run_identity
    from composition_rl.io.runs import LOCK_FILE, RUN_FILE
    from composition_rl.jobs.export import clear_exports, export
    from composition_rl.jobs.grow import Students, grow
    from composition_rl.jobs.grow.run import profile_qualify

    out = Path(args.out)
    had_work = any(f.name not in (RUN_FILE, LOCK_FILE) for f in out.iterdir())  # before this run writes anything
    problems, loaded = _load_seeds(args)
    teacher, cache = teacher_from_args(args, config.seed, out)
    readable, skipped = _readable(teacher, problems, args)
    _claim(args, out, config, prof_cfg, bands, had_work)
    executor_config = from_flags(ExecutorConfig, args)
    verifier = shared_verifier(VerifyConfig(timeout_s=args.verify_timeout))
    policy_spec = rollout_spec(args.policy, args)
    policy = policy_spec.build()
    student_specs = args.students or [args.policy]
    backends = {args.policy: policy}
    for spec in student_specs:
        if spec not in backends:
            backends[spec] = rollout_spec(spec, args).build()
    students = Students([(spec, backends[spec]) for spec in student_specs], verifier, n=config.student_n,
                        sampling=sampling, template=args.template)
    try:
        classes = _seed_classes(args, readable, out, policy_spec, policy, verifier, prof_cfg, executor_config)
        hard, pre = _hard_seeds(args, readable, classes, bands, skipped)
        # a candidate too long for the policy's context is a prompt_too_long reject, not solve_none
        qualify = profile_qualify(policy, verifier, prof_cfg, name=args.policy, progress=not args.no_progress,
                                  identity=run_identity(model=args.policy))
        res = grow(hard, [teacher], students, verifier, out, config, method=args.method, qualify=qualify,
                   seeds_in=len(problems), pre_dropped=pre, input_rejects=loaded.rejects,
                   progress=not args.no_progress)
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
    return res
