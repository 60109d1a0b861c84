"""Exact values out of LaTeX: numbers, answers and the small arithmetic they are written in.

:func:`parse_answer_value` reads v1 from an answer such as ``\\frac47``, ``64,\\!328``,
``-\\dfrac{5}{3}``, ``7\\sqrt{2}``, ``14\\pi``, ``\\$3.50``, ``30^\\circ``, ``8.7 \\times 10^{8}``.
Tuples, intervals, matrices, expressions with letters and text return ``None``: such a
problem cannot be q1 (the paper's Section 3.4: sub-step 1 needs a number), but it can still be
the last problem, whose answer passes through unchanged. Exact (sympy, never floats).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import sympy

from composition_rl.values.latex import MAX_EXPONENT, Domain, LatexError, evaluate, read
from composition_rl.values.numbers import clean, plain_number
from composition_rl.values.numwords import word_number


class SympyDomain(Domain):
    """Values of a :mod:`~composition_rl.values.latex` tree as exact sympy numbers: ``\\pi``
    is pi, a letter is a real symbol when ``letters`` (an answer in x), and a power needs a
    small whole exponent (``2^{64}`` is read, ``10^{10^{10}}`` refused rather than built)."""

    def __init__(self, letters: bool = False) -> None:
        self.letters = letters

    def number(self, q: Fraction) -> sympy.Rational:
        """A literal number as the equal ``sympy.Rational``."""
        return sympy.Rational(q.numerator, q.denominator)

    def name(self, name: str) -> sympy.Expr:
        """``\\pi`` as sympy's pi, a single ASCII letter as a real symbol when ``letters``; raises
        :class:`LatexError` for any other name."""
        if name == "\\pi":
            return sympy.pi
        if self.letters and len(name) == 1 and name.isascii() and name.isalpha():
            return sympy.Symbol(name, real=True)
        raise LatexError(f"name {name}")

    def power(self, a, b):
        """``a`` to a whole exponent of at most ``MAX_EXPONENT`` in size; raises :class:`LatexError`
        for any other exponent and for zero to a negative power."""
        if not (b.is_Integer and abs(int(b)) <= MAX_EXPONENT):
            raise LatexError("exponent not a small integer")
        if a == 0 and int(b) < 0:
            raise LatexError("zero to a negative power")
        return a ** int(b)

    def root(self, a, index: int):
        """The exact ``index``-th root of ``a`` in sympy (``sqrt`` for square roots), unbounded."""
        return sympy.sqrt(a) if index == 2 else sympy.root(a, index)


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
        """The rational ``q`` (anything ``Fraction`` accepts) as a :class:`Lin`."""
        return cls({1: Fraction(q)})

    def rational(self) -> Fraction | None:
        """The value as a ``Fraction`` when it has no irrational part (0 when empty), else
        ``None``."""
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
        """The same number as an exact sympy expression."""
        out = sympy.Integer(0)
        for k, v in self.terms.items():
            c = sympy.Rational(v.numerator, v.denominator)
            out += c if k == 1 else c * (sympy.pi if k == "pi" else sympy.sqrt(k))
        return out


class LinDomain(Domain):
    """Values of a :mod:`~composition_rl.values.latex` tree as :class:`Lin` (fast, exact,
    limited: anything outside Q-linear combinations of 1, square roots and pi raises
    :class:`NotLinear`, and the caller falls back on :class:`SympyDomain`)."""

    def number(self, q: Fraction) -> Lin:
        """A literal number as a :class:`Lin`."""
        return Lin.of(q)

    def name(self, name: str) -> Lin:
        """``\\pi`` as the pi atom; raises :class:`LatexError` for any other name."""
        if name == "\\pi":
            return Lin({"pi": Fraction(1)})
        raise LatexError(f"name {name}")

    def power(self, a: Lin, b: Lin) -> Lin:
        """``a`` to a whole rational exponent of at most ``MAX_EXPONENT`` in size; raises
        :class:`LatexError` for any other exponent and for zero to a negative power (and
        :class:`NotLinear` from :meth:`Lin.__pow__` when the power leaves the domain)."""
        e = b.rational()
        if e is None or e.denominator != 1 or abs(e) > MAX_EXPONENT:
            raise LatexError("exponent not a small integer")
        if a == 0 and e < 0:
            raise LatexError("zero to a negative power")
        return a ** int(e)

    def root(self, x: Lin, n: int) -> Lin:
        """The square root of a non-negative rational as ``c * sqrt(n)`` with ``n`` square-free;
        raises :class:`NotLinear` for other indices, irrational or negative radicands."""
        a = x.rational()
        if n != 2 or a is None or a < 0:
            raise NotLinear("only square roots of non-negative rationals")
        p, q = a.numerator * a.denominator, a.denominator  # sqrt(p/q) = sqrt(p*q)/q
        out, ins = _squarefree(p)
        return Lin.of(Fraction(out, q)) if ins == 1 else Lin({ins: Fraction(out, q)})


LIN = LinDomain()
SYMPY = SympyDomain()


@lru_cache(maxsize=65536)
def parse_number(text: str) -> sympy.Expr | None:
    """Exact value of a LaTeX number/arithmetic expression, or None if it is anything else.

    >>> parse_number(r"\\frac47"), parse_number(r"64,\\!328"), parse_number(r"7\\sqrt{2}")
    (4/7, 64328, 7*sqrt(2))
    """
    s = clean(text)
    fast = plain_number(s)
    if fast is not None:
        return sympy.Rational(fast.value.numerator, fast.value.denominator)
    if not s or re.search(r"[a-zA-Z]", re.sub(r"\\[a-zA-Z]+|(?<=\d)[eE](?=[+-]?\d)", "", s)):
        return None  # letters outside known commands: an expression, not a number
    try:
        tree = read(s)
    except (LatexError, RecursionError):
        return None
    try:  # Q-linear combinations of 1, square roots and pi: exact at Fraction speed
        return evaluate(tree, LIN).to_sympy()
    except (NotLinear, ValueError, TypeError, ZeroDivisionError, RecursionError):
        pass  # anything else, or any doubt: the general sympy evaluation decides
    try:
        v = evaluate(tree, SYMPY)
    except (ValueError, TypeError, ZeroDivisionError, RecursionError):
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
# a unit in text, after spacing (``5\text{ cm}``, ``1.85\ \text{USD}``), squared or cubed
# outside the braces (``2400 \mbox{ cm}^2``: "square cm", as prose writes it)
_TEXT_UNIT = re.compile(r"(?:\s|\\[,;: ]|~)*\\(?:text|textnormal|mbox|mathrm)\s*\{\s*([A-Za-z][A-Za-z. ]{0,20}?)\s*\}"
                        r"(?:\^\s*\{?\s*([23])\s*\}?)?$")
# the name of the quantity asked for: ``x = 5``, ``AB = 12``, ``\overline{AB} = 12``
_VAR_PREFIX = re.compile(r"^(?:[a-zA-Z]|[A-Z]{2}|\\overline\s*\{\s*[A-Z]{2}\s*\})\s*=\s*")
_UNIT_WORDS = {"dollars", "cents", "degrees", "percent"}
_POWER_WORDS = {"2": "square", "3": "cubic"}
# the full stop of a sentence the answer was written as (``-\frac{5}{3}.``, ``30^\circ.``)
_FULL_STOP = re.compile(r"(?<=[\d}a-zA-Z])\s*\.$")
# a decimal numeral marked as one (``24_{10}``)
_BASE_TEN = re.compile(r"^(\d+)\s*_\s*\{?\s*10\s*\}?$")
# a count written as a word (``\mbox{four}``)
_NUMBER_WORD = re.compile(r"^(?:\\(?:text|textnormal|mbox|mathrm)\s*\{\s*([A-Za-z]+(?:-[A-Za-z]+)?)\s*\}"
                          r"|([A-Za-z]+(?:-[A-Za-z]+)?))$")


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
    s = _VAR_PREFIX.sub("", _FULL_STOP.sub("", s))
    if (m := _NUMBER_WORD.match(s)) is not None:
        n = word_number(m.group(1) or m.group(2))
        return None if n is None else AnswerValue(sympy.Integer(n), "")
    s = _BASE_TEN.sub(r"\1", s)
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
        if unit and m.group(2):
            unit = f"{_POWER_WORDS[m.group(2)]} {unit}"
        if unit == "" or unit in ("(A)", "(B)"):
            return None
    if unit in _UNIT_WORDS and _TEXT_UNIT.search(s):
        return None
    v = parse_number(s)
    if v is None:
        return None
    return AnswerValue(v, unit)


# A decimal mantissa times a power of ten is written to significant figures (Minerva:
# "8.7 \times 10^{8}", "4.5e33"); the true value is some other number that rounds to it.
_SIG_FIGS = re.compile(r"\d\.\d+\s*(?:\\times|\\cdot|\*|x)\s*10\s*\^|\d\.\d+[eE][+-]?\d")
_DECIMAL = re.compile(r"(?<![\d.])\d*\.\d+")
# how a worked solution shows that its decimal result was rounded: an approximation sign,
# or a function whose values at rational points are irrational (Minerva's 20.39 is
# -7 + 5 log(3 x 10^5) = 20.386..., its 50.7 is ln(0.06) / (ln 2 / 12.5) = 50.73...)
_ROUNDING = re.compile(
    r"\\approx|\\simeq|\\sim(?![a-zA-Z])|\\doteq|≈|\broughly\b|\bapproximately\b"
    r"|\\log|\\ln|\\lg|\\exp|\\sqrt|\\pi|\\sin|\\cos|\\tan|\\arc|(?<![a-zA-Z])e\^",
    re.I,
)


def inexact_answer(answers: tuple[str, ...] | list[str], solution: str = "") -> str:
    """Why a problem's gold answer cannot stand as an exact value v1 of a link, or "".

    Sub-step 1 of the paper (Section 3.4) takes q1's answer as the exact value of ``X``; a
    reader of the composed problem must be able to recompute it. It cannot when:

    * ``answers_disagree``: the accepted forms have different values (Minerva accepts
      ``0.01`` and ``0.02`` for one answer): which one is ``X``?
    * ``significant_figures``: the answer is a decimal mantissa times a power of ten;
    * ``rounded_result``: the answer is a decimal and the worked ``solution`` reaches it by
      approximation (``\\approx``, ``\\simeq``, "roughly") or through ``\\log``, ``\\ln``,
      ``\\sqrt``, ``\\pi``, trigonometry or ``e^``, whose values are irrational.

    Answers that are no number at all are not judged here (see :func:`parse_answer_value`).

    >>> inexact_answer(["0.01", "0.02"]), inexact_answer(["7.5 \\\\times 10^7"]), inexact_answer(["8.75"])
    ('answers_disagree', 'significant_figures', '')
    >>> inexact_answer(["20.39"], r"m = -7 + 5 \\log(3 \\times 10^5) = \\boxed{20.39}")
    'rounded_result'
    >>> inexact_answer(["8.75"], r"$\\frac{35}{4} = \\boxed{8.75}$")
    ''
    """
    forms = [str(a).strip() for a in answers if str(a).strip()]
    if not forms:
        return ""
    values = []
    for f in forms:
        av = parse_answer_value(f)
        if av is not None:
            values.append(av.value)
    if len(values) > 1 and any(sympy.simplify(v - values[0]) != 0 for v in values[1:]):
        return "answers_disagree"
    first = forms[0]
    if _SIG_FIGS.search(first):
        return "significant_figures"
    if values and _DECIMAL.search(first) and not values[0].is_integer and solution and _ROUNDING.search(solution):
        return "rounded_result"
    return ""
