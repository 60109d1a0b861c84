"""Exporters to trainer dataset formats, registered by name.

* ``verl``: verl's RL parquet schema (``data_source``, ``prompt`` as a chat list, ``ability``,
  ``reward_model = {style: "rule", ground_truth}``, ``extra_info``), which
  ``verl.utils.dataset.rl_dataset.RLHFDataset`` reads. verl's reward managers pass
  ``ground_truth`` and the whole ``extra_info`` to the reward function
  (``composition_rl.integrations.verl.compute_score``). ``ground_truth`` is the canonical
  answer as one string, which verl's own scorers and validation logs expect; every accepted
  form is in ``extra_info.answers``, and ``compute_score`` accepts each of them.
* ``trl``: ``prompt`` (conversational), ``answer`` and ``answers`` columns; TRL passes extra
  columns to reward functions as keyword arguments, and ``make_reward_fn()`` accepts every
  form in both.

So a completion gets the same reward from ``crl train``, TRL and verl
(:mod:`composition_rl.grading.reward`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from composition_rl.io.files import atomic_open
from composition_rl.records import Problem
from composition_rl.registry import Registry

__all__ = ["EXPORTERS", "clear_exports", "export", "export_path", "instruction", "user_prompt"]

#: name -> ``fn(problems, split, start=0)``: one row per problem; ``start`` is the first
#: problem's index in the whole set (:func:`export` hands an exporter one batch at a time)
EXPORTERS: Registry[Callable[..., list[dict[str, Any]]]] = Registry("exporter")


@cache
def _template() -> str:
    # the same packaged template the rollout backends use by default, so training and
    # export prompts cannot drift from profiling and evaluation prompts
    text = resources.files("composition_rl.prompts").joinpath("rollout_boxed.txt").read_text("utf-8")
    return text.rstrip("\n")


def instruction() -> str:
    """The instruction that follows every question (from prompts/rollout_boxed.txt)."""
    return _template().replace("{question}", "").strip()


def user_prompt(question: str) -> str:
    """The user message: the question, then the request for a final answer in ``\\boxed{}``."""
    return _template().replace("{question}", question.strip())


def _extra(p: Problem, index: int, split: str) -> dict[str, Any]:
    return {
        "split": split,
        "index": index,
        "id": p.id,
        "depth": p.depth,
        "answers": list(p.answers),
        "parents": list(p.parents),
        "engine": p.engine,
        "question": p.question,
    }


@EXPORTERS.register("verl")
def to_verl(problems: Sequence[Problem], split: str = "train", start: int = 0) -> list[dict[str, Any]]:
    """One verl RL row per problem (see the module doc); ``split`` and each problem's index,
    counted from ``start``, go to ``extra_info``."""
    return [
        {
            "data_source": p.source or "composition_rl",
            "prompt": [{"role": "user", "content": user_prompt(p.question)}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": p.answer},
            "extra_info": _extra(p, i, split),
        }
        for i, p in enumerate(problems, start)
    ]


@EXPORTERS.register("trl")
def to_trl(problems: Sequence[Problem], split: str = "train", start: int = 0) -> list[dict[str, Any]]:
    """One TRL row per problem: ``prompt``, ``answer``, ``answers``, ``id`` and ``depth``
    (``split`` and ``start`` are not used: TRL rows carry no index)."""
    return [
        {
            "prompt": [{"role": "user", "content": user_prompt(p.question)}],
            "answer": p.answer,
            "answers": list(p.answers),
            "id": p.id,
            "depth": p.depth,
        }
        for p in problems
    ]


def export_path(out_dir: str | os.PathLike, name: str) -> Path:
    """Where exporter ``name`` writes in ``out_dir`` (``<name>.parquet``)."""
    return Path(out_dir) / f"{name}.parquet"


def clear_exports(out_dir: str | os.PathLike) -> list[Path]:
    """Remove every registered exporter's file from ``out_dir``; returns the removed paths.

    A run that replaces the records an export was made from calls this first, so an export
    of the previous run never sits beside the new records (a rerun without
    ``--export`` left the previous input's parquet files, and ``crl verl-recipe`` took them).
    """
    gone = []
    for name in EXPORTERS.names():
        path = export_path(out_dir, name)
        if path.is_file():
            path.unlink()
            gone.append(path)
    return gone


#: problems an exporter turns into rows at a time: the rows of one batch are Python dicts (a
#: few KB each), the whole set is held only as Arrow columns
EXPORT_BATCH = 4096


def export(problems: Iterable[Problem], name: str, out_dir: str | os.PathLike, split: str = "train",
           batch: int = EXPORT_BATCH) -> Path:
    """Write ``<name>.parquet`` into ``out_dir`` atomically; returns its path. Refuses (ValueError)
    to write an empty dataset.

    ``problems`` may be any iterable, read once (a generator over a ``composed.jsonl``): the
    exporter gets ``batch`` problems at a time and only their Arrow columns are kept, never
    every problem and row as Python objects at once (MATH depth 2's 124,753 records as
    ``Problem`` objects and row dicts took about 1 GB). The file is the same bytes whatever
    ``batch`` is: the batches are joined into one contiguous column each, as one
    ``Table.from_pylist`` of every row would give, before the parquet writer sees them.

    Example:
        >>> export([Problem.new("What is $1+1$?", "2")], "trl", "out")
        PosixPath('out/trl.parquet')
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if batch < 1:
        raise ValueError(f"batch={batch} must be at least 1")
    to_rows = EXPORTERS.get(name)
    it = iter(problems)
    batches = []
    start = 0
    while chunk := list(itertools.islice(it, batch)):
        batches.append(pa.RecordBatch.from_pylist(to_rows(chunk, split, start=start)))
        start += len(chunk)
    if not batches:  # a parquet with no rows and no columns would fail late, inside the trainer
        raise ValueError(f"no problems to export: refusing to write an empty {name}.parquet")
    table = _one_table(batches)
    path = export_path(out_dir, name)
    with atomic_open(path, "wb") as f:
        pq.write_table(table, f)
    return path


def _one_table(batches: list) -> Any:
    """One table of ``batches`` with each column in one contiguous chunk: the schema that
    reading every row at once infers (a column null in one batch takes its type from the
    others), and the same parquet bytes as that table (the writer's pages follow the chunks)."""
    import pyarrow as pa

    schema = pa.unify_schemas([b.schema for b in batches], promote_options="permissive")
    table = pa.Table.from_batches([b if b.schema == schema else b.cast(schema) for b in batches], schema)
    batches.clear()  # the table holds the buffers now
    columns = []
    for _ in range(table.num_columns):  # column by column: the batches' copy of one column at a time
        columns.append(table.column(0).combine_chunks())
        table = table.remove_column(0)
    return pa.Table.from_arrays(columns, schema=schema)


def export_loaded(res: Any, out: Path, formats: Sequence[str], input_path: str,
                  question_field: str | None = None, answer_field: str | None = None) -> list[str]:
    """The ``crl export`` job with ``out`` held: write the problems of ``res`` (a
    :class:`~composition_rl.io.readers.LoadResult` of ``input_path``) as ``problems.jsonl``
    and the trainer datasets ``formats``, with ``input_rejects.jsonl`` and ``run.json``, all
    replaced together and only when all are written. Returns the names of an earlier export's
    files removed (not asked for now, or made from the records replaced).

    A ValueError says why nothing is written: no usable row (its rejects are written first
    when there are some and no previous export sits in ``out``).
    """
    from composition_rl.io.files import StagedOutputs, atomic_write_jsonl
    from composition_rl.io.identity import run_identity
    from composition_rl.io.runs import record_run

    exports = [export_path(out, e).name for e in EXPORTERS.names()]
    if not res.problems:
        msg = res.why_empty(f"--input {input_path}")
        if (out / "problems.jsonl").exists():  # the previous export stays whole
            raise ValueError(msg + f"; {out} keeps its previous export as it was")
        if not res.rejects:
            raise ValueError(msg)
        atomic_write_jsonl(out / "input_rejects.jsonl", res.rejects)
        raise ValueError(msg + f". Every rejected row, with its reason: {out / 'input_rejects.jsonl'}")
    with StagedOutputs(out, ["problems.jsonl", "input_rejects.jsonl", "run.json", *exports,
                             "report.html"]) as stage:
        atomic_write_jsonl(stage.dir / "input_rejects.jsonl", res.rejects)
        atomic_write_jsonl(stage.dir / "problems.jsonl", (p.to_dict() for p in res.problems))
        for f in formats:
            export(res.problems, f, stage.dir)
        record_run(stage.dir, "export", run_identity(inputs={"input": input_path}, formats=list(formats),
                                                     question_field=question_field, answer_field=answer_field),
                   info={"input": str(input_path)})
        return [n for n in stage.commit() if n in exports or n == "report.html"]
