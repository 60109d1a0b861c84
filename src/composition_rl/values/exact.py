"""Exact arithmetic on parsed values: the fast ``Fraction`` / :class:`Lin` forms, the one
equality of the project (:func:`exact_equal`), and LaTeX rendering of offsets and values."""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

import sympy

from composition_rl.values.latex import evaluate, read
from composition_rl.values.numbers import MAX_DIGITS, clean, plain_number
from composition_rl.values.parse import LIN, Lin, NotLinear, parse_number

Exact = Fraction | Lin | sympy.Expr  # Fraction, then Lin (radicals, pi), then sympy


def to_fraction(v: sympy.Rational) -> Fraction:
    """A sympy rational as the equal ``Fraction``."""
    return Fraction(int(v.p), int(v.q))


@lru_cache(maxsize=65536)
def exact_value(text: str) -> Exact | None:
    """:func:`parse_number`, with rationals returned as ``Fraction`` for fast arithmetic."""
    s = clean(text)
    f = plain_number(s)
    if f is not None:
        return f.value
    lin = _spaced_sum(s) if " " in s else None
    if lin is None:
        try:
            lin = evaluate(read(s), LIN)
        except NotLinear:
            lin = None
        except (ValueError, TypeError, ZeroDivisionError, RecursionError):
            return None
    if lin is not None:
        r = lin.rational()
        return r if r is not None else lin
    v = parse_number(text)
    if v is None:
        return None
    return to_fraction(v) if v.is_Rational else v


_SIGN_OR_BRACKET = re.compile(r"[-+(){}\[\]]")


def _top_level_signs(s: str) -> list[int]:
    """Indices of the ``+``/``-`` characters of ``s`` outside any bracket."""
    out, depth = [], 0
    for m in _SIGN_OR_BRACKET.finditer(s):
        ch = m.group()
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif depth == 0:
            out.append(m.start())
    return out


@lru_cache(maxsize=65536)
def _linear_term(s: str) -> Fraction | Lin | None:
    """One cleaned term (``486 \\sqrt{3}``, ``-\\frac{305}{2}``) as Fraction or Lin; None when it
    is not Q-linear or does not parse on its own."""
    # the whole-string \frac shortcut has no digit cap; a piece must keep the parser's
    # 80-digit limit, or a sum would read what the full parse refuses
    f = plain_number(s) if len(s) <= MAX_DIGITS else None
    if f is not None:
        return f.value
    try:
        lin = evaluate(read(s), LIN)
    except (NotLinear, ValueError, TypeError, ZeroDivisionError, RecursionError):
        return None
    r = lin.rational()
    return r if r is not None else lin


def _spaced_sum(s: str) -> Lin | None:
    """``t1 - t2 + t3`` with the binary signs written spaced at the top level and every ``t`` a
    single term (a leading unary sign at most): the signed sum of the terms, each parsed once
    and cached. The grammar makes this the value the full parse gives, so the checks, which
    meet the same irrational part (``486 \\sqrt{3}``) in thousands of relations, parse it once.
    None for any other shape (``1 - 3-4``, ``2^ - 3``, ``1e-5 + 2``): the full parser decides."""
    cuts = [i for i in _top_level_signs(s) if 1 < i < len(s) - 2 and s[i - 1] == " " and s[i + 1] == " "]
    if not cuts:
        return None
    total = Lin({})
    start, sign = 0, "+"
    for i in [*cuts, len(s) + 1]:
        piece = s[start : i - 1].strip()
        body = piece[1:] if piece[:1] in "+-" else piece
        if not body.strip() or _top_level_signs(body):
            return None  # empty, or itself a sum: not a single term
        v = _linear_term(piece)
        if v is None:
            return None
        v = v if isinstance(v, Lin) else Lin.of(v)
        total = total + v if sign == "+" else total - v
        if i <= len(s):
            sign, start = s[i], i + 2
    return total


def _to_sym(v) -> sympy.Expr:
    if isinstance(v, Fraction):
        return sympy.Rational(v.numerator, v.denominator)
    if isinstance(v, Lin):
        return v.to_sympy()
    return v


def exact_equal(a: Exact, b: Exact) -> bool:
    """Exact equality of two values: Fractions and :class:`Lin` directly, the rest via sympy.

    The one equality of the project (the composers, the record checks and ``evaluate``).
    A float in either side (a model wrote "0.5") is made rational first; a sympy failure on
    odd input counts as unequal, the safe answer for a check.

    >>> exact_equal(Fraction(1, 2), sympy.Float(0.5)), exact_equal(sympy.sqrt(8), 2 * sympy.sqrt(2))
    (True, True)
    """
    if type(a) is Fraction and type(b) is Fraction:
        return a == b
    if isinstance(a, (Fraction, Lin)) and isinstance(b, (Fraction, Lin)):
        return (Lin.of(a) if isinstance(a, Fraction) else a) == (Lin.of(b) if isinstance(b, Fraction) else b)
    a, b = _to_sym(a), _to_sym(b)
    if a.is_Rational and b.is_Rational:
        return a == b
    diff = a - b  # sympy's automatic canonical form settles the usual cases
    if a.has(sympy.Float) or b.has(sympy.Float):
        diff = sympy.nsimplify(diff)
    if diff == 0:
        return True
    if diff.is_Rational:
        return False
    try:
        return sympy.simplify(diff) == 0
    except Exception:  # sympy can fail on odd input; unequal is the safe answer
        return False


def exact_sub(a: Exact, b: Exact) -> Exact:
    """``a - b`` exactly, staying in the fast domains where possible."""
    if type(a) is Fraction and type(b) is Fraction:
        return a - b
    if isinstance(a, (Fraction, Lin)) and isinstance(b, (Fraction, Lin)):
        la = Lin.of(a) if isinstance(a, Fraction) else a
        lb = Lin.of(b) if isinstance(b, Fraction) else b
        d = la - lb
        r = d.rational()
        return r if r is not None else d
    return _to_sym(a) - _to_sym(b)


def exact_positive(v: Exact) -> bool:
    """Whether ``v > 0``: exact for ``Fraction``, :meth:`Lin.sign` for :class:`Lin`, and sympy's
    ``is_positive`` otherwise (a sign sympy cannot decide counts as not positive)."""
    if isinstance(v, Fraction):
        return v > 0
    if isinstance(v, Lin):
        return v.sign() > 0
    return bool(v.is_positive)


@lru_cache(maxsize=4096)
def split_rational(v: sympy.Expr) -> tuple[Fraction, sympy.Expr, float]:
    """``v = a + r`` with ``a`` rational and ``r`` the irrational rest (0 if none), plus a float
    of ``r`` for sign decisions. Cached: q1 values repeat across a whole pool."""
    if v.is_Rational:
        return to_fraction(v), sympy.Integer(0), 0.0
    a, r = v.as_coeff_Add()
    return to_fraction(sympy.Rational(a)), r, float(r.evalf(30))


@lru_cache(maxsize=4096)
def _latex_cached(v: sympy.Expr) -> str:
    return sympy.latex(v)


@lru_cache(maxsize=4096)
def _irrational_parts(v: sympy.Expr) -> tuple[Fraction, str, int, float]:
    """(rational part, LaTeX of |irrational part| bracketed if compound, its sign, its float)."""
    a, r, rf = split_rational(v)
    if r == 0:
        return a, "", 0, 0.0
    lr = _latex_cached(r if rf > 0 else -r)
    if lr.startswith("-") or " + " in lr or " - " in lr:
        lr = f"\\left({lr}\\right)"
    return a, lr, (1 if rf > 0 else -1), rf


def render_fraction(c: Fraction) -> str:
    """LaTeX of a rational: ``7``, ``-\\frac{13}{2}``."""
    if c.denominator == 1:
        return str(c.numerator)
    p, q = c.numerator, c.denominator
    return f"-\\frac{{{-p}}}{{{q}}}" if p < 0 else f"\\frac{{{p}}}{{{q}}}"


def irrational_parts(v: sympy.Expr) -> tuple[Fraction, str, int, float]:
    """(rational part, LaTeX of |irrational part| bracketed if compound, its sign, its float);
    for a rational ``v`` the LaTeX is "". Compute once per q1 and pass to :func:`render_offset`."""
    return _irrational_parts(v)


def render_offset(
    v1: sympy.Expr, v2: Fraction, parts: tuple[Fraction, str, int, float] | None = None
) -> tuple[str, str, str]:
    """Sub-step 3 in exact arithmetic: ``d = v1 - v2`` as (direction, |d| LaTeX, d LaTeX).

    Direction is "less" (d > 0), "more" (d < 0) or "equal". Rationals never touch sympy;
    an irrational v1 reuses its cached LaTeX, so sympy's printer runs once per q1.

    >>> render_offset(sympy.Integer(7), Fraction(1))
    ('less', '6', '6')
    """
    a, lr, sgn_r, rf = parts if parts is not None else _irrational_parts(v1)
    c = a - v2
    if not lr:
        if c == 0:
            return "equal", "0", "0"
        return ("less" if c > 0 else "more"), render_fraction(abs(c)), render_fraction(c)
    positive = float(c) + rf > 0
    # |d| = s*(c + r); write its positive part first
    cs, rs = (c, sgn_r) if positive else (-c, -sgn_r)
    if cs == 0:
        text = lr if rs > 0 else f"-{lr}"
    elif rs > 0:
        text = f"{lr} {'+' if cs > 0 else '-'} {render_fraction(abs(cs))}"
    else:
        text = f"{render_fraction(cs)} - {lr}" if cs > 0 else f"-{lr} - {render_fraction(-cs)}"
    if positive:
        signed = text
    elif c != 0:
        signed = f"{render_fraction(c)} {'+' if sgn_r > 0 else '-'} {lr}"
    else:
        signed = lr if sgn_r > 0 else f"-{lr}"
    return ("less" if positive else "more"), text, signed


def render_latex(v: sympy.Expr) -> str:
    """LaTeX for an exact value; rationals get a fast, canonical form.

    >>> render_latex(sympy.Rational(-13, 2)), render_latex(7 * sympy.sqrt(2) - 3)
    ('-\\\\frac{13}{2}', '-3 + 7 \\\\sqrt{2}')
    """
    if v.is_Integer:
        return str(int(v))
    if v.is_Rational:
        p, q = int(v.p), int(v.q)
        return f"-\\frac{{{-p}}}{{{q}}}" if p < 0 else f"\\frac{{{p}}}{{{q}}}"
    return _latex_cached(v)
