"""Group statistics shared by the trainer, the profiler and evaluation, so they cannot disagree.

A *group* is the G responses sampled for one prompt (G = 8 in the paper), each scored 1.0
(correct) or 0.0 by the verifier.

- :func:`pass_rate`: the mean score (Composition-RL, Section 3.2: the per-prompt pass rate).
- :func:`classify_group`: ``solve_all`` (mean 1), ``solve_none`` (mean 0), else
  ``informative`` -- exactly the dynamic-sampling filter of Equation 5, which keeps the
  prompts with 0 < mean < 1.
- :func:`grpo_advantages`: the GRPO advantage of Equation 2, the z-score of each score within
  its group, exactly 0 for every response when the group's std is 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Literal

__all__ = ["GROUP_KINDS", "classify_group", "group_counts", "grpo_advantages", "pass_rate"]

GroupKind = Literal["solve_all", "solve_none", "informative"]
GROUP_KINDS: tuple[GroupKind, ...] = ("solve_all", "solve_none", "informative")


def _scores(scores: Iterable[object]) -> list[float]:
    out = []
    for s in scores:
        v = float(getattr(s, "score", s))  # a VerifyResult or a number
        if not (0.0 <= v <= 1.0):
            raise ValueError(f"scores must be in [0, 1], got {v!r}")
        out.append(v)
    if not out:
        raise ValueError("a group needs at least one score")
    return out


def pass_rate(scores: Iterable[object]) -> float:
    """Mean score of one group (numbers in [0, 1], bools, or VerifyResults).

    >>> pass_rate([1, 0, 1, 1])
    0.75
    """
    s = _scores(scores)
    return math.fsum(s) / len(s)


def classify_group(scores: Iterable[object]) -> GroupKind:
    """``solve_all`` if every response is correct, ``solve_none`` if none is, else ``informative``.

    >>> classify_group([1] * 8), classify_group([0] * 8), classify_group([1, 0, 0, 0, 0, 0, 0, 0])
    ('solve_all', 'solve_none', 'informative')
    """
    s = _scores(scores)
    if all(v == 1.0 for v in s):
        return "solve_all"
    if all(v == 0.0 for v in s):
        return "solve_none"
    return "informative"


def group_counts(groups: Iterable[Iterable[object]]) -> dict[str, int]:
    """How many groups are solve_all / solve_none / informative (all three keys present).

    >>> group_counts([[1, 1], [0, 0], [1, 0]])
    {'solve_all': 1, 'solve_none': 1, 'informative': 1}
    """
    counts = dict.fromkeys(GROUP_KINDS, 0)
    for g in groups:
        counts[classify_group(g)] += 1
    return counts


def grpo_advantages(scores: Sequence[object], unbiased: bool = True, eps: float = 0.0) -> list[float]:
    """GRPO advantages of one group: ``(r_i - mean) / (std + eps)``; all 0.0 when std is 0.

    Seed 000, Equation 2. The std is the sample std (``unbiased=True``, as ``torch.std``
    computes it in TRL's and verl's GRPO); pass ``unbiased=False`` for the population std.
    A group of one has no spread, so its advantage is 0.

    >>> grpo_advantages([1, 1, 1, 1])
    [0.0, 0.0, 0.0, 0.0]
    >>> [round(a, 4) for a in grpo_advantages([1, 0, 0, 0])]
    [1.5, -0.5, -0.5, -0.5]
    """
    s = _scores(scores)
    n = len(s)
    mean = math.fsum(s) / n
    dof = n - 1 if unbiased else n
    if dof <= 0:
        return [0.0] * n
    var = math.fsum((v - mean) ** 2 for v in s) / dof
    std = math.sqrt(var)
    if std == 0.0:
        return [0.0] * n
    return [(v - mean) / (std + eps) for v in s]
