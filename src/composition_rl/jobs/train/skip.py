"""Pre-rollout skipping of stale prompts (GRESO, arXiv 2506.02177), independent of any trainer.

Dynamic sampling (Composition-RL, Equation 5) drops a zero-variance group *after* generating it.
GRESO predicts one *before* generating: a prompt whose last ``z`` groups were all correct
(or all wrong) is skipped with probability ``1 - max(p ** z, floor)``, where ``p`` is an
exploration probability kept per side (``p_easy`` for all-correct streaks, ``p_hard`` for
all-wrong ones). After every step, each ``p`` moves by ``adjust`` towards the share of
zero-variance groups the run aims for (``target_zero_variance``, split one third easy, two
thirds hard, as in GRESO's release), within ``[min_p, max_p]``.

It is the baseline that composition has to beat to show that it adds more than "stop
spending rollouts on prompts that teach nothing": skipping saves the rollouts, composition
also makes the stale prompts teach again.

Every choice is a function of ``(seed, step, prompt id, draw number)``, so a run is
reproducible and a resumed run continues the same sequence.

>>> s = PromptSkipper(SkipConfig(enabled=True), seed=0)
>>> s.observe("a", "solve_all"); s.observe("a", "solve_all"); s.observe("b", "informative")
>>> s.skip_probability("a"), s.skip_probability("b"), s.skip_probability("new")
(0.75, 0.0, 0.0)
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PromptSkipper", "SkipConfig"]


@dataclass
class SkipConfig:
    """GRESO's settings; the defaults are those of its released training scripts.

    Args:
        enabled: skip prompts before rollout (off: every drawn prompt is generated).
        p_easy, p_hard: starting exploration probabilities for all-correct and all-wrong streaks.
        target_zero_variance: share of zero-variance groups per step the adaptation aims at
            (one third of it all-correct, two thirds all-wrong).
        adjust: how far each ``p`` moves per step.
        min_p, max_p: bounds of ``p``.
        floor: the smallest keep probability of any prompt (it is never skipped for good).
        max_scan: a step's draw looks at most ``max_scan`` times the prompts it needs; when
            too few pass, the skipped ones it saw fill the rest (counted in ``refilled``).
    """

    enabled: bool = False
    p_easy: float = 0.5
    p_hard: float = 0.5
    target_zero_variance: float = 0.25
    adjust: float = 0.01
    min_p: float = 0.05
    max_p: float = 0.95
    floor: float = 0.01
    max_scan: int = 32

    def validate(self) -> None:
        """Check the probabilities, target, adjust rate and ``max_scan``; raises ``ValueError``
        naming every one out of range, or when ``min_p > max_p``."""
        bad = [f"{k}={getattr(self, k)}" for k in ("p_easy", "p_hard", "min_p", "max_p")
               if not 0.0 < getattr(self, k) <= 1.0]
        if not 0.0 <= self.target_zero_variance < 1.0:
            bad.append(f"target_zero_variance={self.target_zero_variance}")
        if not 0.0 <= self.adjust < 1.0:
            bad.append(f"adjust={self.adjust}")
        if not 0.0 < self.floor <= 1.0:
            bad.append(f"floor={self.floor}")
        if self.max_scan < 1:
            bad.append(f"max_scan={self.max_scan}")
        if bad:
            raise ValueError("skip: out of range: " + ", ".join(bad)
                             + " (probabilities in (0, 1], target and adjust in [0, 1), max_scan >= 1)")
        if self.min_p > self.max_p:
            raise ValueError(f"skip: min_p ({self.min_p}) must not exceed max_p ({self.max_p})")


@dataclass
class _Counts:
    drawn: int = 0
    skipped: int = 0
    refilled: int = 0
    groups: int = 0
    easy: int = 0
    hard: int = 0


@dataclass
class PromptSkipper:
    """GRESO's probabilistic pre-rollout filter over prompt ids."""

    config: SkipConfig
    seed: int = 0
    p_easy: float = field(init=False)
    p_hard: float = field(init=False)

    def __post_init__(self) -> None:
        self.config.validate()
        self.p_easy, self.p_hard = self.config.p_easy, self.config.p_hard
        self.streaks: dict[str, tuple[str, int]] = {}  # id -> (solve_all | solve_none, length)
        self.step = 0
        self.draws = 0  # draws made this step (part of each choice's seed)
        self.counts = _Counts()
        self.totals = _Counts()

    def observe(self, prompt_id: str, kind: str) -> None:
        """Record one sampled group of ``prompt_id`` (kind: solve_all, solve_none or informative)."""
        self.counts.groups += 1
        if kind == "informative":
            self.streaks.pop(prompt_id, None)
            return
        self.counts.easy += kind == "solve_all"
        self.counts.hard += kind == "solve_none"
        last, n = self.streaks.get(prompt_id, (kind, 0))
        self.streaks[prompt_id] = (kind, n + 1 if last == kind else 1)

    def skip_probability(self, prompt_id: str) -> float:
        """``1 - max(p ** z, floor)`` for a streak of ``z`` zero-variance groups, else 0."""
        kind, z = self.streaks.get(prompt_id, ("", 0))
        if not z:
            return 0.0
        p = self.p_easy if kind == "solve_all" else self.p_hard
        return 1.0 - max(p**z, self.config.floor)

    def select(self, draw_one, need: int) -> list[dict[str, Any]]:
        """Draw rows with ``draw_one()`` until ``need`` pass the filter (bounded by ``max_scan``)."""
        kept: list[dict[str, Any]] = []
        skipped: list[dict[str, Any]] = []
        for _ in range(need * self.config.max_scan):
            if len(kept) == need:
                break
            row = draw_one()
            u = random.Random(f"greso:{self.seed}:{self.step}:{self.draws}:{row['id']}").random()
            self.draws += 1
            self.counts.drawn += 1
            if u < self.skip_probability(str(row["id"])):
                skipped.append(row)
                self.counts.skipped += 1
            else:
                kept.append(row)
        while len(kept) < need and skipped:
            kept.append(skipped.pop())
            self.counts.refilled += 1
        return kept

    def end_step(self) -> dict[str, Any]:
        """Adapt ``p_easy``/``p_hard`` to this step's zero-variance shares; return the step's counts."""
        c, cfg = self.counts, self.config
        if c.groups:
            for side, share, target in (("p_easy", c.easy / c.groups, cfg.target_zero_variance / 3),
                                        ("p_hard", c.hard / c.groups, cfg.target_zero_variance * 2 / 3)):
                p = getattr(self, side)
                # too many zero-variance groups of this side: explore them less
                p = p - cfg.adjust if share >= target else p + cfg.adjust
                setattr(self, side, round(min(max(p, cfg.min_p), cfg.max_p), 6))
        row = {"drawn": c.drawn, "skipped": c.skipped, "refilled": c.refilled,
               "p_easy": self.p_easy, "p_hard": self.p_hard}
        for k in ("drawn", "skipped", "refilled"):
            setattr(self.totals, k, getattr(self.totals, k) + getattr(c, k))
        self.counts = _Counts()
        self.step += 1
        self.draws = 0
        return row

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs: both exploration probabilities, the step, every prompt's streak
        and the run totals."""
        return {"p_easy": self.p_easy, "p_hard": self.p_hard, "step": self.step,
                "streaks": {k: list(v) for k, v in sorted(self.streaks.items())},
                "totals": vars(self.totals).copy()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; the current step's counts and draw number start at zero."""
        self.p_easy, self.p_hard, self.step = float(state["p_easy"]), float(state["p_hard"]), int(state["step"])
        self.streaks = {k: (str(v[0]), int(v[1])) for k, v in state["streaks"].items()}
        self.totals = _Counts(**state["totals"])
        self.counts = _Counts()
        self.draws = 0
