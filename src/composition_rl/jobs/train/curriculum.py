"""The depth curriculum: when to move from depth K to depth K+1.

Seed 000, Section 4.3 trains depth 1, then 2, then 3, switching "when performance
saturates", judged by eye. Here the switch is a rule:

- ``auto``: advance when the mean solve_all ratio over the last ``window`` steps of the
  stage reaches ``threshold``, or when the stage's step budget runs out;
- ``manual``: advance after exactly each stage's ``max_steps`` (a fixed schedule).

``total_steps`` optionally caps the whole run, whatever stage it is in: two curricula then
train for the same number of steps (matched-steps comparisons) while their stage changes
are still decided by saturation.

Every transition is returned (and logged by the trainer) with its reason. The state is a
small dict so a resumed run continues the same stage with the same window.

>>> c = Curriculum([StageSpec("d1", 1, max_steps=10), StageSpec("d2", 2, max_steps=10)],
...                threshold=0.5, window=2)
>>> c.observe(1, 0.4), c.observe(2, 0.5)
(None, None)
>>> c.observe(3, 0.7).reason
'solve_all 0.60 >= 0.50 over the last 2 steps'
>>> c.stage.name
'd2'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["Curriculum", "StageSpec", "Transition", "check_budget"]


@dataclass(frozen=True)
class StageSpec:
    """One stage: a name, the compositional depth it trains on, its step budget, and the fewest
    steps it runs before saturation may end it (``min_steps``; 0: as soon as the window is full)."""

    name: str
    depth: int
    max_steps: int
    min_steps: int = 0

    def __post_init__(self) -> None:
        check_budget(self.name, self.max_steps, self.min_steps)


def check_budget(name: str, max_steps: int, min_steps: int) -> None:
    """A stage's step budget and minimum, as a stage config and the curriculum both require."""
    if max_steps < 1:
        raise ValueError(f"stage {name!r}: max_steps must be >= 1, got {max_steps}")
    if not 0 <= min_steps <= max_steps:
        raise ValueError(f"stage {name!r}: min_steps must be in [0, max_steps={max_steps}], got {min_steps}")


@dataclass(frozen=True)
class Transition:
    """A stage change at the end of ``step``; ``to_stage`` is None when training ends."""

    step: int
    from_stage: str
    to_stage: str | None
    reason: str
    kind: Literal["threshold", "budget", "manual"]

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict."""
        return asdict(self)


class Curriculum:
    """Tracks the current stage and decides transitions from per-step solve_all ratios."""

    def __init__(
        self,
        stages: Sequence[StageSpec],
        mode: Literal["auto", "manual"] = "auto",
        threshold: float = 0.75,
        window: int = 5,
        total_steps: int | None = None,
    ) -> None:
        if not stages:
            raise ValueError("a curriculum needs at least one stage")
        if mode not in ("auto", "manual"):
            raise ValueError(f"mode must be 'auto' or 'manual', got {mode!r}")
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        if total_steps is not None and total_steps < 1:
            raise ValueError(f"total_steps must be >= 1, got {total_steps}")
        self.stages = list(stages)
        self.total_steps = total_steps
        self.steps_done = 0
        self.mode = mode
        self.threshold = threshold
        self.window = window
        self.index = 0
        self.history: list[float] = []  # solve_all ratios of the current stage, in order
        self.finished = False
        self.transitions: list[Transition] = []

    @property
    def stage(self) -> StageSpec:
        """The current stage."""
        return self.stages[self.index]

    @property
    def max_total_steps(self) -> int:
        """Upper bound on steps: every stage running its full budget, or ``total_steps``."""
        budgets = sum(s.max_steps for s in self.stages)
        return budgets if self.total_steps is None else min(budgets, self.total_steps)

    def rolling_solve_all(self) -> float | None:
        """Mean solve_all over the last ``window`` steps of this stage; None until it is full."""
        if len(self.history) < self.window:
            return None
        recent = self.history[-self.window :]
        return sum(recent) / len(recent)

    def observe(self, step: int, solve_all: float) -> Transition | None:
        """Record the solve_all ratio of a finished ``step``; return a transition if one fires."""
        if self.finished:
            raise RuntimeError("the curriculum has finished; no more steps to observe")
        self.history.append(float(solve_all))
        self.steps_done += 1
        if self.total_steps is not None and self.steps_done >= self.total_steps:
            return self.end(step, f"total step budget of {self.total_steps} exhausted")
        stage = self.stage
        rolling = self.rolling_solve_all()
        transition: Transition | None = None
        last = self.index == len(self.stages) - 1
        if (self.mode == "auto" and rolling is not None and rolling >= self.threshold and not last
                and len(self.history) >= stage.min_steps):
            reason = f"solve_all {rolling:.2f} >= {self.threshold:.2f} over the last {self.window} steps"
            transition = self._advance(step, reason, "threshold")
        elif len(self.history) >= stage.max_steps:
            kind = "manual" if self.mode == "manual" else "budget"
            reason = (
                f"manual schedule: {stage.max_steps} steps done"
                if kind == "manual"
                else f"step budget of {stage.max_steps} exhausted"
                + (f" (rolling solve_all {rolling:.2f} < {self.threshold:.2f})" if rolling is not None else "")
            )
            transition = self._advance(step, reason, kind)
        return transition

    def end(self, step: int, reason: str) -> Transition:
        """End training after ``step`` whatever stage it is in (a budget or an empty pool)."""
        t = Transition(step=step, from_stage=self.stage.name, to_stage=None, reason=reason, kind="budget")
        self.finished = True
        self.history = []
        self.transitions.append(t)
        return t

    def _advance(self, step: int, reason: str, kind) -> Transition:
        old = self.stage.name
        if self.index + 1 < len(self.stages):
            self.index += 1
            new: str | None = self.stage.name
        else:
            self.finished = True
            new = None
        self.history = []
        t = Transition(step=step, from_stage=old, to_stage=new, reason=reason, kind=kind)
        self.transitions.append(t)
        return t

    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs: stage index, the stage's solve_all history, steps done,
        whether training finished, and the transitions so far."""
        return {
            "index": self.index,
            "history": list(self.history),
            "finished": self.finished,
            "steps_done": self.steps_done,
            "transitions": [t.to_dict() for t in self.transitions],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; a state from before ``steps_done`` was saved gets it from the
        last transition's step plus the current stage's history."""
        self.index = int(state["index"])
        self.history = [float(x) for x in state["history"]]
        self.finished = bool(state["finished"])
        self.transitions = [Transition(**t) for t in state["transitions"]]
        # states written before steps_done existed: steps are numbered from 1, stage by stage
        done = self.transitions[-1].step if self.transitions else 0
        self.steps_done = int(state.get("steps_done", done + len(self.history)))
