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
    from composition_rl.flags import add_flags
    from composition_rl.refresh import DecontamConfig

    p.add_argument("--input", required=True, help="problems file (json, jsonl, csv, tsv, parquet; also .gz/.zst), "
                   "or a composed.jsonl (each part of a composed prompt is checked too)")
    p.add_argument("--benchmarks", action="append", default=[], required=True,
                   help="benchmark files, comma-separated or repeated (any format the reader takes)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--question-field", help="force the question field")
    p.add_argument("--answer-field", help="force the answer field")
    add_flags(p, DecontamConfig, prefix="decontam_")


def run(args: argparse.Namespace) -> int:
    from composition_rl.commands.refresh import benchmark_paths, load_benchmarks
    from composition_rl.flags import from_flags
    from composition_rl.io.files import StagedOutputs, atomic_write_json, atomic_write_jsonl
    from composition_rl.io.identity import run_identity
    from composition_rl.io.readers import InputError, ReaderConfig, load_problems
    from composition_rl.io.runs import RunBusy, record_run, run_folder
    from composition_rl.refresh import BenchmarkIndex, DecontamConfig

    try:
        config = from_flags(DecontamConfig, args, prefix="decontam_")
    except ValueError as e:
        raise UsageError(str(e)) from None
    marks = benchmark_paths(args)
    out = Path(args.out)
    try:
        with run_folder(out, "decontaminate",
                        inputs={"--input": args.input, **{f"--benchmarks {b}": b for b in marks}},
                        refusals=(UsageError, ValueError)):
            try:
                res = load_problems(args.input, ReaderConfig(question_field=args.question_field,
                                                             answer_field=args.answer_field))
            except (InputError, OSError) as e:
                raise UsageError(str(e)) from None
            if not res.problems:
                raise UsageError(res.why_empty(f"--input {args.input}"))
            index = BenchmarkIndex(load_benchmarks(marks), config)
            # a composed prompt's parts are checked alone too, where the input holds them
            text = {p.id: p.question for p in res.problems}
            clean, aside = [], []
            for p in res.problems:
                m = index.match_problem(p, [text[q] for q in p.parents if q in text])
                if m is None:
                    clean.append(p)
                else:
                    aside.append({"id": p.id, "reason": "benchmark_overlap", "match": m.to_dict(),
                                  "problem": p.to_dict()})
            summary = {"input": len(res.problems), "clean": len(clean), "set_aside": len(aside),
                       "input_rejects": len(res.rejects), "benchmark_rows": len(index),
                       "n": config.n, "threshold": config.threshold}
            names = ["clean.jsonl", "set_aside.jsonl", "input_rejects.jsonl", "summary.json", "run.json"]
            with StagedOutputs(out, names) as stage:
                atomic_write_jsonl(stage.dir / "clean.jsonl", (p.to_dict() for p in clean))
                atomic_write_jsonl(stage.dir / "set_aside.jsonl", aside)
                atomic_write_jsonl(stage.dir / "input_rejects.jsonl", res.rejects)
                atomic_write_json(stage.dir / "summary.json", summary)
                record_run(stage.dir, "decontaminate",
                           run_identity(inputs={"input": args.input, **{f"benchmark {b}": b for b in marks}},
                                        n=config.n, threshold=config.threshold))
                stage.commit()
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None
    print(f"decontaminated {summary['input']} prompts against {summary['benchmark_rows']} benchmark problems: "
          f"{summary['clean']} clean -> {out / 'clean.jsonl'}, {summary['set_aside']} set aside -> "
          f"{out / 'set_aside.jsonl'}" + (f"; {len(res.rejects)} input rows rejected" if res.rejects else ""))
    return 0
