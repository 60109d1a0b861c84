"""Check 5's reading of a statement the variable stands in
(:mod:`composition_rl.spc.dependence`): TeX tokens read into a tree with the variable as
the letter :data:`VAR`, evaluated exactly at test points (``Fraction``, bounded) and in sympy
for the proofs; whether a tree is constant in the variable, or an equation keeps its
solutions for every value of it. Only exact arithmetic and sympy; nothing is executed."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import sympy

from composition_rl.values.latex import Domain, LatexError, evaluate, ops, read, tokenize

__all__ = ["MAX_POWER", "MAX_PROOF", "OTHER_POINTS", "VAR", "constant_in_var", "domain_moves", "letters_in", "lex",
           "read_side", "same_zero_set", "simplest", "split_sides", "split_statements", "to_sympy", "tree_size",
           "value_at"]

VAR = "\uE000"  # stands for the variable inside a parsed span (no TeX source holds it)


def lex(text: str) -> list[tuple[str, str]]:
    """The TeX tokens of ``text``, a letter read as a letter token rather than refused."""
    return tokenize(text, letters=True)


def read_side(toks: list[tuple[str, str]]):
    """The tree of one side of a statement; a letter before a bracket (``f(x)``: a function
    applied, or a product) and a root with an index are not decided here."""
    node = read(toks, letters=True)
    if ops(node) & {"call", "root"}:
        raise LatexError("a function applied, or a root with an index")
    return node


MAX_POWER = 64  # no exponent above it is evaluated (value_at) or expanded (_degree)


class _AtPoint(Domain):
    """Exact values with every letter at a test point (``Fraction``); powers, factorials,
    binomials and roots bounded, an irrational root undecided."""

    def __init__(self, env: dict[str, Fraction]) -> None:
        self.env = env

    def name(self, name: str) -> Fraction:
        return self.env[name]

    def power(self, a: Fraction, b: Fraction) -> Fraction:
        if b.denominator != 1 or abs(b) > MAX_POWER or (a == 0 and b < 0) or abs(a.numerator) > 10**12:
            raise LatexError("power")
        return a ** int(b)

    def factorial(self, a: Fraction) -> Fraction:
        if a.denominator != 1 or not 0 <= a <= 60:
            raise LatexError("factorial")
        return Fraction(math.factorial(int(a)))

    def binomial(self, n: Fraction, k: Fraction) -> Fraction:
        if n.denominator != 1 or k.denominator != 1 or n < 0 or not 0 <= k or n > 10**4:
            raise LatexError("binomial")
        return Fraction(math.comb(int(n), int(k)))


class _Symbolic(Domain):
    """sympy values with the letters as the given symbols, for the proofs."""

    def __init__(self, names: dict[str, sympy.Symbol]) -> None:
        self.names = names

    def number(self, q: Fraction) -> sympy.Rational:
        return sympy.Rational(q.numerator, q.denominator)

    def name(self, name: str) -> sympy.Expr:
        return self.names[name]

    def divide(self, a, b):
        return a / b

    def power(self, a, b):
        return a**b

    def root(self, a, index: int):
        return sympy.sqrt(a)

    def factorial(self, a):
        return sympy.factorial(a)

    def binomial(self, n, k):
        return sympy.binomial(n, k)


def value_at(node, env: dict[str, Fraction]) -> Fraction:
    """The exact value of ``node`` with each letter at its value in ``env`` (bounded powers,
    factorials and binomials; an irrational root or out-of-bound operation raises
    :class:`LatexError`, a letter missing from ``env`` ``KeyError``)."""
    return evaluate(node, _AtPoint(env))


def to_sympy(node, names: dict[str, sympy.Symbol]) -> sympy.Expr:
    """``node`` as a sympy expression, each letter the symbol ``names`` maps it to (unbounded:
    only for trees :func:`tree_size` keeps small)."""
    return evaluate(node, _Symbolic(names))


MAX_PROOF = 40  # tree nodes sympy is given to prove (a long sum of fractions takes it seconds)


def tree_size(node) -> int:
    """How many nodes the tree has (leaves included); compared with :data:`MAX_PROOF`."""
    return 1 if node[0] in ("n", "v") else 1 + sum(tree_size(c) for c in node[1:])


def simplest(expr: sympy.Expr) -> sympy.Expr:
    """``expr`` simplified: ``cancel`` for a rational function (fast), ``simplify`` when a
    binomial, factorial or root is in it."""
    if expr.has(sympy.binomial, sympy.factorial, sympy.Pow) and not expr.is_rational_function():
        return sympy.simplify(expr)
    return sympy.cancel(expr)


def letters_in(node, out: set[str]) -> set[str]:
    """The letters (names) the tree uses, added to ``out``, which is returned."""
    if node[0] == "v":
        out.add(node[1])
    elif node[0] != "n":
        for child in node[1:]:
            letters_in(child, out)
    return out


# test points: the variable at v2 and two other values; other letters at two assignments
OTHER_POINTS = (Fraction(7, 3), Fraction(-5, 11))


def domain_moves(node) -> bool:
    """Whether a denominator holds the variable and another letter: where it vanishes then
    moves with the variable, so a quotient that cancels (``\\frac{x^2 - Yx^3}{1 - Yx}``) still
    excludes other points for other values, and equal values prove nothing."""
    # a quotient's denominator, or the base of a negative power ((x + Yx^2)^{-1})
    den_node = node[2] if node[0] == "/" else node[1] if (
        node[0] == "^" and (node[2][0] == "neg" or (node[2][0] == "n" and node[2][1] < 0))) else None
    if den_node is not None:
        den = letters_in(den_node, set())
        if VAR in den and len(den) > 1:
            # the zeros of the denominator: a factor in both the variable and a letter moves
            # them (1 - Yx); one in the variable alone (Y x^{-3}) does not
            y = sympy.Symbol("Y")
            names = {name: sympy.Symbol(f"s{i}") for i, name in enumerate(sorted(den - {VAR}))} | {VAR: y}
            try:
                num = sympy.fraction(sympy.together(to_sympy(den_node, names)))[0]
                if any(y in f.free_symbols and len(f.free_symbols) > 1 for f, _ in sympy.factor_list(num)[1]):
                    return True
            except (LatexError, TypeError, ValueError, sympy.PolynomialError):
                return True
    return any(isinstance(c, tuple) and domain_moves(c) for c in node[1:])


def constant_in_var(node, v2: Fraction) -> bool | None:
    """True when ``node`` is proved constant in the variable, False when it is not, None when
    it cannot be evaluated exactly (or the points it is defined at move with the variable)."""
    letters = sorted(letters_in(node, set()) - {VAR})
    points = [v2, v2 + 1, v2 + 2]
    try:
        for base in OTHER_POINTS:
            env = {name: base + i for i, name in enumerate(letters)}
            vals = []
            for p in points:
                env[VAR] = p
                vals.append(value_at(node, env))
            if len(set(vals)) > 1:
                return False
            if not letters:
                break
    except (LatexError, ZeroDivisionError, OverflowError, ValueError):
        return None
    # equal at every test point: prove it (a polynomial may meet one value three times)
    if tree_size(node) > MAX_PROOF or (letters and domain_moves(node)):
        return None
    integer = v2.denominator == 1 and v2 >= 0
    y = sympy.Symbol("Y", integer=True, nonnegative=True) if integer else sympy.Symbol("Y")
    names = {name: sympy.Symbol(f"s{i}") for i, name in enumerate(letters)} | {VAR: y}
    try:
        expr = to_sympy(node, names)
        return simplest(sympy.diff(expr, y)) == 0
    except (LatexError, TypeError, ValueError):
        return None


def same_zero_set(node, v2: Fraction) -> bool:
    """Whether the equation ``node = 0`` has the same solutions for every value of the
    variable: ``node`` is the variable's part times a part free of it (``\\frac{Y}{j} +
    \\frac{Y}{k} - \\frac{Y}{3}``), tested at exact points and proved with sympy."""
    letters = sorted(letters_in(node, set()) - {VAR})
    if not letters or domain_moves(node):
        return False  # (the points excluded from the equation move with the variable)
    try:
        ratios = set()
        for base in (*OTHER_POINTS, Fraction(13, 7)):
            env = {name: base + i for i, name in enumerate(letters)}
            env[VAR] = v2
            f0 = value_at(node, env)
            if f0 == 0:
                return False
            for t in (1, 2):
                env[VAR] = v2 + t
                ratios.add((t, value_at(node, env) / f0))
        if len(ratios) != 2 or any(r == 0 for _, r in ratios):
            return False
    except (LatexError, ZeroDivisionError, OverflowError, ValueError):
        return False
    if tree_size(node) > MAX_PROOF:
        return False
    y = sympy.Symbol("Y")
    names = {name: sympy.Symbol(f"s{i}") for i, name in enumerate(letters)} | {VAR: y}
    try:
        expr = to_sympy(node, names)
        ratio = simplest(expr / expr.subs(y, sympy.Rational(v2.numerator, v2.denominator)))
    except (LatexError, TypeError, ValueError, ZeroDivisionError):
        return False
    return not (ratio.free_symbols - {y})


_END_STOP = re.compile(r"\s*\.\s*$")


def split_statements(span: str) -> list[list[tuple[str, str]]]:
    """A span's top-level statements (split at commas, semicolons and ``\\text{and}``), as tokens."""
    span = re.sub(r"\\(?:text|mbox|mathrm)\s*\{\s*(?:and|or|if|for|where)\s*\}", ";", span)
    # the sentence's full stop written inside display math: "\[3x^3 - 20x + 27 = 0.\]"
    span = _END_STOP.sub("", span)
    toks = lex(span)
    out, cur, depth = [], [], 0
    for tok in toks:
        if tok[0] == "op" and tok[1] in "([{":
            depth += 1
        elif tok[0] == "op" and tok[1] in ")]}":
            depth -= 1
        if depth == 0 and tok[0] == "op" and tok[1] in ",;":
            out.append(cur)
            cur = []
            continue
        cur.append(tok)
    out.append(cur)
    return [s for s in out if s]


def split_sides(stmt: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """A statement's tokens cut at each relation (``=``, ``<``, ...): the sides, relations left
    out."""
    sides, cur = [], []
    for tok in stmt:
        if tok[0] == "rel":
            sides.append(cur)
            cur = []
        else:
            cur.append(tok)
    sides.append(cur)
    return sides
