"""Stage data: load problems, turn them into trainer rows, and draw them in a seeded order.

A :class:`PromptStream` walks one stage's problems in a permutation derived from
``(seed, stage name, epoch)``, so the prompts of every step are reproducible and a resumed
run continues from the saved cursor.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from composition_rl.jobs.train.config import StageConfig
from composition_rl.records import Problem

__all__ = ["PromptStream", "fit_stage", "load_stage_problems", "problem_row", "read_problems", "stage_depth"]

log = logging.getLogger(__name__)


def load_stage_problems(stage: StageConfig) -> list[Problem]:
    """The problems of one stage, from its file or the built-in arithmetic family.

    Raises:
        ValueError: the file is missing, empty, or has no usable rows.
    """
    if stage.arithmetic is not None:
        from composition_rl.jobs.train.arithmetic import arithmetic_problems

        a = stage.arithmetic
        problems = arithmetic_problems(int(a.get("n", 512)), int(a["depth"]), seed=int(a.get("seed", 0)),
                                       digits=int(a.get("digits", 2)))
    elif stage.compose is not None:
        problems = _compose_stage(stage)
    elif stage.reasoning_gym is not None:
        from composition_rl.io.readers import RGSpec, load_reasoning_gym

        g = stage.reasoning_gym
        conf = ((k, tuple(v) if isinstance(v, list) else v) for k, v in dict(g.get("config") or {}).items())
        spec = RGSpec(str(g["name"]), int(g.get("n", 64)), tuple(sorted(conf)))
        problems = list(load_reasoning_gym([spec], seed=int(g.get("seed", 0))).problems)
    else:
        path = Path(stage.data)
        if not path.is_file():
            raise ValueError(f"stage {stage.name!r}: data file not found: {path}")
        problems = read_problems(path)
    if stage.limit is not None:
        problems = problems[: stage.limit]
    if not problems:
        raise ValueError(f"stage {stage.name!r}: no problems from "
                         f"{stage.data or stage.arithmetic or stage.compose or stage.reasoning_gym}")
    return problems


def _compose_stage(stage: StageConfig, first: Sequence[Problem] | None = None,
                   previous: Sequence[Problem] | None = None) -> list[Problem]:
    """Compose the stage's problems on the fly with the project's symbolic engine.

    ``first`` (when given) is the pool q1 is drawn from; later positions come from the
    ``compose.from`` file, or without one from ``previous`` (the previous stage's problems).
    """
    from composition_rl.jobs.compose.pipeline import ComposeConfig, compose_problems

    c = stage.compose
    if "from" in c:
        src = Path(str(c["from"]))
        if not src.is_file():
            raise ValueError(f"stage {stage.name!r}: compose.from file not found: {src}")
        base = read_problems(src)
    elif previous is not None:
        src, base = f"the previous stage's {len(previous)} problems", list(previous)
    else:
        raise ValueError(f"stage {stage.name!r}: compose without from needs a stage before it")
    depth = int(c["depth"])
    if depth == 1:
        return base
    cfg = ComposeConfig(depth=depth, pool_size=int(c.get("pool_size", 20)),
                        max_candidates=int(c.get("max_candidates", 512)), seed=int(c.get("seed", 0)),
                        risks=str(c.get("risks", "last")))
    out = list(compose_problems(base, cfg, first_pool=list(first) if first is not None else None).accepted)
    if not out:
        raise ValueError(f"stage {stage.name!r}: no composition accepted from {src}")
    return out


def mastered_ids(pass_rates: Sequence[dict[str, Any]], stage: str) -> list[str]:
    """Ids of ``stage``'s prompts whose latest sampled group was solve_all, in first-seen order.

    >>> rows = [{"stage": "d1", "id": "a", "kind": "solve_all"}, {"stage": "d1", "id": "b", "kind": "solve_all"},
    ...         {"stage": "d1", "id": "a", "kind": "informative"}, {"stage": "d2", "id": "c", "kind": "solve_all"}]
    >>> mastered_ids(rows, "d1")
    ['b']
    """
    latest: dict[str, str] = {}
    for r in pass_rates:
        if r["stage"] == stage:
            latest[r["id"]] = r["kind"]
    return [i for i, kind in latest.items() if kind == "solve_all"]


def compose_from_mastered(stage: StageConfig, previous: Sequence[Problem], previous_stage: str,
                          pass_rates: Sequence[dict[str, Any]]) -> tuple[list[Problem], dict[str, Any]]:
    """The stage's problems, composed with q1 from the mastered prompts of ``previous``.

    Returns the problems and a record of the choice (how many were mastered, whether it fell
    back to every prompt of the previous stage because too few were).
    """
    ids = set(mastered_ids(pass_rates, previous_stage))
    first = [p for p in previous if p.id in ids]
    need = int(stage.compose.get("min_mastered", 2))
    fallback = len(first) < need
    problems = _compose_stage(stage, list(previous) if fallback else first, previous=previous)
    if stage.limit is not None:
        problems = problems[: stage.limit]
    info = {"stage": stage.name, "from_stage": previous_stage, "mastered": len(first),
            "previous_prompts": len(previous), "fallback_to_all": fallback, "problems": len(problems)}
    return problems, info


def read_problems(path: Path) -> list[Problem]:
    """The problems of one file, with the input rows it had to reject noted (a warning on this
    module's logger)."""
    # the project's reader maps heterogeneous fields and keeps our own Problem rows
    # (composed.jsonl) whole, links and all
    from composition_rl.io.readers import load_problems

    res = load_problems(path)
    if res.rejects:  # never dropped without a word
        log.warning("note: %s", res.rejected_note(str(path)))
    return list(res.problems)


def fit_stage(problems: Sequence[Problem], stage: str, model: str | Path, instruction: bool = False
              ) -> tuple[list[Problem], list[dict[str, Any]]]:
    """The stage's problems whose prompt fits the context of the local model ``model``, and
    the others as rejects (reason ``prompt_too_long``, with the stage's name).

    A prompt that fills the context leaves no room for a completion, so it cannot be trained
    on; set aside here, it is said once instead of being sampled to nothing at every draw.
    A model that is not a local folder (a hub name) is not checked.
    """
    if not Path(model).is_dir():
        return list(problems), []
    from composition_rl.chat.context import PromptFit
    from composition_rl.io.readers import set_aside

    fit = PromptFit.for_model(model)  # TRL applies the tokenizer's chat template to the rows
    kept, rejects = set_aside(problems, lambda p: fit.reason(problem_row(p, stage, instruction)["prompt"][0]["content"]))
    if not kept:
        raise ValueError(f"stage {stage!r}: none of its {len(problems)} prompts fits the context of {model} "
                         f"({fit.context} tokens)")
    return kept, [{"stage": stage, **r} for r in rejects]


def stage_depth(stage: StageConfig, problems: Sequence[Problem]) -> int:
    """The declared depth, else the most common depth among the problems."""
    if stage.depth is not None:
        return stage.depth
    return Counter(p.depth for p in problems).most_common(1)[0][0]


def problem_row(p: Problem, stage: str, instruction: bool = False) -> dict[str, Any]:
    """A TRL row: a conversational prompt plus the columns the reward and metrics read.

    ``instruction`` appends the exporters' boxed-answer instruction (jobs/export.py).
    """
    content = p.question
    if instruction:
        from composition_rl.jobs.export import user_prompt

        content = user_prompt(p.question)
    return {
        "prompt": [{"role": "user", "content": content}],
        "answer": p.answer,
        "answers": list(p.answers),
        "id": p.id,
        "depth": p.depth,
        "stage": stage,
    }


class SeededCycle:
    """Indices ``0..size-1``, each once per epoch in an order seeded by ``(seed, key, epoch)``;
    resumable from ``{"epoch", "cursor"}``. The draw order of :class:`PromptStream` (a stage) and
    of ``prompt_source.DatasetSource`` (a user's dataset).

    >>> c = SeededCycle(3, "s", seed=0)
    >>> sorted(c.next_index() for _ in range(3)), c.state_dict()
    ([0, 1, 2], {'epoch': 0, 'cursor': 3})
    """

    def __init__(self, size: int, key: str, seed: int = 0) -> None:
        self.size, self.key, self.seed = size, key, seed
        self.epoch = 0
        self.cursor = 0
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> list[int]:
        order = list(range(self.size))
        random.Random(f"{self.seed}:{self.key}:{epoch}").shuffle(order)
        return order

    def next_index(self) -> int:
        """The next index, reshuffling for a new epoch after every ``size`` draws."""
        if self.cursor == len(self._order):
            self.epoch += 1
            self.cursor = 0
            self._order = self._permutation(self.epoch)
        i = self._order[self.cursor]
        self.cursor += 1
        return i

    def state_dict(self) -> dict[str, int]:
        """The position to resume from: ``{"epoch", "cursor"}``."""
        return {"epoch": self.epoch, "cursor": self.cursor}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume at the position :meth:`state_dict` saved (the epoch's order is rebuilt from the
        seed)."""
        self.epoch = int(state["epoch"])
        self.cursor = int(state["cursor"])
        self._order = self._permutation(self.epoch)


class PromptStream:
    """Seeded, resumable draws from one stage: every problem once per epoch, then reshuffle."""

    def __init__(self, problems: Sequence[Problem], name: str, seed: int = 0, instruction: bool = False) -> None:
        if not problems:
            raise ValueError(f"stage {name!r} has no problems")
        self.rows = [problem_row(p, name, instruction) for p in problems]
        self.name = name
        self.seed = seed
        self.order = SeededCycle(len(self.rows), name, seed)

    def draw(self, n: int) -> list[dict[str, Any]]:
        """The next ``n`` rows (copies), crossing epochs as needed."""
        return [dict(self.rows[self.order.next_index()]) for _ in range(n)]

    def state_dict(self) -> dict[str, int]:
        """The draw position (:meth:`SeededCycle.state_dict`)."""
        return self.order.state_dict()

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Resume at the draw position :meth:`state_dict` saved."""
        self.order.load_state_dict(state)
