"""Candidate pools and candidate chains (Composition-RL, Section 3.4, "Surrogate Dataset Construction").

``|D_k| = 20`` for positions k < K and ``D_K = D`` (the full set) by default; the Section 5.1
ablations are ``pool_sizes=(500, 500)`` and ``pool_sizes=(None, 20)`` (None means the full set).
Chains never hold one problem twice. Everything derives from the seed, so the same inputs
give the same candidates in the same order.
"""

from __future__ import annotations

import math
import random
import sys
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from composition_rl.records import Problem, content_id

__all__ = ["build_pools", "candidate_id", "count_candidates", "iter_candidates", "iter_index_chains", "iter_index_range",
           "output_order"]


def candidate_id(chain: Sequence[Problem]) -> str:
    """Content id of an ordered chain (independent of seed and engine)."""
    return content_id("chain", *(p.id for p in chain))


def build_pools(
    sets: Sequence[Sequence[Problem]],
    sizes: Sequence[int | None],
    seed: int,
    eligible: Callable[[Problem, int], bool] | None = None,
    flaw: Callable[[Problem, int], str] | None = None,
    report: dict[str, Any] | None = None,
    reserve: dict[int, list[Problem]] | None = None,
) -> list[list[Problem]]:
    """One pool per position: a seeded random sample of ``sizes[k]`` problems from ``sets[k]``
    (the whole set when the size is None or not smaller). Small pools sample only problems
    ``eligible(p, k)``; a full pool keeps every problem, so the rejections stay visible.

    ``flaw(p, k)`` ranks pool partners: it names why an eligible problem reads
    poorly at position k ("" if it does not). A sampled problem with a flaw is swapped for
    one without, drawn by a second seeded generator, so a pool whose first draw has no flawed
    problem is exactly the pool drawn without ``flaw`` (outputs stay byte-identical where the
    rule changes nothing). ``report``, if given, receives per position the flaws met among
    the eligible problems and among the first draw, and how many were swapped.

    ``reserve``, if given, receives per sampled position the eligible problems the pool did
    not draw, in a seeded order of their own: the partners an engine may take next when a
    drawn one cannot be composed naturally. A full pool has no reserve.
    """
    if len(sets) != len(sizes):
        raise ValueError(f"{len(sets)} sets but {len(sizes)} pool sizes")
    pools: list[list[Problem]] = []
    for k, (items, size) in enumerate(zip(sets, sizes)):
        if size is None or size >= len(items):
            pools.append(list(items))
            continue
        if size < 1:
            raise ValueError(f"pool size {size} at position {k + 1} must be >= 1 or None")
        # a problem listed twice (an API caller's list; the readers drop repeated questions)
        # is drawn at most once
        seen: set[str] = set()
        cands = [p for p in items if (eligible is None or eligible(p, k)) and not (p.id in seen or seen.add(p.id))]
        rng = random.Random(f"pool:{seed}:{k}")
        idx = sorted(rng.sample(range(len(cands)), min(size, len(cands))))
        if flaw is not None:
            idx = _prefer(cands, idx, k, seed, flaw, report)
        pools.append([cands[i] for i in idx])
        if reserve is not None:
            drawn = set(idx)
            rest = [i for i in range(len(cands)) if i not in drawn]
            random.Random(f"pool-reserve:{seed}:{k}").shuffle(rest)
            reserve[k] = [cands[i] for i in rest]
    return pools


def _prefer(cands: Sequence[Problem], idx: list[int], k: int, seed: int,
            flaw: Callable[[Problem, int], str], report: dict[str, Any] | None) -> list[int]:
    """``idx`` with every flawed problem swapped for an unflawed one not yet drawn (as many
    as there are); the replacements come from their own seeded stream."""
    flaws = [flaw(p, k) for p in cands]
    bad = [i for i in idx if flaws[i]]
    keep = [i for i in idx if not flaws[i]]
    drawn = set(idx)
    spare = [i for i, f in enumerate(flaws) if not f and i not in drawn]
    extra = random.Random(f"pool-prefer:{seed}:{k}").sample(spare, min(len(bad), len(spare)))
    kept_bad = bad[len(extra):]  # too few good ones: the rest stay, flawed but eligible
    if report is not None:
        report[f"position_{k + 1}"] = {
            "eligible": len(cands),
            "flawed_eligible": dict(sorted(Counter(f for f in flaws if f).items())),
            "flawed_drawn": dict(sorted(Counter(flaws[i] for i in bad).items())),
            "swapped": len(extra),
            "excluded": [cands[i].id for i in bad[: len(extra)]],
        }
    return sorted(keep + extra + kept_bad)


def count_candidates(pools: Sequence[Sequence[Problem]]) -> int:
    """Upper bound on the chains (the product of the pool sizes, repeats included)."""
    return math.prod(len(p) for p in pools)


def _distinct(chain: Sequence[Problem]) -> bool:
    return len({p.id for p in chain}) == len(chain)


def iter_index_chains(
    pools: Sequence[Sequence[Problem]], seed: int, max_candidates: int | None = None
) -> Iterator[tuple[int, ...]]:
    """Chains as tuples of pool indices, with no problem twice.

    Order: the last position varies slowest, so consecutive chains share their last problem
    (the one whose text is rewritten), which keeps per-problem work local to a chunk. With
    ``max_candidates`` a seeded uniform sample of the product is taken, in that same order.
    """
    total = count_candidates(pools)
    if total == 0:
        return
    if max_candidates is None or max_candidates >= total:
        yield from iter_index_range(pools, 0, total)
        return
    ids = [[p.id for p in pool] for pool in pools]

    def distinct(ix: tuple[int, ...]) -> bool:
        return len({ids[k][i] for k, i in enumerate(ix)}) == len(ix)

    sizes = [len(p) for p in pools]
    rng = random.Random(f"cands:{seed}")
    picked: list[int] = []
    # sample a little extra so that chains with a repeated problem can be dropped
    for i in _sample(rng, total, min(total, max_candidates + max_candidates // 10 + 16)):
        if distinct(_decode(i, sizes)):
            picked.append(i)
            if len(picked) == max_candidates:
                break
    for i in sorted(picked):
        yield _decode(i, sizes)


def _sample(rng: random.Random, total: int, k: int) -> list[int]:
    """``k`` different numbers of ``range(total)``, seeded. ``random.sample`` needs the length of
    the range as a C integer: a deep chain of large pools (6 problems at depth 40: 6^40 chains)
    overflowed it, so such a product is sampled number by number (k is small beside it)."""
    if total <= sys.maxsize:
        return rng.sample(range(total), k)
    seen: set[int] = set()
    out: list[int] = []
    while len(out) < k:
        i = rng.randrange(total)
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


def _decode(i: int, sizes: Sequence[int]) -> tuple[int, ...]:
    """Pool indices of chain number ``i`` of the product (position 0 the least significant digit)."""
    out = []
    for n in sizes:
        i, r = divmod(i, n)
        out.append(r)
    return tuple(out)


def iter_index_range(pools: Sequence[Sequence[Problem]], start: int, stop: int) -> Iterator[tuple[int, ...]]:
    """The chains numbered ``start .. stop-1`` of the full product, in the order of
    :func:`iter_index_chains`, without those that hold one problem twice.

    Consecutive ranges tile the product, so a worker can enumerate its own share of a run
    from two integers instead of being sent every chain."""
    sizes = [len(p) for p in pools]
    n0 = sizes[0]
    first = [p.id for p in pools[0]]
    i = max(start, 0)
    stop = min(stop, math.prod(sizes))
    while i < stop:
        outer, r0 = divmod(i, n0)
        rest = _decode(outer, sizes[1:])  # positions 1..K-1 stay fixed while position 0 runs
        hi = min(stop, (outer + 1) * n0)
        rest_ids = {pools[k + 1][j].id for k, j in enumerate(rest)}
        if len(rest_ids) == len(rest):
            for r in range(r0, r0 + hi - i):
                if first[r] not in rest_ids:
                    yield (r, *rest)
        i = hi


def iter_candidates(
    pools: Sequence[Sequence[Problem]], seed: int, max_candidates: int | None = None
) -> Iterator[tuple[Problem, ...]]:
    """Chains of Problems (one from each pool, none twice); see :func:`iter_index_chains`."""
    for ix in iter_index_chains(pools, seed, max_candidates):
        yield tuple(pools[k][i] for k, i in enumerate(ix))


def output_order(n: int, seed: int) -> array:
    """The order in which ``n`` accepted records are written: a seeded shuffle of candidate
    order, so that any prefix of composed.jsonl is a fair sample (candidate order groups 20
    prompts on the same last problem). Depends on ``n`` and ``seed`` only.

    An array of 8-byte ints, not a list: the parent builds it at its peak, after the workers,
    and for MATH depth 2 (125,843 records) a list of ints took ~5 MB where the array takes
    1 MB. ``random.shuffle`` swaps the same positions in either, so the order is the same.

    >>> output_order(5, 0) == output_order(5, 0) and sorted(output_order(5, 0)) == [0, 1, 2, 3, 4]
    True
    """
    order = array("q", range(n))
    random.Random(f"order:{seed}").shuffle(order)
    return order
