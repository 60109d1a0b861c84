"""A tiny arithmetic task family with sequential composition, for CPU-sized models.

Depth 1 is a two-digit sum or difference (``59+63``). Depth K chains K of them the way SPC
does (Composition-RL, Section 3.4): the answer of step k becomes a variable, and a constant of step
k+1 is replaced by ``Y = X - d`` with ``d = v1 - v2``, so the composed prompt has one
verifiable final answer. Every problem comes with a short scratchpad solution, which the
tiny model's SFT warm-up imitates (without a scratchpad, a 1M-parameter model stays near
chance; see docs/training.md).

Questions and scratchpads are deterministic in ``(seed, index)``:

>>> p, sol = make_problem(1, seed=0, index=0)
>>> p.depth, sol.endswith("\\\\boxed{" + p.answer + "}")
(1, True)
"""

from __future__ import annotations

import random

from composition_rl.records import Problem

__all__ = ["VARS", "arithmetic_problems", "make_problem", "render_chain"]

VARS = ("X", "Y", "Z", "W", "V", "U", "T")
SOURCE = "tiny-arithmetic"
MAX_DEPTH = (len(VARS) + 1) // 2


def _step(rng: random.Random, digits: int = 2) -> tuple[int, str, int]:
    """One a±b with ``digits``-digit operands and a non-negative result: (a, op, b)."""
    lo, hi = (0, 9) if digits == 1 else (10 ** (digits - 1), 10**digits - 1)
    a, b = rng.randint(lo, hi), rng.randint(lo, hi)
    op = rng.choice("+-")
    if op == "-" and b > a:
        a, b = b, a
    return a, op, b


def _apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b


def _link(x: str, d: int) -> str:
    return f"{x}-{d}" if d >= 0 else f"{x}+{-d}"


def make_problem(depth: int, seed: int = 0, index: int = 0, digits: int = 2) -> tuple[Problem, str]:
    """Problem ``index`` of the depth-``depth`` family for ``seed``, with its scratchpad.

    Depth 2 reads ``X=59+63. Y=X-82. Y+17=?`` and is solved as
    ``X=59+63=122. Y=122-82=40. 40+17=57. \\boxed{57}``.
    """
    if not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"depth must be in 1..{MAX_DEPTH}, got {depth}")
    if digits not in (1, 2, 3):
        raise ValueError(f"digits must be 1, 2 or 3, got {digits}")
    rng = random.Random(f"{seed}:{depth}:{index}" + (f":{digits}" if digits != 2 else ""))
    steps = [_step(rng, digits) for _ in range(depth)]
    question, solution = render_chain(steps)
    answer = str(_apply(*steps[-1]))
    return Problem.new(question, (answer,), source=SOURCE, depth=depth), solution


def render_chain(steps: list[tuple[int, str, int]] | tuple[tuple[int, str, int], ...]) -> tuple[str, str]:
    """(question, scratchpad) of a chain of ``(a, op, b)`` steps: the one wording of this family.

    >>> render_chain([(5, "+", 3), (6, "-", 4)])
    ('X=5+3. Y=X-2. Y-4=?', 'X=5+3=8. Y=8-2=6. 6-4=2. \\\\boxed{2}')
    """
    if not 1 <= len(steps) <= MAX_DEPTH:
        raise ValueError(f"a chain has 1..{MAX_DEPTH} steps, got {len(steps)}")
    if len(steps) == 1:
        a, op, b = steps[0]
        v = _apply(a, op, b)
        return f"{a}{op}{b}=?", f"{a}{op}{b}={v}. \\boxed{{{v}}}"
    # Chain (SPC, Section 3.4): each answer gets a name; the next step's first operand v2
    # becomes a new variable defined from it, Y = X - d with d = v1 - v2.
    names = iter(VARS)
    a, op, b = steps[0]
    prev, prev_name = _apply(a, op, b), next(names)
    parts_q = [f"{prev_name}={a}{op}{b}."]
    parts_s = [f"{prev_name}={a}{op}{b}={prev}."]
    for k in range(1, len(steps)):
        a, op, b = steps[k]
        d = prev - a
        link = next(names)
        parts_q.append(f"{link}={_link(prev_name, d)}.")
        parts_s.append(f"{link}={_link(str(prev), d)}={a}.")
        value = _apply(a, op, b)
        if k < len(steps) - 1:
            prev_name = next(names)
            parts_q.append(f"{prev_name}={link}{op}{b}.")
            parts_s.append(f"{prev_name}={a}{op}{b}={value}.")
        else:
            parts_q.append(f"{link}{op}{b}=?")
            parts_s.append(f"{a}{op}{b}={value}.")
        prev = value
    return " ".join(parts_q), " ".join(parts_s) + f" \\boxed{{{prev}}}"


def arithmetic_problems(n: int, depth: int, seed: int = 0, start: int = 0, digits: int = 2) -> list[Problem]:
    """``n`` deterministic problems of one depth (indices ``start .. start+n-1``)."""
    return [make_problem(depth, seed, i, digits)[0] for i in range(start, start + n)]
