"""Dynamic sampling (Composition-RL, Equation 5), independent of any trainer.

Each step needs ``B`` prompt groups of ``G`` completions. Rounds of prompts are drawn,
generated and scored; a group is kept when its pass rate is strictly between 0 and 1 (or
inside the optional band ``[lo, hi]``); rounds continue until ``B`` groups are kept or
``max_rounds`` is reached. When the bound is hit, the batch is topped up with the latest
dropped groups, so shapes stay fixed, and the step is flagged ``bound_hit``: only then can a
trained batch hold a zero-variance group. The fillers are listed (``StepSample.fillers``) so
the trainer can keep those without an advantage out of the loss (their tokens would
otherwise dilute a token-mean loss).

The solve_all / solve_none / informative ratios are measured over every sampled group of
the step, before filtering (Figure 2, left).

>>> ds = DynamicSampler(DynamicSamplingConfig(max_rounds=3), num_generations=2)
>>> pools = iter([[1, 1, 0, 1], [0, 0], [1, 0]])    # scores of rounds 1, 2, 3
>>> out = ds.sample(2, draw=lambda n: [{"id": str(i), "depth": 1} for i in range(n)],
...                 generate=lambda rows: (rows, next(pools), [3] * 2 * len(rows)))
>>> out.rounds, [g.kind for g in out.groups], out.bound_hit
(3, ['solve_all', 'informative', 'solve_none', 'informative'], False)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from composition_rl.grading.groups import classify_group, pass_rate
from composition_rl.jobs.train.config import DynamicSamplingConfig

__all__ = ["DynamicSampler", "GroupRecord", "StepSample"]

B = TypeVar("B")


@dataclass
class GroupRecord:
    """One sampled prompt group."""

    id: str
    depth: int
    stage: str
    scores: list[float]
    pass_rate: float
    kind: str  # solve_all | solve_none | informative
    kept: bool
    round: int
    mean_length: float

    def to_dict(self) -> dict[str, Any]:
        """The group as a metrics row: its fields with the score count ``n`` in place of the scores
        (``mean_length`` left out)."""
        return {
            "id": self.id,
            "depth": self.depth,
            "stage": self.stage,
            "pass_rate": self.pass_rate,
            "n": len(self.scores),
            "kind": self.kind,
            "kept": self.kept,
            "round": self.round,
        }


@dataclass
class StepSample(Generic[B]):
    """What one step sampled: the per-round batches and which groups of each to train on."""

    parts: list[tuple[B, list[int]]]  # (round batch, group indices within it to train on)
    groups: list[GroupRecord] = field(default_factory=list)
    rounds: int = 0
    bound_hit: bool = False
    filled: int = 0  # uninformative groups added to fill the batch after the bound was hit
    fillers: list[tuple[int, int]] = field(default_factory=list)  # their (part, group index)
    generated: int = 0  # completions generated this step

    @property
    def trained_groups(self) -> list[GroupRecord]:
        """The groups kept for training, in sampling order."""
        return [g for g in self.groups if g.kept]

    def metrics(self) -> dict[str, float]:
        """The step as flat ``dynamic_sampling/*`` numbers (what the TRL trainer logs).

        ``solve_all``, ``solve_none`` and ``informative`` are shares of every sampled group,
        before filtering; ``refilled`` counts the trained groups that a round after the first
        gave and kept on their merit (the fillers of a bound hit are ``filled``).

        >>> def step(*rounds):   # scores per round; each round draws only the groups still missing
        ...     pools = iter(rounds)
        ...     return DynamicSampler(DynamicSamplingConfig(max_rounds=2), num_generations=2).sample(
        ...         2, draw=lambda n: [{"id": str(i)} for i in range(n)],
        ...         generate=lambda rows: (rows, next(pools), [3] * len(rows))).metrics()
        >>> m = step([1, 1, 0, 1], [1, 0])     # a solve_all group dropped, refilled by round 2
        >>> m["dynamic_sampling/rounds"], m["dynamic_sampling/solve_all"], m["dynamic_sampling/refilled"]
        (2.0, 0.3333333333333333, 1.0)
        >>> m = step([1, 1, 0, 1], [1, 1])     # round 2 solved again: the bound fills the batch
        >>> m["dynamic_sampling/refilled"], m["dynamic_sampling/bound_hit"], m["dynamic_sampling/filled"]
        (0.0, 1.0, 1.0)
        """
        kinds = {k: 0 for k in ("solve_all", "solve_none", "informative")}
        for g in self.groups:
            kinds[g.kind] += 1
        n = max(len(self.groups), 1)
        refill_fillers = sum(1 for part, _ in self.fillers if part > 0)
        return {
            "dynamic_sampling/rounds": float(self.rounds),
            **{f"dynamic_sampling/{k}": c / n for k, c in kinds.items()},
            "dynamic_sampling/refilled": float(sum(1 for g in self.groups if g.kept and g.round > 0) - refill_fillers),
            "dynamic_sampling/bound_hit": float(self.bound_hit),
            "dynamic_sampling/filled": float(self.filled),
            "dynamic_sampling/generated": float(self.generated),
        }


class DynamicSampler:
    """Over-sample, drop zero-variance groups, refill, with bounded rounds."""

    def __init__(self, config: DynamicSamplingConfig, num_generations: int,
                 on_round: Callable[[list[GroupRecord]], None] | None = None) -> None:
        config.validate()
        self.config = config
        self.G = num_generations
        # called with each round's groups before the next round is drawn (the online curriculum
        # retires a prompt there, so a refill round does not sample it again)
        self.on_round = on_round

    def keeps(self, rate: float) -> bool:
        """Whether a group with this pass rate is trained on (Equation 5, or the band)."""
        if not self.config.enabled:
            return True
        if self.config.band is None:
            return 0.0 < rate < 1.0
        lo, hi = self.config.band
        return lo <= rate <= hi

    def sample(
        self,
        need: int,
        draw: Callable[[int], list[dict[str, Any]]],
        generate: Callable[[list[dict[str, Any]]], tuple[B, Sequence[float], Sequence[int]]],
    ) -> StepSample[B]:
        """Fill ``need`` groups.

        Args:
            need: prompt groups per trained batch (B).
            draw: ``n -> n`` prompt rows.
            generate: rows repeated G times -> (batch, one score per completion, one
                completion length per completion), all in row order.
        """
        out: StepSample[B] = StepSample(parts=[])
        kept = 0
        dropped: list[tuple[int, int]] = []  # (part index, group index) of dropped groups
        while kept < need and out.rounds < self.config.max_rounds:
            n = need if not self.config.enabled else math.ceil((need - kept) * self.config.oversample)
            prompts = draw(n)
            rows = [r for r in prompts for _ in range(self.G)]
            batch, scores, lengths = generate(rows)
            if len(scores) != len(rows):
                raise RuntimeError(f"generate returned {len(scores)} scores for {len(rows)} completions")
            out.generated += len(rows)
            take: list[int] = []
            for gi, row in enumerate(prompts):
                s = [float(x) for x in scores[gi * self.G : (gi + 1) * self.G]]
                ln = lengths[gi * self.G : (gi + 1) * self.G]
                rate = pass_rate(s)
                keep = kept < need and self.keeps(rate)
                if keep:
                    take.append(gi)
                    kept += 1
                else:
                    dropped.append((len(out.parts), gi))
                out.groups.append(
                    GroupRecord(
                        id=str(row.get("id", "")),
                        depth=int(row.get("depth", 1)),
                        stage=str(row.get("stage", "")),
                        scores=s,
                        pass_rate=rate,
                        kind=classify_group(s),
                        kept=keep,
                        round=out.rounds,
                        mean_length=sum(ln) / len(ln),
                    )
                )
            out.parts.append((batch, take))
            if self.on_round is not None:
                self.on_round([g for g in out.groups if g.round == out.rounds])
            out.rounds += 1
        if kept < need:
            # The bound was hit: top up with the most recent dropped groups (zero or
            # out-of-band advantage) so the batch keeps its size; logged by the caller.
            out.bound_hit = True
            for part, gi in reversed(dropped):
                if kept == need:
                    break
                out.parts[part][1].append(gi)
                out.fillers.append((part, gi))
                self._mark_kept(out, part, gi)
                kept += 1
                out.filled += 1
        return out

    def _mark_kept(self, out: StepSample, part: int, gi: int) -> None:
        # Groups are recorded round by round; find the gi-th group of round ``part``.
        round_groups = [g for g in out.groups if g.round == part]
        round_groups[gi].kept = True
