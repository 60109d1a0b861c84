"""``crl compose``: compose a verifiable prompt set into a harder one (SPC to depth K)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from composition_rl.cli import UsageError

HELP = "compose a verifiable prompt set into a harder one (SPC, depth K)"


def RESUMABLE(args: argparse.Namespace) -> bool | str:  # noqa: N802 - read by cli.main on Ctrl-C
    """Only the journaled engines (llm, auto) keep finished work; a symbolic run starts over,
    and the folder keeps the previous complete run (outputs are replaced only at the end)."""
    from composition_rl.compose.run import is_resumable

    try:
        if is_resumable(getattr(args, "engine", "symbolic")):
            return True
    except KeyError:
        pass
    return (f"a symbolic run keeps no partial work; {getattr(args, 'out', 'the output folder')} holds the "
            "previous complete run, if any, as it was: rerun the command to start over")


def _pool_sizes(text: str) -> tuple[int | None, ...]:
    """``--pool-sizes`` (see :func:`composition_rl.compose.pipeline.parse_pool_sizes`)."""
    from composition_rl.compose.pipeline import parse_pool_sizes

    return parse_pool_sizes(text)


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_argument_group("input")
    src.add_argument("--input", help="problems file (.json array, .jsonl, .csv, .tsv, .parquet; .gz or .zst "
                     "compressed too); default: reasoning-gym numeric generators")
    src.add_argument("--question-field", help="field holding the question (default: problem/question/prompt)")
    src.add_argument("--answer-field", help="field holding the answer (default: answer/final_answer/ground_truth)")
    src.add_argument("--first-pool", help="take q1 (positions 1..K-1) from this file instead (cross-domain, Section 4.4)")
    src.add_argument("--from-profile", help="a `crl profile` output folder: compose only the prompts it classed as --select")
    src.add_argument("--select", help="with --from-profile: the band to take: band names, comma-separated, or a pass-rate "
                     "interval LO,HI such as 0.875,1 (default solve_all)")
    src.add_argument("--rg-size", type=int, default=0, help="scale the default reasoning-gym set to about this many problems")

    c = p.add_argument_group("composition")
    from composition_rl.compose.pipeline import ComposeConfig
    from composition_rl.flags import add_flags

    add_flags(c, ComposeConfig)  # --depth, --pool-size, --pool-sizes, ..., --engine, --workers
    c.add_argument("--limit-candidates", type=int, default=20_000_000,
                   help="refuse a run estimated above this many candidate chains (default 20,000,000) "
                   "unless --yes or --max-candidates is given")
    c.add_argument("--yes", action="store_true", help="run even when the size estimate exceeds --limit-candidates")

    from composition_rl.compose import natural

    natural.add_arguments(p.add_argument_group("naturalness (docs/composition.md)"))
    o = p.add_argument_group("output")
    o.add_argument("--out", required=True, help="output folder")
    o.add_argument("--export", default="", help="also write trainer datasets: verl,trl")
    o.add_argument("--no-progress", action="store_true", help="no progress bar")
    from composition_rl.compose.llm.config import LLMComposeConfig

    add_flags(p.add_argument_group("LLM engine (--engine llm|auto); the API key is read from OPENAI_API_KEY only"),
              LLMComposeConfig, prefix="llm_")
    from composition_rl.backends.rollout import ROLLOUT_BACKENDS
    from composition_rl.probe import BACKEND_HELP, BASE_URL_HELP, MODEL_HELP

    pr = p.add_argument_group("solver probe (opt-in; crl probe does the same on an existing composed set)")
    pr.add_argument("--probe-model", help="reject the records this solver answers with the first problem's value "
                    "withheld, as guessable (OUT/probe holds its pass rates): " + MODEL_HELP)
    pr.add_argument("--probe-base-url", action="append", default=[], help=BASE_URL_HELP)
    pr.add_argument("--probe-backend", choices=["auto", *ROLLOUT_BACKENDS.names()], default="auto", help=BACKEND_HELP)
    pr.add_argument("--probe-k", type=int, default=4, help="samples per record (crl probe -k)")
    pr.add_argument("--probe-tau", type=float, default=0.5, help="reject at this pass rate or above (crl probe --tau)")
    pr.add_argument("--probe-max-tokens", type=int, default=4096, help="most new tokens per sample")


def llm_config_from_args(args: argparse.Namespace):
    """The :class:`LLMComposeConfig` the generated ``--llm-*`` flags describe (ValueError if bad)."""
    from composition_rl.compose.llm.config import LLMComposeConfig
    from composition_rl.flags import from_flags

    # checked here, not in __post_init__: a config handed a ready backend (tests,
    # benchmarks) needs no URL
    if args.llm_backend == "openai" and not args.llm_base_urls:
        raise ValueError("--engine llm/auto needs an endpoint: pass --base-url URL (repeatable) and --model NAME")
    return from_flags(LLMComposeConfig, args, prefix="llm_")


def _refuse_llm_flags(args: argparse.Namespace) -> None:
    """The model's settings given to an engine that asks no model are a mistake to name,
    not options to drop (``--concurrency -5`` ran as if unset)."""
    from composition_rl.compose.llm.config import LLMComposeConfig
    from composition_rl.flags import flags_given

    given = flags_given(LLMComposeConfig, args, prefix="llm_")
    if given:
        raise ValueError(f"{', '.join(given)} set the model of --engine llm or auto; --engine {args.engine} asks "
                         "no model: drop them, or choose --engine llm or auto")


def load_inputs(
    args: argparse.Namespace, out: Path | None = None
) -> tuple[list, list | None, dict[str, Any], list[dict[str, Any]]]:
    """Problems, first pool, input description and input rejects for ``args``. When no row
    is usable, the rejects are written to ``out/input_rejects.jsonl`` first (if ``out``)
    and the error gives the top reasons and the flags that would fix them."""
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
                raise UsageError(str(e)) from e
        first = load_problems(args.first_pool, cfg) if args.first_pool else None
    except InputError as e:
        raise UsageError(str(e)) from e
    for name, res, path in (("--input", main, args.input), ("--first-pool", first, args.first_pool)):
        if res is not None and not res.problems:
            raise UsageError(_no_problem(res, f"{name} {path}", out))
    problems = main.problems
    from composition_rl.io.identity import file_sha256

    inputs: dict[str, Any] = {
        "main": {"path": args.input or "reasoning-gym (built-in default)", "rows": main.rows,
                 "problems": len(main.problems), "rejects": len(main.rejects),
                 "sha256": file_sha256(args.input) if args.input else f"reasoning-gym seed {args.seed} size {args.rg_size}"},
    }
    rejects = list(main.rejects)
    if args.from_profile:
        from composition_rl.profile import select_from_profile

        try:
            keep = select_from_profile(args.from_profile, args.select or "solve_all")
        except (OSError, ValueError) as e:
            raise UsageError(f"--from-profile {args.from_profile}: {e}") from e
        problems = [p for p in problems if p.id in keep]
        inputs["from_profile"] = {"dir": args.from_profile, "select": args.select or "solve_all", "selected": len(problems),
                                  "sha256": file_sha256(Path(args.from_profile) / "profile.jsonl")}
        if not problems:
            raise UsageError(f"--from-profile {args.from_profile}: no problem of {args.input or 'the input'} is in class "
                             f"{args.select or 'solve_all'!r}")
    if first is not None:
        inputs["first_pool"] = {"path": args.first_pool, "rows": first.rows, "problems": len(first.problems),
                                "rejects": len(first.rejects), "sha256": file_sha256(args.first_pool)}
        rejects += first.rejects
    return problems, (first.problems if first else None), inputs, rejects


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
        raise UsageError(str(e)) from None


def _state(out: Path) -> dict[str, tuple[int, int]]:
    """The folder's files by size and modification time (to see whether another run wrote
    there since)."""
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in out.iterdir()
            if p.name != ".crl.lock"} if out.is_dir() else {}


def _drop_made(out: Path, made: bool, keep: tuple[str, ...] = (),
               unless_changed_since: dict[str, tuple[int, int]] | None = None) -> None:
    """Remove folder ``out`` that this run made (and what it wrote there, but ``keep``),
    under its lock; a folder another run holds or has written since is left alone."""
    if not made or not out.is_dir():
        return
    from composition_rl.io.runs import RunBusy, drop_made_folder, hold_lock

    try:
        with hold_lock(out, "compose"):
            if unless_changed_since is None or _state(out) == unless_changed_since:
                drop_made_folder(out, keep=keep)
    except (RunBusy, ValueError):
        pass  # another run holds it: the folder is that run's now


def size_guard(args: argparse.Namespace, config, problems: list, first: list | None) -> None:
    """Refuse, before any worker starts, a run the variable names cannot support or one
    estimated beyond ``--limit-candidates``; note the estimate of any large run."""
    from composition_rl.compose.pipeline import estimate_run
    from composition_rl.compose.spc import VARIABLE_NAMES

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
        raise UsageError(
            f"--depth {config.depth} needs {config.depth} different problems in every chain, but the pools "
            f"({_pools_text(est.pools)}) hold only {est.distinct} different problems: no chain exists; "
            f"use --depth {max(2, est.distinct)} or less, or more input")
    if est.trial == 0:
        if not args.yes:
            raise UsageError(
                f"--depth {config.depth}: none of the sampled chains of pools {_pools_text(est.pools)} holds "
                f"{config.depth} different problems, so nothing can be estimated and almost every candidate is a "
                "repeat; use a smaller --depth or larger pools (--yes runs it anyway)")
        return
    if est.names_ok == 0:
        raise UsageError(
            f"--depth {config.depth} needs {est.names_needed} free variable names per chain, of the "
            f"{len(VARIABLE_NAMES)} the engine uses ({''.join(VARIABLE_NAMES)}); none of {est.trial} sampled "
            f"chains leaves that many (their problems use the others as symbols), so every candidate "
            f"would fail: use a smaller --depth")
    workers = args.workers or os.cpu_count() or 1
    what = (f"about {est.candidates:,} candidate chains (pools {_pools_text(est.pools)}), "
            f"~{_human_bytes(est.output_bytes)} of output, ~{_human_time(est.seconds(workers))} with {workers} "
            f"worker(s) (from a trial of {est.trial} chains, {est.trial_accepted} accepted)")
    if est.candidates > args.limit_candidates and config.max_candidates is None and not args.yes:
        raise UsageError(f"{what}: beyond --limit-candidates {args.limit_candidates:,}. "
                         f"Take a seeded sample with --max-candidates N, or pass --yes to run it all")
    if est.candidates > 1_000_000:
        print(f"crl compose: note: {what}", file=sys.stderr)


def _pools_text(pools: tuple[int, ...]) -> str:
    """Pool sizes as ``20x20x300``; a long chain as ``6x...x6 (40 positions)``."""
    if len(pools) <= 8:
        return "x".join(map(str, pools))
    return f"{pools[0]}x...x{pools[-1]} ({len(pools)} positions)"


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:,.0f} {unit}"
        n /= 1000
    return f"{n:,.0f} PB"  # pragma: no cover


def _human_time(s: float) -> str:
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.0f} min"
    if s < 172800:
        return f"{s / 3600:.0f} h"
    if s < 3.2e8:
        return f"{s / 86400:,.0f} days"
    return f"{s / 3.15e7:,.0f} years"


def run(args: argparse.Namespace) -> int:
    from composition_rl.compose import ComposeConfig, natural, run_compose
    from composition_rl.compose.run import is_resumable
    from composition_rl.flags import from_flags

    t0 = time.perf_counter()
    try:
        config = from_flags(ComposeConfig, args, natural=natural.from_args(args))
        exports = [e.strip() for e in args.export.split(",") if e.strip()]
        from composition_rl.io.export import EXPORTERS

        for e in exports:
            EXPORTERS.get(e)
        probe_config = _probe_config(args)
        llm_kw: dict[str, Any] = {}
        if is_resumable(args.engine):  # an engine with a model behind it
            llm_kw["llm_config"] = llm_config_from_args(args)
        else:
            _refuse_llm_flags(args)
    except (ValueError, KeyError) as e:
        raise UsageError(str(e).strip("'\"")) from e
    if args.select and not args.from_profile:
        raise UsageError(f"--select {args.select} picks classes of a profile: it needs --from-profile DIR "
                         "(without it every problem of --input is composed)")
    out = Path(args.out)
    from composition_rl.compose.run import output_paths
    from composition_rl.io.files import refuse_overwrite
    from composition_rl.io.runs import refuse_foreign

    try:
        refuse_overwrite({"--input": args.input, "--first-pool": args.first_pool}, output_paths(out),
                         fix="choose another --out (a composed set is composed again from a copy or another folder)")
        refuse_foreign("compose", folders={"--out": out},
                       inputs={"--input": args.input, "--first-pool": args.first_pool, "--from-profile": args.from_profile})
    except ValueError as e:
        raise UsageError(str(e)) from None
    made = check_out_dir(out)
    try:
        problems, first, inputs, rejects = load_inputs(args, out)
        if not is_resumable(args.engine):  # a batch run: estimate it before it starts
            size_guard(args, config, problems, first)
    except UsageError:  # refused before any work: a folder this run made goes (but a rejects file it names)
        _drop_made(out, made, keep=("input_rejects.jsonl",))
        raise
    from composition_rl.compose.journal import EndpointDown
    from composition_rl.compose.run import OutputBusy
    from composition_rl.compose.workers import WorkerDied
    from composition_rl.io.runs import RunClash

    try:
        stats = run_compose(problems, config, out, first_pool=first, inputs=inputs, input_rejects=rejects,
                            progress=not args.no_progress, exports=exports, **llm_kw)
    except OutputBusy as e:
        raise UsageError(str(e)) from e  # another run holds the folder: it is that run's now
    except RunClash as e:  # another command's run took the folder between the checks and the lock
        raise UsageError(str(e)) from e
    except WorkerDied as e:  # killed from outside (OOM killer, kill -9): the run has no output
        print(f"crl compose: error: {e}; no output was written, rerun the same command", file=sys.stderr)
        return 1
    except OSError as e:
        raise UsageError(f"cannot write to {out}: {e}") from e
    except ValueError as e:  # llm/auto: a resumed run with other settings, a busy cache
        if not is_resumable(args.engine):
            raise
        raise UsageError(str(e)) from e
    except EndpointDown as e:
        print(f"crl compose: error: {e}", file=sys.stderr)
        return 1
    if args.probe_model and stats["accepted"] and not stats.get("kept_previous"):
        stats = _probe(args, out, exports, probe_config)
        from composition_rl.profile import no_answer_note

        note = no_answer_note(stats["probe"]["no_answer"], stats["probe"]["replies"])
        if note:  # the probe's "guessable" count rests on replies it could grade
            print(f"probe: {note}", file=sys.stderr)
    empty = _empty_outcome(stats, len(problems), config.depth)
    if empty and stats["candidates"] == 0 and made:
        # nothing to look at (no chain, so no rejected.jsonl worth keeping): the folder this
        # run made goes, as for any refused run
        _drop_made(out, made, unless_changed_since=_state(out))
        print(f"crl compose: error: {empty}; no trainer export written (no folder left)", file=sys.stderr)
        return 1
    if empty:
        print_summary(stats, out, [], time.perf_counter() - t0, failed=True)
        kept = (f"; {out} keeps the previous run as it was (its composed.jsonl, stats.json and exports); rerun "
                "into a new --out to see this run's rejected.jsonl") if stats.get("kept_previous") else ""
        print(f"crl compose: error: {empty}; no trainer export written{kept}", file=sys.stderr)
        return 1
    from composition_rl.io.export import export_path

    print_summary(stats, out, [export_path(out, e) for e in exports], time.perf_counter() - t0)
    return 0


def _probe_config(args: argparse.Namespace):
    """The probe's settings, checked before any composing (None without ``--probe-model``)."""
    if not args.probe_model:
        if args.probe_base_url:
            raise ValueError("--probe-base-url needs --probe-model NAME (the served solver's name)")
        return None
    from composition_rl.backends.rollout import SamplingConfig
    from composition_rl.probe import ProbeConfig

    return ProbeConfig(k=args.probe_k, tau=args.probe_tau, sampling=SamplingConfig(max_tokens=args.probe_max_tokens))


def _probe(args: argparse.Namespace, out: Path, exports: list[str], config) -> dict[str, Any]:
    """The solver probe over the run just written, folded into it under the run's lock."""
    from composition_rl.compose.run import lock_output
    from composition_rl.io.identity import run_identity
    from composition_rl.io.readers import ReaderConfig, load_problems
    from composition_rl.probe import apply_to_run, build_solver, probe_records
    from composition_rl.profile import RunMismatch
    from composition_rl.verify import VerifyConfig, shared_verifier

    try:
        solver = build_solver(args.probe_model, args.probe_base_url, args.probe_backend)
    except (ImportError, ValueError) as e:
        raise UsageError(f"--probe-model {args.probe_model}: {e}") from None
    try:
        with lock_output(out):
            records = load_problems(str(out / "composed.jsonl"), ReaderConfig()).problems
            result = probe_records(records, solver, shared_verifier(VerifyConfig()), out / "probe", config,
                                   progress=not args.no_progress,
                                   identity=run_identity(model=args.probe_model, backend=solver.name, command="probe"))
            return apply_to_run(out, result, exports)
    except RunMismatch as e:
        raise UsageError(f"{e} (the solver's pass rates are kept in {out / 'probe'})") from None
    finally:
        solver.close()


def _empty_outcome(stats: dict[str, Any], n_problems: int, depth: int) -> str | None:
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


def print_summary(stats: dict[str, Any], out: Path, exports: list[Path], wall: float, failed: bool = False) -> None:
    """The closing table: the yield funnel, the reasons, and where the files are (of a
    ``failed`` run, only where each candidate's reason is: the error that follows says why)."""
    from rich.console import Console
    from rich.table import Table

    con = Console()
    t = Table(title=f"composition ({stats.get('engine', 'symbolic')}, depth {stats['config']['depth']})", show_lines=False)
    t.add_column("stage")
    t.add_column("kept", justify="right")
    t.add_column("share", justify="right")
    n = max(stats["candidates"], 1)
    for row in stats["funnel"]:
        t.add_row(row["stage"], f"{row['kept']:,}", f"{row['kept'] / n:.1%}")
    con.print(t)
    if stats["rejected_by_reason"]:
        r = Table(title="rejected by reason")
        r.add_column("reason")
        r.add_column("count", justify="right")
        for k, v in sorted(stats["rejected_by_reason"].items(), key=lambda kv: -kv[1]):
            r.add_row(k, f"{v:,}")
        con.print(r)
    rate = stats.get("candidates_per_s")
    con.print(
        f"[bold]{stats['accepted']:,}[/bold] of {stats['candidates']:,} candidates accepted "
        f"({stats['accepted'] / n:.1%}) in {wall:.1f} s"
        + (f" ({rate:,.0f} candidates/s)" if rate else "")
        + (f"; {stats['input_rejects']} input rows rejected" if stats.get("input_rejects") else "")
    )
    if stats.get("pending"):
        con.print(f"[bold]{stats['pending']:,}[/bold] candidates got no answer (timeouts, connection errors, 5xx) "
                  "and are not counted above: rerun the same command to retry them")
    if failed:
        if not stats.get("kept_previous"):  # then the folder's files are the previous run's
            con.print(f"each candidate's reason in {out}/rejected.jsonl")
        return
    con.print(f"outputs in {out}/: composed.jsonl, rejected.jsonl, input_rejects.jsonl, stats.json"
              + "".join(f", {p.name}" for p in exports))
