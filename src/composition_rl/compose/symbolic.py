"""The symbolic composition engine: SPC done exactly by program, no LLM.

For every chain whose non-last answers are single exact numbers, sub-steps 1-3 of seed 000
(Section 3.4) are carried out by rule: v1 is the exact value of q_k's answer, v2 is a ranked
literal of q_{k+1} (see :func:`composition_rl.values.find_constants`), ``d = v1 - v2`` is
computed in sympy and written in LaTeX. The result is correct by construction and is then
checked again by :mod:`composition_rl.compose.checks` on the record itself.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from json.encoder import encode_basestring as _js
from typing import NamedTuple

import sympy

from composition_rl.compose import spc
from composition_rl.compose.base import COMPOSERS, Rejection
from composition_rl.compose.checks import run_checks
from composition_rl.io.files import dumps
from composition_rl.records import Link, Problem
from composition_rl.values import (
    Constant,
    find_constants,
    irrational_parts,
    parse_answer_value,
    render_latex,
    render_offset,
    symbols_used,
)

__all__ = ["VARIABLE_NAMES", "SymbolicComposer"]

# Preferred variable names, in order; X, Y first as in the paper's example.
VARIABLE_NAMES: tuple[str, ...] = tuple("XYZWUVPQRSTMNKLGHJ")
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


def _offset_str(lead: _Lead, v2: Fraction) -> str:
    """``v1 - v2`` as a sympy-readable string, without building a new sympy expression."""
    c = lead.parts[0] - v2
    if not lead.r_str:
        return _frac_str(c)
    return lead.r_str if c == 0 else f"{lead.r_str} + ({_frac_str(c)})"


def _v1_str(v: sympy.Expr) -> str:
    return f"{v.p}" if v.is_Integer else f"{v.p}/{v.q}" if v.is_Rational else sympy.sstr(v)


def _choice_hash(seed: int, candidate_id: str, link: int) -> int:
    """A stable 64-bit number per (seed, candidate, link): all choices derive from it."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{candidate_id}:{link}".encode(), digest_size=8).digest(), "big")


@COMPOSERS.register("symbolic")
@dataclass
class SymbolicComposer:
    """Compose chains exactly.

    Args:
        seed: all choices (constant, phrasing) derive from ``seed`` and the candidate id.
        max_chars: length limit of a composed prompt (check 4).
    """

    seed: int = 0
    max_chars: int = 8000
    name: str = "symbolic"

    def __post_init__(self) -> None:
        # per-problem work, done once and keyed by id (sympy objects hash slowly)
        self._best: dict[str, tuple[Constant, ...]] = {}
        self._lead: dict[str, _Lead | None] = {}
        self._masks: dict[str, int] = {}  # VARIABLE_NAMES a problem uses, as a bit mask
        self._free: dict[int, tuple[str, ...]] = {}  # used-name mask -> the free names
        # sub-step 3 depends only on (v1, v2): (q1 id, literal) -> the link's arithmetic.
        # Pools repeat v1 (|D_1| = 20) and small literals recur, so most links are a lookup.
        self._arith: dict[tuple[str, str], tuple[str, str, str, str, str]] = {}
        self._pjson: dict[str, tuple[str, str, str, dict]] = {}  # id -> source, metadata as JSON, and raw

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
            lead = _Lead(av.value, av.unit, parts, render_latex(av.value), _v1_str(av.value), r_str)
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

    def _link_arith(self, q1: Problem, lead: _Lead, c: Constant) -> tuple[str, str, str, str, str]:
        """(direction, |d| LaTeX, d LaTeX, v2 expr, d expr) for v1 of ``q1`` and literal ``c``."""
        key = (q1.id, c.literal)
        out = self._arith.get(key)
        if out is None:
            direction, d_abs_latex, d_latex = render_offset(lead.value, c.value, lead.parts)
            out = (direction, d_abs_latex, d_latex, _frac_str(c.value), _offset_str(lead, c.value))
            if len(self._arith) >= _ARITH_CACHE:
                self._arith.clear()
            self._arith[key] = out
        return out

    def lead_value(self, p: Problem):
        return parse_answer_value(p.answer)

    def constants(self, p: Problem) -> tuple[Constant, ...]:
        return find_constants(p.question, p.answer)

    def best_constants(self, p: Problem) -> tuple[Constant, ...]:
        """The best-ranked constants of ``p`` (math mode in arithmetic, then unique values)."""
        top = self._best.get(p.id)
        if top is None:
            cs = self.constants(p)
            best = min((c.rank for c in cs), default=None)
            top = self._best[p.id] = tuple(c for c in cs if c.rank == best)
        return top

    def eligible(self, p: Problem, position: int, depth: int) -> bool:
        """Whether ``p`` can stand at ``position`` (0-based) of a chain of ``depth``."""
        if position < depth - 1 and self.lead_value(p) is None:
            return False
        if position > 0 and not self.constants(p):
            return False
        return True

    def compose(self, chain: Sequence[Problem], candidate_id: str) -> Problem | Rejection:
        """``SPC(q1..qK) = Compose(q1, SPC(q2..qK))`` for one candidate chain."""
        K = len(chain)
        leads: list[_Lead] = []
        for k in range(K - 1):
            lead = self.lead(chain[k])
            if lead is None:
                return Rejection("check1_v1", "q1_not_numeric", f"position {k + 1}: answer {chain[k].answer!r} of {chain[k].id} has no exact numeric value")
            leads.append(lead)
        tops = [self.best_constants(chain[k]) for k in range(1, K)]  # empty: no constant
        for k, top in enumerate(tops, 2):
            if not top:
                return Rejection("constant", "no_constant", f"position {k}: problem {chain[k - 1].id} has no replaceable constant")
        masks = self._masks
        mask = 0
        for p in chain:
            m = masks.get(p.id)
            mask |= m if m is not None else self._names_mask(p)
        free = self._free_names(mask)
        if len(free) < 2 * (K - 1):
            return Rejection("check4_names_length", "name_collision", f"only {len(free)} free variable names for {K - 1} links")

        text = chain[-1].question
        links: list[Link] = []
        for k in reversed(range(K - 1)):
            top = tops[k]
            h = _choice_hash(self.seed, candidate_id, k)
            c = top[h % len(top)]
            x, y = free[2 * k], free[2 * k + 1]
            lead = leads[k]
            direction, d_abs_latex, d_latex, v2_expr, d_expr = self._link_arith(chain[k], lead, c)
            tail = c.offset + len(c.literal)
            token = spc.variable_token(y, c.math_mode, text[tail : tail + 12])
            glue = spc.glue_text(x, y, d_abs_latex, direction, (h >> 32) % len(spc.DEFINITIONS), lead.unit)
            text = spc.join(chain[k].question, glue, text[: c.offset] + token + text[tail:])
            links.append(Link(x, y, lead.latex, lead.expr, c.literal, v2_expr, d_latex, d_expr, c.offset))
        links.reverse()
        composed = Problem.new(
            text, chain[-1].answers, source="compose:" + self.name, depth=K, parents=tuple([p.id for p in chain]),
            links=tuple(links), engine=self.name, metadata=self.metadata(chain, candidate_id),
        )
        failure = run_checks(composed, chain, self.max_chars)
        if failure is not None:
            return Rejection(failure.stage, failure.reason, failure.detail)
        return composed

    @staticmethod
    def metadata(chain: Sequence[Problem], candidate_id: str) -> dict[str, object]:
        """A composed record's metadata: the candidate id and each parent's source and metadata."""
        return {
            "candidate": candidate_id,
            "parent_sources": [p.source for p in chain],
            "parent_metadata": [dict(p.metadata) for p in chain],
        }

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
        parts = [self._parent_json(p) for p in chain]
        links = ",".join([
            f'{{"d":{_js(lk.d_latex)},"d_expr":{_js(lk.d_expr)},"v1":{_js(lk.v1_latex)},'
            f'"v1_expr":{_js(lk.v1_expr)},"v2":{_js(lk.v2_literal)},"v2_expr":{_js(lk.v2_expr)},'
            f'"v2_offset":{int.__repr__(lk.v2_offset)},"x":{_js(lk.x)},"y":{_js(lk.y)}}}'
            for lk in rec.links
        ])
        meta = (
            f'{{"candidate":{_js(rec.metadata["candidate"])},'
            f'"parent_metadata":[{",".join([m for _, m in parts])}],'
            f'"parent_sources":[{",".join([s for s, _ in parts])}]}}'
        )
        return (
            f'{{"answer":{_js(rec.answers[0])},"answers":[{",".join(map(_js, rec.answers))}],'
            f'"depth":{int.__repr__(rec.depth)},"engine":{_js(rec.engine)},"id":{_js(rec.id)},'
            f'"links":[{links}],"metadata":{meta},"parents":[{",".join(map(_js, rec.parents))}],'
            f'"question":{_js(rec.question)},"source":{_js(rec.source)}}}'
        )
