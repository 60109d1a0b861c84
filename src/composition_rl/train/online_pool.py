"""The live prompt pool of ``curriculum.mode: online`` on the TRL trainer.

The static curriculum (train/curriculum.py) switches whole stages when the stage's rolling
solve_all saturates (seed 000, Section 4.3, where the switch is chosen by eye). The online
pool decides per prompt, every step, with the rule of :mod:`composition_rl.online`:

- every sampled group (kept or dropped by dynamic sampling) is one visit of its prompt,
  recorded after each generation round, so a prompt retired in one round is not drawn by
  the step's refill rounds;
- a prompt the rule retires (solve_all on ``k`` visits in a row, Wilson lower bound high
  enough) leaves the sampler, and its compositions with it as q1 (its answer becomes X)
  join it, composed in-process by the symbolic engine and checked
  (:func:`composition_rl.online.compose_from_retired`); a lineage grows one depth per
  retirement up to ``max_depth``;
- a prompt that stays solve_none is drawn at ``low_weight``, not dropped.

Draws are weighted and without replacement within one draw (Efraimidis and Spirakis 2006,
keys ``u ** (1 / w)``), from ``Random(f"{seed}:online:{draw number}")``, so a resumed run
draws what the uninterrupted one would have. Every retirement is appended to
``online.jsonl`` (step, retired id and depth, new ids and their depth, the rule's reason).

>>> from composition_rl.train.arithmetic import arithmetic_problems
>>> probs = arithmetic_problems(6, depth=1, seed=0)
>>> pool = OnlinePool(probs[:2], probs, OnlineConfig(k=1), stage="online")
>>> sorted(r["id"] for r in pool.draw(2)) == sorted(p.id for p in probs[:2])  # distinct within a draw
True
>>> events = pool.observe(1, [(probs[0].id, 8, 8)])
>>> events[0]["retired"] == probs[0].id, events[0]["depth"], len(events[0]["new"])
(True, 2, 2)
>>> pool.live_by_depth()
{'1': 1, '2': 2}
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from composition_rl.online import OnlineConfig, OnlineTracker, compose_from_retired
from composition_rl.records import Problem
from composition_rl.train.data import problem_row

__all__ = ["OnlinePool"]


class OnlinePool:
    """Live prompts, their tracker, and the compositions injected for retired ones.

    Args:
        start: the starting pool (the online stage's problems).
        partners: problems whose depth-1 ones are the partners of retired prompts; the
            depth-1 problems of ``start`` are added, since they are the ancestors of every
            composition.
        config: the rule (:class:`composition_rl.online.OnlineConfig`).
        stage: the stage name written on every row.
        instruction: append the boxed-answer instruction to prompts (as PromptStream does).
    """

    def __init__(self, start: Sequence[Problem], partners: Sequence[Problem], config: OnlineConfig,
                 stage: str, instruction: bool = False) -> None:
        if not start:
            raise ValueError(f"online stage {stage!r} has no problems")
        self.config = config
        self.stage = stage
        self.instruction = instruction
        self.tracker = OnlineTracker(config)
        self.problems: dict[str, Problem] = {}
        for p in start:
            self.problems.setdefault(p.id, p)
        self.base: list[Problem] = []
        seen: set[str] = set()
        for p in [*partners, *start]:
            if p.depth == 1 and p.id not in seen:
                seen.add(p.id)
                self.base.append(p)
        self.live: list[str] = list(dict.fromkeys(p.id for p in start))
        self.injected: list[str] = []  # ids composed during the run, in order
        self.draws = 0
        self.retired_total = 0
        self.step_events: list[dict[str, Any]] = []

    # ----------------------------------------------------------------------------- sampling

    def weights(self) -> list[float]:
        return [self.tracker.weight(i) for i in self.live]

    def draw(self, n: int) -> list[dict[str, Any]]:
        """``n`` trainer rows, weighted, distinct while the pool has enough drawable prompts."""
        self.draws += 1
        rng = random.Random(f"{self.config.seed}:online:{self.draws}")
        weighted = [(i, w) for i, w in zip(self.live, self.weights()) if w > 0]
        if not weighted:
            # every lineage retired at max_depth during this step: its refill rounds redraw retired
            # prompts (uninformative, but the batch keeps its shape) and the trainer ends the run
            # at the end of the step (transitions.jsonl says why)
            weighted = [(i, 1.0) for i in self.tracker.retired]
        out: list[str] = []
        while len(out) < n:
            keys = sorted(((rng.random() ** (1.0 / w), k) for k, (_, w) in enumerate(weighted)), reverse=True)
            out += [weighted[k][0] for _, k in keys[: n - len(out)]]
        return [problem_row(self.problems[i], self.stage, self.instruction) for i in out]

    @property
    def exhausted(self) -> bool:
        """True when no live prompt can be drawn any more."""
        return not any(w > 0 for w in self.weights())

    # ----------------------------------------------------------------------------- the rule

    def observe(self, step: int, groups: Iterable[tuple[str, int, int]]) -> list[dict[str, Any]]:
        """Record the step's groups ``(id, correct, n)`` in order; retire and inject.

        Returns the retirement events (the ``online.jsonl`` rows) of this call.
        """
        events = []
        for pid, correct, n in groups:
            if pid not in self.problems:
                raise ValueError(f"step {step}: group for prompt {pid!r}, which the online pool never held")
            v = self.tracker.observe(pid, correct, n, step=step)
            if v.action != "retire":
                continue
            q1 = self.problems[pid]
            known = set(self.problems)
            new = compose_from_retired(q1, self.base, self.config, exclude=known)
            for c in new:
                self.problems[c.id] = c
                self.live.append(c.id)
                self.injected.append(c.id)
            self.live.remove(pid)
            self.retired_total += 1
            events.append({"step": step, "retired": pid, "retired_depth": q1.depth, "new": [c.id for c in new],
                           "depth": q1.depth + 1 if new else None, "visits": v.visits,
                           "pass_rate": round(v.pass_rate, 4), "reason": v.reason})
        self.step_events += events
        return events

    def live_by_depth(self) -> dict[str, int]:
        """Live prompts (retired ones excluded) by depth, as a JSON-able dict."""
        c = Counter(self.problems[i].depth for i in self.live)
        return {str(d): c[d] for d in sorted(c)}

    def step_metrics(self) -> dict[str, Any]:
        """The per-step ``online`` block of metrics.jsonl; resets the step's event list."""
        ev, self.step_events = self.step_events, []
        return {
            "live": len(self.live),
            "live_by_depth": self.live_by_depth(),
            "down_weighted": sum(1 for i in self.live if i in self.tracker.down),
            "retired": len(ev),
            "injected": sum(len(e["new"]) for e in ev),
            "retired_total": self.retired_total,
            "injected_total": len(self.injected),
        }

    # ----------------------------------------------------------------------------- state

    def state_dict(self) -> dict[str, Any]:
        """Everything the next draws and decisions depend on (JSON-able)."""
        return {
            "tracker": self.tracker.state_dict(),
            "live": list(self.live),
            "injected": [self.problems[i].to_dict() for i in self.injected],
            "draws": self.draws,
            "retired_total": self.retired_total,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`state_dict` onto a pool built from the same start and partners."""
        self.tracker.load_state_dict(state["tracker"])
        injected = [Problem.from_dict(d) for d in state["injected"]]
        for p in injected:
            self.problems[p.id] = p
        self.injected = [p.id for p in injected]
        missing = [i for i in state["live"] if i not in self.problems]
        if missing:
            raise ValueError(f"online state names live prompt(s) {missing[:3]} that are neither in the stage's "
                             "problems nor injected: the checkpoint belongs to another config")
        self.live = list(state["live"])
        self.draws = int(state["draws"])
        self.retired_total = int(state["retired_total"])
        self.step_events = []
