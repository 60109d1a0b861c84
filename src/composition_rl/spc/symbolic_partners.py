"""How the symbolic engine takes another partner for a chain (Section 3.4's pools, extended):
when v1 of the problem at a position gives no natural offset with any constant of the next
one, or only a risky or fractional one, the chain takes a problem from the position's reserve
(the eligible problems its pool did not draw) instead of being rejected.

:class:`PartnerChoice` is the part of :class:`~composition_rl.spc.symbolic.SymbolicComposer`
that does it; it uses the composer's per-problem answers (``lead``, ``choose``, ``_plain``,
``_q1_flaw``) and its state (``partners`` and ``pool_lists``, which the executor fills, and the
caches set up in its ``__post_init__``).
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from fractions import Fraction

from composition_rl.records import Problem

__all__ = ["PartnerChoice", "choice_hash"]

_PLAIN_INT = re.compile(r"-?\d{1,9}")

# pools up to this size give chains that differ only in the drawn problem distinct partners
# (_swap_place: one choose() per pool problem and later problem); a larger pool (a user's
# --pool-size 2000) draws partners by the candidate's hash, where the same composition may
# repeat (a code review measured 319 in 300,000 depth-3 candidates at pool 2,000)
_DISTINCT_POOL = 64


def choice_hash(seed: int, candidate_id: str, link: int) -> int:
    """A stable 64-bit number per (seed, candidate, link): all choices derive from it."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{candidate_id}:{link}".encode(), digest_size=8).digest(), "big")



class PartnerChoice:
    """Partners past the pools, for :class:`~composition_rl.spc.symbolic.SymbolicComposer`."""

    def _swap_place(self, k: int, chain: Sequence[Problem], drawn: Sequence[Problem], top) -> tuple[int, int] | None:
        """(the start of the partner picks, this chain's place among them) for a chain that takes
        a partner at position ``k``: the places are those of the pool's problems that, in this
        chain, would take a partner too (no natural offset, or only a risky constant), in pool
        order, so chains that differ only there never take the same partner. None without pools."""
        pool = self.pool_lists.get(k)
        if not pool or len(pool) > _DISTINCT_POOL or len(drawn) <= k:
            return None  # no pool, or a large one: partners by the candidate's hash, as before
        cached = self._pool_ranks.get(k)
        if cached is None or cached[0] is not pool:  # built for this pool (pools may be rebuilt)
            cached = self._pool_ranks[k] = (pool, {p.id: i for i, p in enumerate(pool)})
        ranks = cached[1]
        if drawn[k].id not in ranks:
            return None
        rest = "|".join(p.id for i, p in enumerate(drawn) if i != k)
        later = chain[k + 1]
        # the places depend on the later problem alone (at depth 3 it may be a partner already),
        # so the list is the same whichever chain asks first: the output does not depend on the
        # order chains are composed in, nor on the workers
        needing = self._needing.get((k, later.id))
        if needing is None:
            plain = bool(self._plain(later, top))
            needing = []
            for r, q in enumerate(pool):
                lead = self.lead(q)
                if lead is None:
                    continue
                picked = self.choose(lead, top, 0, later)
                if picked is None or (picked[0].risk and plain):
                    needing.append(r)
            self._needing[(k, later.id)] = needing
        rank = ranks[drawn[k].id]
        place = needing.index(rank) if rank in needing else len(needing) + rank  # past the needing ones
        return choice_hash(self.seed, rest, k), place

    def _reserve_index(self, k: int) -> tuple[list[int], list[list[Problem]], list[Problem], dict]:
        """Position ``k``'s reserve grouped by value: (the values, the problems at each, the
        reserve it was built from, per (reach, decimal constant) the value indices within
        reach). Only problems whose answer is a plain integer lead naturally, and a q1 flaw
        other than a large value keeps a problem out."""
        reserve = self.partners.get(k, ())
        index = self._partner_index.get(k)
        if index is None or index[2] is not reserve:  # built for this reserve (pools may be rebuilt)
            by_value: dict[int, list[Problem]] = {}
            for p in reserve:
                # an answer written as a plain integer: read without the exact parser (the
                # reserve holds thousands of problems, and only whole numbers lead naturally)
                if not _PLAIN_INT.fullmatch(p.answer):
                    continue
                v1 = int(p.answer)
                why = self._q1_flaw(p, Fraction(v1))
                if why and why != "large_q1":
                    continue
                by_value.setdefault(v1, []).append(p)
            vals = sorted(by_value)
            index = self._partner_index[k] = (vals, [by_value[v] for v in vals], reserve, {})
        return index

    def _partner(self, k: int, chain: Sequence[Problem], safe, h: int,
                 drawn: Sequence[Problem] = (), top=(), small_only: bool = False) -> Problem | None:
        """The next partner for position ``k`` when v1 of ``chain[k]`` gives no natural offset
        with any constant of ``chain[k + 1]`` (the chain goes to another
        partner, not to rejection): among the reserve problems whose v1 lies within ``small_offset`` of
        some safe constant (else within ``max_offset``), the pick is ``h``. Reserve partners
        are preferred problems whose answer is a plain integer (a large one is allowed: a
        large constant needs it), grouped by value once. ``small_only``: within
        ``small_offset`` or not at all (a fraction gives way to a small whole offset only:
        "$Y$ is $88$ more than $X$" reads no better than "$\\frac{1}{2}$ more")."""
        placed = self._swap_place(k, chain, drawn, top) if top else None
        vals, groups, _, near = self._reserve_index(k)
        if not vals:
            return None
        taken = {p.id for p in chain}
        nat = self.natural
        reaches = (nat.small_offset,) if small_only else (nat.small_offset, nat.max_offset)
        for reach in reaches:
            ok: set[int] = set()
            for _, c, ci in safe:
                if ci is None:  # a decimal constant: the offset is a fraction (in Fractions: slow, kept)
                    allowed = near.get((reach, c.value))
                    if allowed is None:
                        lo, hi = bisect_left(vals, c.value - reach), bisect_right(vals, c.value + reach)
                        allowed = near[reach, c.value] = tuple(i for i in range(lo, hi) if nat.allows(vals[i] - c.value))
                    ok.update(allowed)
                else:
                    ok.update(range(bisect_left(vals, ci - reach), bisect_right(vals, ci + reach)))
                    if not nat.zero_offset:  # v1 == v2 would state "Y is equal to X": not that partner
                        at = bisect_left(vals, ci)
                        if at < len(vals) and vals[at] == ci and not any(
                                e[2] is not None and e[2] != ci and abs(vals[at] - e[2]) <= reach for e in safe):
                            ok.discard(at)
            if not ok:
                continue
            # the h-th of the problems at the allowed values, chain members left out, without
            # listing them (a value such as 2 has hundreds of partners)
            idx = sorted(ok)
            counts = [len(groups[i]) for i in idx]
            total = sum(counts)
            if placed is not None:
                # chains that differ only in the drawn problem take distinct partners: a start
                # per rest of the chain plus this chain's place, when there are partners for
                # every place; else the place itself, none past the last (the same partner
                # twice would write the same record twice: 981 duplicate ids in the MATH
                # depth-2 output before)
                base, place = placed
                if total >= len(self.pool_lists[k]):
                    h = base + place
                elif reach == reaches[-1]:
                    if place >= total:
                        return None
                    h = place
                else:
                    continue  # too few within the small offset: the wider reach
            for _ in range(len(taken) + 1):
                if total == 0:
                    break
                pick = h % total
                for i, n in zip(idx, counts):
                    if pick < n:
                        p = groups[i][pick]
                        break
                    pick -= n
                if p.id not in taken:
                    return p
                h += 1  # a chain member: the next one
        return None
