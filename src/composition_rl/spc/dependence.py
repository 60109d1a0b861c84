"""Check 5: does the composed answer depend on the variable?

A composition teaches nothing when the later problem's answer is the same for every value of
the variable: the policy can skip q1 and still be rewarded. :func:`decide` reads the original
later problem and the places the variable replaced, and says one of :data:`OUTCOMES`:

* ``independent``: proved. Every statement (an expression, or both sides of a relation) the
  variable stands in is constant in it: it cancels (``3t+Y-6t+7t-Y``), sits in
  ``\\binom{Y}{Y}`` or ``\\binom{Y}{0}``, or is multiplied by zero; or the statement is an
  equation whose two sides differ by the variable's part times a part free of it
  (``\\frac{Y}{j} + \\frac{Y}{k} = \\frac{Y}{3}`` has the same solutions for every Y).
  Exact evaluation at v2 and two other values finds the candidates; sympy proves them (a
  derivative that is identically zero, a ratio free of the other letters). Or the question
  asks Vieta's sum or product of a polynomial's roots, or the vertex of a parabola, and the
  variable is a coefficient that quantity does not use ("What is the sum of the roots of
  $x^2 - 4x + Y = 0$?" is 4): proved in sympy, with the roots distinct at v2 (and real
  when real values are asked), so the values the problem means keep their sum around v2.
  Or the question asks about the asymptotes of a rational function, and the variable is a
  coefficient they do not use (a numerator's coefficient for a vertical one, with no root
  shared at v2; one outside the quotient's polynomial part for a horizontal or slant one),
  or of a hyperbola, and the variable is its constant term alone.
* ``dependent``: proved. The problem asks for the value of one expression of numbers
  ("Compute $\\frac{Y}{4}+2$.", "Simplify $(2x+Y)-(x+3)$."), and that expression takes
  other values at other values of the variable, so the answer changes with it.
* ``unknown``: everything else (the variable in prose, or in a statement the answer depends
  on through reasoning this module does not do). The LLM engine asks the model about those
  when one is configured (:mod:`composition_rl.spc.llm.composer`).

Only exact arithmetic (``Fraction``) and sympy are used; nothing is executed. The verdict is
a pure function of the problem text and the replaced places, so it is computed once per
(problem, constant) and shared by the engine and the checks (one implementation).
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Literal

import sympy

from composition_rl.spc.dependence_eval import (
    MAX_POWER,
    MAX_PROOF,
    VAR,
    constant_in_var,
    letters_in,
    read_side,
    same_zero_set,
    split_sides,
    split_statements,
    to_sympy,
    tree_size,
)
from composition_rl.values import constant_value
from composition_rl.values.latex import LatexError
from composition_rl.values.regions import math_spans

__all__ = ["OUTCOMES", "Dependence", "decide"]

Dependence = Literal["dependent", "independent", "unknown"]
OUTCOMES: tuple[str, ...] = ("dependent", "independent", "unknown")

# "Compute $E$." and the like: the answer is E's value (or E itself, for Simplify/Expand)
_ASKS_VALUE = re.compile(
    r"\s*(?P<verb>Compute|Evaluate|Calculate|Simplify|Expand|Find|What is|Determine)\s*(?:the value of\s*)?:?\s*"
    r"(?P<open>\$\$|\$|\\\[)", re.I)
_TAIL_OK = re.compile(
    r"\s*[.?]?\s*(?:Express your answer (?:as a (?:common|mixed|improper) (?:fraction|number)|in simplest (?:radical )?form"
    r"|as a fraction in simplest form|as a polynomial[^.]*)\.?\s*)?", re.I)


def _asked_span(q: str, spans: list[tuple[int, int]]) -> tuple[tuple[int, int], bool] | None:
    """The span a "Compute $E$." problem asks for, and whether letters may stay (Simplify)."""
    m = _ASKS_VALUE.match(q)
    if m is None or not spans or spans[0][0] != m.end():
        return None
    a, b = spans[0]
    close = {"$$": "$$", "$": "$", "\\[": "\\]"}[m.group("open")]
    rest = q[b + len(close) :]
    t = _TAIL_OK.match(rest)
    if t is None or t.end() != len(rest) or "nearest" in rest or "round" in rest.lower():
        return None
    return (a, b), m.group("verb").lower() in ("simplify", "expand")


def _marked(q: str, a: int, b: int, places: tuple[int, ...], literal: str) -> str:
    out, pos = [], a
    for p in places:
        if a <= p < b:
            out += [q[pos:p], VAR]
            pos = p + len(literal)
    out.append(q[pos:b])
    return "".join(out)


_DEGENERATE = re.compile(r"binom|(?<![\d.])0(?![\d.])|(?<![\d.])1\s*\^")


# a run of plain-text arithmetic ("Calculate 6 - 6.", "68 - 32 ="): numbers, operators and
# brackets from a number (or a sign before one) to a number or a closing bracket
_PLAIN_RUN = re.compile(r"(?<![\w.])-?[\d(][\d\s.+\-*/()]*[\d)]")
_PLAIN_EXPR = re.compile(r"\d\s*\)*\s*[-+*/]\s*\(*\s*-?\d")


@lru_cache(maxsize=4096)
def _spans(question: str) -> list[tuple[int, int]]:
    """The spans whose arithmetic this module reads: math mode; in a question with no math
    mode at all (reasoning-gym's "Calculate 6 - 6."), its runs of plain-text arithmetic.

    >>> _spans("Calculate 6 - 6."), _spans("Find $x$ if 6 - 6 apples.")
    ([(10, 15)], [(6, 7)])
    """
    spans = math_spans(question)
    if spans:
        return spans
    return [m.span() for m in _PLAIN_RUN.finditer(question) if _PLAIN_EXPR.search(m.group())]


def _independent(question: str, held: dict[tuple[int, int], list[int]], literal: str, v2: Fraction) -> bool:
    """Whether every statement the variable stands in is proved constant in it."""
    try:
        for (a, b), ps in held.items():
            for stmt in split_statements(_marked(question, a, b, tuple(ps), literal)):
                if not any(t[0] == "var" for t in stmt):
                    continue
                trees = [read_side(side) for side in split_sides(stmt)]
                if len(trees) == 1:
                    checks = trees
                else:  # a relation holds or fails alike for every value when L - R is constant
                    checks = [("-", x, y) for x, y in zip(trees, trees[1:])
                              if VAR in letters_in(x, set()) or VAR in letters_in(y, set())]
                equation = len(trees) == 2 and [t for t in stmt if t[0] == "rel"] == [("rel", "=")]
                for node in checks:
                    if constant_in_var(node, v2) is True:
                        continue
                    if equation and same_zero_set(node, v2):
                        continue  # L - R = (part in Y) * (part free of Y): the same equation
                    return False
    except (LatexError, RecursionError):
        return False
    return True


# -- what the question asks of a polynomial: Vieta's sum or product, the vertex ----------------
# "What is the sum of the roots of $x^2 - 4x + Y = 0$?" is 4 for every Y: the sum of the roots
# is -a_{n-1}/a_n, the product (-1)^n a_0/a_n, the vertex of a parabola lies at -a_1/(2 a_2),
# whatever the other coefficients are. Read only where
# the question asks that and nothing else of the roots: one such phrase, no word that keeps
# some roots and drops others, no other condition on the letter, no other use of the function.
_LETTER = r"\$?(?P<of>[a-z])(?![\w^_{(])\$?"  # "values of $x$", not "values of $x^2$" or "the"
_ROOT_NOUN = r"(?:roots|zeros|zeroes|solutions|values\s+(?:of|for)\s+" + _LETTER + ")"
_ASKS_VIETA = re.compile(
    r"\b(?P<what>sum|product)\s+of\s+(?:the\s+|all\s+(?:the\s+)?)?(?P<adj>(?:(?:possible|distinct|real|complex)\s+)*)"
    + _ROOT_NOUN, re.I)
_ASKS_VERTEX = re.compile(
    r"\b\$?(?P<coord>[a-z])\$?-coordinate\s+of\s+the\s+vertex"
    r"|\bvalues?\s+of\s+\$?(?P<of>[a-z])\$?\s+(?:will\s+|would\s+|that\s+|which\s+)?"
    r"(?:gives?|yields?|produces?|minimizes|maximizes)\b[^.?]*\b(?:minimum|maximum)", re.I)
# another quantity around the asked one ("the difference between the sum of the roots and their
# product"), or a word that keeps some roots only ("greater than 2", "in the interval", "positive")
_OTHER_ASK = re.compile(r"\b(?:sum|product|difference|ratio|quotient|mean|average|twice|square|cube|reciprocal)s?\b",
                        re.I)
_KEEPS_SOME = re.compile(
    r"\b(?:greater|less|more|fewer|larger|smaller|bigger|positive|negative|nonnegative|nonpositive|integers?|integral"
    r"|rational|irrational|interval|between|least|most|exceed\w*|above|below|odd|even|prime|whole|natural|digits?"
    r"|domain|range|except|other\s+than|nonzero|non-zero)\b|\\(?:in|le|leq|ge|geq|lt|gt|neq?)(?![a-zA-Z])|[<>]", re.I)
_REL_TEXT = re.compile(r"[=<>]|\\(?:le|leq|ge|geq|ne|neq|lt|gt|in)(?![a-zA-Z])")


@lru_cache(maxsize=4096)
def _asked_of_polynomial(question: str) -> tuple[str, str, bool] | None:
    """("sum" | "product" | "vertex", the letter the question names or "", whether the roots
    must be real) when the question asks for Vieta's sum or product of a polynomial's roots,
    or for its vertex, and nothing else of them (its words hold no second quantity and no
    word that keeps some roots only); None otherwise. Once per question: every constant of
    the question reads the same answer."""
    m = _ASKS_VIETA.search(question)
    if m is not None:
        what, named = m.group("what").lower(), m.group("of") or ""
        real = "real" in m.group("adj").lower() or m.group("of") is not None
    elif (m := _ASKS_VERTEX.search(question)) is not None:
        what, named, real = "vertex", m.group("coord") or m.group("of") or "", False
    else:
        return None
    prose = _prose(question, _spans(question))
    if len(_OTHER_ASK.findall(prose)) != (what != "vertex") or _KEEPS_SOME.search(prose[: m.start()] + prose[m.end() :]):
        return None
    return what, named, real


def _prose(question: str, spans) -> str:
    """``question`` with every math span blanked (the words around the formulas)."""
    out, pos = [], 0
    for a, b in spans:
        out += [question[pos:a], " " * (b - a)]
        pos = b
    out.append(question[pos:])
    return "".join(out)


def _degree(node, letter: str) -> int | None:
    """An upper bound of the degree of ``node`` in ``letter``, or None when a power is not a
    small whole number (``x^{2001}``, ``2^x``): nothing that large is expanded."""
    op = node[0]
    if op == "n" or (op == "v" and node[1] != letter):
        return 0
    if op == "v":
        return 1
    if op == "neg":
        return _degree(node[1], letter)
    if op in "+-*/":
        a, b = _degree(node[1], letter), _degree(node[2], letter)
        if a is None or b is None or (op == "/" and b):
            return None  # the letter in a denominator: no polynomial
        return a + b if op == "*" else a
    if op == "^":
        a, e = _degree(node[1], letter), node[2]
        if a is None or e[0] != "n" or e[1].denominator != 1 or not 0 <= e[1] <= MAX_POWER:
            return None if a != 0 or _degree(e, letter) != 0 else 0
        return a * int(e[1])
    return None if op in ("!", "C", "sqrt") and any(_degree(c, letter) for c in node[1:]) else 0


def _polynomial(stmt: list[tuple[str, str]]) -> tuple[object, str] | None:
    """The tree whose zeros the statement is about and the function's name ("" when it
    defines none): ``L = R`` gives ``L - R``; ``f(x) = R`` and ``y = R`` (a name on the left
    that R does not use) give ``R``; an expression is itself."""
    sides = split_sides(stmt)
    if len(sides) == 1:
        return read_side(sides[0]), "?"
    if len(sides) != 2 or [t for t in stmt if t[0] == "rel"] != [("rel", "=")]:
        return None
    left, right = sides
    named = (len(left) == 1 and left[0][0] == "let") or (
        len(left) == 4 and left[0][0] == "let" and left[1] == ("op", "(") and left[2][0] == "let" and left[3] == ("op", ")"))
    if named and left[0] not in right:
        return read_side(right), left[0][1]
    return ("-", read_side(left), read_side(right)), ""


def _read_statement(question: str, a: int, b: int, ps, literal: str):
    """(the statements of span ``a:b`` with the variable at ``ps``, what :func:`_polynomial`
    reads from the one statement that holds it, that statement), or None when none or several
    hold it or it does not read."""
    try:
        stmts = split_statements(_marked(question, a, b, tuple(ps), literal))
        mine = [st for st in stmts if any(t[0] == "var" for t in st)]
        if len(mine) != 1:
            return None
        read = _polynomial(mine[0])
    except (LatexError, RecursionError):
        return None
    return None if read is None else (stmts, read, mine[0])


def _polynomial_fixes_answer(question: str, spans, held: dict[tuple[int, int], list[int]], literal: str,
                             v2: Fraction) -> bool:
    """Whether the question asks Vieta's sum or product, or the vertex, of a polynomial in one
    letter that the variable is a coefficient of, and that quantity is free of the variable
    (proved in sympy). Roots must be distinct at v2 (and real, when real ones are asked), so
    the sum or product of the values the problem means stays the same around v2. Anything
    else the question says of the roots or the letter (``x > 2``, "greater than 2", "the
    difference between the sum ... and the product", ``f(x+1)``) leaves it undecided."""
    asked = _asked_of_polynomial(question)
    if asked is None or len(held) != 1:
        return False
    what, named, real = asked
    (a, b), ps = next(iter(held.items()))
    read = _read_statement(question, a, b, ps, literal)
    if read is None or tree_size(read[1][0]) > MAX_PROOF:
        return False
    stmts, (node, name), own = read
    letters = letters_in(node, set()) - {VAR}
    if len(letters) != 1 or (named and letters != {named}) or (what == "vertex" and not name):
        return False
    letter = next(iter(letters))
    if letter.startswith("\\") or _degree(node, letter) is None:
        return False  # \pi; a power too large or not whole
    word = re.compile(rf"(?<![A-Za-z\\]){letter}(?![A-Za-z])")
    if any(word.search(" ".join(v for _, v in st)) for st in stmts if st is not own):
        return False  # another statement about the letter in the same span ("x^2 = 16, x > 0")
    if any(_REL_TEXT.search(question, s, e) and word.search(question, s, e) for s, e in spans if (s, e) != (a, b)):
        return False  # a condition on the letter elsewhere may drop roots
    if name not in ("", "?") and len(re.findall(rf"(?<![A-Za-z\\]){name}\s*\(", question)) > 1:
        return False  # the function is used again, perhaps at another argument (f(x+1))
    y, t = sympy.Symbol("Y"), sympy.Symbol("t")
    try:
        num, den = sympy.fraction(sympy.together(to_sympy(node, {letter: t, VAR: y})))
        if den.has(t):
            return False
        poly = sympy.Poly(sympy.expand(num), t)
        n = poly.degree()
        if n < 2 or (what == "vertex" and n != 2):
            return False
        cs = poly.all_coeffs()
        at = sympy.Rational(v2.numerator, v2.denominator)
        p0 = sympy.Poly([c.subs(y, at) for c in cs], t)
        if not (p0.domain.is_ZZ or p0.domain.is_QQ):
            return False  # irrational coefficients: no exact root count here
        if cs[0].subs(y, at) == 0 or sympy.degree(sympy.gcd(p0, p0.diff(t)), t) > 0:
            return False  # the degree drops, or a root is repeated, at v2
        if real and p0.count_roots() != n:
            return False  # real values are asked, and not every root is real at v2
        q = {"sum": -cs[1] / cs[0], "product": (-1) ** n * cs[-1] / cs[0], "vertex": -cs[1] / (2 * cs[0])}[what]
        return not sympy.cancel(q).has(y)
    except Exception:  # noqa: BLE001 - any failure of the proof (sympy's own errors included) decides nothing
        return False


# -- what the question asks of a rational function's asymptotes ------------------------------
# "At what value of $x$ is there a vertical asymptote of $y = \frac{x^2+Yx+8}{x-4}$?" is 4 for
# every Y (and the asymptotes of \frac{x^2-4x+Y}{x^2-4x+4} meet at (2, 1) whatever Y
# is). The vertical asymptotes are the roots of the denominator the numerator does
# not share; the horizontal or slant one is the polynomial part of the quotient. Read only where
# the question asks about asymptotes and nothing else of the function.
# each mention of an asymptote, with the kind named right before it ("the vertical asymptote");
# a mention without a kind asks about all of them
_ASYMPTOTE_MENTION = re.compile(r"(?:\b(?P<kind>vertical|horizontal|slant|oblique)\s+)?\basymptot", re.I)
# other math of the question may only name letters ("$x$", "$y = a$", "$y = mx + b$", "$\infty$"):
# a number, a function applied or a command there may ask something else of the function
_NAMES_ONLY = re.compile(r"\s*(?:[A-Za-z]|\\infty|\\pm|[-+=,.\s])*\s*")
# every word the question may use around its formulas: what it asks must be the asymptotes
# themselves (where they are, their equations, slopes, kind, count, where they meet). A list of
# words to refuse is not enough: "the product of the distances from a point on the hyperbola
# to its asymptotes", "the area of the triangle the asymptotes and the directrix form", "its
# eccentricity" each move with the constant term
_ASYMPTOTE_WORDS = frozenset("""
    a an the this that it its there is are be will would does do has have given by of in at as on for if or and
    what which where how many find compute determine enter write state your answer form value values
    x y m b equation equations expression rational function graph hyperbola curve line lines
    approached approaches positive negative asymptote asymptotes vertical horizontal slant oblique
""".split())
_WORD = re.compile(r"[A-Za-z]+")
_MAX_RATIONAL = 160  # tree nodes of a rational function read (polynomial division and a gcd: fast)
_MEETING = re.compile(r"\b(?:the\s+)?(?:point\s+of\s+)?intersection\s+of\s+(?:the\s+)?(?:two\s+)?asymptotes\b"
                      r"(?!\s+(?:with|and)\b)", re.I)  # where they meet each other, not the graph


def _asymptotes_fix_answer(question: str, spans, held: dict[tuple[int, int], list[int]], literal: str,
                           v2: Fraction) -> bool:
    """Whether the question asks about the asymptotes of a rational function of one letter
    that the variable is a coefficient of (and nothing else of it), and those asymptotes are
    the same for every value of the variable near v2 (proved in sympy):

    * vertical ones: the denominator does not hold the variable, and at v2 the numerator
      shares no root with it (so no asymptote turns into a hole there);
    * horizontal or slant ones: the polynomial part of numerator / denominator is free of the
      variable, with both leading coefficients nonzero at v2 (the degrees stay).

    "asymptotes" with no kind named asks for all of them (their intersection point)."""
    prose = _MEETING.sub(" asymptotes ", _prose(question, spans))  # where they meet is theirs alone
    mentions = list(_ASYMPTOTE_MENTION.finditer(prose))
    if len(held) != 1 or not mentions or any(w.lower() not in _ASYMPTOTE_WORDS for w in _WORD.findall(prose)):
        return False  # a word that may ask something else of the curve ("point", "distance", "area", "hole")
    (a, b), ps = next(iter(held.items()))
    if any(not _NAMES_ONLY.fullmatch(question, s, e) for s, e in spans if (s, e) != (a, b)):
        return False  # "$g(x) = \frac{1}{f(x)}$", "at $x = 0$": other math about the function
    kinds = set()
    for m in mentions:
        kind = (m.group("kind") or "").lower().replace("oblique", "slant")
        kinds |= {kind} if kind else {"vertical", "slant"}
    got = _read_statement(question, a, b, ps, literal)
    if got is None or len(got[0]) != 1 or tree_size(got[1][0]) > _MAX_RATIONAL:
        return False
    read = got[1]
    if read[1] == "":  # an equation: a hyperbola's, or nothing this reads
        return _conic_constant_term(read[0], v2)
    node = read[0]
    letters = letters_in(node, set()) - {VAR}
    if len(letters) != 1 or next(iter(letters)).startswith("\\"):
        return False
    y, t = sympy.Symbol("Y"), sympy.Symbol("t")
    try:
        num, den = sympy.fraction(sympy.together(to_sympy(node, {next(iter(letters)): t, VAR: y})))
        if not den.has(t) or not (num.is_polynomial(t, y) and den.is_polynomial(t, y)):
            return False
        at = sympy.Rational(v2.numerator, v2.denominator)
        pn, pd = sympy.Poly(sympy.expand(num), t), sympy.Poly(sympy.expand(den), t)
        if pn.LC().subs(y, at) == 0 or pd.LC().subs(y, at) == 0:
            return False  # a degree drops at v2
        if "vertical" in kinds:
            n0 = sympy.Poly(pn.as_expr().subs(y, at), t)
            if pd.as_expr().has(y) or sympy.degree(sympy.gcd(n0, pd), t) > 0:
                return False
        if kinds & {"horizontal", "slant"}:
            if pn.degree() > pd.degree() + 1:
                return False  # no horizontal or slant asymptote at all
            quotient = sympy.div(pn.as_expr(), pd.as_expr(), t)[0]
            if sympy.cancel(quotient).has(y):
                return False
        return True
    except Exception:  # noqa: BLE001 - any failure of the proof (sympy's own errors included) decides nothing
        return False


def _conic_constant_term(node, v2: Fraction) -> bool:
    """Whether ``node`` (left side minus right side of an equation in x and y) is a hyperbola
    whose constant term alone holds the variable: its asymptotes are the lines through its
    centre along the directions of its quadratic part, and neither uses the constant term
    ("$\\frac{x^2}{100} - \\frac{y^2}{64} = Y$" has the asymptotes $y = \\pm \\frac45 x$ for every
    Y but the one that makes it the pair of lines itself, which v2 must not be)."""
    if letters_in(node, set()) - {VAR} != {"x", "y"}:
        return False
    x, y, v = sympy.Symbol("x"), sympy.Symbol("y"), sympy.Symbol("Y")
    try:
        expr = sympy.expand(to_sympy(node, {"x": x, "y": y, VAR: v}))
        if not expr.is_polynomial(x, y, v):
            return False
        poly = sympy.Poly(expr, x, y)
        if poly.total_degree() != 2:
            return False
        coeff = {m: poly.coeff_monomial(x ** m[0] * y ** m[1]) for m in
                 ((2, 0), (1, 1), (0, 2), (1, 0), (0, 1), (0, 0))}
        if any(c.has(v) for m, c in coeff.items() if m != (0, 0)):
            return False  # the variable outside the constant term moves the asymptotes
        a, b, c, d, e, f = (coeff[m] for m in ((2, 0), (1, 1), (0, 2), (1, 0), (0, 1), (0, 0)))
        if not b ** 2 - 4 * a * c > 0:
            return False  # an ellipse or a parabola: no asymptotes
        at = sympy.Rational(v2.numerator, v2.denominator)
        conic = sympy.Matrix([[a, b / 2, d / 2], [b / 2, c, e / 2], [d / 2, e / 2, f.subs(v, at)]])
        return conic.det() != 0  # at v2 a hyperbola, not its pair of asymptotes
    except Exception:  # noqa: BLE001 - any failure of the proof decides nothing
        return False


@lru_cache(maxsize=1 << 16)
def decide(question: str, places: tuple[int, ...], literal: str) -> Dependence:
    """Whether the answer of ``question`` depends on the literal at ``places`` (the offsets
    one variable replaced; ``literal`` the text it replaced).

    >>> decide("Simplify $3t+5-6t+7t-5$.", (13, 21), "5")
    'independent'
    >>> decide("Compute $\\\\dbinom{8}{8}$.", (17, 20), "8")
    'independent'
    >>> decide("Compute $\\\\frac{9}{4} + 2$.", (15,), "9")
    'dependent'
    >>> decide("A box holds $12$ eggs. How many boxes hold 60 eggs?", (13,), "12")
    'unknown'
    """
    if not places:
        return "unknown"
    spans = _spans(question)
    held: dict[tuple[int, int], list[int]] = {}
    for p in places:
        span = next(((a, b) for a, b in spans if a <= p < b), None)
        if span is None:
            return "unknown"  # in prose: its meaning is not arithmetic this module reads
        held.setdefault(span, []).append(p)
    out = _decide_held(question, spans, held, literal)
    if out == "unknown" and len(held) == 1 and (v2 := constant_value(literal)) is not None \
            and (_polynomial_fixes_answer(question, spans, held, literal, v2)
                 or _asymptotes_fix_answer(question, spans, held, literal, v2)):
        return "independent"  # Vieta's sum or product, the vertex, or the asymptotes are free of it
    return out


def _decide_held(question: str, spans, held: dict[tuple[int, int], list[int]], literal: str) -> Dependence:
    """:func:`decide` for the places ``held``, grouped by the math span they lie in: the
    variable cancels (or sits in a degenerate form), or a "Compute $E$." problem's E changes
    with it."""
    # one occurrence can only vanish in a degenerate form (0 \cdot Y, \binom{Y}{0}, 1^Y)
    independent = all(len(ps) > 1 or _DEGENERATE.search(question, a, b) for (a, b), ps in held.items())
    asked = _asked_span(question, spans) if set(held) == {spans[0]} else None
    if not independent and asked is None:
        return "unknown"
    v2 = constant_value(literal)
    if v2 is None:
        return "unknown"
    if independent and _independent(question, held, literal, v2):
        return "independent"
    if asked is None or set(held) != {asked[0]}:
        return "unknown"
    (a, b), letters_ok = asked
    try:
        stmts = split_statements(_marked(question, a, b, tuple(held[(a, b)]), literal))
        if len(stmts) != 1 or any(t[0] == "rel" for t in stmts[0]):
            return "unknown"
        node = read_side(stmts[0])
    except (LatexError, RecursionError):
        return "unknown"
    if not letters_ok and letters_in(node, set()) - {VAR, "\\pi"}:
        return "unknown"
    return "dependent" if constant_in_var(node, v2) is False else "unknown"
