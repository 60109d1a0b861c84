"""Exact numbers out of answers, and the constants in a problem's text that may become a variable.

Two jobs, both exact (sympy, never floats):

* :func:`parse_answer_value` reads v1 from an answer such as ``\\frac47``, ``64,\\!328``,
  ``-\\dfrac{5}{3}``, ``7\\sqrt{2}``, ``14\\pi``, ``\\$3.50``, ``30^\\circ``, ``8.7 \\times 10^{8}``.
  Tuples, intervals, matrices, expressions with letters and text return ``None``: such a
  problem cannot be q1 (seed 000, Section 3.4, sub-step 1 needs a number), but it can still be
  the last problem, whose answer passes through unchanged.
* :func:`find_constants` lists the literals in a question that may be replaced by a variable
  (sub-step 2), skipping figure/code blocks, numbers glued to letters, subscripts and label
  indices, years, digit concatenations and parts of larger numbers, and ranks them.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import sympy

__all__ = [
    "AnswerValue",
    "Constant",
    "find_constants",
    "parse_answer_value",
    "parse_number",
    "render_latex",
    "render_offset",
    "irrational_parts",
    "render_fraction",
    "split_rational",
    "exact_value",
    "exact_equal",
    "in_math",
    "exact_sub",
    "exact_positive",
    "Lin",
    "symbols_used",
    "FLAWS",
    "MATH_ENVIRONMENTS",
]

# --------------------------------------------------------------------------------------------
# Parsing exact values
# --------------------------------------------------------------------------------------------

_MAX_EXPONENT = 64  # 2^64 is fine, 10^{10^{10}} is not: refuse rather than hang
_MAX_DIGITS = 80

_TOKEN = re.compile(
    r"""
    (?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\.\d+)
  | (?P<cmd>\\[a-zA-Z]+)
  | (?P<op>[-+*/^(){}\[\]])
  | (?P<ws>\s+)
    """,
    re.VERBOSE,
)
_SPACING = re.compile(r"\\[,!;: ]|\\quad|\\qquad|~")
_THOUSANDS = re.compile(r"(?<![\d.])(\d{1,3})((?:,\d{3})+)(?![\d])")


class _ParseError(ValueError):
    pass


class _SympyDomain:
    """Numbers for :class:`_Parser` as sympy objects (general, slower)."""

    @staticmethod
    def integer(n: int):
        return sympy.Integer(n)

    @staticmethod
    def rational(s: str):
        return sympy.Rational(s)

    pi = sympy.pi

    @staticmethod
    def root(x, n: int):
        return sympy.sqrt(x) if n == 2 else sympy.root(x, n)

    @staticmethod
    def is_small_int(e) -> bool:
        return bool(e.is_Integer and abs(int(e)) <= _MAX_EXPONENT)


class NotLinear(ArithmeticError):
    """The value leaves Q-linear combinations of 1, square roots and pi (use sympy)."""


def _squarefree(n: int) -> tuple[int, int]:
    """``n = outside**2 * inside`` with ``inside`` square-free (n > 0, bounded)."""
    if n > 10**12:
        raise NotLinear("radicand too large")
    outside, inside, f = 1, n, 2
    while f * f <= inside:
        while inside % (f * f) == 0:
            inside //= f * f
            outside *= f
        f += 1
    return outside, inside


class Lin:
    """An exact number ``sum(c_a * a)`` over the atoms 1, sqrt(n) (n square-free) and pi, with
    rational coefficients. These atoms are linearly independent over Q, so equal canonical
    forms mean equal numbers: exact comparisons at Fraction speed for answers such as
    ``7\\sqrt{2} - 3`` or ``14\\pi``. Anything else raises :class:`NotLinear`."""

    __slots__ = ("terms",)

    def __init__(self, terms: dict) -> None:
        self.terms = {k: v for k, v in terms.items() if v != 0}

    @classmethod
    def of(cls, q) -> Lin:
        return cls({1: Fraction(q)})

    def rational(self) -> Fraction | None:
        t = self.terms
        if not t:
            return Fraction(0)
        return t[1] if len(t) == 1 and 1 in t else None

    def __add__(self, o: Lin) -> Lin:
        t = dict(self.terms)
        for k, v in o.terms.items():
            t[k] = t.get(k, 0) + v
        return Lin(t)

    def __neg__(self) -> Lin:
        return Lin({k: -v for k, v in self.terms.items()})

    def __sub__(self, o: Lin) -> Lin:
        t = dict(self.terms)
        for k, v in o.terms.items():
            t[k] = t.get(k, 0) - v
        return Lin(t)

    def __mul__(self, o: Lin) -> Lin:
        a, b = self.rational(), o.rational()
        if a is not None:
            return Lin({k: a * v for k, v in o.terms.items()})
        if b is not None:
            return o * self
        if len(self.terms) == 1 and len(o.terms) == 1:
            (ka, va), (kb, vb) = next(iter(self.terms.items())), next(iter(o.terms.items()))
            if isinstance(ka, int) and isinstance(kb, int):  # sqrt(m) * sqrt(n)
                out, ins = _squarefree(ka * kb)
                return Lin({(1 if ins == 1 else ins): va * vb * out})
        raise NotLinear("product of irrationals")

    def __truediv__(self, o: Lin) -> Lin:
        b = o.rational()
        if b is None:
            if len(o.terms) == 1:
                (k, v), = o.terms.items()
                if isinstance(k, int):  # x / (v sqrt(k)) = x sqrt(k) / (v k)
                    return self * Lin({k: 1 / (v * k)})
            raise NotLinear("division by an irrational")
        if b == 0:
            raise ZeroDivisionError
        return Lin({k: v / b for k, v in self.terms.items()})

    def __pow__(self, e: int) -> Lin:
        a = self.rational()
        if a is not None:
            if a == 0 and e < 0:
                raise ZeroDivisionError
            return Lin.of(a**e)
        if e == 2 and len(self.terms) == 1:
            (k, v), = self.terms.items()
            if isinstance(k, int):
                return Lin.of(v * v * k)
        raise NotLinear("power of an irrational")

    def __eq__(self, o: object) -> bool:
        if isinstance(o, (int, Fraction)):
            o = Lin.of(o)
        return isinstance(o, Lin) and self.terms == o.terms

    def __hash__(self) -> int:
        return hash(frozenset(self.terms.items()))

    def __float__(self) -> float:
        import math

        return sum(float(v) * (1.0 if k == 1 else math.pi if k == "pi" else math.sqrt(k)) for k, v in self.terms.items())

    def __int__(self) -> int:
        a = self.rational()
        if a is None or a.denominator != 1:
            raise NotLinear("not an integer")
        return int(a)

    def sign(self) -> int:
        """-1, 0 or 1, exactly for rationals; for irrationals the float is far from 0 in practice,
        and sympy decides when it is not."""
        a = self.rational()
        if a is not None:
            return (a > 0) - (a < 0)
        f = float(self)
        if abs(f) > 1e-6:
            return 1 if f > 0 else -1
        return 1 if self.to_sympy().is_positive else -1

    def to_sympy(self) -> sympy.Expr:
        out = sympy.Integer(0)
        for k, v in self.terms.items():
            c = sympy.Rational(v.numerator, v.denominator)
            out += c if k == 1 else c * (sympy.pi if k == "pi" else sympy.sqrt(k))
        return out


class _LinDomain:
    """Numbers for :class:`_Parser` as :class:`Lin` (fast, exact, limited)."""

    @staticmethod
    def integer(n: int) -> Lin:
        return Lin.of(n)

    @staticmethod
    def rational(s: str) -> Lin:
        return Lin.of(Fraction(int(s)) if s.isdigit() else Fraction(s))

    pi = Lin({"pi": Fraction(1)})

    @staticmethod
    def root(x: Lin, n: int) -> Lin:
        a = x.rational()
        if n != 2 or a is None or a < 0:
            raise NotLinear("only square roots of non-negative rationals")
        p, q = a.numerator * a.denominator, a.denominator  # sqrt(p/q) = sqrt(p*q)/q
        out, ins = _squarefree(p)
        return Lin.of(Fraction(out, q)) if ins == 1 else Lin({ins: Fraction(out, q)})

    @staticmethod
    def is_small_int(e: Lin) -> bool:
        a = e.rational()
        return a is not None and a.denominator == 1 and abs(a) <= _MAX_EXPONENT


class _Parser:
    """Recursive descent over a tiny LaTeX arithmetic grammar; anything else is rejected."""

    def __init__(self, text: str, domain=_SympyDomain) -> None:
        self.D = domain
        self.toks: list[tuple[str, str]] = []
        pos = 0
        for m in _TOKEN.finditer(text):
            if m.start() != pos:  # finditer skipped a character no token matches
                break
            pos = m.end()
            kind = m.lastgroup
            if kind != "ws":
                self.toks.append((kind, m.group()))
        if pos < len(text):
            raise _ParseError(f"unexpected {text[pos]!r}")
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        t = self.peek()
        if t is None or (value is not None and t[1] != value):
            raise _ParseError(f"expected {value!r}, got {t!r}")
        self.i += 1
        return t

    def parse(self) -> sympy.Expr:
        v = self.expr()
        if self.peek() is not None:
            raise _ParseError(f"trailing {self.peek()!r}")
        return v

    def expr(self) -> sympy.Expr:
        v = self.term()
        while (t := self.peek()) and t[1] in "+-":
            self.take()
            w = self.term()
            v = v + w if t[1] == "+" else v - w
        return v

    def _starts_factor(self, t: tuple[str, str] | None) -> bool:
        if t is None:
            return False
        kind, s = t
        return s in ("(", "{") or (kind == "cmd" and s in _FACTOR_CMDS)

    def term(self) -> sympy.Expr:
        v = self.unary()
        while True:
            t = self.peek()
            if t is None:
                return v
            kind, s = t
            if s in ("*", "/") or (kind == "cmd" and s in ("\\cdot", "\\times", "\\div")):
                self.take()
                w = self.unary()
                if s in ("/", "\\div"):
                    if w == 0:
                        raise _ParseError("division by zero")
                    v = v / w
                else:
                    v = v * w
            elif self._starts_factor(t):  # implicit product: 7\sqrt{2}, 14\pi, 2(3)
                v = v * self.power()
            else:
                return v

    def unary(self) -> sympy.Expr:
        t = self.peek()
        if t and t[1] in "+-":
            self.take()
            v = self.unary()
            return -v if t[1] == "-" else v
        return self.power()

    def power(self) -> sympy.Expr:
        base = self.atom()
        t = self.peek()
        if t and t[1] == "^":
            self.take()
            nt = self.peek()
            if nt and nt[0] == "num" and len(nt[1]) > 1 and nt[1].isdigit():
                # x^23 in LaTeX means x^2 followed by 3: only the first digit is the exponent
                raise _ParseError("ambiguous exponent")
            e = self.atom() if not (nt and nt[1] in "+-") else self.unary()
            if not self.D.is_small_int(e):
                raise _ParseError("exponent not a small integer")
            if base == 0 and int(e) < 0:
                raise _ParseError("zero to a negative power")
            return base ** int(e)
        return base

    def group(self) -> sympy.Expr:
        """A ``{...}`` argument, or (LaTeX shorthand) a single digit or command."""
        t = self.peek()
        if t is None:
            raise _ParseError("missing argument")
        if t[1] == "{":
            self.take("{")
            v = self.expr()
            self.take("}")
            return v
        if t[0] == "num":
            # \frac47 -> digits 4 and 7; the number token may hold both
            self.take()
            digits = t[1]
            if not digits.isdigit():
                raise _ParseError("shorthand argument")
            if len(digits) > 1:
                self.toks.insert(self.i, ("num", digits[1:]))
            return self.D.integer(int(digits[0]))
        if t[0] == "cmd" and t[1] == "\\pi":
            self.take()
            return self.D.pi
        raise _ParseError(f"bad argument {t!r}")

    def atom(self) -> sympy.Expr:
        t = self.peek()
        if t is None:
            raise _ParseError("unexpected end")
        kind, s = t
        if kind == "num":
            self.take()
            if len(s.replace(".", "")) > _MAX_DIGITS:
                raise _ParseError("number too long")
            if "e" in s or "E" in s:
                mant, _, exp = s.lower().partition("e")
                if abs(int(exp)) > _MAX_EXPONENT:
                    raise _ParseError("exponent too large")
                return self.D.rational(mant) * self.D.integer(10) ** int(exp)
            return self.D.rational(s)
        if s in ("(", "{", "["):
            close = {"(": ")", "{": "}", "[": "]"}[s]
            self.take()
            v = self.expr()
            self.take(close)
            return v
        if kind == "cmd":
            if s in ("\\frac", "\\dfrac", "\\tfrac"):
                self.take()
                num = self.group()
                den = self.group()
                if den == 0:
                    raise _ParseError("zero denominator")
                return num / den
            if s == "\\sqrt":
                self.take()
                index = 2
                if (nt := self.peek()) and nt[1] == "[":
                    self.take("[")
                    iv = self.expr()
                    self.take("]")
                    if not (self.D.is_small_int(iv) and 2 <= int(iv) <= 10):
                        raise _ParseError("root index")
                    index = int(iv)
                arg = self.group()
                return self.D.root(arg, index)
            if s == "\\pi":
                self.take()
                return self.D.pi
        raise _ParseError(f"unexpected {s!r}")


_FACTOR_CMDS = {"\\frac", "\\dfrac", "\\tfrac", "\\sqrt", "\\pi"}


def _clean(text: str) -> str:
    s = text.strip()
    s = s.replace("\\left", "").replace("\\right", "")
    s = _SPACING.sub("", s)
    s = s.replace("{,}", ",")
    s = _THOUSANDS.sub(lambda m: m.group(1) + m.group(2).replace(",", ""), s)
    return s.strip()


_PLAIN = re.compile(r"-?(?:\d+(?:\.\d+)?|\\frac\{\d+\}\{\d+\})")  # nothing for _clean to do
_SIMPLE = re.compile(r"(-?)(\d+)(?:\.(\d+))?")
_SIMPLE_FRAC = re.compile(r"(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}")


def _fast_number(s: str) -> sympy.Rational | None:
    """The common cases (integers, decimals, plain fractions) without the parser."""
    m = _SIMPLE.fullmatch(s)
    if m is not None:
        sign, whole, frac = m.groups()
        if len(whole) + len(frac or "") > _MAX_DIGITS:
            return None
        v = sympy.Rational(int(whole + (frac or "")), 10 ** len(frac or ""))
        return -v if sign else v
    m = _SIMPLE_FRAC.fullmatch(s)
    if m is not None and int(m.group(3)) != 0:
        v = sympy.Rational(int(m.group(2)), int(m.group(3)))
        return -v if m.group(1) else v
    return None


@lru_cache(maxsize=65536)
def parse_number(text: str) -> sympy.Expr | None:
    """Exact value of a LaTeX number/arithmetic expression, or None if it is anything else.

    >>> parse_number(r"\\frac47"), parse_number("64,\\!328"), parse_number(r"7\\sqrt{2}")
    (4/7, 64328, 7*sqrt(2))
    """
    s = _clean(text)
    fast = _fast_number(s)
    if fast is not None:
        return fast
    if not s or re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+|(?<=\d)[eE](?=[+-]?\d)", "", s)):
        return None  # letters outside known commands: an expression, not a number
    try:  # Q-linear combinations of 1, square roots and pi: exact at Fraction speed
        return _Parser(s, _LinDomain).parse().to_sympy()
    except (NotLinear, _ParseError, ValueError, TypeError, ZeroDivisionError, RecursionError):
        pass  # anything else, or any doubt: the general sympy parse decides
    try:
        v = _Parser(s).parse()
    except (_ParseError, ValueError, TypeError, ZeroDivisionError, RecursionError):
        return None
    if v.is_Rational:
        return v
    if not v.is_number or v.has(sympy.zoo, sympy.nan, sympy.oo, sympy.I) or not v.is_real:
        return None
    return v


@dataclass(frozen=True)
class AnswerValue:
    """An exact number read from an answer, with the unit that was stripped ('' if none)."""

    value: sympy.Expr
    unit: str = ""


_WRAPPERS = re.compile(r"^\\(?:boxed|displaystyle|mathbf|mathrm|textbf)\s*\{(.*)\}$", re.S)
_DOLLAR = re.compile(r"^(?:\\\$|\$)\s*")
_PERCENT = re.compile(r"\s*\\?%$")
_DEGREES = re.compile(r"\s*(?:\^\s*\{?\s*\\circ\s*\}?|°|\\degree)$")
_TEXT_UNIT = re.compile(r"\s*\\(?:text|textnormal|mbox|mathrm)\s*\{\s*([A-Za-z][A-Za-z. ]{0,20}?)\s*\}$")
_VAR_PREFIX = re.compile(r"^[a-zA-Z]\s*=\s*")
_UNIT_WORDS = {"dollars", "cents", "degrees", "percent"}


@lru_cache(maxsize=65536)
def parse_answer_value(answer: str) -> AnswerValue | None:
    """Read v1 from one answer string, stripping $, %, degrees and a trailing text unit.

    Returns None for tuples, intervals, matrices, choices, expressions and text.

    >>> parse_answer_value(r"\\$3.50")
    AnswerValue(value=7/2, unit='dollars')
    """
    s = answer.strip()
    if s.startswith("$") and s.endswith("$") and len(s) > 1 and not s.startswith("\\$"):
        s = s.strip("$").strip()
    while (m := _WRAPPERS.match(s)) is not None:
        s = m.group(1).strip()
    s = _VAR_PREFIX.sub("", s)
    unit = ""
    if _DOLLAR.match(s):
        s, unit = _DOLLAR.sub("", s), "dollars"
    if _PERCENT.search(s):
        s, unit = _PERCENT.sub("", s), "percent"
    elif _DEGREES.search(s):
        s, unit = _DEGREES.sub("", s), "degrees"
    elif (m := _TEXT_UNIT.search(s)) is not None:
        word = m.group(1).strip().rstrip(".")
        s, unit = s[: m.start()], word if word else ""
        if unit == "" or unit in ("(A)", "(B)"):
            return None
    if unit in _UNIT_WORDS and _TEXT_UNIT.search(s):
        return None
    v = parse_number(s)
    if v is None:
        return None
    return AnswerValue(v, unit)


Exact = Fraction | Lin | sympy.Expr  # Fraction, then Lin (radicals, pi), then sympy


def to_fraction(v: sympy.Rational) -> Fraction:
    return Fraction(int(v.p), int(v.q))


@lru_cache(maxsize=65536)
def exact_value(text: str) -> Exact | None:
    """:func:`parse_number`, with rationals returned as ``Fraction`` for fast arithmetic."""
    s = text if _PLAIN.fullmatch(text) else _clean(text)
    f = _simple_rational(s)
    if f is not None:
        return f
    lin = _spaced_sum(s) if " " in s else None
    if lin is None:
        try:
            lin = _Parser(s, _LinDomain).parse()
        except NotLinear:
            lin = None
        except (_ParseError, ValueError, TypeError, ZeroDivisionError, RecursionError):
            return None
    if lin is not None:
        r = lin.rational()
        return r if r is not None else lin
    v = parse_number(text)
    if v is None:
        return None
    return to_fraction(v) if v.is_Rational else v


def _simple_rational(s: str) -> Fraction | None:
    """``-12``, ``3.25``, ``\\frac{7}{2}`` (cleaned) without the parser; None for anything else."""
    m = _SIMPLE.fullmatch(s)
    if m is not None and len(s) <= _MAX_DIGITS:
        sign, whole, frac = m.groups()
        f = Fraction(int(whole + (frac or "")), 10 ** len(frac or ""))
        return -f if sign else f
    m = _SIMPLE_FRAC.fullmatch(s)
    if m is not None and int(m.group(3)) != 0:
        f = Fraction(int(m.group(2)), int(m.group(3)))
        return -f if m.group(1) else f
    return None


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
    f = _simple_rational(s) if len(s) <= _MAX_DIGITS else None
    if f is not None:
        return f
    try:
        lin = _Parser(s, _LinDomain).parse()
    except (NotLinear, _ParseError, ValueError, TypeError, ZeroDivisionError, RecursionError):
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


# --------------------------------------------------------------------------------------------
# Constants in problem text
# --------------------------------------------------------------------------------------------

_BLOCKS = re.compile(
    r"\[asy\].*?(?:\[/asy\]|\Z)"
    r"|\\begin\{(asy|tabular|verbatim|lstlisting|tikzpicture|picture)\}.*?(?:\\end\{\1\}|\Z)"
    r"|```.*?(?:```|\Z)"
    r"|<code>.*?(?:</code>|\Z)"
    r"|\\(?:label|ref|eqref|url|href|includegraphics|overline|underline|underbrace|text(?:bf|it|tt)?\s*\{\s*\()\s*\{[^{}]*\}"
    r"|\\(?:overline|underline)\s*\{(?:[^{}]|\{[^{}]*\})*\}",
    re.S,
)
_NUMBER = re.compile(r"\d{1,3}(?:(?:,|\{,\}|,\\!)\d{3})+(?!\d)|\d+(?:\.\d+)?")
_LABEL_WORDS = re.compile(
    r"(?:Figure|Fig\.|Problem|Exercise|Question|Chapter|Section|Table|Example|Lemma|Theorem|Step|Part|Round|Day|Game)\s*$",
    re.I,
)
_CHOICE = re.compile(r"\\(?:text|textbf|mathrm)\s*\{\s*\(A\)|\(A\)\s*\$?\s*[-\d\\]|^\s*A\.\s", re.M)
_ARITH = set("+-*/=<>^")
_ARITH_CMDS = re.compile(r"\\(?:cdot|times|div|le|ge|leq|geq|pm|frac|dfrac|tfrac|sqrt|neq|approx)\s*\{?\s*$")
_ARITH_CMDS_AFTER = re.compile(r"^\s*\\(?:cdot|times|div|le|ge|leq|geq|pm|neq|approx)\b")


@dataclass(frozen=True)
class Constant:
    """A literal in a question that may be replaced by a variable.

    ``offset`` and ``literal`` locate it exactly in the original text; ``value`` is exact.
    ``rank`` is lower for better candidates (math mode taking part in arithmetic first).
    ``flaw`` names why the literal must not be replaced even though it is a quantity (one of
    :data:`FLAWS`), or is "" for a safe one.
    """

    offset: int
    literal: str
    value: Fraction
    math_mode: bool
    arithmetic: bool
    unique: bool
    flaw: str = ""  # why replacing it would make a poor prompt (see FLAWS); "" if none
    # the other occurrences of the same literal, (offset, math_mode), that must be replaced
    # with it (the text repeats the quantity); () when the value occurs once
    also: tuple[tuple[int, bool], ...] = ()

    @property
    def rank(self) -> tuple[int, int]:
        tier = 0 if (self.math_mode and self.arithmetic) else 1 if self.math_mode else 2
        return (tier, 0 if self.unique else 1)


_CHOICE_ANSWER = re.compile(r"\s*(?:\\text\{\s*)?\(?[A-E]\)?\s*\}?\s*")
_SUBSCRIPT_TAIL = re.compile(r"_\s*\{[^{}]*$")
_SHORTHAND_TAIL = re.compile(r"\\(?:frac|dfrac|tfrac|sqrt)$")
_CMD_TAIL = re.compile(r"\\[a-zA-Z]+\s*$")
_KNOWN_CMD_TAIL = re.compile(r"\\(?:pi|circ|cdot|times|div|left|right|quad|qquad|le|ge|leq|geq|pm|neq|approx)\s*$")
_SEPARATORS = re.compile(r"\{,\}|,\\!|,")
# Environments that are math mode wherever they stand: LaTeX needs them in math or sets
# them as display math, and MathJax (which renders MATH) treats a bare \begin{align*} in
# prose as display math. Inside them a variable is written ``Y``, never ``$Y$``.
MATH_ENVIRONMENTS = frozenset(
    "equation align alignat eqnarray gather multline flalign displaymath math cases dcases "
    "rcases matrix pmatrix bmatrix Bmatrix vmatrix Vmatrix smallmatrix array split aligned "
    "gathered alignedat subarray".split()
)
_MATH_TOKENS = re.compile(r"\\(begin|end)\s*\{([a-zA-Z]+)\*?\}|\\.|\$\$|\$", re.S)
_TEXT_IN_MATH = re.compile(r"\\(?:text|textrm|textbf|textit|textsf|texttt|textnormal|mbox|hbox)\s*\{")


def in_math(text: str, pos: int) -> bool:
    """Whether offset ``pos`` of ``text`` lies in math mode (see :func:`_math_spans`).

    >>> in_math("Let $x = 3$ and 4 apples.", 9), in_math("Let $x = 3$ and 4 apples.", 16)
    (True, False)
    """
    return any(a <= pos < b for a, b in _math_spans(text))


def _math_spans(text: str) -> list[tuple[int, int]]:
    """Spans in math mode: ``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]`` (escaped ``\\$``
    is not a delimiter) and every environment of :data:`MATH_ENVIRONMENTS` met in prose,
    ``\\begin{..}`` and its arguments included."""
    spans: list[tuple[int, int]] = []
    inside: str | None = None
    env = ""
    depth = 0
    start = 0
    for m in _MATH_TOKENS.finditer(text):
        kind = m.group(1)
        if kind is not None:  # \begin{..} / \end{..}
            if inside is None and kind == "begin" and m.group(2) in MATH_ENVIRONMENTS:
                inside, env, depth, start = "env", m.group(2), 1, m.start()
            elif inside == "env" and m.group(2) == env:
                depth += 1 if kind == "begin" else -1
                if depth == 0:
                    spans.append((start, m.start()))
                    inside = None
            continue
        tok = m.group()
        if inside == "env":
            continue
        if tok[0] == "\\":
            if inside is None and tok in ("\\(", "\\["):
                inside, start = ("\\)" if tok == "\\(" else "\\]"), m.end()
            elif inside is not None and tok == inside:
                spans.append((start, m.start()))
                inside = None
            continue
        if inside is None:
            inside, start = tok, m.end()
        elif inside == tok:
            spans.append((start, m.start()))
            inside = None
    if inside == "env":  # an environment left open runs to the end of the text
        spans.append((start, len(text)))
    return spans


def _text_in_math(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``\\text{...}`` (and the like) groups inside math spans: prose again, where neither
    ``Y`` (an upright letter) nor ``$Y$`` (nested dollars) is a safe way to write a variable."""
    out: list[tuple[int, int]] = []
    for a, b in spans:
        for m in _TEXT_IN_MATH.finditer(text, a, b):
            depth, i = 1, m.end()
            while i < b and depth:
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            out.append((m.end(), i))
    return out


def _masked_blocks(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in _BLOCKS.finditer(text)]


@lru_cache(maxsize=32768)
def find_constants(question: str, answer: str = "") -> tuple[Constant, ...]:
    """The replaceable literals of ``question``, in text order.

    Args:
        question: the problem text.
        answer: its answer; when the answer is a choice letter, numbers from the first
            answer choice on are skipped (replacing them would change the options).
    """
    blocks = _masked_blocks(question)
    spans = _math_spans(question)
    span_starts = [a for a, _ in spans]
    end = len(question)
    if _CHOICE_ANSWER.fullmatch(answer or ""):
        m = _CHOICE.search(question)
        if m:
            end = m.start()
    found: list[tuple[int, str, Fraction, bool, bool]] = []
    bi = 0
    for m in _NUMBER.finditer(question, 0, end):
        s, e, lit = m.start(), m.end(), m.group()
        while bi < len(blocks) and blocks[bi][1] <= s:
            bi += 1
        if bi < len(blocks) and blocks[bi][0] <= s < blocks[bi][1]:
            continue
        before = question[s - 1] if s else " "
        after = question[e] if e < len(question) else " "
        # glued to letters / commands (14n, 3rd, x2, \frac12), subscripts, parts of numbers
        if before.isalpha() or before in "_.'" or before.isdigit():
            continue
        if after.isalpha() or after in "_'" or after.isdigit():
            continue
        if after == "." and e + 1 < len(question) and (question[e + 1].isdigit() or question[e + 1] == "\\"):
            continue  # the integer part of a decimal, or of 0.\overline{6}
        if after == "," and e + 1 < len(question) and question[e + 1].isdigit():
            continue
        if before == "," and s >= 2 and question[s - 2].isdigit():
            continue
        pre = question[max(0, s - 12) : s]
        if _SUBSCRIPT_TAIL.search(pre) or _SHORTHAND_TAIL.search(pre):
            continue  # subscript index or \frac12-style shorthand
        if _SUBSCRIPT_TAIL.search(question[max(0, s - 40) : s]):
            continue  # deeper in a subscript: the bound of \sum_{1 \le i < j \le 95}, an index
        if _CMD_TAIL.search(pre) and not _ARITH_CMDS.search(pre):
            if _KNOWN_CMD_TAIL.search(pre) is None:
                continue  # argument of an unknown command
        if len(lit) > 1 and lit[0] == "0" and lit[1] != ".":
            continue  # leading zeros: a digit string, not a quantity
        plain = _SEPARATORS.sub("", lit) if "," in lit else lit
        if plain.isdigit() and len(plain) == 4 and 1000 <= int(plain) <= 2099 and "," not in lit:
            continue  # a year
        if _LABEL_WORDS.search(question[max(0, s - 14) : s]):
            continue
        i = bisect_right(span_starts, s) - 1
        in_math = i >= 0 and s < spans[i][1]  # inside $...$ and the like
        if not in_math and before == "(" and after == ")":
            continue  # an enumeration label such as (1) in text
        left = question[max(0, s - 8) : s].rstrip()
        right = question[e : e + 8].lstrip()
        arithmetic = in_math and (
            (left[-1:] in _ARITH)
            or (right[:1] in _ARITH)
            or bool(_ARITH_CMDS.search(left))
            or bool(_ARITH_CMDS_AFTER.match(question[e : e + 10]))
        )
        # an int counts as the equal Fraction (same hash, equal), and hashes far faster
        key = int(plain) if plain.isdigit() else Fraction(plain)
        found.append((s, lit, key, in_math, arithmetic))
    counts: dict[int | Fraction, int] = {}
    for f in found:
        counts[f[2]] = counts.get(f[2], 0) + 1
    if not found:
        return ()
    flaws = _Flaws(question, spans, blocks)
    own = [flaws.of(s, k) for s, _, k, _, _ in found]
    groups: dict[int | Fraction, list[int]] = {}
    for i, f in enumerate(found):
        groups.setdefault(f[2], []).append(i)
    out = []
    for i, (s, lit, k, mm, ar) in enumerate(found):
        g = groups[k]
        flaw, also = own[i], ()
        if not flaw and (k in flaws.labels or len(g) > 1):
            # a repeated value: replace every occurrence (all the same literal, none flawed,
            # none in a figure label), or none
            if k in flaws.labels or any(own[j] or found[j][1] != lit for j in g):
                flaw = "repeated"
            else:
                also = tuple((found[j][0], found[j][3]) for j in g if j != i)
        out.append(Constant(s, lit, Fraction(k), mm, ar, len(g) == 1, flaw, also))
    return tuple(out)


# Why a literal that is a quantity still must not become the variable (issue 16: a prompt
# whose chain can be skipped, or that reads badly, is correct but teaches no composition).
FLAWS = (
    "repeated",  # the value is written again elsewhere (text, figure, label): Y is visible anyway
    "choice",  # inside the answer options: replacing it changes what is asked
    "fact",  # in a stated fact with no unknowns (5!=...=120, 7^{400}\equiv 1): it fixes nothing
    "answer_form",  # in an answer-format instruction ("in the form Ax+By+C=0")
    "hint",  # in a hint or reminder ("Note that ...", "Recall that ...")
    "notation",  # part of notation, not a quantity: f^{-1}, \sqrt[3], f^{(4)}, \mathbb{R}^3
    "text_in_math",  # inside \text{} in math mode: neither Y nor $Y$ is safe there
)
_INVERSE_TAIL = re.compile(r"\^\s*\{?\s*-\s*$")
_NOTATION_TAIL = re.compile(
    r"\\sqrt\s*\[\s*$"  # root index
    r"|\^\s*\{\s*\(\s*$"  # derivative order f^{(4)}
    r"|\\mathbb\s*\{?\s*[A-Z]\s*\}?\s*\^\s*\{?\s*$"  # dimension R^3
    r"|\\begin\s*\{[a-zA-Z*]+\}\s*\{\s*$"  # environment argument \begin{alignat}{2}
)
_RELATION = re.compile(r"[=<>]|\\(?:equiv|leq?|geq?|neq?|approx|cong|lt|gt)(?![a-zA-Z])")
_SENTENCE_END = re.compile(r"[.?!](?=\s)|\n\s*\n")
# an answer template follows these ("in the form $Ax+By+C=0$"); "express your answer in base
# $12$" is no template: a radix is a real parameter of the problem
_FORM_WORDS = re.compile(r"in the form|of the form", re.I)
_HINT_WORDS = re.compile(
    r"\bhint\b|\bnote that\b|\bnote:|\brecall that\b|\byou may use\b|\buse the fact|\bfor example\b|\be\.g\.", re.I
)
_FIGURE_STRING = re.compile(r'"[^"\n]*"')
# Greek letters name unknowns (\theta = \frac{\pi}{3} is no fact); \pi is a number
_GREEK = re.compile(
    r"\\(?:alpha|beta|gamma|delta|epsilon|varepsilon|zeta|eta|theta|vartheta|iota|kappa|lambda|mu|nu|xi"
    r"|rho|sigma|tau|upsilon|phi|varphi|chi|psi|omega|Gamma|Delta|Theta|Lambda|Xi|Sigma|Phi|Psi|Omega)(?![a-zA-Z])"
)


class _Flaws:
    """The context of one question that decides :data:`FLAWS` for its literals."""

    def __init__(self, q: str, spans: list[tuple[int, int]], blocks: list[tuple[int, int]]) -> None:
        self.q = q
        self.spans = spans
        self.text_spans = _text_in_math(q, spans)
        # values a figure label shows (a string in figure code: label("$4''$", ...)); those
        # cannot be replaced, so a literal with such a value would leave Y visible. Indices,
        # exponents and coordinates are other quantities that happen to be equal.
        self.labels: dict[int | Fraction, int] = {}
        for a, b in blocks:
            for lab in _FIGURE_STRING.finditer(q, a, b):
                for m in _NUMBER.finditer(lab.group()):
                    lit = m.group()
                    plain = _SEPARATORS.sub("", lit) if "," in lit else lit
                    k = int(plain) if plain.isdigit() else Fraction(plain)
                    self.labels[k] = self.labels.get(k, 0) + 1
        ch = _CHOICE.search(q)
        self.choice_start = ch.start() if ch else len(q)
        self.ends = [m.start() for m in _SENTENCE_END.finditer(q)]

    def _span(self, s: int) -> tuple[int, int] | None:
        for a, b in self.spans:
            if a <= s < b:
                return a, b
        return None

    def _sentence(self, s: int) -> tuple[int, str]:
        i = bisect_right(self.ends, s)
        a = self.ends[i - 1] + 1 if i else 0
        b = self.ends[i] if i < len(self.ends) else len(self.q)
        return a, self.q[a:b]

    def of(self, s: int, key: int | Fraction) -> str:
        """The flaw of the literal at ``s`` with value ``key``, "repeated" aside."""
        q = self.q
        if s >= self.choice_start:
            return "choice"
        pre = q[max(0, s - 24) : s]
        if (key == 1 and _INVERSE_TAIL.search(pre)) or _NOTATION_TAIL.search(pre):
            return "notation"
        if any(a <= s < b for a, b in self.text_spans):
            return "text_in_math"
        span = self._span(s)
        if span is not None:
            body = q[span[0] : span[1]]
            if _RELATION.search(body) and not re.search(r"[A-Za-z]", _CMD.sub(" ", _GREEK.sub("x", _TEXTCMD.sub(" ", body)))):
                return "fact"
        a, sentence = self._sentence(s)
        form = _FORM_WORDS.search(sentence)
        if form is not None and a + form.start() < s:  # a template follows its keyword
            return "answer_form"
        if _HINT_WORDS.search(sentence):
            return "hint"
        return ""


_CMD = re.compile(r"\\[a-zA-Z]+")
_TEXTCMD = re.compile(r"\\(?:text|mathrm|textbf|textit|mbox|operatorname)\s*\{[^{}]*\}")


@lru_cache(maxsize=32768)
def symbols_used(text: str) -> frozenset[str]:
    """Upper-cased single letters used as symbols: in math mode, in figure code, or a lone
    capital letter in prose ("point A"). Case is folded so that X never sits beside x."""
    used: set[str] = set()
    blocks = _masked_blocks(text)
    spans = [text[a:b] for a, b in _math_spans(text)]
    for a, b in blocks:  # figure code: single-letter names and labels only
        used.update(c.upper() for c in re.findall(r"(?<![A-Za-z\\])[A-Za-z](?![A-Za-z])", text[a:b]))
    for span in spans:
        # in math mode every letter is a symbol of its own ($BC$ is B and C)
        span = _CMD.sub(" ", _TEXTCMD.sub(" ", span))
        used.update(c.upper() for c in re.findall(r"[A-Za-z]", span))
    for m in re.finditer(r"(?<![A-Za-z$\\])([A-Z])(?![A-Za-z])", text):
        c, i = m.group(1), m.start()
        if c in ("A", "I") and text[m.end() : m.end() + 2][:1] == " " and text[m.end() + 1 : m.end() + 2].islower():
            # "A box ..." at the start of a sentence, or the pronoun "I": not symbols.
            # "Point A lies ..." stays a symbol (conservative: a false hit only costs a name).
            before = text[:i].rstrip()
            if c == "I" or not before or before[-1] in ".!?:\n":
                continue
        used.add(c)
    return frozenset(used)
