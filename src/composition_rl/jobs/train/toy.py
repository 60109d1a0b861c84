"""The CPU-scale recipe that ``crl demo`` and ``crl reproduce`` share: one place for its numbers.

The toy domain is reasoning-gym's ``basic_arithmetic`` (one-digit operands) and its
compositions by the project's symbolic engine (:class:`composition_rl.jobs.train.rg_task.RGTask`).
The policy is the tiny Qwen2 of :mod:`composition_rl.jobs.tiny_model`, warmed up by SFT on
scratchpads of depth 1, 2 and 3. GRPO then trains on a small depth-1 pool, which the
policy masters within tens of steps (solve_all rises, as in Figure 2 left), and on
compositions built on that pool (q1 from the pool, as the paper composes the prompts a
policy has mastered), which it has not mastered (Figure 2 right).

Nothing here is demo-only: :meth:`ToyRecipe.train_config` returns an ordinary
:class:`~composition_rl.jobs.train.config.TrainConfig` on the ``cpu-tiny`` preset, and the
stage files it points at are plain JSONL problem files, so ``crl train`` runs the same thing.

>>> r = ToyRecipe()
>>> r.tiny_model_config(seed=3).seed, r.task(seed=3).seed
(3, 3)
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composition_rl.io.files import atomic_write_jsonl
from composition_rl.records import Problem

__all__ = ["ToyRecipe"]


@dataclass(frozen=True)
class ToyRecipe:
    """Settings of the toy reproduction (measured on 2 CPU cores; see docs/science.md).

    The task is reasoning-gym ``basic_arithmetic`` with ``terms`` one-digit operands
    (``Calculate 5 + 9 - 7.``), solved left to right one fact at a time. With 3 terms every
    held-out problem is a new combination of facts the training side covers, so held-out
    tests measure a skill, not recall of facts the model never saw (with 2 terms each problem
    is one fact: the first design, docs/science.md).

    Args:
        n_base: reasoning-gym problems generated (duplicates are set aside: 4,000 draws give
            about 2,800 distinct 3-term problems).
        terms: operands per depth-1 problem.
        test_share: distinct depth-1 problems held out from SFT and RL, for testing.
        pool_size: depth-1 prompts in the RL pool (kept out of SFT).
        composed_per_depth: composition candidates per depth (the pool's compositions).
        sft_steps: SFT warm-up steps of the tiny model (batch 32).
        depth_mix: share of SFT examples per composed depth (the rest is depth 1). Without
            composed examples the model never composes and depth-2 reward stays 0.
        hidden_size, num_layers, intermediate_size: the tiny Qwen2's shape.
        learning_rate: GRPO learning rate.
        threshold, window: the curriculum's saturation rule (rolling solve_all).
        min_depth1_steps: the fewest depth-1 steps before saturation may end the stage (two
            windows, so that a climb can be seen before the level is judged).
        partners: where the later problems of a composition come from: ``pool`` (the RL
            prompts themselves, so every arm trains on the same original problems) or
            ``train`` (the SFT side).
        depth2_limit: keep only this many of the curriculum's depth-2 compositions (None: all),
            so that a short stage visits each several times.
    """

    n_base: int = 4000
    terms: int = 3
    test_share: float = 0.25
    pool_size: int = 64
    composed_per_depth: int = 1500
    sft_steps: int = 600
    depth_mix: dict[int, float] = field(default_factory=lambda: {2: 0.15, 3: 0.05})
    hidden_size: int = 128
    num_layers: int = 4
    intermediate_size: int = 512
    learning_rate: float = 1e-4
    threshold: float = 0.5
    window: int = 5
    min_depth1_steps: int = 10
    partners: str = "pool"
    depth2_limit: int | None = None

    @classmethod
    def demo(cls) -> ToyRecipe:
        """``crl demo``'s settings: the mechanism within minutes, not a held-out comparison.

        Two one-digit terms and a pool of 16 whose facts SFT never showed, so depth-1 solve_all
        climbs from low as GRPO learns them (design 1 of docs/science.md); depth 2 composed from
        the pool prompts just mastered with SFT-side partners, 48 of them, so that the stage's
        steps see each a few times and the reward can move within the demo.
        """
        return cls(n_base=600, terms=2, pool_size=16, depth_mix={2: 0.5, 3: 0.05}, partners="train",
                   depth2_limit=48, learning_rate=2e-4, min_depth1_steps=15)

    def task(self, seed: int):
        """The seed's problem family, with its held-out side."""
        from composition_rl.jobs.train.rg_task import RGTask

        return RGTask(seed=seed, n_base=self.n_base, test_share=self.test_share, pool_size=self.pool_size,
                      terms=self.terms)

    def tiny_model_config(self, seed: int):
        """The tiny model's SFT settings for ``seed``."""
        from composition_rl.jobs.tiny_model import TinyModelConfig

        return TinyModelConfig(seed=seed, sft_steps=self.sft_steps, depth_mix=dict(self.depth_mix),
                               hidden_size=self.hidden_size, num_layers=self.num_layers,
                               intermediate_size=self.intermediate_size)

    def write_stage_data(self, seed: int, folder: str | Path, test_composed: int = 0,
                         train_probe: int = 0) -> dict[str, Path]:
        """Write the pool, its depth-2/3 compositions and (optionally) test sets.

        Composed sets take q1 from the pool and later problems from ``partners``. Returns
        name -> path for ``pool`` (depth 1), ``depth2``, ``depth3``, ``mix`` (the pool plus as
        many depth-2 prompts), ``train`` (the train side without the pool: SFT's depth-1
        problems), and with ``test_composed > 0`` the held-out tests ``test1`` (depth 1),
        ``test2`` and ``test3`` (compositions of held-out problems only), and with
        ``train_probe > 0`` ``train1``: that many train-side problems outside the pool, the
        candidates of :meth:`new_pair_tests`.
        """
        task = self.task(seed)
        pool = task.pool()
        pool_ids = {p.id for p in pool}
        train = [p for p in task.base("train") if p.id not in pool_ids]
        partners = pool if self.partners == "pool" else train
        sets: dict[str, list[Problem]] = {"pool": pool}
        for depth in (2, 3):
            # the Composition-RL paper's pools: q1 from the prompts being mastered (the RL pool), the later
            # problems from the partners' whole set
            sets[f"depth{depth}"] = task.compose(partners, depth, self.composed_per_depth, first=pool)
        sets["mix"] = pool + sets["depth2"][: len(pool)]
        sets["train"] = train
        if test_composed:
            test = task.base("test")
            sets["test1"] = test
            for depth in (2, 3):
                sets[f"test{depth}"] = task.compose(test, depth, self.composed_per_depth)[:test_composed]
        if train_probe:
            order = sorted(train, key=lambda p: p.id)
            random.Random(f"toy-probe:{seed}").shuffle(order)
            sets["train1"] = order[:train_probe]
        folder = Path(folder)
        paths = {}
        for name, probs in sets.items():
            paths[name] = folder / f"{name}.jsonl"
            atomic_write_jsonl(paths[name], (p.to_dict() for p in probs))
        return paths

    def new_pair_tests(self, seed: int, solved: list[Problem], size: int) -> dict[int, list[Problem]]:
        """Depth-2/3 compositions of ``solved`` whose consecutive pairs SFT never showed.

        ``solved``: train-side problems outside the RL pool that a checkpoint solves alone.
        The RL arms compose only pool prompts as q1, so these pairs are new to RL as well:
        the test isolates the composition skill (carry q1's answer through the link into q2)
        from the facts, which the checkpoint already has.
        """
        task = self.task(seed)
        seen: set[tuple[str, str]] = set()
        for depth in (2, 3):
            for p in task.sft_problems(depth):
                seen.update(zip(p.parents, p.parents[1:]))
        out = {}
        for depth in (2, 3):
            fresh = [p for p in task.compose(solved, depth, self.composed_per_depth * 2)
                     if not seen.intersection(zip(p.parents, p.parents[1:]))]
            out[depth] = fresh[:size]
        return out

    def curriculum_stages(self, paths: dict[str, Path], seed: int, budgets: dict[int, int]) -> list[dict[str, Any]]:
        """Depth 1 on the pool, then depth 2 composed when reached from the pool prompts the policy
        has mastered (``compose.first: mastered``), then the depth-3 set."""
        return [
            {"name": "depth1", "data": str(paths["pool"]), "max_steps": budgets[1], "depth": 1,
             "min_steps": min(self.min_depth1_steps, budgets[1])},
            {"name": "depth2", "max_steps": budgets[2], "depth": 2,
             "compose": {"from": str(paths[self.partners]), "depth": 2, "first": "mastered", "seed": seed,
                         "max_candidates": self.composed_per_depth}, "limit": self.depth2_limit},
            {"name": "depth3", "data": str(paths["depth3"]), "max_steps": budgets[3], "depth": 3},
        ]

    def train_config(self, model: str | Path, output_dir: str | Path, stages: list[dict[str, Any]], seed: int,
                     mode: str = "auto", total_steps: int | None = None, progress: bool = True,
                     **extra: Any):
        """A ``cpu-tiny`` :class:`TrainConfig` with this recipe's learning rate and curriculum rule."""
        from composition_rl.jobs.train.config import TrainConfig

        raw: dict[str, Any] = {
            "preset": "cpu-tiny",
            "model": str(model),
            "output_dir": str(output_dir),
            "seed": seed,
            "stages": stages,
            "grpo": {"learning_rate": self.learning_rate},
            "curriculum": {"mode": mode, "threshold": self.threshold, "window": self.window,
                           "total_steps": total_steps},
            "progress": progress,
            **extra,
        }
        return TrainConfig.from_dict(raw)
