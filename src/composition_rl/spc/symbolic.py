"""The symbolic composition engine: SPC done exactly by program, no LLM.

For every chain whose non-last answers are single exact numbers, sub-steps 1-3 of the Composition-RL
paper (Section 3.4) are carried out by rule: v1 is the exact value of q_k's answer, v2 is a ranked
literal of q_{k+1} (see :func:`composition_rl.values.find_constants`), ``d = v1 - v2`` is
computed in sympy and written in LaTeX. The result is correct by construction and is then
checked again by :mod:`composition_rl.spc.checks` on the record itself.

Everything that depends on one problem alone (its constants, their roles and flaws, why none
is safe, and, for each constant that comes into question, whether the answer is proved
independent of it) is computed once and kept by id; per chain only the offsets ``v1 - v2``
and the text are new work, so composing stays cheap per chain.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from json.encoder import encode_basestring as _js
from typing import ClassVar, NamedTuple

import sympy

from composition_rl.io.files import dumps
from composition_rl.records import Link, Problem
from composition_rl.spc import text as spc
from composition_rl.spc.base import COMPOSERS, Rejection
from composition_rl.spc.checks import run_checks
from composition_rl.spc.dependence import OUTCOMES, decide
from composition_rl.spc.natural import (
    OFFSET_KINDS,
    Naturalness,
    degenerate,
    incomplete_answer,
    inexact_q1,
    missing_figure,
    offset_kind,
)
from composition_rl.spc.symbolic_partners import PartnerChoice, choice_hash
from composition_rl.spc.text import VARIABLE_NAMES
from composition_rl.values import (
    FLAWS,
    Constant,
    find_constants,
    irrational_parts,
    parse_answer_value,
    render_latex,
    render_offset,
    symbols_used,
)
from composition_rl.values.derive import Derivation, lead_value
from composition_rl.values.shortcut_risks import RISKS

__all__ = ["VARIABLE_NAMES", "SymbolicComposer"]

_ARITH_CACHE = 1 << 18  # entries of the (q1, literal) arithmetic memo before it is reset


@lru_cache(maxsize=4096)
def _expr_str(v: sympy.Expr) -> str:
    return sympy.sstr(v)


def _frac_str(c: Fraction) -> str:
    return str(c.numerator) if c.denominator == 1 else f"{c.numerator}/{c.denominator}"


class _Lead(NamedTuple):
    """v1 of one problem, prepared once: value, unit, irrational parts, LaTeX and expr strings."""

    value: sympy.Expr
    unit: str
    parts: tuple[Fraction, str, int, float]
    latex: str
    expr: str
    r_str: str  # sympy string of the irrational part ("" if rational)
    derivation: Derivation | None = None  # how v1 is read off a non-numeric answer
    phrase: str = ""  # the derivation's wording in the glue (spc.derived_phrase)
    derivation_items: tuple[tuple[str, str], ...] = ()  # as Link.v1_derivation records it


def _offset_str(lead: _Lead, v2: Fraction) -> str:
    """``v1 - v2`` as a sympy-readable string, without building a new sympy expression."""
    c = lead.parts[0] - v2
    if not lead.r_str:
        return _frac_str(c)
    return lead.r_str if c == 0 else f"{lead.r_str} + ({_frac_str(c)})"


def _fractional(lead: _Lead, c: Constant) -> bool:
    """Whether the link of ``lead`` and ``c`` states a fractional offset: one built to cancel
    a fraction ("$Y$ is $\\frac{49}{5}$ less than $X$" to reach 0.2, or from a fractional
    v1), which readers of both halves of a blind audit found unnatural."""
    return not lead.r_str and (lead.parts[0] - c.value).denominator != 1


def _v1_str(v: sympy.Expr) -> str:
    return f"{v.p}" if v.is_Integer else f"{v.p}/{v.q}" if v.is_Rational else sympy.sstr(v)


def _replace_all(text: str, y: str, c: Constant, removed: Sequence[spc.Instruction] = (), plain: bool = False) -> str:
    """``text`` with the literal of ``c`` replaced by Y at its offset and at every offset of
    ``c.also``, each written for its own mode (``plain``: the problem writes no LaTeX). The
    offsets are the problem's own; ``removed`` are the answer instructions already taken out
    of it (see :func:`spc.lead_text`)."""
    n = len(c.literal)
    out, pos = [], 0
    for off, math_mode in sorted([(c.offset, c.math_mode), *c.also]):
        off = spc.shift_offset(off, removed) if removed else off
        out.append(text[pos:off])
        out.append(spc.variable_token(y, math_mode, text[off + n : off + n + 12], plain))
        pos = off + n
    out.append(text[pos:])
    return "".join(out)


_MAG_BUCKETS = ("0..10", "10..100", "100..1000", ">1000", "irrational")


def _bucket(lead: _Lead, v2: Fraction) -> tuple[str, str]:
    """("kind:<offset kind>", "abs:<bucket of |d|>") of one link."""
    if lead.r_str:
        return "kind:irrational", "abs:irrational"
    d = lead.parts[0] - v2
    a = abs(d)
    mag = "0..10" if a <= 10 else "10..100" if a <= 100 else "100..1000" if a <= 1000 else ">1000"
    return f"kind:{offset_kind(d)}", "abs:" + mag


@COMPOSERS.register("symbolic")
@dataclass
class SymbolicComposer(PartnerChoice):
    """Compose chains exactly.

    Args:
        seed: all choices (constant, phrasing) derive from ``seed`` and the candidate id.
        max_chars: length limit of a composed prompt (check 4).
        natural: which q1s lead and which offsets a relation may state, and their ranking
            (see :mod:`composition_rl.spc.natural`).
    """

    seed: int = 0
    max_chars: int = 8000
    name: str = "symbolic"
    natural: Naturalness = field(default_factory=Naturalness)
    derive_q1: bool = True
    risks: str = "last"  # "reject": a constant with a risk is never replaced (ComposeConfig.risks)
    resumable: ClassVar[bool] = False  # cheap per chain: the batch path, in forked workers

    @classmethod
    def from_config(cls, config) -> SymbolicComposer:
        """The engine for a :class:`~composition_rl.jobs.compose.pipeline.ComposeConfig`."""
        return cls(seed=config.seed, max_chars=config.max_chars, natural=config.natural,
                   derive_q1=config.derive_q1, risks=getattr(config, "risks", "last"))

    def __post_init__(self) -> None:
        # per-problem work, done once and keyed by id (sympy objects hash slowly)
        self._best: dict[str, tuple] = {}
        self._why_none: dict[str, tuple[str, str]] = {}  # id -> (stage, reason) when no constant is safe
        self._dep: dict[tuple[str, int], str] = {}  # (problem id, offset) -> check 5's outcome
        # partners past the pools: per position, the eligible problems no pool drew,
        # in seeded order (filled by jobs/compose/run.engine_pools); a chain whose link has no
        # natural offset takes the next partner whose answer gives one
        self.partners: dict[int, list[Problem]] = {}
        # per position: the reserve's values, its problems grouped by value, the reserve it was
        # built from, and per (reach, decimal constant) the value indices within reach
        self._partner_index: dict[int, tuple[list[int], list[list[Problem]], list[Problem], dict]] = {}
        self._partner_by_id: dict[str, Problem] = {}  # partners that took a place, for record_json
        # per sampled position, its pool (jobs.compose.run.engine_pools): chains that differ only in
        # the problem drawn there take different partners (_swap_place)
        self.pool_lists: dict[int, list[Problem]] = {}
        self._pool_ranks: dict[int, tuple[list[Problem], dict[str, int]]] = {}  # per pool list, id -> place
        self._needing: dict[tuple[int, str], list[int]] = {}  # see _swap_place
        self._lead: dict[str, _Lead | None] = {}
        self._masks: dict[str, int] = {}  # VARIABLE_NAMES a problem uses, as a bit mask
        self._free: dict[int, tuple[str, ...]] = {}  # used-name mask -> the free names
        # sub-step 3 depends only on (v1, v2): (q1 id, literal) -> the link's arithmetic.
        # Pools repeat v1 (|D_1| = 20) and small literals recur, so most links are a lookup.
        self._arith: dict[tuple[str, str], tuple[str, str, str, str, str, tuple[str, str]]] = {}
        self._pjson: dict[str, tuple[str, str, str, dict]] = {}  # id -> source, metadata as JSON, and raw
        # per accepted link: its offset kind and magnitude bucket (see take_tally / link_stats)
        self.tally: Counter[str] = Counter()
        self.pool_report: dict[str, object] = {}  # what build_pools swapped out, for stats.json
        self._q1_flaws: dict[tuple[str, Fraction | None], str] = {}  # see _q1_flaw
        self._pool_facts: dict[str, tuple[bool, Fraction | None, str]] = {}  # see pool_facts
        self._not_exact: set[str] = set()  # ids of q1s whose answer is no exact value (q1_inexact)

    def lead(self, p: Problem) -> _Lead | None:
        """v1 of ``p`` with everything the links need, or None if its answer is no number."""
        try:
            return self._lead[p.id]
        except KeyError:
            pass
        av = self.lead_value(p)
        lead = None
        if av is not None:
            parts = irrational_parts(av.value)
            r_str = "" if not parts[1] else _expr_str(av.value - sympy.Rational(parts[0].numerator, parts[0].denominator))
            dv = getattr(av, "derivation", None)
            lead = _Lead(av.value, av.unit, parts, render_latex(av.value), _v1_str(av.value), r_str, dv,
                         *(("", ()) if dv is None else
                           (spc.derived_phrase(dv.kind, dv.arg, dv.name), tuple(sorted(dv.to_dict().items())))))
        self._lead[p.id] = lead
        return lead

    def _names_mask(self, p: Problem) -> int:
        m = self._masks.get(p.id)
        if m is None:
            used = symbols_used(p.question)
            m = self._masks[p.id] = sum(1 << i for i, n in enumerate(VARIABLE_NAMES) if n in used)
        return m

    def _free_names(self, mask: int) -> tuple[str, ...]:
        free = self._free.get(mask)
        if free is None:
            free = self._free[mask] = tuple(n for i, n in enumerate(VARIABLE_NAMES) if not mask >> i & 1)
        return free

    def _link_arith(self, q1: Problem, lead: _Lead, c: Constant) -> tuple[str, str, str, str, str, tuple[str, str]]:
        """(direction, |d| LaTeX, d LaTeX, v2 expr, d expr, stats bucket) for v1 of ``q1`` and
        literal ``c``."""
        key = (q1.id, c.literal)
        out = self._arith.get(key)
        if out is None:
            direction, d_abs_latex, d_latex = render_offset(lead.value, c.value, lead.parts)
            out = (direction, d_abs_latex, d_latex, _frac_str(c.value), _offset_str(lead, c.value), _bucket(lead, c.value))
            if len(self._arith) >= _ARITH_CACHE:
                self._arith.clear()
            self._arith[key] = out
        return out

    def lead_value(self, p: Problem):
        """v1 of ``p`` (an answer value, derived when ``derive_q1`` and the answer is not one
        number), or ``None`` when there is none or the answer is inexact as q1."""
        if self.q1_inexact(p):
            return None
        if not self.derive_q1:
            return parse_answer_value(p.answer)
        # an answer that is not one number leads with a number derived from it
        nat = self.natural
        return lead_value(p.answer, p.question, nat.max_q1, nat.max_denominator)

    def q1_inexact(self, p: Problem) -> str:
        """Why ``p``'s answer cannot stand as an exact v1, or "" (:func:`~composition_rl.spc.natural.inexact_q1`)."""
        return inexact_q1(p.answers, p.question, str(p.metadata.get("solution") or ""))

    def constants(self, p: Problem) -> tuple[Constant, ...]:
        """The quantities of ``p``'s question in text order, each with its flaw and role
        (:func:`find_constants`)."""
        return find_constants(p.question, p.answer)

    def safe_constants(self, p: Problem) -> tuple[tuple[tuple[int, int, int], Constant, int | None], ...]:
        """The constants of ``p`` without a flaw (see :data:`composition_rl.values.FLAWS`), once
        per problem, each with its rank (1 when it carries a risk, then the structural rank)
        and, when it is an integer, its value as an int. Which of them the answer depends on
        is decided when one comes into question (:meth:`dependence`)."""
        top = self._best.get(p.id)
        if top is None:
            # a problem no later place may hold: no constant of it can be asked about (its figure
            # is missing), or the record's answer would be wrong (its answer lists too few items)
            unusable = ("missing_figure" if missing_figure(p.question)
                        else "incomplete_answer" if incomplete_answer(p.question, p.answer)
                        else "degenerate" if degenerate(p.question, p.answer) else "")
            if unusable:
                top = self._best[p.id] = ()
                self._why_none[p.id] = ("constant", unusable)
        if top is None:
            cs = self.constants(p)
            reject = self.risks == "reject"
            top = self._best[p.id] = tuple(
                ((1 if c.risk else 0, *c.rank), c, c.value.numerator if c.value.denominator == 1 else None)
                for c in cs if not c.flaw and not (reject and c.risk))
            if not top:
                if not cs:
                    why = "no_constant"
                elif any(not c.flaw for c in cs):
                    why = "risky_constant"  # unflawed constants, every one with a risk (--risks reject)
                else:
                    why = max((c.flaw for c in cs), key=FLAWS.index)
                self._why_none[p.id] = ("constant", why)
        return top

    def dependence(self, p: Problem, c: Constant) -> str:
        """Check 5 for replacing ``c`` in ``p`` (:func:`composition_rl.spc.dependence.decide`),
        once per (problem, constant): a pure function, so deciding it only for the constants
        that come into question changes no choice."""
        key = (p.id, c.offset)
        dep = self._dep.get(key)
        if dep is None:
            dep = self._dep[key] = decide(p.question, tuple(sorted((c.offset, *(o for o, _ in c.also)))), c.literal)
        return dep

    def mark_independent(self, p: Problem, offset: int) -> None:
        """Treat the constant of ``p`` at ``offset`` as one the answer is independent of, from
        now on: another judge decided it (the auto engine's model, check 5 at v2 + 1), and
        :meth:`choose` takes the next constant as it does for a proved one."""
        self._dep[(p.id, offset)] = "independent"

    def choose(self, lead: _Lead, safe, h: int, p: Problem) -> tuple[Constant, str] | None:
        """The constant of ``p`` a link replaces for v1 ``lead``, and its dependence: among the
        safe constants whose offset the naturalness rules allow and that the answer is not
        proved independent of, those of the best (offset kind, risk, size of ``|d|``,
        structural rank); the pick among them is ``h``. None when no offset is allowed."""
        nat = self.natural
        v1 = lead.parts[0] if not lead.r_str else None
        v1i = v1.numerator if v1 is not None and v1.denominator == 1 else None
        best = None
        top: list[Constant] = []
        small = nat.small_offset
        for rank, c, ci in safe:
            if v1i is not None and ci is not None:  # the common case, in ints
                d = v1i - ci
                if abs(d) > nat.max_offset or (d == 0 and not nat.zero_offset):
                    continue
                # zero and integer offsets share a kind; a constant with a risk only when no other
                # allows a natural offset (rank[0])
                key = (0, rank[0], 0 if -small <= d <= small else 1, rank)
            else:
                dq = None if v1 is None else v1 - c.value
                if not nat.allows(dq):
                    continue
                key = (nat.rank(dq), rank[0], nat.size_rank(dq), rank)
            if best is None or key < best:
                best, top = key, [c]
            elif key == best:
                top.append(c)
        if not top:
            return None
        live = [(c, dep) for c in top if (dep := self.dependence(p, c)) != "independent"]
        if live:
            return live[h % len(live)]
        # every constant of the best group is irrelevant to the answer: the next group
        return self.choose(lead, tuple(e for e in safe if e[1] not in top), h, p)

    def _alive(self, p: Problem, safe) -> tuple:
        """The safe constants of ``p`` the answer is not proved independent of."""
        return tuple(e for e in safe if self.dependence(p, e[1]) != "independent")

    def _plain(self, p: Problem, safe) -> tuple:
        """The constants a risky one gives way to: integer, without a risk, and not proved
        irrelevant to the answer (a decimal one gives a rational offset, which :meth:`choose`
        ranks before the risk)."""
        return tuple(e for e in self._alive(p, safe) if not e[1].risk and e[2] is not None)

    def eligible(self, p: Problem, position: int, depth: int) -> bool:
        """Whether ``p`` can stand at ``position`` (0-based) of a chain of ``depth``."""
        if position < depth - 1:
            facts = self._pool_facts.get(p.id)  # learnt from the workers (learn_pool_facts)
            if not (facts[0] if facts is not None else self.lead_value(p) is not None):
                why = self.q1_inexact(p)
                if why and p.id not in self._not_exact:  # counted in stats.json, once per problem
                    self._not_exact.add(p.id)
                    counts = self.pool_report.setdefault("q1_not_exact", {})
                    counts[why] = counts.get(why, 0) + 1
                return False
        if position > 0 and not self.constants(p):
            return False
        # an answer read off the text ("1 * 7", the LCM of 20 and 20) neither leads nor receives
        return not degenerate(p.question, p.answer)

    def pool_facts(self, p: Problem) -> tuple[bool, Fraction | None, str]:
        """What the pools ask of ``p`` at a position before the last: whether it leads (has a
        v1; else it is not eligible there), v1 when rational, and its q1 flaw ("" if none);
        once per problem. Pure per problem, so the executor asks it of the whole input in
        forked workers, in parallel, and hands the answers to :meth:`learn_pool_facts`
        (done in the parent, it cost ~1.1 s of one core before any worker started)."""
        facts = self._pool_facts.get(p.id)
        if facts is None:
            lead = self.lead(p)
            if lead is None:
                facts = (False, None, "")
            else:
                v1 = None if lead.r_str else lead.parts[0]
                facts = (True, v1, self._q1_flaw(p, v1))
            self._pool_facts[p.id] = facts
        return facts

    def learn_pool_facts(self, problems: Sequence[Problem], facts: Sequence[tuple[bool, Fraction | None, str]]) -> None:
        """Keep :meth:`pool_facts` of ``problems``, computed in another process, as if computed
        here: :meth:`eligible` and :meth:`pool_flaw` read them, and the forked compose workers
        inherit the q1 flaws for their partner index. Only the answers travel, not the leads
        (sympy values, slow to unpickle): a worker makes the few leads it composes with."""
        for p, f in zip(problems, facts):
            if p.id not in self._pool_facts:  # the first of a repeated id counts, as when computed here
                self._pool_facts[p.id] = f
                if f[0]:
                    self._q1_flaws.setdefault((p.id, f[1]), f[2])

    def pool_flaw(self, p: Problem, position: int, depth: int) -> str:
        """Why ``p`` reads poorly at ``position`` ("" if it does not): a q1 whose answer is
        irrational, large or approximate by construction, or a later problem with no safe
        constant. Pools are filled with problems without such a flaw first."""
        if position < depth - 1:
            why = self.pool_facts(p)[2]
            if why:
                return why
        if position > 0 and not self.safe_constants(p):
            return "no_safe_constant"
        return ""

    def _q1_flaw(self, p: Problem, v1: Fraction | None) -> str:
        """``natural.q1_flaw`` of ``p`` as a lead with value ``v1``, once per (problem, value):
        the parent asks it of every q1 for the pools, and each forked worker again of the
        reserve's problems for its partner index."""
        key = (p.id, v1)
        why = self._q1_flaws.get(key)
        if why is None:
            why = self._q1_flaws[key] = self.natural.q1_flaw(p.question, v1)
        return why

    def take_tally(self) -> dict[str, int]:
        """The offset kinds and magnitudes counted since the last call (a worker's share)."""
        out = dict(self.tally)
        self.tally.clear()
        return out

    @staticmethod
    def link_stats(tally: dict[str, int]) -> dict[str, dict[str, object]]:
        """``stats.json``'s summary of the accepted links: count and share of each offset kind
        and of each magnitude bucket of ``|d|``, check 5's outcomes, the chains that took
        another partner, and the links whose constant carries a risk."""
        n = sum(v for k, v in tally.items() if k.startswith("kind:")) or 1
        kinds = {k: tally.get("kind:" + k, 0) for k in OFFSET_KINDS}
        mags = {b: tally.get("abs:" + b, 0) for b in _MAG_BUCKETS}
        deps = {k: tally.get("dep:" + k, 0) for k in OUTCOMES}
        return {
            "offset_kinds": {k: {"count": v, "share": round(v / n, 6)} for k, v in kinds.items()},
            "offset_abs": {k: {"count": v, "share": round(v / n, 6)} for k, v in mags.items()},
            # check 5's three outcomes: accepted links proved dependent or undecided, and
            # candidates rejected because the answer depends on none of the constants
            "dependence": deps,
            "partners": {"swapped": tally.get("partner:swapped", 0)},
            # links whose constant carries a risk (values.shortcut_risks.RISKS): replaced because no
            # other constant of the later problem allowed a natural offset
            "risks": {k: tally.get("risk:" + k, 0) for k in ("none", *RISKS)},
        }

    def compose(self, chain: Sequence[Problem], candidate_id: str) -> Problem | Rejection:
        """``SPC(q1..qK) = Compose(q1, SPC(q2..qK))`` for one candidate chain."""
        return self._compose(tuple(chain), candidate_id, tuple(chain))

    def _leads(self, chain: tuple[Problem, ...]) -> list[_Lead] | Rejection:
        """v1 of every problem before the last, or the rejection of the first that has none."""
        leads: list[_Lead] = []
        for k in range(len(chain) - 1):
            if missing_figure(chain[k].question):  # a pool flaw; rejected too if drawn all the same
                return Rejection("check1_v1", "missing_figure", f"position {k + 1}: problem {chain[k].id} points at a "
                                 "figure it does not hold")
            if degenerate(chain[k].question, chain[k].answer):  # not eligible; rejected too if given all the same
                return Rejection("check1_v1", "degenerate", f"position {k + 1}: the answer {chain[k].answer!r} of "
                                 f"{chain[k].id} is read off its text ({degenerate(chain[k].question, chain[k].answer)})")
            lead = self.lead(chain[k])
            if lead is None:
                why = self.q1_inexact(chain[k])
                if why:
                    return Rejection("check1_v1", f"q1_{why}", f"position {k + 1}: answer {list(chain[k].answers)!r} of "
                                     f"{chain[k].id} cannot be an exact value ({why})")
                return Rejection("check1_v1", "q1_not_numeric", f"position {k + 1}: answer {chain[k].answer!r} of {chain[k].id} has no exact numeric value")
            leads.append(lead)
        return leads

    def _compose(self, chain: tuple[Problem, ...], candidate_id: str, drawn: tuple[Problem, ...],
                 swaps: int = 0) -> Problem | Rejection:
        K = len(chain)
        leads = self._leads(chain)
        if isinstance(leads, Rejection):
            return leads
        tops = [self.safe_constants(chain[k]) for k in range(1, K)]  # empty: no constant
        for k, top in enumerate(tops, 2):
            if not top:
                stage, reason = self._why_none[chain[k - 1].id]
                return Rejection(stage, reason, f"position {k}: problem {chain[k - 1].id} has no replaceable constant ({reason})")
        masks = self._masks
        mask = 0
        for p in chain:
            m = masks.get(p.id)
            mask |= m if m is not None else self._names_mask(p)
        free = self._free_names(mask)
        if len(free) < 2 * (K - 1):
            return Rejection("check4_names_length", "name_collision", f"only {len(free)} free variable names for {K - 1} links")

        text = chain[-1].question
        # every part but the last loses its answer instructions ("Give only the result as your
        # final answer."): the composed prompt asks for one final answer, the last part's
        removed: dict[int, tuple[spc.Instruction, ...]] = {}
        links: list[Link] = []
        kinds = []
        deps = []
        risks = []
        for k in reversed(range(K - 1)):
            h = choice_hash(self.seed, candidate_id, k)
            lead = leads[k]
            picked = self.choose(lead, tops[k], h, chain[k + 1])
            if picked is None:
                alive = self._alive(chain[k + 1], tops[k])
                if not alive:
                    self.tally["dep:independent"] += 1
                    return Rejection("check5_dependence", "independent", f"position {k + 2}: the answer of "
                                     f"{chain[k + 1].id} depends on none of its constants")
                partner = self._partner(k, chain, alive, h, drawn, tops[k]) if k in self.partners and swaps < K - 1 else None
                if partner is not None:  # the next partner, not a rejection
                    self._partner_by_id[partner.id] = partner
                    return self._compose(chain[:k] + (partner,) + chain[k + 1 :], candidate_id, drawn, swaps + 1)
                return Rejection("constant", "unnatural_offset", f"position {k + 2}: no constant of {chain[k + 1].id} "
                                 f"gives an offset from v1 = {lead.latex} within the naturalness limits")
            c, dep = picked
            if (c.risk or (self.natural.prefer_integer and _fractional(lead, c))) and k in self.partners and swaps < K - 1:
                swapped = self._partner_instead(k, chain, candidate_id, drawn, swaps, tops[k], h, c)
                if swapped is not None:
                    return swapped
            text, link, bucket = self._write_link(k, chain, lead, c, h, free, text, removed)
            links.append(link)
            kinds.append(bucket)
            deps.append(dep)
            risks.append(c.risk or "none")
        links.reverse()
        dependence = "unknown" if "unknown" in deps else "dependent"
        composed = Problem.new(
            # depth counts original problems: a chain of composed records is as deep as their sum
            text, chain[-1].answers, source="compose:" + self.name, depth=sum(p.depth for p in chain),
            parents=tuple([p.id for p in chain]), links=tuple(links), engine=self.name,
            metadata=self.metadata(chain, candidate_id, dependence, drawn if drawn != chain else None,
                                   [[k + 1, *ins.to_list()] for k in sorted(removed) for ins in removed[k]]),
        )
        failure = run_checks(composed, chain, self.max_chars)
        if failure is not None:
            return Rejection(failure.stage, failure.reason, failure.detail)
        self._count(kinds, deps, risks, swaps)
        return composed

    def _partner_instead(self, k: int, chain: tuple[Problem, ...], candidate_id: str, drawn: tuple[Problem, ...],
                         swaps: int, top, h: int, c: Constant) -> Problem | None:
        """The record with another partner at ``k`` in place of a risky or fractional link's
        constant ``c``, or None to keep ``c``."""
        # a constant with a risk only as a last resort: another partner whose answer gives
        # an integer offset to an integer constant without one comes first (choose ranks
        # the offset's kind before the risk, so a decimal constant would not win over the
        # risky one). A fractional offset (choose takes one only when no constant gives
        # this q1 a whole one) gives way to a partner whose answer gives the same integer
        # constant a whole offset within small_offset; a chain the partner cannot complete (at depth 3
        # the partner is also the problem before it, and may have no safe constant)
        # keeps its drawn q1 and the risky constant, as before
        plain = self._plain(chain[k + 1], top)
        if not c.risk:  # a fraction: only a partner that keeps this constant (an integer)
            plain = tuple(e for e in plain if e[1] is c)
        partner = self._partner(k, chain, plain, h, drawn, top, small_only=not c.risk) if plain else None
        if partner is not None:
            saved = Counter(self.tally)
            swapped = self._compose(chain[:k] + (partner,) + chain[k + 1 :], candidate_id, drawn, swaps + 1)
            # a fraction gives way only where the partner keeps the constant: moved onto
            # another one (a decimal has no integer partner), the variable landed on worse
            # constants in 36 of 120 MATH records (a volume a ratio ignores, a 1000 also
            # left in an exponent)
            if not isinstance(swapped, Rejection) and (c.risk or swapped.links[k].v2_offset == c.offset):
                self._partner_by_id[partner.id] = partner
                return swapped
            self.tally.clear()  # the swapped chain's counts are not this record's
            self.tally.update(saved)
        return None

    def _write_link(self, k: int, chain: tuple[Problem, ...], lead: _Lead, c: Constant, h: int,
                    free: tuple[str, ...], text: str, removed: dict[int, tuple[spc.Instruction, ...]],
                    ) -> tuple[str, Link, tuple[str, str]]:
        """Link ``k``: ``text`` (the composed later part) with ``c`` replaced by Y, behind the
        earlier problem (its answer instructions taken out, into ``removed[k]``) and the glue;
        the link's record and its stats bucket."""
        x, y = free[2 * k], free[2 * k + 1]
        direction, d_abs_latex, d_latex, v2_expr, d_expr, bucket = self._link_arith(chain[k], lead, c)
        dv = lead.derivation
        if dv is None:
            glue = spc.glue_text(x, y, d_abs_latex, direction, (h >> 32) % len(spc.DEFINITIONS), lead.unit)
        else:  # a derived v1: "Let $X$ be the sum of the values that answer the problem above."
            glue = spc.derived_glue(x, y, lead.phrase, d_abs_latex, direction)
        later_removed = removed.get(k + 1, ())  # taken out of the later problem (not the last)
        plain = spc.plain_text(chain[k + 1].question)  # Y written as the problem writes numbers
        if c.also:  # a repeated quantity: every occurrence becomes Y
            text = _replace_all(text, y, c, later_removed, plain)
        else:
            at = spc.shift_offset(c.offset, later_removed) if later_removed else c.offset
            tail = at + len(c.literal)
            text = text[:at] + spc.variable_token(y, c.math_mode, text[tail : tail + 12], plain) + text[tail:]
        part_text, removed[k] = spc.lead_text(chain[k].question)
        text = spc.join(part_text, glue, text)
        link = Link(x, y, lead.latex, lead.expr, c.literal, v2_expr, d_latex, d_expr, c.offset,
                    tuple(sorted(o for o, _ in c.also)) if c.also else (), lead.derivation_items)
        return text, link, bucket

    def _count(self, kinds: list[tuple[str, str]], deps: list[str], risks: list[str], swaps: int) -> None:
        """Count an accepted record's links for stats.json (see :meth:`take_tally`)."""
        for kind, mag in kinds:
            self.tally[kind] += 1
            self.tally[mag] += 1
        for dep in deps:
            self.tally["dep:" + dep] += 1
        for risk in risks:
            self.tally["risk:" + risk] += 1
        if swaps:
            self.tally["partner:swapped"] += 1

    @staticmethod
    def metadata(chain: Sequence[Problem], candidate_id: str, dependence: str = "unknown",
                 drawn: Sequence[Problem] | None = None, instructions: list | None = None) -> dict[str, object]:
        """A composed record's metadata: the candidate id, whether the answer is proved to
        depend on the variable (``dependence``: "dependent" or "unknown", :mod:`.dependence`),
        the chain the pools drew when a partner took a place (``candidate_parents``), the
        answer instructions taken out of the parts before the last (``instructions_removed``:
        ``[part, start, text, replaced by]``, part 1 the first problem, start an offset of
        that problem's own text; see :func:`spc.lead_text`), and each parent's source and
        metadata."""
        out: dict[str, object] = {"candidate": candidate_id}
        if drawn is not None:
            out["candidate_parents"] = [p.id for p in drawn]
        out["dependence"] = dependence
        if instructions:
            out["instructions_removed"] = instructions
        out["parent_sources"] = [p.source for p in chain]
        out["parent_metadata"] = [dict(p.metadata) for p in chain]
        return out

    def _parent_json(self, p: Problem) -> tuple[str, str]:
        # keyed by id, but the id hashes only question and answers: the same problem from two
        # files (cross-domain runs) has another source and metadata, so those must match too
        f = self._pjson.get(p.id)
        if f is None or f[2] != p.source or f[3] != p.metadata:
            f = self._pjson[p.id] = (_js(p.source), dumps(dict(p.metadata)), p.source, dict(p.metadata))
        return f[0], f[1]

    def record_json(self, rec: Problem, chain: Sequence[Problem]) -> str:
        """``dumps(rec.to_dict())`` for a record :meth:`compose` built from ``chain``, byte for byte.

        JSON encoding is compositional (a nested value encodes exactly as it does alone, keys
        sorted at every level), so each parent's source and metadata are encoded once per
        run and spliced in; the rest is written field by field in sorted-key order. This
        replaces ``to_dict`` + ``dumps``, about a quarter of the job, with a few
        string encodes. ``tests/test_compose.py`` holds it equal to ``dumps(to_dict())``.
        """
        if "candidate_parents" in rec.metadata:
            # a partner took a place: the record's own parents, not the drawn chain
            drawn = {p.id: p for p in chain}
            chain = [drawn.get(i) or self._partner_by_id[i] for i in rec.parents]
        parts = [self._parent_json(p) for p in chain]
        links = ",".join([
            f'{{"d":{_js(lk.d_latex)},"d_expr":{_js(lk.d_expr)},"v1":{_js(lk.v1_latex)},'
            + (f'"v1_derivation":{dumps(dict(lk.v1_derivation))},' if lk.v1_derivation else "")
            + f'"v1_expr":{_js(lk.v1_expr)},"v2":{_js(lk.v2_literal)},'
            + (f'"v2_also":[{",".join(map(str, lk.v2_also))}],' if lk.v2_also else "")
            + f'"v2_expr":{_js(lk.v2_expr)},'
            f'"v2_offset":{int.__repr__(lk.v2_offset)},"x":{_js(lk.x)},"y":{_js(lk.y)}}}'
            for lk in rec.links
        ])
        md = rec.metadata
        drawn = md.get("candidate_parents")
        meta = (
            f'{{"candidate":{_js(md["candidate"])},'
            + (f'"candidate_parents":[{",".join(map(_js, drawn))}],' if drawn is not None else "")
            + f'"dependence":{_js(md["dependence"])},'
            + (f'"instructions_removed":{dumps(md["instructions_removed"])},' if "instructions_removed" in md else "")
            + f'"parent_metadata":[{",".join([m for _, m in parts])}],'
            f'"parent_sources":[{",".join([s for s, _ in parts])}]}}'
        )
        return (
            f'{{"answer":{_js(rec.answers[0])},"answers":[{",".join(map(_js, rec.answers))}],'
            f'"depth":{int.__repr__(rec.depth)},"engine":{_js(rec.engine)},"id":{_js(rec.id)},'
            f'"links":[{links}],"metadata":{meta},"parents":[{",".join(map(_js, rec.parents))}],'
            f'"question":{_js(rec.question)},"source":{_js(rec.source)}}}'
        )
