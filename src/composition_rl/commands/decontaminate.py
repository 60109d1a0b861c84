"""``crl decontaminate``: set aside the prompts of a set whose text overlaps a benchmark problem.

    crl decontaminate --input train.jsonl --benchmarks ../shared/data/eval/math500.parquet --out runs/clean

Writes ``clean.jsonl`` (the prompts kept, as Problem records), ``set_aside.jsonl`` (each
prompt set aside with the benchmark row it matches and the overlap), ``input_rejects.jsonl``
and ``summary.json``. The measure (word 8-gram containment, threshold 0.5) and its measured
false-positive rate: docs/refresh.md, "Decontamination".
"""

from __future__ import annotations

import argparse
from pathlib import Path

from composition_rl.cli import UsageError

HELP = "set aside the prompts of a set that overlap benchmark problems (n-gram containment)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``crl decontaminate``: ``--input``, ``--benchmarks``, ``--out``,
    the field overrides and the :class:`DecontamConfig` settings (``--decontam-*``)."""
    from composition_rl.flags import add_flags
    from composition_rl.jobs.refresh import DecontamConfig

    p.add_argument("--input", required=True, help="problems file (json, jsonl, csv, tsv, parquet; also .gz/.zst), "
                   "or a composed.jsonl (each part of a composed prompt is checked too)")
    p.add_argument("--benchmarks", action="append", default=[], required=True,
                   help="benchmark files, comma-separated or repeated (any format the reader takes)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--question-field", help="force the question field")
    p.add_argument("--answer-field", help="force the answer field")
    add_flags(p, DecontamConfig, prefix="decontam_")


def run(args: argparse.Namespace) -> int:
    """Set aside the ``--input`` prompts that overlap a benchmark, writing the run folder, and
    print how many were kept and set aside; 0 on success."""
    from composition_rl.flags import from_flags
    from composition_rl.io.runs import RunBusy, run_folder
    from composition_rl.jobs.decontaminate import benchmark_paths, decontaminate_file
    from composition_rl.jobs.refresh import DecontamConfig

    try:
        config = from_flags(DecontamConfig, args, prefix="decontam_")
    except ValueError as e:
        raise UsageError(str(e)) from None
    marks = benchmark_paths(args.benchmarks)
    out = Path(args.out)
    try:
        with run_folder(out, "decontaminate",
                        inputs={"--input": args.input, **{f"--benchmarks {b}": b for b in marks}},
                        refusals=(UsageError, ValueError)):
            summary = decontaminate_file(args.input, marks, out, config, args.question_field, args.answer_field)
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None
    print(f"decontaminated {summary['input']} prompts against {summary['benchmark_rows']} benchmark problems: "
          f"{summary['clean']} clean -> {out / 'clean.jsonl'}, {summary['set_aside']} set aside -> "
          f"{out / 'set_aside.jsonl'}"
          + (f"; {summary['input_rejects']} input rows rejected" if summary["input_rejects"] else ""))
    return 0
