"""The demo's tiny-model task: reasoning-gym arithmetic composed by the real engine.

Depth 1 is reasoning-gym's ``basic_arithmetic`` with one-digit operands (``Calculate 5 + 3.``).
Depths 2 and 3 are the symbolic composition engine's own output on those problems (the
same code path as ``crl compose``), so the tiny model learns and is trained on exactly the
prompts the toolkit produces. Each problem comes with a short scratchpad derived from its
record (values of the links, not an LLM), which the SFT warm-up imitates::

    Calculate 5 + 3.

    Let $X$ be the answer to the problem above. $Y$ is $2$ less than $X$.

    Calculate $Y$ - 4.
    ->  5+3=8. X=8. Y=8-2=6. 6-4=2. \\boxed{2}
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from composition_rl.records import Problem

__all__ = ["RGTask", "scratchpad"]

_EXPR = re.compile(r"Calculate\s+(-?\d+)\s*([+\-*])\s*(-?\d+)\s*\.")


def _solve(question: str) -> tuple[str, int]:
    """``("5+3=8.", 8)`` for ``Calculate 5 + 3.``; ValueError for any other shape."""
    m = _EXPR.search(question)
    if m is None:
        raise ValueError(f"not a two-term basic_arithmetic question: {question[:60]!r}")
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    v = a + b if op == "+" else a - b if op == "-" else a * b
    return f"{a}{op}{b}={v}.", v


def scratchpad(problem: Problem, parents: dict[str, Problem]) -> str:
    """The worked solution of a depth-K record from its parents and links.

    Each link contributes ``X=v1. Y=v1-d=v2.`` (``+|d|`` when d < 0); each problem its own
    computation, whose literal v2 is the value Y stands for.
    """
    if problem.depth == 1:
        work, v = _solve(problem.question)
        return f"{work} \\boxed{{{v}}}"
    chain = [parents[i] for i in problem.parents]
    parts: list[str] = []
    for k, q in enumerate(chain):
        work, v = _solve(q.question)
        if k > 0:
            lk = problem.links[k - 1]
            v1, v2 = Fraction(lk.v1_expr), Fraction(lk.v2_expr)
            d = v1 - v2
            sign = "-" if d >= 0 else "+"
            parts.append(f"{lk.x}={v1}. {lk.y}={v1}{sign}{abs(d)}={v2}.")
        parts.append(work)
    final = _solve(chain[-1].question)[1]
    if str(final) != problem.answer:
        raise ValueError(f"scratchpad of {problem.id} ends in {final}, the answer is {problem.answer}")
    return " ".join(parts) + f" \\boxed{{{final}}}"


@dataclass(frozen=True)
class RGTask:
    """Problems of depth 1-3 for one seed, and their scratchpads.

    Args:
        seed: reasoning-gym seed and composition seed.
        n_base: depth-1 problems generated.
        n_composed: composed candidates per depth (a seeded sample; pools of 20 for q1).
    """

    seed: int = 0
    n_base: int = 600
    n_composed: int = 3000

    def problems(self, depth: int) -> list[Problem]:
        return list(_problems(self.seed, self.n_base, self.n_composed, depth))

    def example(self, depth: int, index: int) -> tuple[Problem, str]:
        """(problem, scratchpad) number ``index`` of a depth (cycling through the set)."""
        probs = _problems(self.seed, self.n_base, self.n_composed, depth)
        p = probs[index % len(probs)]
        return p, scratchpad(p, _base_index(self.seed, self.n_base))


@lru_cache(maxsize=8)
def _base(seed: int, n: int) -> tuple[Problem, ...]:
    from composition_rl.io.readers import RGSpec, load_reasoning_gym

    spec = RGSpec(
        "basic_arithmetic",
        n,
        (("min_terms", 2), ("max_terms", 2), ("min_digits", 1), ("max_digits", 1), ("operators", ("+", "-")),
         ("allow_parentheses", False), ("allow_negation", False)),
    )
    return tuple(load_reasoning_gym([spec], seed=seed).problems)


@lru_cache(maxsize=8)
def _base_index(seed: int, n: int) -> dict[str, Problem]:
    return {p.id: p for p in _base(seed, n)}


@lru_cache(maxsize=16)
def _problems(seed: int, n_base: int, n_composed: int, depth: int) -> tuple[Problem, ...]:
    base = _base(seed, n_base)
    if depth == 1:
        return base
    from composition_rl.compose import ComposeConfig, compose_problems

    res = compose_problems(list(base), ComposeConfig(depth=depth, pool_size=20, seed=seed, max_candidates=n_composed))
    if not res.accepted:
        raise RuntimeError(f"no depth-{depth} composition from {len(base)} problems")
    out = list(res.accepted)
    # candidates come grouped by their last problem; mix them so a batch sees many answers
    random.Random(f"rg-task:{seed}:{depth}").shuffle(out)
    return tuple(out)
