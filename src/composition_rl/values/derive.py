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

The wording of each derivation (the sentence in the composed prompt) is owned by
:mod:`composition_rl.compose.spc`, which writes and reads it from one set of templates.

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

from composition_rl.values.constants import symbols_used
from composition_rl.values.latex import evaluate, read
from composition_rl.values.numbers import clean
from composition_rl.values.parse import AnswerValue, SympyDomain, parse_answer_value, parse_number
from composition_rl.values.regions import math_spans

__all__ = ["DERIVATION_KINDS", "Derivation", "DerivedValue", "derivations", "derive", "lead_value", "list_items",
           "split_top"]

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
        d = {"kind": self.kind}
        if self.arg:
            d["arg"] = self.arg
        if self.name:
            d["name"] = self.name
        return d

    @classmethod
    def from_dict(cls, d) -> Derivation:
        return cls(str(d["kind"]), str(d.get("arg", "")), str(d.get("name", "")))


@dataclass(frozen=True)
class DerivedValue(AnswerValue):
    """v1 derived from a non-numeric answer (``unit`` is always "")."""

    derivation: Derivation | None = None


# ---------------------------------------------------------------- reading the answer's shape
_WRAP = re.compile(r"^\\(?:boxed|displaystyle)\s*\{(.*)\}$", re.S)
_TEXT = re.compile(r"^\\(?:text|textbf|mathrm|mbox)\s*\{(.*)\}$", re.S)
_INF = re.compile(r"^([+-]?)\\infty$|^([+-]?)\\infinity$")


_END_MARK = re.compile(r"\s*[.,]$")  # the full stop or comma of the sentence the answer was written in


def _strip(answer: str) -> str:
    s = answer.strip()
    if len(s) > 1 and s[0] == "$" and s[-1] == "$":
        s = s.strip("$").strip()
    s = _END_MARK.sub("", s)
    while (m := _WRAP.match(s)) is not None:
        s = _END_MARK.sub("", m.group(1).strip())
    return s


def split_top(s: str, sep: str = ",") -> list[str]:
    """``s`` split at the separators outside any bracket (``\\{ \\}`` count as brackets)."""
    out, depth, cur = [], 0, []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\" and i + 1 < n:  # \{ \} are brackets; \, \; are spacing, never separators
            if s[i + 1] in "{}":
                depth += 1 if s[i + 1] == "{" else -1
            cur.append(s[i : i + 2])
            i += 2
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    out.append("".join(cur))
    return [p.strip() for p in out]


def _num(text: str) -> sympy.Expr | None:
    """An exact real number (a unit such as ``^\\circ`` or ``\\%`` is allowed), else None."""
    t = text.strip().strip("$").strip()
    if not t:
        return None
    v = parse_number(t)
    if v is None:
        av = parse_answer_value(t)
        v = av.value if av is not None else None
    return v


def _rational(v) -> bool:
    return v is not None and bool(getattr(v, "is_Rational", False))


# A question that asks for a set of values: "Enter all the solutions, separated by commas",
# "What are all of the values", "Find the real roots". A list answering a question that asks
# for several different quantities ("... respectively") is not a set.
_ASKS_ALL = re.compile(
    r"separated by commas|separate your answers|\blist of numbers|\ball\s+(?:of\s+)?(?:the\s+|possible\s+|real\s+"
    r"|integer\s+|positive\s+|negative\s+|distinct\s+|integral\s+|nonnegative\s+)*"
    r"(?:solutions?|values?|roots?|zeros?|numbers?|integers?|x|n|k|a|b|c)\b|\benter all\b|\blist all\b"
    r"|\b(?:solutions|roots|zeros|values)\b"
    # "Solve <an equation>." answered by a list: its solutions (MATH 7381, arcsin x + arcsin(1 - x)
    # = arccos x: "0, \frac{1}{2}"); a system's answer is a pair and an inequality's an interval
    r"|^\s*Solve\b(?!\s+the\s+(?:following\s+)?(?:system|inequality))(?![^.?]*\bfor\s+\$?[a-zA-Z]\$?\s*(?:,|and)\s)"
    r"(?![\s\S]*\\begin\{(?:align|cases|array))",
    re.I,
)
_SEVERAL_QUANTITIES = re.compile(r"\brespectively\b", re.I)
_SENTENCES = re.compile(r"(?<=[.?!])\s+")
_DEFINITION = re.compile(r"\s*(?:Let|Suppose)\b")


def _several_quantities(question: str) -> bool:
    """Whether a sentence of the question asks for several quantities "respectively"; a
    sentence that only names things ("Let $O$ and $H$ denote the circumcenter and orthocenter
    of triangle $ABC,$ respectively.") asks for nothing."""
    return any(_SEVERAL_QUANTITIES.search(t) and not _DEFINITION.match(t) for t in _SENTENCES.split(question))


# "(3, 5)" is an open interval or an ordered pair: the question says which
_ASKS_INTERVAL = re.compile(
    r"interval|\b(?:domain|range)\b|\bvalues? of\b|\bsolve the inequality\b|[<>]|\\[lg]eq?\b|\\[lg]t\b", re.I)
_ASKS_TUPLE = re.compile(r"ordered|\bpoints?\b|coordinates|\bpairs?\b|\btriple|\bvector|\bcent(?:er|re)\b|\bfocus\b"
                         # "(a, b)" names a tuple; "f(x,y,z)" is a function's arguments
                         r"|\bvertex\b|(?<![A-Za-z\\])\(\s*[a-z]\s*,\s*[a-z]\s*(?:,\s*[a-z]\s*)*\)", re.I)


def _interval(s: str, question: str):
    """(left, right) of a single interval, infinite ends as None; None for anything else."""
    t = s.replace("\\left", "").replace("\\right", "").strip()
    if len(t) < 5 or t[0] not in "([" or t[-1] not in ")]" or "\\cup" in t or "\\cap" in t:
        return None
    parts = split_top(t[1:-1])
    if len(parts) != 2:
        return None
    ends = []
    for p in parts:
        p = p.strip()
        if _INF.match(p):
            ends.append(("inf", p.startswith("-")))
            continue
        v = _num(p)
        if v is None or not v.is_real:
            return None
        ends.append(("num", v))
    bracket = t[0] == "[" or t[-1] == "]"
    infinite = any(k == "inf" for k, _ in ends)
    if not (bracket or infinite or (_ASKS_INTERVAL.search(question) and not _ASKS_TUPLE.search(question))):
        return None  # "(3, 5)" answering "find the point": a pair
    lo = None if ends[0][0] == "inf" else ends[0][1]
    hi = None if ends[1][0] == "inf" else ends[1][1]
    if ends[0] == ("inf", False) or ends[1] == ("inf", True):
        return None  # (+inf, ...) or (..., -inf): not an interval
    if lo is not None and hi is not None and not bool(lo < hi):
        return None
    return lo, hi


_NAME = r"(?:\\[a-zA-Z]+|[a-zA-Z])(?:_\{?[\w]+\}?)?"
_NAMED_TUPLE = re.compile(r"\(\s*(" + _NAME + r"(?:\s*,\s*" + _NAME + r")+)\s*\)")


_GIVEN = re.compile(r"\s*(?:\\right\s*)?=")
# the words that ask for the answer as a named tuple, just before it and with no formula between:
# "Enter the ordered pair $(a,b)$", "in the form $(r,\\theta)$", "Find the point $(r,s)$"; not
# "A point has rectangular coordinates $(10,3)$ and polar coordinates $(r, \\theta)$"
_ASKED_AS = re.compile(r"(?:ordered\s+(?:pair|triple|triplet|quadruple|quintuple|tuple)|in\s+the\s+form|\bpoint\b"
                       r"|\benter\b|\banswer\s+as\b|\bwhat\s+(?:is|are)\b|\bfind\b|\bcompute\b|\bdetermine\b)[^.?!$]*\$?\s*$",
                       re.I)


def _tuple_names(question: str, n: int) -> tuple[str, ...]:
    """The names of an ordered tuple of ``n`` entries as the question writes it (``$(p,q)$``
    in "Enter the ordered pair $(p,q)$"), or () when there is no unique such tuple."""
    found = set()
    for m in _NAMED_TUPLE.finditer(question):
        if _GIVEN.match(question, m.end()):
            continue  # "$(\\rho,\\theta,\\phi) = (4, ...)$": the point given, not the answer's entries
        if not _ASKED_AS.search(question[max(0, m.start() - 80) : m.start()]):
            continue  # "... and polar coordinates $(r, \\theta)$": names of a point described, not asked
        names = tuple(x.strip() for x in m.group(1).split(","))
        if len(names) == n and len(set(names)) == n:
            found.add(names)
    return found.pop() if len(found) == 1 else ()


def _tuple(s: str):
    t = s.replace("\\left", "").replace("\\right", "").strip()
    if len(t) < 5 or t[0] != "(" or t[-1] != ")":
        return None
    parts = split_top(t[1:-1])
    if len(parts) < 2 or len(parts) > 6:
        return None
    vals = [_num(p) for p in parts]
    if any(v is None or not v.is_real for v in vals):
        return None
    return vals


_SET_WRAP = re.compile(r"^\\\{(.*)\\\}$", re.S)
_AND = re.compile(r"\\(?:text|textrm|mathrm|mbox)\s*\{\s*,?\s*(?:and|or)\s*\}|\\(?:quad|qquad)"
                  r"|(?<![a-zA-Z])(?:and|or)(?![a-zA-Z])")


def list_items(s: str, seps: str = ",") -> list[str]:
    """The items of an answer written as a list: a set's braces taken off, "and", "or"
    (``\\text{ and }``, ``\\mbox{ or }``, ...) and ``\\quad`` read as separators, split at the
    top level at whichever separator of ``seps`` gives the most items.

    >>> list_items("\\\\{1, 2\\\\}"), list_items("(-2, 18); (8, 38)", ",;"), list_items("12 \\\\mbox{ and } 18")
    (['1', '2'], ['(-2, 18)', '(8, 38)'], ['12', '18'])
    """
    m = _SET_WRAP.match(s)
    body = _AND.sub(",", m.group(1) if m else s)
    return max(([p for p in split_top(body, sep) if p] for sep in seps), key=len)


def _set(s: str, question: str):
    m = _SET_WRAP.match(s)
    parts = list_items(s)
    if len(parts) < 2 or len(parts) > 12:
        return None
    if m is None and (not _ASKS_ALL.search(question) or _several_quantities(question)):
        return None  # two numbers that do not answer "find all": two answers to two questions
    names = {p.split("=")[0].strip().strip("$") for p in parts if "=" in p}
    if len(names) > 1:
        return None  # "x = 2, y = 3": values of two unknowns, not solutions of one
    vals = []
    for p in parts:
        v = _num(p)
        if v is None or not v.is_real:
            z = _complex(p)  # a complex solution: "2 - 9i, -2 + 9i"
            if z is None:
                return None
            v = z[0] + sympy.I * z[1]
        vals.append(v)
    return vals


_LETTER = re.compile(r"^(?:\\(?:text|textbf|mathrm)\s*\{\s*)?\(?([A-Z])\)?(?:\s*\})?$"
                     r"|^\(\s*\\(?:text|textbf|mathrm)\s*\{\s*([A-Z])\s*\}\s*\)$")  # "(\text{H})"
_LETTERS = re.compile(r"^(?:\\text\s*\{)?\s*([A-Z](?:\s*,\s*[A-Z])+)\s*\}?$")


def _option_values(question: str, letter: str) -> sympy.Expr | None:
    """The number written as option ``letter`` when every option of the question is a number
    (``\\textbf{(A)}\\ 2 \\qquad \\textbf{(B)}\\ 3``, ``(A) $5$``, ``A. $\\sqrt{3}$``); else None."""
    marks = []
    for ch in "ABCDEFGH":
        m = re.search(r"(?:\\textbf\{\(" + ch + r"\)\}|\(" + ch + r"\)|(?<![A-Za-z\\])" + ch + r"(?:\.|\)\.?))", question)
        if m is None:
            break
        if marks and m.start() < marks[-1][1]:
            return None
        marks.append((ch, m.end(), m.start()))
    if len(marks) < 2 or letter not in [c for c, _, _ in marks]:
        return None
    values = {}
    for i, (ch, end, _) in enumerate(marks):
        stop = marks[i + 1][2] if i + 1 < len(marks) else len(question)
        body = question[end:stop]
        body = re.split(r"\n\s*\n|\\qquad|\\quad", body)[0]
        body = body.replace("\\ ", " ").replace("\\,", " ").strip().strip("$").strip()
        v = _num(body)
        if v is None or not v.is_real:
            return None
        values[ch] = v
    return values.get(letter)


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
_MATRIX = re.compile(r"^\\begin\{([pbvB]?matrix)\}(.*)\\end\{\1\}$", re.S)
_BASE = re.compile(r"^(-?)(\w+)_\{?(\d+)\}?$")
_PHANTOM = re.compile(r"\\phantom\s*(?:\{[^{}]*\}|[^\s{])")  # space kept for a sign: "\phantom -1" is 1


def _matrix(s: str):
    m = _MATRIX.match(s.strip())
    if m is None:
        return None
    rows = [r for r in re.split(r"\\\\", _PHANTOM.sub("", m.group(2))) if r.strip()]
    out = []
    for r in rows:
        cells = [_num(c) for c in r.split("&")]
        if any(c is None or not c.is_real for c in cells):
            return None
        out.append(cells)
    if not out or len({len(r) for r in out}) != 1:
        return None
    return out


_ALGEBRA = SympyDomain(letters=True)


def _algebra(text: str) -> sympy.Expr:
    """The sympy value of an expression in single-letter real variables (``x``, ``p``;
    ``a_1`` is not one): polynomials and rational expressions with implicit products."""
    return evaluate(read(text, letters=True), _ALGEBRA)


def _complex(s: str):
    """(real part, imaginary part) of a non-real complex number written with ``i``, else None."""
    if not re.search(r"(?<![a-zA-Z\\])i(?![a-zA-Z])", s) or "," in s or "=" in s:
        return None
    t = clean(s).replace("\\cdot", "*")
    if re.search(r"\\(?!frac|dfrac|tfrac|sqrt|pi\b)[a-zA-Z]+", t):
        return None
    try:
        e = _algebra(t)
    except (ValueError, TypeError, ZeroDivisionError, RecursionError, IndexError):
        return None
    if not isinstance(e, sympy.Expr) or {str(v) for v in e.free_symbols} != {"i"}:
        return None
    z = sympy.expand(e.subs(sympy.Symbol("i", real=True), sympy.I))
    re_, im_ = sympy.re(z), sympy.im(z)
    if not (re_.is_real and im_.is_real) or im_ == 0 or re_.free_symbols or im_.free_symbols:
        return None
    return sympy.nsimplify(re_) if re_.has(sympy.Float) else re_, im_


_NORMAL_FORM = re.compile(r"in the form.*\bgcd\b", re.I | re.S)


def _normal_equation(s: str, question: str):
    """(polynomial, its variables) of an answer ``<polynomial> = 0`` when the question fixes
    the normal form (an integer form with gcd 1), else None."""
    m = re.fullmatch(r"(.+?)=\s*0", s.strip())
    if m is None or not _NORMAL_FORM.search(question) or "=" in m.group(1):
        return None
    e = _expression(m.group(1), question)
    if e is None or not e.is_polynomial(*e.free_symbols):
        return None
    syms = sorted(e.free_symbols, key=str)
    return sympy.Poly(e, *syms), syms


_FUNC_LHS = re.compile(r"^\s*(?:[a-zA-Z](?:\^\{-1\})?\s*\(\s*[a-zA-Z]\s*\)|[a-zA-Z])\s*=\s*")


def _expression(s: str, question: str):
    """A polynomial or rational expression in one or more real variables (no ``i``, no
    functions), or None. ``y = 3x + 1`` and ``p(x) = ...`` give their right side. Every
    variable must be a symbol of the question: letters that are not (the unit in
    ``4.4677 \\times 10^{14} Hz``) make the answer no expression."""
    t = _FUNC_LHS.sub("", s, count=1)
    if "=" in t or "<" in t or ">" in t or "\\le" in t or "\\ge" in t or "," in t:
        return None
    t = clean(t).replace("\\cdot", "*").replace("\\times", "*")
    if re.search(r"\\(?!frac|dfrac|tfrac|sqrt|pi\b)[a-zA-Z]+", t):
        return None
    try:
        e = _algebra(t)
    except (ValueError, TypeError, ZeroDivisionError, RecursionError, IndexError):
        return None
    if not isinstance(e, sympy.Expr) or not e.free_symbols:
        return None
    if any(str(v) in ("i", "e") for v in e.free_symbols):
        return None  # the imaginary unit or Euler's number, not a variable
    used = symbols_used(question)
    if e.is_Symbol or any(str(v).upper() not in used for v in e.free_symbols):
        return None  # a bare variable ("b") derives nothing but itself
    return e


# "a:b" answers a question that asks for a ratio ("the ratio of ... is", "in the form $a:b$") or
# for a time of day ("What time will it be", "at 8:00"); a question that reads as both leads nothing
_ASKS_RATIO = re.compile(r"\bratios?\b|\bform\s+\$\s*[a-zA-Z]\s*:\s*[a-zA-Z]\s*\$", re.I)
# a time of day, not a duration: "what time", a clock, a.m./p.m., noon, or a clock time the
# question starts from ("start running at 8:00"; a ratio "in the ratio $25:36$" is not one);
# never "how much time" or "how long"
_ASKS_TIME = re.compile(r"\bwhat\s+time\b|\btime\s+of\s+(?:the\s+)?day\b|\bclock\b|o'clock|\b[ap]\.m\.|\bnoon\b"
                        r"|\bmidnight\b|\bat\s+\$?\d{1,2}\s*(?:\\!)?:\s*(?:\\!)?\d{2}(?!\d)", re.I)
_DURATION = re.compile(r"\bhow\s+(?:much\s+time|long)\b", re.I)
_CLOCK = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(?:\\text\s*\{\s*([ap])\.?\s*m\.?\s*\}|([ap])\.?\s*m\.?)?")


def _time(s: str, question: str):
    """(hour, minute, second or None) of a time of day ``9:24``, ``05\\!:\\!00``, ``8\\!:\\!34
    \\text{ p.m.}``, ``4:51:06``, when the question asks for a time; else None."""
    if not _ASKS_TIME.search(question) or _DURATION.search(question) or _ASKS_RATIO.search(question):
        return None
    m = _CLOCK.fullmatch(clean(s))
    if m is None:
        return None
    h, mi = int(m.group(1)), int(m.group(2))
    sec = None if m.group(3) is None else int(m.group(3))
    meridiem = m.group(4) or m.group(5)
    if h > (12 if meridiem else 23) or mi > 59 or (sec is not None and sec > 59) or (meridiem and h == 0):
        return None
    return h, mi, sec


def _ratio(s: str, question: str):
    """(first term, second term) of a ratio ``5:6``, ``1 : 2`` answering a question that asks
    for a ratio, both positive numbers; else None."""
    if s.count(":") != 1 or not _ASKS_RATIO.search(question) or _ASKS_TIME.search(question):
        return None
    a, b = (_num(t) for t in s.split(":"))
    if a is None or b is None or not (a.is_positive and b.is_positive):
        return None
    return a, b


def _written(v, question: str) -> bool:
    """Whether the integer ``v`` is written as a number in the question."""
    return bool(re.search(r"(?<![\d.])" + str(abs(int(v))) + r"(?![\d.])", question))


_INEQ = re.compile(r"\\leq?(?![a-zA-Z])|<|\\lt(?![a-zA-Z])")
_BOUNDED = re.compile(r"\s*[a-zA-Z](?:\s*\(\s*[a-zA-Z]\s*\))?\s*")


def _double_inequality(s: str):
    """(left, right) of a bounded interval written ``-80 \\leq g(x) \\leq 82``, else None."""
    parts = _INEQ.split(s)
    # the middle is one variable or one function of it (g(x)): "2 < 3x + 1 < 7" bounds 3x + 1,
    # not x, and "1 < x^2 < 4" is two intervals
    if len(parts) != 3 or "=" in s or ">" in s or "\\ge" in s or not _BOUNDED.fullmatch(parts[1]):
        return None
    lo, hi = _num(parts[0]), _num(parts[2])
    if lo is None or hi is None or not (lo.is_real and hi.is_real) or not bool(lo < hi):
        return None
    return lo, hi


_POINTS = (2, 3, 4, 5, 6, 7, 10, -2, -3)  # positive first: physical quantities (R, C, m) are


def _points(question: str) -> tuple[int, ...]:
    """Small integers not written in the question, in order of preference (a point the
    question names may have a value it gives away: "p(2) = 5")."""
    return tuple(t for t in _POINTS if not _written(t, question))


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
        q = _expression(question[a:b].strip().rstrip(".,;").rstrip(), question)
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


def _derived(answer: str, question: str) -> list[tuple[Derivation, sympy.Expr]]:
    s = _strip(answer)
    out: list[tuple[Derivation, sympy.Expr]] = []
    add = out.append

    def add_if(d: Derivation, v) -> None:
        if v is not None and bool(v.is_real):
            add((d, sympy.nsimplify(v) if v.has(sympy.Float) else v))

    # option letters
    if (m := _LETTER.match(s)) is not None:
        letter = m.group(1) or m.group(2)
        v = _option_values(question, letter)
        if v is not None:
            add_if(Derivation("choice_value"), v)
        add_if(Derivation("choice_position"), sympy.Integer(ord(letter) - ord("A") + 1))
        return out
    if (m := _LETTERS.match(s)) is not None and re.search(r"letter|option|\bchoices\b", question, re.I):
        add_if(Derivation("choice_count"), sympy.Integer(len(m.group(1).split(","))))
        return out
    # words: only months and days of the week read as numbers, and the day of a date ("October 30")
    if (word := _name(s)) in _MONTHS:
        add_if(Derivation("month"), sympy.Integer(_MONTHS.index(word) + 1))
        return out
    if word in _WEEKDAYS:
        add_if(Derivation("weekday"), sympy.Integer(_WEEKDAYS.index(word) + 1))
        return out
    if (m := _DATE.match(s)) is not None and m.group(1).lower() in _MONTHS:
        day = int(m.group(2))
        if 1 <= day <= _MONTH_DAYS[_MONTHS.index(m.group(1).lower())]:
            add_if(Derivation("date_day"), sympy.Integer(day))
        return out
    # a numeral in another base: 2104_5
    if (m := _BASE.match(s)) is not None:
        sign, digits, base = -1 if m.group(1) else 1, m.group(2), int(m.group(3))
        if 2 <= base <= 36 and base != 10:
            try:
                add_if(Derivation("base_value"), sympy.Integer(sign * int(digits, base)))
            except ValueError:
                pass
        return out
    # matrices and vectors
    if (mat := _matrix(s)) is not None:
        rows, cols = len(mat), len(mat[0])
        if cols == 1 and rows > 1:
            comps = [r[0] for r in mat]
            for i, v in sorted(enumerate(comps, 1), key=lambda iv: _entry_rank(iv[1])):
                if i <= _ORDINAL_MAX:
                    add_if(Derivation("vector_entry", str(i)), v)
            return out
        entries = [((i, j), v) for i, r in enumerate(mat, 1) for j, v in enumerate(r, 1)]
        for (i, j), v in sorted(entries, key=lambda e: _entry_rank(e[1])):
            add_if(Derivation("matrix_entry", f"{i},{j}"), v)
        if rows == cols:
            M = sympy.Matrix(mat)
            add_if(Derivation("trace"), M.trace())
            add_if(Derivation("det"), M.det())
        return out
    # intervals (before tuples: "[0, 3)"), also written as a double inequality
    if (iv := _interval(s, question) or _double_inequality(s)) is not None:
        lo, hi = iv
        if lo is not None and hi is not None:
            add_if(Derivation("interval_length"), hi - lo)
        if lo is not None:
            add_if(Derivation("interval_left"), lo)
        if hi is not None:
            add_if(Derivation("interval_right"), hi)
        return out
    # unions of intervals: their finite endpoints
    if "\\cup" in s:
        pieces = [_interval(p, "interval") for p in s.split("\\cup")]
        if all(p is not None for p in pieces):
            ends = [e for p in pieces for e in p if e is not None]
            if ends:
                add_if(Derivation("union_max_end"), sympy.Max(*ends))
                add_if(Derivation("union_min_end"), sympy.Min(*ends))
        return out
    # ordered tuples
    if (vals := _tuple(s)) is not None:
        names = _tuple_names(question, len(vals))
        for i, v in sorted(enumerate(vals, 1), key=lambda iv: _entry_rank(iv[1])):
            if names or i <= _ORDINAL_MAX:
                add_if(Derivation("tuple_entry", str(i), names[i - 1] if names else ""), v)
        add_if(Derivation("tuple_sum"), sum(vals, sympy.Integer(0)))
        return out
    # sets of solutions
    if (vals := _set(s, question)) is not None:
        if not all(v.is_real for v in vals):
            # complex solutions lead nothing: their number is the degree ("the solutions to
            # $z^4 = -4$": 4) and their sum is Vieta's (-b/a), both known without solving
            # the problem, and a complex set has no largest or smallest element (MATH train
            # has 12 such answers; counting them was tried and taken out)
            return out
        distinct = list(dict.fromkeys(vals))
        add_if(Derivation("set_max"), sympy.Max(*distinct))
        add_if(Derivation("set_min"), sympy.Min(*distinct))
        if len(distinct) == len(vals):  # "75^\circ, 75^\circ" lists two angles: no sum or count
            add_if(Derivation("set_sum"), sum(distinct, sympy.Integer(0)))
            add_if(Derivation("set_size"), sympy.Integer(len(distinct)))
        return out
    # a time of day: the minutes past the hour, the hour, the seconds
    if (t := _time(s, question)) is not None:
        h, mi, sec = t
        add_if(Derivation("time_minute"), sympy.Integer(mi))
        add_if(Derivation("time_hour"), sympy.Integer(h % 12 or 12))
        if sec is not None:
            add_if(Derivation("time_second"), sympy.Integer(sec))
        return out
    # a ratio: its value, and its terms when it is a ratio of integers (in lowest terms)
    if (r := _ratio(s, question)) is not None:
        value = r[0] / r[1]
        add_if(Derivation("ratio_value"), value)
        if value.is_Rational:
            terms = [(str(i), sympy.Integer(t)) for i, t in enumerate((value.p, value.q), 1)]
            for i, t in sorted(terms, key=lambda it: (it[1] == 1, _written(it[1], question))):
                add_if(Derivation("ratio_term", i), t)
        return out
    # complex numbers a + bi
    if (z := _complex(s)) is not None:
        re_, im_ = z
        for d, v in sorted([(Derivation("complex_real"), re_), (Derivation("complex_imag"), im_)],
                           key=lambda dv: _entry_rank(dv[1])):
            add_if(d, v)
        return out
    # an equation "... = 0" in the normal form the question prescribes (integer coefficients,
    # gcd 1, a sign fixed: "Enter your answer in the form Ax + By + Cz + D = 0, where ...
    # gcd(|A|,|B|,|C|,|D|) = 1"): its coefficients are the answer's own numbers
    if (eq := _normal_equation(s, question)) is not None:
        poly, syms = eq
        items = [(Derivation("poly_coeff", "1", str(v)), poly.coeff_monomial(v)) for v in syms]
        items.append((Derivation("poly_coeff", "0"), poly.coeff_monomial(1)))
        for d, v in sorted(items, key=lambda dv: _entry_rank(dv[1])):
            if v != 0:
                add_if(d, v)
        return out
    # expressions in variables
    if (e := _expression(s, question)) is not None:
        if _stated(e, question):
            return out  # "Factor $x^4+10x^3+...$": every number read off the answer is in the question
        syms = sorted(e.free_symbols, key=lambda v: str(v))
        free = _points(question)
        if len(syms) > 1:
            free = tuple(t for t in free if t > 0)
        if len(free) >= len(syms):
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
                    add_if(Derivation("expr_value", arg), v)
                    found += 1
                    if found == 3:  # a few points, so that one of them may give a modest value
                        break
        if len(syms) == 1 and e.is_polynomial(syms[0]):
            poly = sympy.Poly(e, syms[0])
            name = str(syms[0])
            if poly.degree() >= 1:
                # the leading coefficient last: a question often shows it ("4(x + 5)(x + 6)...")
                lead_power = poly.degree()
                terms = sorted(((p[0], c) for p, c in poly.terms()), key=lambda pc: (pc[0] == lead_power, -pc[0]))
                for power, c in terms:
                    if c != 0 and power >= 1:
                        add_if(Derivation("poly_coeff", str(power), name), c)
                add_if(Derivation("poly_degree", "", name), sympy.Integer(poly.degree()))
        return out
    return out


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
