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
(:mod:`composition_rl.verify.reward`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from composition_rl.io.files import atomic_open
from composition_rl.records import Problem
from composition_rl.registry import Registry

__all__ = ["EXPORTERS", "clear_exports", "export", "export_path", "instruction", "user_prompt"]

EXPORTERS: Registry[Callable[[Sequence[Problem], str], list[dict[str, Any]]]] = Registry("exporter")


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
def to_verl(problems: Sequence[Problem], split: str = "train") -> list[dict[str, Any]]:
    return [
        {
            "data_source": p.source or "composition_rl",
            "prompt": [{"role": "user", "content": user_prompt(p.question)}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": p.answer},
            "extra_info": _extra(p, i, split),
        }
        for i, p in enumerate(problems)
    ]


@EXPORTERS.register("trl")
def to_trl(problems: Sequence[Problem], split: str = "train") -> list[dict[str, Any]]:
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


def export(problems: Sequence[Problem], name: str, out_dir: str | os.PathLike, split: str = "train") -> Path:
    """Write ``<name>.parquet`` into ``out_dir`` atomically; returns its path. Refuses (ValueError)
    to write an empty dataset.

    Example:
        >>> export([Problem.new("What is $1+1$?", "2")], "trl", "/tmp/x")  # doctest: +SKIP
        PosixPath('/tmp/x/trl.parquet')
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not problems:  # a parquet with no rows and no columns would fail late, inside the trainer
        raise ValueError(f"no problems to export: refusing to write an empty {name}.parquet")
    rows = EXPORTERS.get(name)(problems, split)
    table = pa.Table.from_pylist(rows)
    path = export_path(out_dir, name)
    with atomic_open(path, "wb") as f:
        pq.write_table(table, f)
    return path
