"""The numbers the LLM engine reads: English cardinals, the numbers inside a compound answer,
and sub-step 3 (``d = v1 - v2``) on the sympy values a model's reply parses to.

Equality is :func:`composition_rl.values.exact_equal` and math mode is
:func:`composition_rl.values.in_math`, shared with the symbolic engine and the checks.
``relation`` differs from :func:`composition_rl.values.render_offset` on purpose: v1 here may
be any sympy value read from a reply (a part of a tuple, an interval end), while
``render_offset`` works on the symbolic engine's cached (Fraction, radical part) split.
"""

from __future__ import annotations

import re
from functools import lru_cache

import sympy

from composition_rl.values import parse_answer_value, parse_number, render_latex
from composition_rl.values.numbers import UNSIGNED
from composition_rl.values.numwords import CARDINALS

__all__ = ["NUM_IN_TEXT", "answer_numbers", "expr_str", "has_constant", "has_number", "rat_str", "relation"]

# a fraction of whole numbers, or a number as the scanners of values.numbers find one; each
# match is read by parse_number (whose fast path is values.numbers.plain_number). A thousands
# separator is not read here: in a compound answer "(1,000, 2)" a comma separates the parts
NUM_IN_TEXT = re.compile(r"\\[dt]?frac\s*\{\s*-?\d+\s*\}\s*\{\s*\d+\s*\}|" + UNSIGNED)


@lru_cache(maxsize=65536)
def answer_numbers(answer: str) -> tuple[sympy.Expr | None, tuple[sympy.Expr, ...]]:
    """(exact value of the whole answer or None, the numbers written inside it, with signs).

    >>> answer_numbers("(3,-1)")
    (None, (3, -1, 1))
    >>> answer_numbers("7x+10")[1]
    (7, 10)
    """
    av = parse_answer_value(answer)
    parts: list[sympy.Expr] = []
    for m in NUM_IN_TEXT.finditer(answer):
        v = parse_number(m.group())
        if v is None:
            continue
        neg = answer[: m.start()].rstrip().endswith("-")
        for x in (-v, v) if neg else (v,):
            if x not in parts:
                parts.append(x)
    return (av.value if av is not None else None), tuple(parts)


def has_number(text: str) -> bool:
    """Whether ``text`` has a digit."""
    return bool(re.search(r"\d", text))


# English numbers a model may place where the finder reads none: cardinals, and the ordinals
# and multiples that state a count in words ("every third day", "twice", "a dozen")
_IN_WORDS = ("second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "eleventh",
             "twelfth", "twice", "thrice", "dozen")
_WORD_RE = re.compile(
    r"\b(?:" + "|".join(sorted((*CARDINALS, *_IN_WORDS), key=len, reverse=True)) + r")\b", re.I
)


def has_constant(text: str) -> bool:
    """Whether ``text`` has a digit or an English number word (a cardinal, or "third", "twice",
    "dozen", ...): a constant the model might replace."""
    return has_number(text) or bool(_WORD_RE.search(text))


def relation(v1: sympy.Expr, v2: sympy.Rational) -> tuple[sympy.Expr, str, str, str]:
    r"""Sub-step 3 exactly: ``d = v1 - v2`` with (d, direction, |d| LaTeX, d LaTeX).

    >>> relation(sympy.Integer(7), sympy.Integer(1))
    (6, 'less', '6', '6')
    >>> print(*relation(sympy.Rational(1, 2), sympy.Integer(2))[1:])
    more \frac{3}{2} -\frac{3}{2}
    """
    d = sympy.nsimplify(v1 - v2) if v1.has(sympy.Float) else v1 - v2
    if d == 0:
        return d, "equal", "0", "0"
    if d.is_Rational:  # the common case, without sympy's assumption system
        pos = d > 0
        return d, ("less" if pos else "more"), render_latex(d if pos else -d), render_latex(d)
    pos = d.is_positive
    if pos is None:  # sympy could not decide symbolically: decide numerically at high precision
        pos = bool(d.evalf(60) > 0)
    return d, ("less" if pos else "more"), render_latex(d if pos else -d), render_latex(d)


def rat_str(v: sympy.Rational) -> str:
    """A rational as plain text: ``"3"`` or ``"-3/4"``."""
    return str(v.p) if v.q == 1 else f"{v.p}/{v.q}"


def expr_str(v: sympy.Expr) -> str:
    """A sympy value as plain text: :func:`rat_str` for a rational, else ``sympy.sstr``."""
    return rat_str(v) if v.is_Rational else sympy.sstr(v)
