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

_EXPR = re.compile(r"Calculate\s+(-?\d+)((?:\s*[+\-*]\s*-?\d+)+)\s*\.")
_TERM = re.compile(r"([+\-*])\s*(-?\d+)")


def _solve(question: str) -> tuple[str, int]:
    """The left-to-right work and value of a ``basic_arithmetic`` question.

    One step per operator, each a one-digit fact on the running value, so a new problem of
    the family is new only as a combination of steps the model has seen:

    >>> _solve("Calculate 5 + 3.")
    ('5+3=8.', 8)
    >>> _solve("Calculate 5 + 9 - 7.")
    ('5+9=14. 14-7=7.', 7)
    """
    m = _EXPR.search(question)
    if m is None:
        raise ValueError(f"not a basic_arithmetic question: {question[:60]!r}")
    v, steps = int(m.group(1)), []
    for op, num in _TERM.findall(m.group(2)):
        b = int(num)
        w = v + b if op == "+" else v - b if op == "-" else v * b
        steps.append(f"{v}{op}{b}={w}.")
        v = w
    return " ".join(steps), v


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

    With ``test_share > 0`` the distinct depth-1 problems are split once, by a seeded
    shuffle, into a train side and a held-out test side. Everything a model is trained on
    (SFT examples via :meth:`example`, ``problems(depth)``, :meth:`pool`) comes from the train
    side, and ``problems(depth, "test")`` composes only held-out problems, so a test set of
    any depth shares no problem (as q1, q2 or at depth 1) with training.

    With ``pool_size > 0`` that many train-side problems form the RL pool (:meth:`pool`), and
    SFT examples avoid them and their compositions: as in a real pipeline, the RL prompts are
    not the SFT data, so the policy meets them with room to improve.

    Args:
        seed: reasoning-gym seed, split seed and composition seed.
        n_base: depth-1 problems generated (duplicates are set aside by the reader).
        terms: operands per depth-1 problem (one-digit, ``+``/``-``). With 2 every problem is
            one arithmetic fact, so a held-out problem is a fact the model never saw; with 3
            a held-out problem is a new combination of facts that training covers.
        n_composed: composed candidates per depth (a seeded sample; pools of 20 for q1).
        test_share: share of the distinct depth-1 problems held out for testing.
        pool_size: train-side problems reserved for RL (0: none; SFT may use every one).

    >>> t = RGTask(seed=0, test_share=0.25)
    >>> train, test = t.base("train"), t.base("test")
    >>> len(train) + len(test) == len(RGTask(seed=0).base()), {p.id for p in train} & {p.id for p in test}
    (True, set())
    """

    seed: int = 0
    n_base: int = 600
    n_composed: int = 3000
    test_share: float = 0.0
    pool_size: int = 0
    terms: int = 2

    def __post_init__(self) -> None:
        if not 0.0 <= self.test_share < 1.0:
            raise ValueError(f"test_share must be in [0, 1), got {self.test_share}")
        if not 2 <= self.terms <= 4:
            raise ValueError(f"terms must be 2, 3 or 4, got {self.terms}")

    def base(self, split: str = "train") -> list[Problem]:
        """The depth-1 problems of one side (``train`` or ``test``)."""
        return list(_split(self.seed, self.n_base, self.test_share, self.terms)[_side(split)])

    def problems(self, depth: int, split: str = "train") -> list[Problem]:
        """Depth 1: :meth:`base`; depth K: the engine's depth-K compositions of that side only."""
        if depth == 1:
            return self.base(split)
        return self.compose(self.base(split), depth, self.n_composed)

    def pool(self, size: int | None = None) -> list[Problem]:
        """The first ``size`` (default ``pool_size``) train-side problems in a seeded order: an RL pool."""
        size = self.pool_size if size is None else size
        train = self.base("train")
        if not 1 <= size <= len(train):
            raise ValueError(f"pool size must be in 1..{len(train)} (train-side problems), got {size}")
        random.Random(f"rg-pool:{self.seed}").shuffle(train)
        return train[:size]

    def sft_problems(self, depth: int) -> list[Problem]:
        """What SFT may show: the train side without the RL pool, and its compositions."""
        if not self.pool_size:
            return self.problems(depth)
        held = {p.id for p in self.pool()}
        return self.compose([p for p in self.base("train") if p.id not in held], depth, self.n_composed)

    def compose(self, problems: list[Problem], depth: int, max_candidates: int | None = None,
                first: list[Problem] | None = None) -> list[Problem]:
        """Depth-``depth`` compositions of ``problems`` (seeded, shuffled).

        ``first`` restricts q1 to those problems (the engine's first pool, as in the Composition-RL paper:
        compose the prompts the policy has mastered, with any problem of the set after them).
        """
        return list(_composed(self.seed, tuple(problems), depth, max_candidates or self.n_composed,
                              tuple(first) if first is not None else None))

    def example(self, depth: int, index: int) -> tuple[Problem, str]:
        """(problem, scratchpad) number ``index`` of a depth (cycling through :meth:`sft_problems`)."""
        probs = self.sft_problems(depth)
        p = probs[index % len(probs)]
        return p, scratchpad(p, _base_index(self.seed, self.n_base, self.terms))

    def test_example(self, depth: int, index: int) -> tuple[Problem, str]:
        """Like :meth:`example`, from the held-out side (the train side when nothing is held out)."""
        probs = self.problems(depth, "test" if self.test_share else "train")
        p = probs[index % len(probs)]
        return p, scratchpad(p, _base_index(self.seed, self.n_base, self.terms))


def _side(split: str) -> int:
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    return 0 if split == "train" else 1


@lru_cache(maxsize=8)
def _base(seed: int, n: int, terms: int = 2) -> tuple[Problem, ...]:
    from composition_rl.io.readers import RGSpec, load_reasoning_gym

    spec = RGSpec(
        "basic_arithmetic",
        n,
        (("min_terms", terms), ("max_terms", terms), ("min_digits", 1), ("max_digits", 1), ("operators", ("+", "-")),
         ("allow_parentheses", False), ("allow_negation", False)),
    )
    return tuple(load_reasoning_gym([spec], seed=seed).problems)


@lru_cache(maxsize=8)
def _base_index(seed: int, n: int, terms: int = 2) -> dict[str, Problem]:
    return {p.id: p for p in _base(seed, n, terms)}


@lru_cache(maxsize=16)
def _split(seed: int, n: int, test_share: float, terms: int = 2) -> tuple[tuple[Problem, ...], tuple[Problem, ...]]:
    base = _base(seed, n, terms)
    if not test_share:
        return base, ()
    order = sorted(range(len(base)), key=lambda i: base[i].id)
    random.Random(f"rg-split:{seed}").shuffle(order)
    held = set(order[: round(len(base) * test_share)])
    return (tuple(p for i, p in enumerate(base) if i not in held),
            tuple(p for i, p in enumerate(base) if i in held))


@lru_cache(maxsize=32)
def _composed(seed: int, problems: tuple[Problem, ...], depth: int, n_composed: int,
              first: tuple[Problem, ...] | None = None) -> tuple[Problem, ...]:
    if depth == 1:
        return problems
    from composition_rl.jobs.compose import ComposeConfig, compose_problems

    res = compose_problems(list(problems), ComposeConfig(depth=depth, pool_size=20, seed=seed,
                                                         max_candidates=n_composed),
                           first_pool=list(first) if first is not None else None)
    if not res.accepted:
        raise RuntimeError(f"no depth-{depth} composition from {len(problems)} problems")
    out = list(res.accepted)
    # candidates come grouped by their last problem; mix them so a batch sees many answers
    random.Random(f"rg-task:{seed}:{depth}").shuffle(out)
    return tuple(out)
