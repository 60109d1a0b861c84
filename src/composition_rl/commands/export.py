"""``crl export``: write problems as they are (depth 1) as trainer datasets.

    crl export --input ../shared/data/train/math_train.json --out runs/d1 --format verl,trl

Writes ``problems.jsonl`` (one :class:`~composition_rl.records.Problem` per line, what
``crl train`` stages and ``crl profile`` read), ``verl.parquet`` / ``trl.parquet`` (the same
exporters as ``crl compose --export``) and ``input_rejects.jsonl``. With it, the depth-1
stage of a curriculum is built with the CLI alone: ``crl compose`` makes depths 2 and up.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from composition_rl.cli import UsageError

HELP = "write problems as they are (depth 1) as verl/TRL datasets and Problem JSONL"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``crl export``: ``--input``, the field overrides, ``--out`` and
    ``--format``."""
    p.add_argument("--input", required=True, help="problems file (.json array, .jsonl, .csv, .tsv, .parquet; "
                   ".gz or .zst compressed too), or a composed.jsonl")
    p.add_argument("--question-field", help="field holding the question (default: problem/question/prompt)")
    p.add_argument("--answer-field", help="field holding the answer (default: answer/final_answer/ground_truth)")
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--format", default="verl,trl", help="trainer datasets to write: verl,trl (default both); "
                   "problems.jsonl is always written")


def run(args: argparse.Namespace) -> int:
    """Write the ``--input`` problems as ``problems.jsonl`` and the ``--format`` trainer
    datasets, and print how many were exported (and rejected, on stderr); 0 on success."""
    from composition_rl.io.files import refuse_overwrite
    from composition_rl.io.readers import InputError, ReaderConfig, load_problems
    from composition_rl.io.runs import RunBusy, refuse_foreign, run_folder
    from composition_rl.jobs.export import EXPORTERS, export_loaded, export_path

    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    try:
        for f in formats:
            EXPORTERS.get(f)
    except KeyError as e:
        raise UsageError(str(e).strip("'\"")) from None
    out = Path(args.out)
    exports = [export_path(out, e).name for e in EXPORTERS.names()]
    try:
        refuse_overwrite({"--input": args.input}, [out / "problems.jsonl", out / "input_rejects.jsonl",
                                                   *(out / e for e in exports)])
        refuse_foreign("export", folders={"--out": out}, inputs={"--input": args.input})
    except ValueError as e:
        raise UsageError(str(e)) from None
    try:
        res = load_problems(args.input, ReaderConfig(question_field=args.question_field, answer_field=args.answer_field))
    except InputError as e:
        raise UsageError(str(e)) from None
    try:
        # a refused run leaves nothing in a folder it made but the rejects file its message names
        with run_folder(out, "export", inputs={"--input": args.input}, refusals=(UsageError, ValueError),
                        keep=("input_rejects.jsonl",)):
            stale = export_loaded(res, out, formats, args.input, args.question_field, args.answer_field)
    except RunBusy as e:
        raise UsageError(str(e)) from None
    except ValueError as e:
        raise UsageError(str(e)) from None
    paths = [export_path(out, f) for f in formats]
    if stale:
        print(f"removed {', '.join(stale)} of an earlier export in {out} (not asked for with --format, or made "
              "from the records replaced now)", file=sys.stderr)
    depths = sorted({p.depth for p in res.problems})
    print(f"exported {len(res.problems):,} problems (depth {', '.join(map(str, depths))}) of {res.rows:,} rows "
          f"to {out}/: problems.jsonl" + "".join(f", {p.name}" for p in paths))
    if res.rejects:
        print(f"{len(res.rejects):,} rows rejected (reasons in {out / 'input_rejects.jsonl'})", file=sys.stderr)
    return 0
