"""``crl compose``: compose a verifiable prompt set into a harder one (SPC to depth K)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from composition_rl.cli import UsageError

HELP = "compose a verifiable prompt set into a harder one (SPC, depth K)"


def _pool_sizes(text: str) -> tuple[int | None, ...]:
    out: list[int | None] = []
    for part in text.split(","):
        part = part.strip().lower()
        if part in ("full", "all", "*"):
            out.append(None)
            continue
        try:
            out.append(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError(f"pool size {part!r} is neither an integer nor 'full'") from None
    return tuple(out)


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_argument_group("input")
    src.add_argument("--input", help="problems file (.json array, .jsonl, .parquet); default: reasoning-gym numeric generators")
    src.add_argument("--question-field", help="field holding the question (default: problem/question/prompt)")
    src.add_argument("--answer-field", help="field holding the answer (default: answer/final_answer/ground_truth)")
    src.add_argument("--first-pool", help="take q1 (positions 1..K-1) from this file instead (cross-domain, Section 4.4)")
    src.add_argument("--from-profile", help="a `crl profile` output folder: compose only the prompts it classed as --select")
    src.add_argument("--select", default="solve_all", help="classes to take from --from-profile (comma-separated; default solve_all)")
    src.add_argument("--rg-size", type=int, default=0, help="scale the default reasoning-gym set to about this many problems")

    c = p.add_argument_group("composition")
    c.add_argument("--depth", type=int, default=2, help="K, problems per composed prompt (default 2)")
    c.add_argument("--pool-size", type=int, default=20, help="|D_k| for k < K (default 20; position K is the full set)")
    c.add_argument("--pool-sizes", type=_pool_sizes, help="one size per position, e.g. 500,500 or full,20 (ablations)")
    c.add_argument("--max-candidates", type=int, help="a seeded uniform sample of at most N candidate chains")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--max-chars", type=int, default=8000, help="length limit of a composed prompt (check 4)")
    c.add_argument("--engine", default="symbolic", choices=["symbolic", "llm", "auto"],
                   help="symbolic: exact, by program; llm: the paper's LLM sub-steps; auto: symbolic where it can")
    c.add_argument("--workers", type=int, default=0, help="processes for the symbolic engine (0 = one per core)")

    from composition_rl.compose import natural

    natural.add_arguments(p.add_argument_group("naturalness (docs/composition.md)"))
    o = p.add_argument_group("output")
    o.add_argument("--out", required=True, help="output folder")
    o.add_argument("--export", default="", help="also write trainer datasets: verl,trl")
    o.add_argument("--no-progress", action="store_true", help="no progress bar")
    try:
        from composition_rl.compose.llm import add_llm_arguments
    except ImportError:  # pragma: no cover - the LLM engine is optional
        return
    add_llm_arguments(p)


def load_inputs(args: argparse.Namespace) -> tuple[list, list | None, dict[str, Any], list[dict[str, Any]]]:
    """Problems, first pool, input description and input rejects for ``args``."""
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
            main = load_reasoning_gym(seed=args.seed, config=cfg, **({"scale": args.rg_size} if args.rg_size else {}))
        first = load_problems(args.first_pool, cfg) if args.first_pool else None
    except InputError as e:
        raise UsageError(str(e)) from e
    problems = main.problems
    inputs: dict[str, Any] = {
        "main": {"path": args.input or "reasoning-gym (built-in default)", "rows": main.rows,
                 "problems": len(main.problems), "rejects": len(main.rejects)},
    }
    rejects = list(main.rejects)
    if args.from_profile:
        from composition_rl.profile import select_from_profile

        try:
            keep = select_from_profile(args.from_profile, args.select)
        except (OSError, ValueError) as e:
            raise UsageError(f"--from-profile {args.from_profile}: {e}") from e
        problems = [p for p in problems if p.id in keep]
        inputs["from_profile"] = {"dir": args.from_profile, "select": args.select, "selected": len(problems)}
        if not problems:
            raise UsageError(f"--from-profile {args.from_profile}: no problem of {args.input or 'the input'} is in class {args.select!r}")
    if first is not None:
        inputs["first_pool"] = {"path": args.first_pool, "rows": first.rows, "problems": len(first.problems),
                                "rejects": len(first.rejects)}
        rejects += first.rejects
    if not problems:
        raise UsageError(f"{args.input}: no usable problem ({len(main.rejects)} rows rejected; see input_rejects.jsonl)")
    return problems, (first.problems if first else None), inputs, rejects


def run(args: argparse.Namespace) -> int:
    from composition_rl.compose import ComposeConfig, natural, run_compose

    t0 = time.perf_counter()
    try:
        config = ComposeConfig(
            depth=args.depth, pool_sizes=args.pool_sizes, pool_size=args.pool_size,
            max_candidates=args.max_candidates, seed=args.seed, max_chars=args.max_chars,
            engine=args.engine, workers=args.workers, natural=natural.from_args(args),
        )
        exports = [e.strip() for e in args.export.split(",") if e.strip()]
        from composition_rl.io.export import EXPORTERS

        for e in exports:
            EXPORTERS.get(e)
        llm_kw: dict[str, Any] = {}
        if args.engine != "symbolic":
            from composition_rl.compose.llm import llm_config_from_args

            llm_kw["llm_config"] = llm_config_from_args(args)
    except (ValueError, KeyError) as e:
        raise UsageError(str(e).strip("'\"")) from e
    problems, first, inputs, rejects = load_inputs(args)
    sizes = [len(first) if (k == 0 and first) else len(problems) for k in range(config.depth)]
    upper = 1
    for k, s in enumerate(config.sizes):
        upper *= sizes[k] if s is None else min(s, sizes[k])
    if upper > 1_000_000 and config.max_candidates is None:
        import sys

        print(f"crl compose: note: up to {upper:,} candidate chains; --max-candidates N takes a seeded sample",
              file=sys.stderr)
    out = Path(args.out)
    try:
        stats = run_compose(problems, config, out, first_pool=first, inputs=inputs, input_rejects=rejects,
                            progress=not args.no_progress, **llm_kw)
    except OSError as e:
        raise UsageError(f"cannot write to {out}: {e}") from e
    except ValueError as e:  # llm/auto: a resumed run with other settings, a busy cache
        if args.engine == "symbolic":
            raise
        raise UsageError(str(e)) from e
    paths = write_exports(out, exports)
    print_summary(stats, out, paths, time.perf_counter() - t0)
    return 0


def write_exports(out: Path, exports: list[str]) -> list[Path]:
    """Read back ``composed.jsonl`` and write each requested trainer dataset beside it."""
    if not exports:
        return []
    from composition_rl.io.export import export
    from composition_rl.io.files import read_jsonl
    from composition_rl.records import Problem

    composed = [Problem.from_dict(r) for r in read_jsonl(out / "composed.jsonl")]
    return [export(composed, name, out) for name in exports]


def print_summary(stats: dict[str, Any], out: Path, exports: list[Path], wall: float) -> None:
    """The closing table: the yield funnel, the reasons, and where the files are."""
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
    con.print(f"outputs in {out}/: composed.jsonl, rejected.jsonl, input_rejects.jsonl, stats.json"
              + "".join(f", {p.name}" for p in exports))
