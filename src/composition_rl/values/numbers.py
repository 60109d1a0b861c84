"""The one reader of plain numbers: integers, decimals and fractions of integers as written.

A plain number is what an answer box, a gold answer or a literal of a problem holds when it
is one rational number written out: ``-12``, ``3.25``, ``.5``, ``64,\\!328``, ``1{,}000``,
``3/4``, ``\\frac{7}{2}``, ``\\dfrac47``, ``\\frac{1}{29,\\!322,\\!216}``. The verifier's fast
path (:mod:`composition_rl.grading.compare`), the LaTeX arithmetic reader's fast path
(:func:`composition_rl.values.parse.parse_number`), the constants of a problem
(:func:`composition_rl.values.literals.constant_value`) and the LLM engine's numbers all read
them here, so a string is the same number (or no number) to every one of them.

The rules, each decided once (the strings the old readers read differently, and the answer
each gets now, are in docs/verification.md, "Plain numbers"):

* notation that never changes a value is dropped: ``$``, TeX spacing (``\\!``, ``\\,``, ``~``,
  ``\\quad``), ``\\left``/``\\right``, ``{,}`` (or ``{, }``) for ``,``, and ``\\dfrac`` and
  ``\\tfrac`` for ``\\frac``;
* a comma (or a space) is a thousands separator only between groups of three digits after a
  first group of one to three digits that does not start with 0: ``1,000,000`` and ``1 000``
  are numbers, ``0,500``, ``1,00`` and ``3,14`` are not (a list, or a decimal comma, which
  only the verifier's comparison may read, :func:`composition_rl.grading.extract.decimal_comma`);
  in a longer text the same groups are taken out wherever they stand, so the LaTeX reader
  reads the pair ``(4,112)`` as ``(4112)`` (kept so the MATH depth-2 output stays the same);
* a point with no digit after it is a full stop: ``5.`` is 5 (a decimal, as written);
* a leading ``+`` is allowed, a leading zero is a digit like any other (``007`` is 7);
* anything else (a percent or degree sign, a unit, ``2^3``, ``1e3``, a mixed number) is not a
  plain number; the LaTeX reader (:mod:`.latex`) or Math-Verify decides those.

Pure string work with ``fractions``: no sympy, so the verifier's main process may import it.

>>> plain_number("64,\\\\!328"), plain_number("5."), plain_number("0,500")
(Plain(value=Fraction(64328, 1), decimal=False), Plain(value=Fraction(5, 1), decimal=True), None)
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple

__all__ = ["MAX_DIGITS", "SEPARATOR", "UNSIGNED", "Plain", "clean", "grouped", "plain_number",
           "ungroup", "unformat"]

MAX_DIGITS = 80  # the longest number read exactly; longer ones are left to the caller

SEPARATOR = r"(?:,|\{,\}|,\\!|\\,)"
"""How a thousands separator is written in LaTeX (``1,000``, ``1{,}000``, ``1,\\!000``,
``1\\,000``): the constants scanner finds digit groups with it."""

UNSIGNED = r"\d+(?:\.\d+)?"
"""Digits with an optional decimal part, as the scanners of a text find a number (a trailing
point is the end of a sentence there); the value is :func:`plain_number`'s."""

_ANY_SEPARATOR = re.compile(r"\{,\}|,\\!|\\,|,")  # the longest spelling first


def ungroup(literal: str) -> str:
    """The digits of a literal found with :data:`SEPARATOR`, separators taken out.

    >>> ungroup("64,\\\\!328"), ungroup("1{,}000"), ungroup("47\\\\,389")
    ('64328', '1000', '47389')
    """
    return _ANY_SEPARATOR.sub("", literal) if ("," in literal or "\\" in literal) else literal


# a first group of one to three digits that is not 0, then groups of three
_GROUPED = r"[1-9]\d{0,2}(?:,\d{3})+"
_GROUPED_WHOLE = re.compile(r"[+-]?" + _GROUPED + r"(?:\.\d*)?")
# in a longer text: not inside a number, and whole. A pair such as (4,112) is read as
# (4112) all the same: MATH has three such answers, and reading them as points changes which
# problems can lead a chain (the MATH depth-2 output); see docs/verification.md
_GROUPED_IN_TEXT = re.compile(r"(?<![\d.])" + _GROUPED + r"(?![\d])")
_SPACE_GROUPED = re.compile(r"[+-]?[1-9]\d{0,2}(?: \d{3})+(?:\.\d+)?")
_BRACED_COMMA = re.compile(r"\s*\{\s*,\s*\}\s*")  # 14{,}916 and 14 {, }916
_SPACING = re.compile(r"\\[,!;: ]|\\quad|\\qquad|~")
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
_FRAC_VARIANTS = re.compile(r"\\[dt]frac(?![A-Za-z])")
_LOOSE_SPACE = re.compile(r"(?<!\d)\s+|\s+(?!\d)")  # whitespace not between two digits
_SIMPLE = re.compile(r"-?\d+(?:\.\d+)?")  # nothing for clean to do
_DECIMAL = re.compile(r"([+-]?)(\d*)\.(\d*)")
_INT = r"[+-]?\d+"
_FRACTION_FORMS = (
    re.compile(r"(?P<s>[+-]?)(?P<n>\d+)/(?P<q>\d+)"),
    re.compile(r"(?P<s>[+-]?)\\frac\{(?P<n>" + _INT + r")\}\{(?P<q>" + _INT + r")\}"),
    re.compile(r"(?P<s>[+-]?)\\frac(?P<n>\d)(?P<q>\d)"),
    re.compile(r"(?P<s>[+-]?)\\frac\{(?P<n>" + _INT + r")\}(?P<q>\d)"),
    re.compile(r"(?P<s>[+-]?)\\frac(?P<n>\d)\{(?P<q>" + _INT + r")\}"),
)


class Plain(NamedTuple):
    """A plain number: its exact value, and whether it was written as a decimal (``0.75``,
    ``5.``), whose last digit may be rounded."""

    value: Fraction
    decimal: bool


def _ungroup(m: re.Match) -> str:
    return m.group().replace(",", "")


def clean(text: str) -> str:
    """``text`` with sizing, spacing and thousands separators taken out (the rules of the
    module docstring); the rest of the text is kept for the LaTeX reader.

    >>> clean("64,\\\\!328"), clean("\\\\left(2\\\\right)"), clean("(4,112)"), clean("0,500")
    ('64328', '(2)', '(4112)', '0,500')
    """
    if _SIMPLE.fullmatch(text):
        return text
    s = text.strip()
    s = s.replace("\\left", "").replace("\\right", "")
    s = _SPACING.sub("", s)
    if "{" in s:
        s = _BRACED_COMMA.sub(",", s)
    if "," in s:
        s = _GROUPED_IN_TEXT.sub(_ungroup, s)
    return s.strip()


def grouped(s: str) -> bool:
    """Whether all of ``s`` is one number written with thousands separators (``-1,234.5``);
    ``0,111`` and ``1,00`` are not.

    >>> grouped("1,000,000"), grouped("12,345.5"), grouped("0,500"), grouped("1,00")
    (True, True, False, False)
    """
    return _GROUPED_WHOLE.fullmatch(s) is not None


def unformat(s: str) -> str:
    """``s`` without the notation that never changes a plain number's value: ``$``, TeX
    spacing, ``\\left``/``\\right``, ``\\dfrac``/``\\tfrac``, thousands separators (commas or
    spaces), and whitespace that does not stand between two digits.

    >>> unformat("$ -\\\\dfrac{1}{29,\\\\!322,\\\\!216} $"), unformat("1 000"), unformat("12 34")
    ('-\\\\frac{1}{29322216}', '1000', '12 34')
    """
    t = _UNESCAPED_DOLLAR.sub("", s)
    t = _FRAC_VARIANTS.sub(r"\\frac", clean(t))
    if "," in t and _GROUPED_WHOLE.fullmatch(t):
        t = t.replace(",", "")
    t = _LOOSE_SPACE.sub("", t)
    if " " in t and _SPACE_GROUPED.fullmatch(t):
        t = t.replace(" ", "")
    return t


def plain_number(s: str) -> Plain | None:
    """The exact value of ``s`` when it is a plain number (the rules of the module
    docstring), else None. A zero denominator and more than :data:`MAX_DIGITS` digits are
    None as well.

    >>> plain_number(r"-\\dfrac{3}{4}"), plain_number("0.75"), plain_number(r"17\\%")
    (Plain(value=Fraction(-3, 4), decimal=False), Plain(value=Fraction(3, 4), decimal=True), None)
    >>> [plain_number(x) for x in ("1,00", "3,14", "1e3", "2^3", r"\\frac{1}{0}")]
    [None, None, None, None, None]
    """
    t = s if _SIMPLE.fullmatch(s) else unformat(s)
    if sum(c.isdigit() for c in t) > MAX_DIGITS:
        return None
    if re.fullmatch(_INT, t):
        return Plain(Fraction(int(t)), False)
    m = _DECIMAL.fullmatch(t)
    if m is not None:
        sign, whole, frac = m.groups()
        if not whole and not frac:
            return None
        f = Fraction(int((whole or "0") + frac), 10 ** len(frac))
        return Plain(-f if sign == "-" else f, True)
    for form in _FRACTION_FORMS:
        m = form.fullmatch(t)
        if m is None:
            continue
        q = int(m.group("q"))
        if q == 0:
            return None
        f = Fraction(int(m.group("n")), q)
        return Plain(-f if m.group("s") == "-" else f, False)
    return None
