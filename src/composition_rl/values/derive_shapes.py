"""Readers of an answer's shape, for :mod:`.derive`: an interval, a tuple, a set of
solutions, the number behind an option letter, a matrix, a complex number, an expression or
an equation in normal form, a time of day, a ratio.

Each reader takes the answer (stripped by :func:`strip_answer`) and, where the reading
depends on it, the question, and returns the parts it read (exact, sympy) or None when the
answer does not have that shape or the question asks for something else. :mod:`.derive`
turns the parts into the numbers a problem writer would name.
"""

from __future__ import annotations

import re

import sympy

from composition_rl.values.constants import symbols_used
from composition_rl.values.latex import evaluate, read
from composition_rl.values.numbers import clean
from composition_rl.values.parse import SympyDomain, parse_answer_value, parse_number

__all__ = ["free_points", "is_written", "list_items", "option_value", "read_complex", "read_double_inequality",
           "read_expression", "read_interval", "read_matrix", "read_normal_equation", "read_ratio", "read_set",
           "read_time", "read_tuple", "split_top", "strip_answer", "tuple_names"]


# ---------------------------------------------------------------- reading the answer's shape
_WRAP = re.compile(r"^\\(?:boxed|displaystyle)\s*\{(.*)\}$", re.S)
_INF = re.compile(r"^([+-]?)\\infty$|^([+-]?)\\infinity$")


_END_MARK = re.compile(r"\s*[.,]$")  # the full stop or comma of the sentence the answer was written in


def strip_answer(answer: str) -> str:
    """``answer`` without its ``$...$``, ``\\boxed{}`` / ``\\displaystyle{}`` wrappers and the
    full stop or comma of the sentence it ended."""
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


def read_interval(s: str, question: str):
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


def tuple_names(question: str, n: int) -> tuple[str, ...]:
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


def read_tuple(s: str):
    """The real entries of an ordered tuple ``(a, b, ...)`` of two to six entries, else None."""
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


def read_set(s: str, question: str):
    """The values of a list of solutions answering a question that asks for all of them (real
    or complex), else None."""
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
            z = read_complex(p)  # a complex solution: "2 - 9i, -2 + 9i"
            if z is None:
                return None
            v = z[0] + sympy.I * z[1]
        vals.append(v)
    return vals

def option_value(question: str, letter: str) -> sympy.Expr | None:
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


_MATRIX = re.compile(r"^\\begin\{([pbvB]?matrix)\}(.*)\\end\{\1\}$", re.S)
_PHANTOM = re.compile(r"\\phantom\s*(?:\{[^{}]*\}|[^\s{])")  # space kept for a sign: "\phantom -1" is 1


def read_matrix(s: str):
    """The rows of real entries of a ``matrix`` / ``pmatrix`` / ``bmatrix`` ... answer, else None."""
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


def read_complex(s: str):
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


def read_normal_equation(s: str, question: str):
    """(polynomial, its variables) of an answer ``<polynomial> = 0`` when the question fixes
    the normal form (an integer form with gcd 1), else None."""
    m = re.fullmatch(r"(.+?)=\s*0", s.strip())
    if m is None or not _NORMAL_FORM.search(question) or "=" in m.group(1):
        return None
    e = read_expression(m.group(1), question)
    if e is None or not e.is_polynomial(*e.free_symbols):
        return None
    syms = sorted(e.free_symbols, key=str)
    return sympy.Poly(e, *syms), syms


_FUNC_LHS = re.compile(r"^\s*(?:[a-zA-Z](?:\^\{-1\})?\s*\(\s*[a-zA-Z]\s*\)|[a-zA-Z])\s*=\s*")


def read_expression(s: str, question: str):
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


def read_time(s: str, question: str):
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


def read_ratio(s: str, question: str):
    """(first term, second term) of a ratio ``5:6``, ``1 : 2`` answering a question that asks
    for a ratio, both positive numbers; else None."""
    if s.count(":") != 1 or not _ASKS_RATIO.search(question) or _ASKS_TIME.search(question):
        return None
    a, b = (_num(t) for t in s.split(":"))
    if a is None or b is None or not (a.is_positive and b.is_positive):
        return None
    return a, b


def is_written(v, question: str) -> bool:
    """Whether the integer ``v`` is written as a number in the question."""
    return bool(re.search(r"(?<![\d.])" + str(abs(int(v))) + r"(?![\d.])", question))


_INEQ = re.compile(r"\\leq?(?![a-zA-Z])|<|\\lt(?![a-zA-Z])")
_BOUNDED = re.compile(r"\s*[a-zA-Z](?:\s*\(\s*[a-zA-Z]\s*\))?\s*")


def read_double_inequality(s: str):
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


def free_points(question: str) -> tuple[int, ...]:
    """Small integers not written in the question, in order of preference (a point the
    question names may have a value it gives away: "p(2) = 5")."""
    return tuple(t for t in _POINTS if not is_written(t, question))

