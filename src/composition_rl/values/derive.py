"""Numbers derived exactly from answers that are not one number.

The paper's method (Section 3.4, sub-step 1) needs q1's answer to be a number v1, and names
that as its limitation. Many answers are not: an interval, an ordered pair, a set of
solutions, an option letter, a polynomial, a matrix, a ratio, a time of day. Each of them
still determines numbers a problem writer would name in one phrase: "the length of the interval", "the value of $q$", "the
sum of the solutions", "the value of the answer at $x = 2$", "the determinant of the matrix",
"the second term of the ratio", "the number of minutes past the hour". This module reads such
answers (exact, sympy) and lists those numbers:

* :func:`derivations` -- every :class:`Derivation` an answer allows, most natural first, each
  with its exact value;
* :func:`derive` -- the value of one recorded derivation, read again from the answer (check 1
  re-derives v1 this way from q1's answer);
* :func:`lead_value` -- v1 of a problem: the answer's own value when it is a number
  (:func:`~composition_rl.values.parse_answer_value`), else the first derivation whose value is
  a modest rational, as a :class:`DerivedValue`.

Each shape is read by :mod:`.derive_shapes` (an interval's ends, a tuple's entries, a set's
values); this module turns what it read into derivations.

The wording of each derivation (the sentence in the composed prompt) is owned by
:mod:`composition_rl.spc.text`, which writes and reads it from one set of templates.

A derivation from a misread answer names a number that is no property of it, and the composed
prompt then asks a wrong question. The readings kept apart here:

* interval or pair: "(3, 5)" is an open interval or an ordered pair, and the question says
  which ("in interval notation", "Enter the ordered pair"); "the length of the interval" of a
  point means nothing.
* a set or several quantities: a list answers "Enter all the solutions, separated by commas"
  as a set, but a list for "... respectively" holds different quantities, and "the sum of the
  solutions" would add unlike things.
* a named tuple: "Enter the ordered pair $(a,b)$" names its entries, so "the value of $b$"
  is one; "polar coordinates $(r, \\theta)$" stated in the problem asks for no tuple.
* words: a day of the week is a number only under the numbering its sentence states (Monday
  = 1, as ISO 8601); words without a natural numeric reading ("even", "yes") derive nothing
  and stay out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, get_args

import sympy

from composition_rl.values.derive_shapes import (
    free_points,
    is_written,
    option_value,
    read_complex,
    read_double_inequality,
    read_expression,
    read_interval,
    read_matrix,
    read_normal_equation,
    read_ratio,
    read_set,
    read_time,
    read_tuple,
    strip_answer,
    tuple_names,
)
from composition_rl.values.parse import AnswerValue, parse_answer_value
from composition_rl.values.regions import math_spans

__all__ = ["DERIVATION_KINDS", "Derivation", "DerivedValue", "derivations", "derive", "lead_value"]

Kind = Literal[
    "interval_length", "interval_left", "interval_right", "union_max_end", "union_min_end",
    "tuple_entry", "tuple_sum",
    "set_max", "set_min", "set_sum", "set_size",
    "choice_value", "choice_position", "choice_count",
    "expr_value", "poly_coeff", "poly_degree",
    "matrix_entry", "trace", "det", "vector_entry",
    "complex_real", "complex_imag",
    "base_value", "month",
    "ratio_value", "ratio_term", "time_hour", "time_minute", "time_second", "date_day", "weekday",
]
DERIVATION_KINDS: tuple[str, ...] = get_args(Kind)


@dataclass(frozen=True)
class Derivation:
    """How v1 is read off a non-numeric answer.

    Args:
        kind: one of :data:`DERIVATION_KINDS`.
        arg: what the kind needs: the 1-based entry of a tuple or vector (``"2"``), the
            ``row,column`` of a matrix entry (``"1,2"``), the point of ``expr_value``
            (``"x=2"``, ``"h=2,r=3"``), the power of ``poly_coeff`` (``"2"``); else ``""``.
        name: the variable as the problem writes it, for the wording: the name of a tuple
            entry (``"q"`` in "Enter the ordered pair $(p,q)$") or the variable of a
            polynomial; ``""`` if none.
    """

    kind: str
    arg: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        if self.kind not in DERIVATION_KINDS:
            raise ValueError(f"derivation kind {self.kind!r} is unknown; known: {', '.join(DERIVATION_KINDS)}")

    def to_dict(self) -> dict[str, str]:
        """The JSON form: ``kind``, with ``arg`` and ``name`` only when they are set."""
        d = {"kind": self.kind}
        if self.arg:
            d["arg"] = self.arg
        if self.name:
            d["name"] = self.name
        return d

    @classmethod
    def from_dict(cls, d) -> Derivation:
        """The derivation :meth:`to_dict` wrote (a missing ``arg`` or ``name`` reads as ``""``)."""
        return cls(str(d["kind"]), str(d.get("arg", "")), str(d.get("name", "")))


@dataclass(frozen=True)
class DerivedValue(AnswerValue):
    """v1 derived from a non-numeric answer (``unit`` is always "")."""

    derivation: Derivation | None = None


# ---------------------------------------------------------------- the shapes read here by a pattern
_LETTER = re.compile(r"^(?:\\(?:text|textbf|mathrm)\s*\{\s*)?\(?([A-Z])\)?(?:\s*\})?$"
                     r"|^\(\s*\\(?:text|textbf|mathrm)\s*\{\s*([A-Z])\s*\}\s*\)$")  # "(\text{H})"
_LETTERS = re.compile(r"^(?:\\text\s*\{)?\s*([A-Z](?:\s*,\s*[A-Z])+)\s*\}?$")


# one word, bare or in \text{} (a full stop after it allowed): "\text{Sunday}", "Sunday.", "\text{May.}"
_ONE_WORD = re.compile(r"\s*(?:\\(?:text|textbf|mathrm|mbox)\s*\{\s*([A-Za-z]+)\.?\s*\}|([A-Za-z]+))\s*\.?\s*")


def _name(s: str) -> str:
    """The one word ``s`` is, lower-cased ("" if it is not one word)."""
    m = _ONE_WORD.fullmatch(s)
    return "" if m is None else (m.group(1) or m.group(2)).lower()


# ISO 8601's numbering, which the wording states (Monday = 1): a day of the week is a number
# only with the numbering said in the sentence, as a letter's position in the alphabet is
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_DATE = re.compile(r"^(?:\\(?:text|textbf|mathrm|mbox)\s*\{)?\s*([A-Za-z]+)\s*~?\s*(\d{1,2})(?:st|nd|rd|th)?\s*\}?$")
_BASE = re.compile(r"^(-?)(\w+)_\{?(\d+)\}?$")


def _rational(v) -> bool:
    return v is not None and bool(getattr(v, "is_Rational", False))


_ORDINAL_MAX = 6


# ---------------------------------------------------------------- the menu
def _stated(e: sympy.Expr, question: str) -> bool:
    """Whether the question writes an expression equal to ``e`` (factor, expand or simplify a
    given expression): then its coefficients, its values at points and its degree are known
    without solving, and no number read off the answer can lead a composition.

    >>> x = sympy.Symbol("x")
    >>> _stated((x + 2) * (x + 3), "Factor $x^2+5x+6$."), _stated((x + 2) * (x + 3), "Find $p$ with $p(1)=12$.")
    (True, False)
    """
    names = {str(v): v for v in e.free_symbols}
    for a, b in math_spans(question):
        q = read_expression(question[a:b].strip().rstrip(".,;").rstrip(), question)
        if q is None or {str(v) for v in q.free_symbols} != set(names):
            continue
        try:
            q = q.subs({v: names[str(v)] for v in q.free_symbols})
            if _differ_at_a_point(e - q):
                continue  # not equal: no need to prove it (cancel is most of the pools' time)
            if sympy.cancel(sympy.expand(e - q)) == 0:
                return True
        except (TypeError, ValueError, ZeroDivisionError, RecursionError):
            continue
    return False


_PROBE = (sympy.Rational(7, 3), sympy.Rational(11, 5), sympy.Rational(13, 4), sympy.Rational(17, 6))


def _differ_at_a_point(diff: sympy.Expr) -> bool:
    """Whether ``diff`` (of two polynomial or rational expressions) has an exact, finite,
    nonzero value at one rational point: then it is not identically zero, which
    ``cancel(expand(...))`` would otherwise take tens of milliseconds to say. False when the
    value is zero or undefined there (the caller proves it the slow way), so the verdict is
    the same as without this test.

    >>> x = sympy.Symbol("x")
    >>> _differ_at_a_point((x + 2) * (x + 3) - (x**2 + 5*x + 7)), _differ_at_a_point((x + 2) * (x + 3) - (x**2 + 5*x + 6))
    (True, False)
    """
    syms = sorted(diff.free_symbols, key=str)
    if len(syms) > len(_PROBE):
        return False
    v = diff.subs(dict(zip(syms, _PROBE)))
    return bool(v.is_Rational) and v != 0


_Menu = list[tuple[Derivation, sympy.Expr]]


def _add_if(out: _Menu, d: Derivation, v) -> None:
    """Append ``(d, v)`` when ``v`` is a real number (a float made exact)."""
    if v is not None and bool(v.is_real):
        out.append((d, sympy.nsimplify(v) if v.has(sympy.Float) else v))


# Each reader below takes the stripped answer and the question and returns None when the
# answer does not have its shape, else the derivations it allows (an empty list when the shape
# is recognized but derives nothing: the later readers are then not tried).
def _from_letters(s: str, question: str) -> _Menu | None:
    """Option letters: the number written as the option, its position, or the count of letters."""
    out: _Menu = []
    if (m := _LETTER.match(s)) is not None:
        letter = m.group(1) or m.group(2)
        v = option_value(question, letter)
        if v is not None:
            _add_if(out, Derivation("choice_value"), v)
        _add_if(out, Derivation("choice_position"), sympy.Integer(ord(letter) - ord("A") + 1))
        return out
    if (m := _LETTERS.match(s)) is not None and re.search(r"letter|option|\bchoices\b", question, re.I):
        _add_if(out, Derivation("choice_count"), sympy.Integer(len(m.group(1).split(","))))
        return out
    return None


def _from_words(s: str, question: str) -> _Menu | None:
    """Words: only months and days of the week read as numbers, and the day of a date
    ("October 30")."""
    out: _Menu = []
    if (word := _name(s)) in _MONTHS:
        _add_if(out, Derivation("month"), sympy.Integer(_MONTHS.index(word) + 1))
        return out
    if word in _WEEKDAYS:
        _add_if(out, Derivation("weekday"), sympy.Integer(_WEEKDAYS.index(word) + 1))
        return out
    if (m := _DATE.match(s)) is not None and m.group(1).lower() in _MONTHS:
        day = int(m.group(2))
        if 1 <= day <= _MONTH_DAYS[_MONTHS.index(m.group(1).lower())]:
            _add_if(out, Derivation("date_day"), sympy.Integer(day))
        return out
    return None


def _from_base(s: str, question: str) -> _Menu | None:
    """A numeral in another base: 2104_5."""
    if (m := _BASE.match(s)) is None:
        return None
    out: _Menu = []
    sign, digits, base = -1 if m.group(1) else 1, m.group(2), int(m.group(3))
    if 2 <= base <= 36 and base != 10:
        try:
            _add_if(out, Derivation("base_value"), sympy.Integer(sign * int(digits, base)))
        except ValueError:
            pass
    return out


def _from_matrix(s: str, question: str) -> _Menu | None:
    """Matrices (entries, trace, determinant) and column vectors (entries)."""
    if (mat := read_matrix(s)) is None:
        return None
    out: _Menu = []
    rows, cols = len(mat), len(mat[0])
    if cols == 1 and rows > 1:
        comps = [r[0] for r in mat]
        for i, v in sorted(enumerate(comps, 1), key=lambda iv: _entry_rank(iv[1])):
            if i <= _ORDINAL_MAX:
                _add_if(out, Derivation("vector_entry", str(i)), v)
        return out
    entries = [((i, j), v) for i, r in enumerate(mat, 1) for j, v in enumerate(r, 1)]
    for (i, j), v in sorted(entries, key=lambda e: _entry_rank(e[1])):
        _add_if(out, Derivation("matrix_entry", f"{i},{j}"), v)
    if rows == cols:
        M = sympy.Matrix(mat)
        _add_if(out, Derivation("trace"), M.trace())
        _add_if(out, Derivation("det"), M.det())
    return out


def _from_interval(s: str, question: str) -> _Menu | None:
    """Intervals (before tuples: "[0, 3)"), also written as a double inequality."""
    if (iv := read_interval(s, question) or read_double_inequality(s)) is None:
        return None
    out: _Menu = []
    lo, hi = iv
    if lo is not None and hi is not None:
        _add_if(out, Derivation("interval_length"), hi - lo)
    if lo is not None:
        _add_if(out, Derivation("interval_left"), lo)
    if hi is not None:
        _add_if(out, Derivation("interval_right"), hi)
    return out


def _from_union(s: str, question: str) -> _Menu | None:
    """Unions of intervals: their finite endpoints."""
    if "\\cup" not in s:
        return None
    out: _Menu = []
    pieces = [read_interval(p, "interval") for p in s.split("\\cup")]
    if all(p is not None for p in pieces):
        ends = [e for p in pieces for e in p if e is not None]
        if ends:
            _add_if(out, Derivation("union_max_end"), sympy.Max(*ends))
            _add_if(out, Derivation("union_min_end"), sympy.Min(*ends))
    return out


def _from_tuple(s: str, question: str) -> _Menu | None:
    """Ordered tuples: each entry (by the name the question gives it) and their sum."""
    if (vals := read_tuple(s)) is None:
        return None
    out: _Menu = []
    names = tuple_names(question, len(vals))
    for i, v in sorted(enumerate(vals, 1), key=lambda iv: _entry_rank(iv[1])):
        if names or i <= _ORDINAL_MAX:
            _add_if(out, Derivation("tuple_entry", str(i), names[i - 1] if names else ""), v)
    _add_if(out, Derivation("tuple_sum"), sum(vals, sympy.Integer(0)))
    return out


def _from_set(s: str, question: str) -> _Menu | None:
    """Sets of solutions: the largest, the smallest, their sum and their number."""
    if (vals := read_set(s, question)) is None:
        return None
    out: _Menu = []
    if not all(v.is_real for v in vals):
        # complex solutions lead nothing: their number is the degree ("the solutions to
        # $z^4 = -4$": 4) and their sum is Vieta's (-b/a), both known without solving
        # the problem, and a complex set has no largest or smallest element (MATH train
        # has 12 such answers; counting them was tried and taken out)
        return out
    distinct = list(dict.fromkeys(vals))
    _add_if(out, Derivation("set_max"), sympy.Max(*distinct))
    _add_if(out, Derivation("set_min"), sympy.Min(*distinct))
    if len(distinct) == len(vals):  # "75^\circ, 75^\circ" lists two angles: no sum or count
        _add_if(out, Derivation("set_sum"), sum(distinct, sympy.Integer(0)))
        _add_if(out, Derivation("set_size"), sympy.Integer(len(distinct)))
    return out


def _from_time(s: str, question: str) -> _Menu | None:
    """A time of day: the minutes past the hour, the hour, the seconds."""
    if (t := read_time(s, question)) is None:
        return None
    out: _Menu = []
    h, mi, sec = t
    _add_if(out, Derivation("time_minute"), sympy.Integer(mi))
    _add_if(out, Derivation("time_hour"), sympy.Integer(h % 12 or 12))
    if sec is not None:
        _add_if(out, Derivation("time_second"), sympy.Integer(sec))
    return out


def _from_ratio(s: str, question: str) -> _Menu | None:
    """A ratio: its value, and its terms when it is a ratio of integers (in lowest terms)."""
    if (r := read_ratio(s, question)) is None:
        return None
    out: _Menu = []
    value = r[0] / r[1]
    _add_if(out, Derivation("ratio_value"), value)
    if value.is_Rational:
        terms = [(str(i), sympy.Integer(t)) for i, t in enumerate((value.p, value.q), 1)]
        for i, t in sorted(terms, key=lambda it: (it[1] == 1, is_written(it[1], question))):
            _add_if(out, Derivation("ratio_term", i), t)
    return out


def _from_complex(s: str, question: str) -> _Menu | None:
    """Complex numbers a + bi: the real and the imaginary part."""
    if (z := read_complex(s)) is None:
        return None
    out: _Menu = []
    re_, im_ = z
    for d, v in sorted([(Derivation("complex_real"), re_), (Derivation("complex_imag"), im_)],
                       key=lambda dv: _entry_rank(dv[1])):
        _add_if(out, d, v)
    return out


def _from_normal_equation(s: str, question: str) -> _Menu | None:
    """An equation "... = 0" in the normal form the question prescribes (integer coefficients,
    gcd 1, a sign fixed: "Enter your answer in the form Ax + By + Cz + D = 0, where ...
    gcd(|A|,|B|,|C|,|D|) = 1"): its coefficients are the answer's own numbers."""
    if (eq := read_normal_equation(s, question)) is None:
        return None
    out: _Menu = []
    poly, syms = eq
    items = [(Derivation("poly_coeff", "1", str(v)), poly.coeff_monomial(v)) for v in syms]
    items.append((Derivation("poly_coeff", "0"), poly.coeff_monomial(1)))
    for d, v in sorted(items, key=lambda dv: _entry_rank(dv[1])):
        if v != 0:
            _add_if(out, d, v)
    return out


def _from_expression(s: str, question: str) -> _Menu | None:
    """Expressions in variables: values at points the question does not name, and a
    polynomial's coefficients and degree."""
    if (e := read_expression(s, question)) is None:
        return None
    out: _Menu = []
    if _stated(e, question):
        return out  # "Factor $x^4+10x^3+...$": every number read off the answer is in the question
    syms = sorted(e.free_symbols, key=lambda v: str(v))
    _add_point_values(out, e, syms, question)
    if len(syms) == 1 and e.is_polynomial(syms[0]):
        poly = sympy.Poly(e, syms[0])
        name = str(syms[0])
        if poly.degree() >= 1:
            # the leading coefficient last: a question often shows it ("4(x + 5)(x + 6)...")
            lead_power = poly.degree()
            terms = sorted(((p[0], c) for p, c in poly.terms()), key=lambda pc: (pc[0] == lead_power, -pc[0]))
            for power, c in terms:
                if c != 0 and power >= 1:
                    _add_if(out, Derivation("poly_coeff", str(power), name), c)
            _add_if(out, Derivation("poly_degree", "", name), sympy.Integer(poly.degree()))
    return out


def _add_point_values(out: _Menu, e: sympy.Expr, syms: list, question: str) -> None:
    """The values of ``e`` at up to three points the question does not write (one small
    integer per variable), finite, real and nonzero."""
    free = free_points(question)
    if len(syms) > 1:
        free = tuple(t for t in free if t > 0)
    if len(free) < len(syms):
        return
    tries = [(t,) for t in free] if len(syms) == 1 else [tuple(free[: len(syms)])]
    found = 0
    for point in tries:
        sub = dict(zip(syms, point))
        try:
            v = e.subs(sub)  # numbers evaluate as they are substituted
        except (ZeroDivisionError, TypeError, ValueError):
            continue
        if v.is_finite and v.is_real and v != 0:
            arg = ",".join(f"{s_}={p}" for s_, p in zip(syms, point))
            _add_if(out, Derivation("expr_value", arg), v)
            found += 1
            if found == 3:  # a few points, so that one of them may give a modest value
                break


# the readers in the order they are tried: the first shape an answer has decides its menu
_SHAPES = (_from_letters, _from_words, _from_base, _from_matrix, _from_interval, _from_union, _from_tuple,
           _from_set, _from_time, _from_ratio, _from_complex, _from_normal_equation, _from_expression)


def _derived(answer: str, question: str) -> _Menu:
    s = strip_answer(answer)
    for shape in _SHAPES:
        if (menu := shape(s, question)) is not None:
            return menu
    return []


def _entry_rank(v) -> tuple[int, int]:
    """Entries whose value says little without solving come first: not 0 or +-1, rational."""
    trivial = v in (0, 1, -1)
    return (int(trivial), int(not _rational(v)))


@lru_cache(maxsize=16384)
def derivations(answer: str, question: str = "") -> tuple[tuple[Derivation, sympy.Expr], ...]:
    """Every number an answer that is not one number determines, with its exact value.

    The first entries read most naturally (an interval's length, a named coordinate, the
    largest solution, the value of a polynomial at a point the question does not mention).
    Empty for a number (use :func:`~composition_rl.values.parse_answer_value`) and for words
    without a numeric reading.

    >>> [(d.kind, str(v)) for d, v in derivations(r"[-2, 7)", "Express your answer in interval notation.")][:2]
    [('interval_length', '9'), ('interval_left', '-2')]
    >>> [(d.kind, d.name, str(v)) for d, v in derivations(r"(3, -1)", "Enter the ordered pair $(p,q)$.")][:1]
    [('tuple_entry', 'p', '3')]
    >>> derivations(r"\\text{even}", "Is f even, odd, or neither?")
    ()
    """
    if parse_answer_value(answer) is not None:
        return ()
    try:
        return tuple(_derived(answer, question))
    except (ArithmeticError, TypeError, ValueError, RecursionError, AttributeError, sympy.SympifyError):
        return ()  # any doubt about the answer's shape: it derives nothing


def derive(answer: str, question: str, derivation: Derivation) -> sympy.Expr | None:
    """The value of ``derivation`` read again from ``answer`` (and ``question``), or None when
    the answer does not allow it (check 1 of a derived link).

    >>> str(derive("-2,1", "Find all roots.", Derivation("set_sum")))
    '-1'
    """
    for d, v in derivations(answer, question):
        if d == derivation:
            return v
    return None


@lru_cache(maxsize=65536)
def lead_value(answer: str, question: str = "", max_abs: int = 1000, max_denominator: int = 100) -> AnswerValue | None:
    """v1 of a problem: its answer's value when that is a number, else the derivation that
    reads best: a rational value (a guessable kind such as a set's size only when no other
    kind has one), of modest size (``|v| <= max_abs``, denominator at most
    ``max_denominator``), not 0 or +-1, an integer; None when the answer derives nothing.

    >>> lead_value("-2,3", "Enter all the solutions, separated by commas.")
    DerivedValue(value=3, unit='', derivation=Derivation(kind='set_max', arg='', name=''))
    >>> lead_value("(0, -47/16)", "Find the focus of the parabola $y = 4x^2 - 3.$").value
    -47/16
    """
    av = parse_answer_value(answer)
    if av is not None:
        return av
    menu = derivations(answer, question)
    if not menu:
        return None

    def modest(v) -> bool:
        return _rational(v) and abs(v.p) <= max_abs * v.q and v.q <= max_denominator

    def key(item):
        i, (d, v) = item
        weak, rational = d.kind in _WEAK, _rational(v)
        tier = 0 if rational and not weak else 1 if weak and modest(v) else 2 if not weak else 3
        # then: modest before large; a value that says something before 0 or +-1 (the point
        # "in the xz-plane" has y = 0, the focus of y = 4x^2 - 3 has x = 0: known without
        # solving, so Y could be had without q1); an integer before a fraction (a fraction
        # makes every offset to q2's integer constants a fraction, which reads worse); the
        # menu's order
        return tier, not modest(v), v in (0, 1, -1), not (rational and v.q == 1), i

    d, v = min(enumerate(menu), key=key)[1]
    return DerivedValue(v, "", d)


# Derivations a reader may get without solving q1 (a quadratic has two roots, and their sum is
# read off the coefficients; the remainder of a division by a cubic has degree 2; "x + y + z
# = 1" gives the sum of the entries; a projection has trace 1, a rotation determinant 1):
# offered, but chosen only when no other derivation has a rational value.
_WEAK = frozenset({"set_size", "set_sum", "poly_degree", "tuple_sum", "trace", "det"})
