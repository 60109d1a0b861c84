"""The composition job's config and its in-memory forms.

:class:`ComposeConfig` (every field documented once; ``crl compose`` generates its flags
from it), :func:`compose_problems` (compose in memory), :func:`output_order` (the seeded
order of ``composed.jsonl``) and :func:`estimate_run` (a trial before a large run). Runs
that write files go through the one executor, :mod:`composition_rl.jobs.compose.run`
(:func:`~composition_rl.jobs.compose.run.run_compose`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from composition_rl.jobs.compose.pools import (
    candidate_id,
    count_candidates,
    iter_candidates,
    iter_index_chains,
    output_order,
)
from composition_rl.jobs.compose.run import engine_pools
from composition_rl.records import Problem
from composition_rl.spc.base import (
    COMPOSERS,
    FUNNEL_STAGES,
    Rejection,
    repeat_key,
    repeat_rejection,
)
from composition_rl.spc.natural import Naturalness
from composition_rl.values.shortcut_risks import RISK_POLICIES

__all__ = [
    "ComposeConfig",
    "ComposeResult",
    "FUNNEL_STAGES",
    "RunEstimate",
    "compose_problems",
    "estimate_run",
    "output_order",
]



def parse_pool_sizes(text: str) -> tuple[int | None, ...]:
    """``--pool-sizes``: one size per position, ``full`` for the whole set.

    >>> parse_pool_sizes("500,500"), parse_pool_sizes("full,20")
    ((500, 500), (None, 20))
    """
    import argparse

    out: list[int | None] = []
    for part in text.split(","):
        part = part.strip().lower()
        if part in ("full", "all", "*"):
            out.append(None)
            continue
        try:
            out.append(int(part))
        except ValueError:
            raise argparse.ArgumentTypeError(f"pool size {part!r} is neither an integer nor 'full'") from None
    return tuple(out)


@dataclass(frozen=True)
class ComposeConfig:
    """How to compose (each field's help is its documentation; ``crl compose`` generates its
    flags from it). ``natural`` holds the naturalness rules (q1 preference, offset limits and
    ranking; see :mod:`composition_rl.spc.natural`), flags of their own."""

    depth: int = field(default=2, metadata={"help": "K, problems per composed prompt (2 = the paper's main setting)"})
    pool_sizes: tuple[int | None, ...] | None = field(default=None, metadata={
        "help": "one size per position, e.g. 500,500 or full,20 (ablations, Section 5.1); default: "
                "--pool-size for positions 1..K-1 and the full set for position K",
        "type": parse_pool_sizes, "no_default_in_help": True})
    pool_size: int = field(default=20, metadata={"help": "|D_k| for k < K (paper: 20; position K is the full set)"})
    max_candidates: int | None = field(default=None, metadata={
        "help": "a seeded uniform sample of at most N candidate chains", "type": int, "metavar": "N"})
    seed: int = field(default=0, metadata={"help": "every random choice derives from it plus a stable id",
                                           "no_default_in_help": True})
    max_chars: int = field(default=8000, metadata={"help": "length limit of a composed prompt (check 4)"})
    engine: str = field(default="symbolic", metadata={
        "help": "symbolic: exact, by program; llm: the paper's LLM sub-steps; auto: symbolic where it can",
        "choices": COMPOSERS.names, "no_default_in_help": True})
    workers: int = field(default=0, metadata={
        "help": "processes for the symbolic engine (0 = one per core; the output does not depend on it)",
        "no_default_in_help": True})
    derive_q1: bool = field(default=True, metadata={
        "help": "a problem whose answer is not one number (an interval, a tuple, a set of solutions, an option "
                "letter, a polynomial, a matrix, a complex number) leads a link with a number derived from it "
                "('the largest of the values that answer the problem above'); --no-derive-q1 keeps such problems "
                "out of the positions before the last (symbolic engine; the llm engine's prompt still lists them)",
        "help_no": "keep problems whose answer is not one number out of the positions before the last "
                   "(symbolic engine and the symbolic half of auto; the llm engine's prompt still lists "
                   "the derived numbers)"})
    risks: str = field(default="last", metadata={
        "help": "constants with a shortcut risk (a bound, a count a figure draws, a count written as a word; "
                "docs/composition.md): last = replaced only when no other constant of the later problem allows "
                "a natural offset (no coverage lost); reject = never replaced, so a chain whose later problem "
                "has no other constant is rejected (fewer shortcuts, lower acceptance; symbolic engine)",
        "choices": RISK_POLICIES})
    natural: Naturalness = field(default_factory=Naturalness)

    def __post_init__(self) -> None:
        if self.depth < 2:
            raise ValueError(f"depth={self.depth}: composition needs at least 2 problems "
                             "(for depth-1 trainer data, use `crl export`)")
        if self.depth > 16:  # far above any use (the paper stops at 3); a typo fails here
            raise ValueError(f"depth={self.depth} must be <= 16")
        if self.pool_size < 1:
            raise ValueError(f"pool_size={self.pool_size} must be >= 1")
        if self.pool_sizes is not None:
            if len(self.pool_sizes) != self.depth:
                raise ValueError(f"pool_sizes={list(self.pool_sizes)} must give {self.depth} sizes for depth={self.depth}")
            bad = [s for s in self.pool_sizes if s is not None and s < 1]
            if bad:
                raise ValueError(f"pool_sizes={list(self.pool_sizes)}: sizes must be >= 1 or full")
        if self.max_candidates is not None and self.max_candidates < 1:
            raise ValueError(f"max_candidates={self.max_candidates} must be >= 1")
        if self.max_chars < 100:
            raise ValueError(f"max_chars={self.max_chars} is too small for any composition")
        if not 0 <= self.workers <= 1024:  # a typo must not fork a hundred thousand processes
            raise ValueError(f"workers={self.workers} must be in [0, 1024] (0 = one per core)")
        if self.risks not in RISK_POLICIES:
            raise ValueError(f"risks={self.risks!r}: one of {', '.join(RISK_POLICIES)}")
        if self.engine not in COMPOSERS:
            raise ValueError(f"engine={self.engine!r}; known: {', '.join(COMPOSERS.names())}")

    @property
    def sizes(self) -> tuple[int | None, ...]:
        """Pool size per position: ``pool_sizes`` when given, else ``pool_size`` for every position
        but the last, which takes every eligible problem (``None``)."""
        if self.pool_sizes is not None:
            return tuple(self.pool_sizes)
        return (self.pool_size,) * (self.depth - 1) + (None,)


@dataclass
class ComposeResult:
    """In-memory result of :func:`compose_problems`."""

    accepted: list[Problem] = field(default_factory=list)
    rejected: list[dict[str, Any]] = field(default_factory=list)
    candidates: int = 0

    def by_reason(self) -> dict[str, int]:
        """How many rejections each reason has, sorted by reason."""
        return dict(sorted(Counter(r["reason"] for r in self.rejected).items()))

    def by_stage(self) -> dict[str, int]:
        """How many rejections each stage has, sorted by stage."""
        return dict(sorted(Counter(r["stage"] for r in self.rejected).items()))


def _symbolic_pools(problems, first_pool, config: ComposeConfig):
    """The symbolic engine for ``config`` and its candidate pools."""
    engine = COMPOSERS.get("symbolic").from_config(config)
    return engine, engine_pools(engine, problems, first_pool, config)


def compose_problems(
    problems: Sequence[Problem],
    config: ComposeConfig,
    first_pool: Sequence[Problem] | None = None,
    on_candidate: Callable[[int, bool], None] | None = None,
) -> ComposeResult:
    """Compose ``problems`` (and ``first_pool`` for q1) in memory with the symbolic engine.

    Example:
        >>> from composition_rl.records import Problem
        >>> q1 = Problem.new("What is $3+4$?", "7")
        >>> q2 = Problem.new("Compute $2 + 5$.", "7")
        >>> res = compose_problems([q1, q2], ComposeConfig(depth=2))
        >>> res.accepted[0].answer
        '7'
    """
    engine, pools = _symbolic_pools(problems, first_pool, config)
    res = ComposeResult()
    seen: set[int] = set()  # one composition, written once (as the executor does)
    for chain in iter_candidates(pools, config.seed, config.max_candidates):
        cid = candidate_id(chain)
        out = engine.compose(chain, cid)
        res.candidates += 1
        if not isinstance(out, Rejection) and (key := repeat_key(out, chain)) and (key in seen or seen.add(key)):
            out = repeat_rejection(out.parents)
        if isinstance(out, Rejection):
            res.rejected.append(out.row(cid, chain))
            ok = False
        else:
            res.accepted.append(out)
            ok = True
        if on_candidate is not None:
            on_candidate(res.candidates, ok)
    res.accepted = [res.accepted[i] for i in output_order(len(res.accepted), config.seed)]
    return res


@dataclass(frozen=True)
class RunEstimate:
    """What a run would do, from its pools and a seeded trial of a few chains.

    Attributes:
        pools: the size of each position's pool.
        candidates: chains the run would try (after ``max_candidates``).
        trial: chains composed in the trial; ``trial_accepted`` of them were accepted.
        names_needed: free variable names a chain needs (two per link).
        names_ok: trial chains whose problems leave that many names free.
        bytes_per_candidate: composed plus rejected output per chain in the trial.
        seconds_per_candidate: one process's time per chain in the trial (cold caches, so
            it errs high).
        distinct: different problems in all the pools together; a chain needs ``depth`` of
            them, so with fewer no chain exists and no trial is run.
    """

    pools: tuple[int, ...]
    candidates: int
    trial: int
    trial_accepted: int
    names_needed: int
    names_ok: int
    bytes_per_candidate: float
    seconds_per_candidate: float
    trial_reasons: tuple[tuple[str, int], ...] = ()
    distinct: int = 0

    @property
    def output_bytes(self) -> float:
        """Estimated bytes of output for all ``candidates``."""
        return self.bytes_per_candidate * self.candidates

    def seconds(self, workers: int) -> float:
        """Estimated seconds for all ``candidates`` across ``workers`` processes (at least one)."""
        return self.seconds_per_candidate * self.candidates / max(1, workers)


def estimate_run(
    problems: Sequence[Problem],
    config: ComposeConfig,
    first_pool: Sequence[Problem] | None = None,
    trial: int = 200,
) -> RunEstimate:
    """Estimate a symbolic run before starting it: candidates from the pools, and output size,
    time and variable-name headroom from composing a seeded sample of ``trial`` chains."""
    from composition_rl.spc.symbolic import VARIABLE_NAMES
    from composition_rl.values import symbols_used

    engine, pools = _symbolic_pools(problems, first_pool, config)
    upper = count_candidates(pools)
    total = min(upper, config.max_candidates) if config.max_candidates else upper
    distinct = len({p.id for pool in pools for p in pool})
    if distinct < config.depth:  # no chain of depth different problems exists: nothing to try
        trial = 0
    need = 2 * (config.depth - 1)
    names = frozenset(VARIABLE_NAMES)
    used: dict[str, frozenset[str]] = {}  # problem id -> the variable names its text uses
    n = acc = ok = size = 0
    reasons: Counter[str] = Counter()
    t0 = time.perf_counter()
    for ix in iter_index_chains(pools, config.seed, trial) if trial else ():
        chain = tuple(pools[k][i] for k, i in enumerate(ix))
        letters: set[str] = set()
        for p in chain:
            if p.id not in used:
                used[p.id] = symbols_used(p.question) & names
            letters |= used[p.id]
        ok += len(names) - len(letters) >= need
        cid = candidate_id(chain)
        res = engine.compose(chain, cid)
        n += 1
        if isinstance(res, Rejection):
            reasons[res.reason] += 1
            size += len(res.row_json(cid, chain)) + 1
        else:
            acc += 1
            size += len(engine.record_json(res, chain)) + 1
    elapsed = time.perf_counter() - t0
    return RunEstimate(
        pools=tuple(len(p) for p in pools), candidates=total, trial=n, trial_accepted=acc,
        names_needed=need, names_ok=ok, bytes_per_candidate=size / n if n else 0.0,
        seconds_per_candidate=elapsed / n if n else 0.0, trial_reasons=tuple(reasons.most_common(3)),
        distinct=distinct,
    )
