"""The ``crl compose`` job around the executor (:func:`composition_rl.jobs.compose.run.run_compose`):
read the inputs, refuse a run that cannot work or is too large before any worker starts,
compose, fold in the optional solver probe, and say why a finished run produced nothing.

``commands/compose.py`` parses the flags into the configs and prints; :func:`compose_from_args`
does the rest. A refusal the user can fix is a :class:`Refused` with a one-line message.
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


class Refused(ValueError):
    """A compose run refused for a reason the user can fix (the message says it in one line)."""


@dataclass
class ComposeRun:
    """What :func:`compose_from_args` did.

    Attributes:
        stats: the run's stats (``stats.json``), with the probe's block when it ran.
        problems: how many usable problems were composed from.
        empty: why the finished run produced nothing usable, or None.
        dropped: the run made the folder and, having nothing to show, removed it again.
        probe_note: the probe's note on replies it could not grade, or None.
        exports: the trainer datasets written (names).
    """

    stats: dict[str, Any]
    problems: int
    empty: str | None = None
    dropped: bool = False
    probe_note: str | None = None
    exports: list[str] = field(default_factory=list)


def compose_from_args(args: argparse.Namespace, config, exports: list[str], llm_kw: dict[str, Any],
                      probe_config=None) -> ComposeRun:
    """The ``crl compose`` run into ``--out`` with the settings the command parsed.

    Raises:
        Refused: inputs, output folder or size refused (a folder this run made is removed,
            but a rejects file it names), or the folder taken by another run.
        WorkerDied: a worker was killed from outside (nothing was written).
        EndpointDown: the LLM engine's endpoint stopped answering (finished work is kept).
    """
    from composition_rl.jobs.compose.run import is_resumable

    out = Path(args.out)
    made = prepare_output(args, out)
    try:
        problems, first, inputs, rejects = load_inputs(args, out)
        if not is_resumable(args.engine):  # a batch run: estimate it before it starts
            size_guard(args, config, problems, first)
    except Refused:  # refused before any work: a folder this run made goes (but a rejects file it names)
        drop_made(out, made, keep=("input_rejects.jsonl",))
        raise
    stats = _compose(args, out, config, problems, first, inputs, rejects, exports, llm_kw)
    run = ComposeRun(stats, len(problems), exports=exports)
    if args.probe_model and stats["accepted"] and not stats.get("kept_previous"):
        from composition_rl.jobs.profile import no_answer_note

        run.stats = probe_run(args, out, exports, probe_config)
        run.probe_note = no_answer_note(run.stats["probe"]["no_answer"], run.stats["probe"]["replies"]) or None
    run.empty = empty_outcome(run.stats, len(problems), config.depth)
    if run.empty and run.stats["candidates"] == 0 and made:
        # nothing to look at (no chain, so no rejected.jsonl worth keeping): the folder this
        # run made goes, as for any refused run
        drop_made(out, made, unless_changed_since=folder_state(out))
        run.dropped = True
    return run


def prepare_output(args: argparse.Namespace, out: Path) -> bool:
    """Refuse an ``--out`` that would overwrite an input or holds another command's run, then
    make it; whether this call made the folder."""
    from composition_rl.io.files import refuse_overwrite
    from composition_rl.io.runs import refuse_foreign
    from composition_rl.jobs.compose.run import output_paths

    try:
        refuse_overwrite({"--input": args.input, "--first-pool": args.first_pool}, output_paths(out),
                         fix="choose another --out (a composed set is composed again from a copy or another folder)")
        refuse_foreign("compose", folders={"--out": out},
                       inputs={"--input": args.input, "--first-pool": args.first_pool, "--from-profile": args.from_profile})
    except ValueError as e:
        raise Refused(str(e)) from None
    return check_out_dir(out)


def _compose(args: argparse.Namespace, out: Path, config, problems, first, inputs, rejects, exports,
             llm_kw) -> dict[str, Any]:
    """:func:`~composition_rl.jobs.compose.run.run_compose` with its refusals as :class:`Refused`."""
    from composition_rl.io.runs import RunClash
    from composition_rl.jobs.compose import run_compose
    from composition_rl.jobs.compose.run import OutputBusy, is_resumable

    try:
        return run_compose(problems, config, out, first_pool=first, inputs=inputs, input_rejects=rejects,
                           progress=not args.no_progress, exports=exports, **llm_kw)
    except OutputBusy as e:
        raise Refused(str(e)) from e  # another run holds the folder: it is that run's now
    except RunClash as e:  # another command's run took the folder between the checks and the lock
        raise Refused(str(e)) from e
    except OSError as e:
        raise Refused(f"cannot write to {out}: {e}") from e
    except ValueError as e:  # llm/auto: a resumed run with other settings, a busy cache
        if not is_resumable(args.engine):
            raise
        raise Refused(str(e)) from e


def load_inputs(
    args: argparse.Namespace, out: Path | None = None
) -> tuple[list, list | None, dict[str, Any], list[dict[str, Any]]]:
    """Problems, first pool, input description and input rejects for ``args``. When no row
    is usable, the rejects are written to ``out/input_rejects.jsonl`` first (if ``out``)
    and the :class:`Refused` gives the top reasons and the flags that would fix them."""
    from composition_rl.io.readers import (
        InputError,
        ReaderConfig,
        load_problems,
        load_reasoning_gym,
    )

    cfg = ReaderConfig(question_field=args.question_field, answer_field=args.answer_field)
    try:
        if args.input:
            main = load_problems(args.input, cfg)
        else:
            try:
                main = load_reasoning_gym(seed=args.seed, config=cfg, **({"scale": args.rg_size} if args.rg_size else {}))
            except ImportError as e:  # the demo extra is not installed: say which one, no traceback
                raise Refused(str(e)) from e
        first = load_problems(args.first_pool, cfg) if args.first_pool else None
    except InputError as e:
        raise Refused(str(e)) from e
    for name, res, path in (("--input", main, args.input), ("--first-pool", first, args.first_pool)):
        if res is not None and not res.problems:
            raise Refused(_no_problem(res, f"{name} {path}", out))
    problems = main.problems
    from composition_rl.io.identity import file_sha256

    inputs: dict[str, Any] = {
        "main": {"path": args.input or "reasoning-gym (built-in default)", "rows": main.rows,
                 "problems": len(main.problems), "rejects": len(main.rejects),
                 "sha256": file_sha256(args.input) if args.input else f"reasoning-gym seed {args.seed} size {args.rg_size}"},
    }
    rejects = list(main.rejects)
    if args.from_profile:
        problems = _from_profile(args, problems, inputs)
    if first is not None:
        inputs["first_pool"] = {"path": args.first_pool, "rows": first.rows, "problems": len(first.problems),
                                "rejects": len(first.rejects), "sha256": file_sha256(args.first_pool)}
        rejects += first.rejects
    return problems, (first.problems if first else None), inputs, rejects


def _from_profile(args: argparse.Namespace, problems: list, inputs: dict[str, Any]) -> list:
    """The ``problems`` a ``--from-profile`` folder classes as ``--select``; noted in ``inputs``."""
    from composition_rl.io.identity import file_sha256
    from composition_rl.jobs.profile import select_from_profile

    try:
        keep = select_from_profile(args.from_profile, args.select or "solve_all")
    except (OSError, ValueError) as e:
        raise Refused(f"--from-profile {args.from_profile}: {e}") from e
    problems = [p for p in problems if p.id in keep]
    inputs["from_profile"] = {"dir": args.from_profile, "select": args.select or "solve_all", "selected": len(problems),
                              "sha256": file_sha256(Path(args.from_profile) / "profile.jsonl")}
    if not problems:
        raise Refused(f"--from-profile {args.from_profile}: no problem of {args.input or 'the input'} is in class "
                      f"{args.select or 'solve_all'!r}")
    return problems


def _no_problem(res, where: str, out: Path | None) -> str:
    msg = res.why_empty(where)
    if out is not None and res.rejects:
        from composition_rl.io.files import atomic_write_jsonl

        atomic_write_jsonl(out / "input_rejects.jsonl", res.rejects)
        msg += f". Every rejected row, with its reason: {out / 'input_rejects.jsonl'}"
    return msg


def check_out_dir(out: Path) -> bool:
    """Fail now, in one line, if ``out`` cannot be an output folder (before any work);
    whether this call made the folder (see :func:`composition_rl.io.runs.make_folder`)."""
    from composition_rl.io.runs import make_folder

    try:
        return make_folder(out)
    except ValueError as e:
        raise Refused(str(e)) from None


def folder_state(out: Path) -> dict[str, tuple[int, int]]:
    """The folder's files by size and modification time (to see whether another run wrote
    there since)."""
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in out.iterdir()
            if p.name != ".crl.lock"} if out.is_dir() else {}


def drop_made(out: Path, made: bool, keep: tuple[str, ...] = (),
              unless_changed_since: dict[str, tuple[int, int]] | None = None) -> None:
    """Remove folder ``out`` that this run made (and what it wrote there, but ``keep``),
    under its lock; a folder another run holds or has written since is left alone."""
    if not made or not out.is_dir():
        return
    from composition_rl.io.runs import RunBusy, drop_made_folder, hold_lock

    try:
        with hold_lock(out, "compose"):
            if unless_changed_since is None or folder_state(out) == unless_changed_since:
                drop_made_folder(out, keep=keep)
    except (RunBusy, ValueError):
        pass  # another run holds it: the folder is that run's now


def size_guard(args: argparse.Namespace, config, problems: list, first: list | None) -> None:
    """Refuse, before any worker starts, a run the variable names cannot support or one
    estimated beyond ``--limit-candidates``; note (log) the estimate of any large run."""
    from composition_rl.jobs.compose.pipeline import estimate_run
    from composition_rl.spc.text import VARIABLE_NAMES

    sizes = [len(first) if (k == 0 and first) else len(problems) for k in range(config.depth)]
    upper = 1
    for k, s in enumerate(config.sizes):
        upper *= sizes[k] if s is None else min(s, sizes[k])
    if config.max_candidates is not None:
        upper = min(upper, config.max_candidates)
    if upper <= 200_000 and config.depth <= 3:
        return  # a few seconds at most: not worth a trial
    est = estimate_run(problems, config, first)
    if est.distinct < config.depth:
        raise Refused(
            f"--depth {config.depth} needs {config.depth} different problems in every chain, but the pools "
            f"({pools_text(est.pools)}) hold only {est.distinct} different problems: no chain exists; "
            f"use --depth {max(2, est.distinct)} or less, or more input")
    if est.trial == 0:
        if not args.yes:
            raise Refused(
                f"--depth {config.depth}: none of the sampled chains of pools {pools_text(est.pools)} holds "
                f"{config.depth} different problems, so nothing can be estimated and almost every candidate is a "
                "repeat; use a smaller --depth or larger pools (--yes runs it anyway)")
        return
    if est.names_ok == 0:
        raise Refused(
            f"--depth {config.depth} needs {est.names_needed} free variable names per chain, of the "
            f"{len(VARIABLE_NAMES)} the engine uses ({''.join(VARIABLE_NAMES)}); none of {est.trial} sampled "
            f"chains leaves that many (their problems use the others as symbols), so every candidate "
            f"would fail: use a smaller --depth")
    workers = args.workers or os.cpu_count() or 1
    what = (f"about {est.candidates:,} candidate chains (pools {pools_text(est.pools)}), "
            f"~{human_bytes(est.output_bytes)} of output, ~{human_time(est.seconds(workers))} with {workers} "
            f"worker(s) (from a trial of {est.trial} chains, {est.trial_accepted} accepted)")
    if est.candidates > args.limit_candidates and config.max_candidates is None and not args.yes:
        raise Refused(f"{what}: beyond --limit-candidates {args.limit_candidates:,}. "
                      f"Take a seeded sample with --max-candidates N, or pass --yes to run it all")
    if est.candidates > 1_000_000:
        log.warning(f"crl compose: note: {what}")


def pools_text(pools: tuple[int, ...]) -> str:
    """Pool sizes as ``20x20x300``; a long chain as ``6x...x6 (40 positions)``.

    >>> pools_text((20, 20, 300)), pools_text((6,) * 40)
    ('20x20x300', '6x...x6 (40 positions)')
    """
    if len(pools) <= 8:
        return "x".join(map(str, pools))
    return f"{pools[0]}x...x{pools[-1]} ({len(pools)} positions)"


def human_bytes(n: float) -> str:
    """A byte count in decimal units.

    >>> human_bytes(999), human_bytes(1_500_000)
    ('999 B', '2 MB')
    """
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:,.0f} {unit}"
        n /= 1000
    return f"{n:,.0f} PB"  # pragma: no cover


def human_time(s: float) -> str:
    """A duration in the largest unit that keeps it readable.

    >>> human_time(90), human_time(600), human_time(4e5)
    ('90 s', '10 min', '5 days')
    """
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.0f} h"
    if s < 3.2e8:
        return f"{s / 86400:,.0f} days"
    return f"{s / 3.15e7:,.0f} years"


def probe_run(args: argparse.Namespace, out: Path, exports: list[str], config) -> dict[str, Any]:
    """The solver probe over the run just written, folded into it under the run's lock."""
    from composition_rl.grading import VerifyConfig, shared_verifier
    from composition_rl.io.identity import run_identity
    from composition_rl.io.readers import ReaderConfig, load_problems
    from composition_rl.jobs.compose.run import lock_output
    from composition_rl.jobs.probe import apply_to_run, build_solver, probe_records
    from composition_rl.jobs.profile import RunMismatch

    try:
        solver = build_solver(args.probe_model, args.probe_base_url, args.probe_backend)
    except (ImportError, ValueError) as e:
        raise Refused(f"--probe-model {args.probe_model}: {e}") from None
    try:
        with lock_output(out):
            records = load_problems(str(out / "composed.jsonl"), ReaderConfig()).problems
            result = probe_records(records, solver, shared_verifier(VerifyConfig()), out / "probe", config,
                                   progress=not args.no_progress,
                                   identity=run_identity(model=args.probe_model, backend=solver.name, command="probe"))
            return apply_to_run(out, result, exports)
    except RunMismatch as e:
        raise Refused(f"{e} (the solver's pass rates are kept in {out / 'probe'})") from None
    finally:
        solver.close()


def empty_outcome(stats: dict[str, Any], n_problems: int, depth: int) -> str | None:
    """Why a finished run produced nothing usable, or None."""
    if stats["candidates"] == 0:
        pools = stats.get("pools")
        return (f"no candidate chain: {n_problems} usable problem(s) and pools of {pools} for depth {depth} "
                f"(a chain needs {depth} different problems; every position but the last needs a numeric "
                f"answer, every position but the first a number in its text to replace)")
    if stats["accepted"] == 0:
        top = sorted(stats["rejected_by_reason"].items(), key=lambda kv: -kv[1])[:3]
        return (f"0 of {stats['candidates']:,} candidates accepted; top reasons: "
                + ", ".join(f"{k} {v:,}" for k, v in top) + " (each chain's reason in rejected.jsonl)")
    return None


def summary_renderables(stats: dict[str, Any], out: Path, exports: list[Path], wall: float,
                        failed: bool = False) -> list[Any]:
    """The closing table of a compose run as rich renderables, for the command to print: the
    yield funnel, the reasons, and where the files are (of a ``failed`` run, only where each
    candidate's reason is: the error that follows says why)."""
    from rich.table import Table

    shown: list[Any] = []
    t = Table(title=f"composition ({stats.get('engine', 'symbolic')}, depth {stats['config']['depth']})", show_lines=False)
    t.add_column("stage")
    t.add_column("kept", justify="right")
    t.add_column("share", justify="right")
    n = max(stats["candidates"], 1)
    for row in stats["funnel"]:
        t.add_row(row["stage"], f"{row['kept']:,}", f"{row['kept'] / n:.1%}")
    shown.append(t)
    if stats["rejected_by_reason"]:
        r = Table(title="rejected by reason")
        r.add_column("reason")
        r.add_column("count", justify="right")
        for k, v in sorted(stats["rejected_by_reason"].items(), key=lambda kv: -kv[1]):
            r.add_row(k, f"{v:,}")
        shown.append(r)
    rate = stats.get("candidates_per_s")
    shown.append(
        f"[bold]{stats['accepted']:,}[/bold] of {stats['candidates']:,} candidates accepted "
        f"({stats['accepted'] / n:.1%}) in {wall:.1f} s"
        + (f" ({rate:,.0f} candidates/s)" if rate else "")
        + (f"; {stats['input_rejects']} input rows rejected" if stats.get("input_rejects") else "")
    )
    if stats.get("pending"):
        shown.append(f"[bold]{stats['pending']:,}[/bold] candidates got no answer (timeouts, connection errors, 5xx) "
                     "and are not counted above: rerun the same command to retry them")
    if failed:
        if not stats.get("kept_previous"):  # then the folder's files are the previous run's
            shown.append(f"each candidate's reason in {out}/rejected.jsonl")
        return shown
    shown.append(f"outputs in {out}/: composed.jsonl, rejected.jsonl, input_rejects.jsonl, stats.json"
                 + "".join(f", {p.name}" for p in exports))
    return shown
