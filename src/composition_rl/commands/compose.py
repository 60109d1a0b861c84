"""``crl compose``: compose a verifiable prompt set into a harder one (SPC to depth K)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from composition_rl.cli import UsageError

HELP = "compose a verifiable prompt set into a harder one (SPC, depth K)"


def RESUMABLE(args: argparse.Namespace) -> bool | str:  # noqa: N802 - read by cli.main on Ctrl-C
    """Only the journaled engines (llm, auto) keep finished work; a symbolic run starts over,
    and the folder keeps the previous complete run (outputs are replaced only at the end)."""
    from composition_rl.jobs.compose.run import is_resumable

    try:
        if is_resumable(getattr(args, "engine", "symbolic")):
            return True
    except KeyError:
        pass
    return (f"a symbolic run keeps no partial work; {getattr(args, 'out', 'the output folder')} holds the "
            "previous complete run, if any, as it was: rerun the command to start over")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``crl compose``: input, :class:`ComposeConfig` and the size guard,
    naturalness, output and exports, the ``--llm-*`` engine and the opt-in ``--probe-*`` solver."""
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
    from composition_rl.flags import add_flags
    from composition_rl.jobs.compose.pipeline import ComposeConfig

    add_flags(c, ComposeConfig)  # --depth, --pool-size, --pool-sizes, ..., --engine, --workers
    c.add_argument("--limit-candidates", type=int, default=20_000_000,
                   help="refuse a run estimated above this many candidate chains (default 20,000,000) "
                   "unless --yes or --max-candidates is given")
    c.add_argument("--yes", action="store_true", help="run even when the size estimate exceeds --limit-candidates")

    from composition_rl.spc import natural

    natural.add_arguments(p.add_argument_group("naturalness (docs/composition.md)"))
    o = p.add_argument_group("output")
    o.add_argument("--out", required=True, help="output folder")
    o.add_argument("--export", default="", help="also write trainer datasets: verl,trl")
    o.add_argument("--no-progress", action="store_true", help="no progress bar")
    from composition_rl.spc.llm.config import LLMComposeConfig

    add_flags(p.add_argument_group("LLM engine (--engine llm|auto); the API key is read from OPENAI_API_KEY only"),
              LLMComposeConfig, prefix="llm_")
    from composition_rl.jobs.probe import BACKEND_HELP, BASE_URL_HELP, MODEL_HELP
    from composition_rl.rollout.base import ROLLOUT_BACKENDS

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
    from composition_rl.flags import from_flags
    from composition_rl.spc.llm.config import LLMComposeConfig

    # checked here, not in __post_init__: a config handed a ready backend (tests,
    # benchmarks) needs no URL
    if args.llm_backend == "openai" and not args.llm_base_urls:
        raise ValueError("--engine llm/auto needs an endpoint: pass --base-url URL (repeatable) and --model NAME")
    return from_flags(LLMComposeConfig, args, prefix="llm_")


def _refuse_llm_flags(args: argparse.Namespace) -> None:
    """The model's settings given to an engine that asks no model are a mistake to name,
    not options to drop (``--concurrency -5`` ran as if unset)."""
    from composition_rl.flags import flags_given
    from composition_rl.spc.llm.config import LLMComposeConfig

    given = flags_given(LLMComposeConfig, args, prefix="llm_")
    if given:
        raise ValueError(f"{', '.join(given)} set the model of --engine llm or auto; --engine {args.engine} asks "
                         "no model: drop them, or choose --engine llm or auto")


def run(args: argparse.Namespace) -> int:
    """Compose the input to depth K and print the closing table and exports; 1 when the run
    kept nothing usable, a worker died or the LLM endpoint went down."""
    from composition_rl.flags import from_flags
    from composition_rl.jobs.compose import ComposeConfig
    from composition_rl.jobs.compose.job import Refused, compose_from_args
    from composition_rl.jobs.compose.journal import EndpointDown
    from composition_rl.jobs.compose.run import is_resumable
    from composition_rl.jobs.compose.workers import WorkerDied
    from composition_rl.spc import natural

    t0 = time.perf_counter()
    try:
        config = from_flags(ComposeConfig, args, natural=natural.from_args(args))
        exports = [e.strip() for e in args.export.split(",") if e.strip()]
        from composition_rl.jobs.export import EXPORTERS

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
    try:
        res = compose_from_args(args, config, exports, llm_kw, probe_config)
    except Refused as e:
        raise UsageError(str(e)) from e
    except WorkerDied as e:  # killed from outside (OOM killer, kill -9): the run has no output
        print(f"crl compose: error: {e}; no output was written, rerun the same command", file=sys.stderr)
        return 1
    except EndpointDown as e:
        print(f"crl compose: error: {e}", file=sys.stderr)
        return 1
    stats = res.stats
    if res.probe_note:  # the probe's "guessable" count rests on replies it could grade
        print(f"probe: {res.probe_note}", file=sys.stderr)
    if res.dropped:
        print(f"crl compose: error: {res.empty}; no trainer export written (no folder left)", file=sys.stderr)
        return 1
    if res.empty:
        print_summary(stats, out, [], time.perf_counter() - t0, failed=True)
        kept = (f"; {out} keeps the previous run as it was (its composed.jsonl, stats.json and exports); rerun "
                "into a new --out to see this run's rejected.jsonl") if stats.get("kept_previous") else ""
        print(f"crl compose: error: {res.empty}; no trainer export written{kept}", file=sys.stderr)
        return 1
    from composition_rl.jobs.export import export_path

    print_summary(stats, out, [export_path(out, e) for e in exports], time.perf_counter() - t0)
    return 0


def _probe_config(args: argparse.Namespace):
    """The probe's settings, checked before any composing (None without ``--probe-model``)."""
    if not args.probe_model:
        if args.probe_base_url:
            raise ValueError("--probe-base-url needs --probe-model NAME (the served solver's name)")
        return None
    from composition_rl.jobs.probe import ProbeConfig
    from composition_rl.rollout.base import SamplingConfig

    return ProbeConfig(k=args.probe_k, tau=args.probe_tau, sampling=SamplingConfig(max_tokens=args.probe_max_tokens))


def print_summary(stats: dict[str, Any], out: Path, exports: list[Path], wall: float, failed: bool = False) -> None:
    """Print the closing table of a compose run
    (:func:`composition_rl.jobs.compose.job.summary_renderables`)."""
    from rich.console import Console

    from composition_rl.jobs.compose.job import summary_renderables

    con = Console()
    for part in summary_renderables(stats, out, exports, wall, failed):
        con.print(part)
