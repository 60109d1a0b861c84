"""Pulling the final answer out of a response, and the string normalisation of the fast path.

Pure string work: no sympy, no Math-Verify, so it is cheap to import anywhere. The worker
process (``composition_rl.verify.compare``) runs it under the per-item time bound, because
even linear string work on a 1 MB response is not free.

Extraction order: the last ``\\boxed{...}`` (or ``\\fbox{...}``) with nested braces matched;
if the response has none, the configured fallbacks in order (see :data:`FALLBACKS`).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction

from composition_rl.registry import Registry

__all__ = [
    "FALLBACKS",
    "extract_answer",
    "gold_forms",
    "last_boxed",
    "normalize",
    "plain_integer",
    "plain_rational",
]

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")


def _last(matches: Iterator[re.Match]) -> re.Match | None:
    tail = deque(matches, maxlen=1)
    return tail[0] if tail else None


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` in ``text``, nested braces matched.

    Returns ``None`` when there is no box or the last one is never closed (a truncated
    response): an unclosed box is not an answer, and an earlier box is usually an
    intermediate result, so we do not fall back to it.

    >>> last_boxed(r"so $\\boxed{\\frac{1}{2}}$, not \\boxed{3}? No: \\boxed{\\{1,2\\}}")
    '\\\\{1,2\\\\}'
    """
    last = _last(_BOX_RE.finditer(text))
    if last is None:
        return None
    depth = 1
    i = start = last.end()
    n = len(text)
    # Escaped braces (\{ \}) are set delimiters, not grouping: skip them.
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
        i += 1
    return None


FALLBACKS: Registry[Callable[[str], str | None]] = Registry("answer fallback")

# Line-anchored and using [ \t]* (never \s*) so that a megabyte of newlines stays linear.
_ANSWER_LINE_RE = re.compile(
    r"^[ \t>*#_-]*(?:final[ \t]+answer|answer)[ \t*_]*[:：][ \t*_]*(?P<a>[^\n]+)$",
    re.IGNORECASE | re.MULTILINE,
)
_ANSWER_IS_RE = re.compile(
    r"(?:final[ \t]+answer|the[ \t]+answer)[ \t]+is[ \t:]*(?P<a>[^\n]+)", re.IGNORECASE
)


def _clean_fallback(s: str) -> str | None:
    s = s.strip().strip("*_").strip()
    s = s.rstrip(".").strip()
    if len(s) >= 2 and s[0] == "$" and s[-1] == "$":
        s = s.strip("$").strip()
    return s or None


@FALLBACKS.register("answer_line")
def _answer_line(text: str) -> str | None:
    """The last ``Answer: X`` / ``Final answer: X`` line (Markdown emphasis allowed)."""
    last = _last(_ANSWER_LINE_RE.finditer(text))
    return _clean_fallback(last.group("a")) if last else None


@FALLBACKS.register("answer_is")
def _answer_is(text: str) -> str | None:
    """The last ``the answer is X`` / ``final answer is X`` phrase, to the end of its line."""
    last = _last(_ANSWER_IS_RE.finditer(text))
    return _clean_fallback(last.group("a")) if last else None


def extract_answer(text: str, fallbacks: Sequence[str] = ("answer_line",)) -> str | None:
    """The final answer written in ``text``: the last box, else the first fallback that matches.

    Args:
        text: a model response.
        fallbacks: names from :data:`FALLBACKS`, tried in order when there is no box.

    Returns:
        the answer as written (LaTeX, unnormalised), or ``None`` when there is none.

    >>> extract_answer(r"... so the total is $\\boxed{64,\\!328}$.")
    '64,\\\\!328'
    >>> extract_answer("Thus\\nFinal Answer: 12 apples")
    '12 apples'
    >>> extract_answer("I could not finish the") is None
    True
    """
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed.strip() or None
    for name in fallbacks:
        got = FALLBACKS.get(name)(text)
        if got:
            return got
    return None


def gold_forms(gold: object) -> tuple[str, ...]:
    """Every accepted form of a gold answer as a string, whatever type the dataset used.

    Handles LaTeX strings (MATH), ints (AIME25), floats (AMC: ``142.0`` means 142),
    lists of accepted forms (Minerva, OlympiadBench; trailing newlines stripped) and numpy
    arrays of them (verl reads list columns from parquet as arrays).

    >>> gold_forms(142.0), gold_forms(["9.6\\n", "9.60"]), gold_forms(r"\\frac12")
    (('142',), ('9.6', '9.60'), ('\\\\frac12',))

    Raises:
        ValueError: no usable form (``None``, empty string or empty list, bool).
    """
    if hasattr(gold, "tolist") and not isinstance(gold, str):  # numpy scalar or array
        gold = gold.tolist()
    if isinstance(gold, (list, tuple)):
        forms: list[str] = []
        for g in gold:
            for f in gold_forms(g):
                if f not in forms:
                    forms.append(f)
        if not forms:
            raise ValueError(f"gold answer has no accepted forms: {gold!r}")
        return tuple(forms)
    if isinstance(gold, bool) or gold is None:
        raise ValueError(f"gold answer must be a string, a number or a list of them, got {gold!r}")
    if isinstance(gold, int):
        return (str(gold),)
    if isinstance(gold, float):
        if gold != gold or gold in (float("inf"), float("-inf")):
            raise ValueError(f"gold answer is not a finite number: {gold!r}")
        return (str(int(gold)),) if gold.is_integer() else (repr(gold),)
    if isinstance(gold, str):
        s = gold.strip()
        if not s:
            raise ValueError("gold answer is an empty string")
        return (s,)
    raise ValueError(f"gold answer must be a string, a number or a list of them, got {type(gold).__name__}")


# ---------------------------------------------------------------- fast-path normalisation
# Each rule removes only notation that does not change the value (spacing, \left/\right,
# \dfrac, thousands separators, degree and percent marks, which Math-Verify also accepts
# as optional), so equal normal forms mean equal answers. It is only used to say
# "correct" early; unequal strings go on to Math-Verify.
_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
_SPACING = re.compile(r"\\[!,;: ]|~")
_LEFT_RIGHT = re.compile(r"\\(?:left|right)(?![A-Za-z])")
_FRAC_VARIANTS = re.compile(r"\\[dt]frac(?![A-Za-z])")
_DEGREE = re.compile(r"\^\{?\\circ\}?")
_PERCENT = re.compile(r"\\?%")
_TEXT_WRAPPED = re.compile(r"^\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}$")
# "(B)", "(b)" and "B" are one choice; a bare lowercase "e" stays Euler's number.
_CHOICE = re.compile(r"^\(([A-Ea-e])\)$|^([A-E])$")
_THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_INT = re.compile(r"^[+-]?\d+$")


def normalize(s: str) -> str:
    """Canonical spelling of an answer for the exact-string fast path.

    >>> normalize(r"\\dfrac12"), normalize(r"$64,\\!328$"), normalize(r"\\text{(B)}")
    ('\\\\frac12', '64328', 'B')
    """
    s = _UNESCAPED_DOLLAR.sub("", s)
    s = s.replace("\\$", "")
    s = _SPACING.sub("", s)
    s = _LEFT_RIGHT.sub("", s)
    s = _FRAC_VARIANTS.sub(r"\\frac", s)
    s = _DEGREE.sub("", s)
    s = _PERCENT.sub("", s)
    s = s.replace("{,}", ",").strip()
    # "64,\!328" and "64,328" are one number; "64, 328" (a space after the comma) is a list.
    if _THOUSANDS.match(s.rstrip(".")):
        s = s.replace(",", "")
    s = "".join(s.split())
    s = s.rstrip(".")
    m = _TEXT_WRAPPED.match(s)
    if m:
        s = m.group(1)
    m = _CHOICE.match(s)
    if m:
        return (m.group(1) or m.group(2)).upper()
    return s


def plain_integer(s: str) -> str | None:
    """The canonical digits of ``s`` if it is a plain integer after :func:`normalize`, else None.

    Used for the exact integer decision (AIME-style answers): ``025`` and ``25`` are equal,
    ``25`` and ``26`` are not, with no sympy and no float rounding.

    >>> plain_integer("025"), plain_integer("-0"), plain_integer("2.5")
    ('25', '0', None)
    """
    if not _INT.match(s):
        return None
    neg = s.startswith("-")
    digits = s.lstrip("+-").lstrip("0") or "0"
    return "-" + digits if neg and digits != "0" else digits


_RATIONAL_FORMS = (
    re.compile(r"^(?P<s>[+-]?)(?P<n>\d+)$"),
    re.compile(r"^(?P<s>[+-]?)(?P<d>\d*\.\d+|\d+\.\d*)$"),
    re.compile(r"^(?P<s>[+-]?)(?P<n>\d+)/(?P<q>\d+)$"),
    re.compile(r"^(?P<s>[+-]?)\\frac\{(?P<n>[+-]?\d+)\}\{(?P<q>[+-]?\d+)\}$"),
    re.compile(r"^(?P<s>[+-]?)\\frac(?P<n>\d)(?P<q>\d)$"),
    re.compile(r"^(?P<s>[+-]?)\\frac\{(?P<n>[+-]?\d+)\}(?P<q>\d)$"),
    re.compile(r"^(?P<s>[+-]?)\\frac(?P<n>\d)\{(?P<q>[+-]?\d+)\}$"),
)


def plain_rational(s: str) -> tuple[Fraction, bool] | None:
    """The exact value of a plain number written as an integer, a decimal or a fraction.

    Returns ``(value, is_decimal)``, or None for anything else, including numbers with a
    percent or degree sign or a unit (Math-Verify is lenient about those, so they are left
    to it). Only spacing, ``$``, ``\\left``/``\\right``, ``\\dfrac`` and thousands
    separators are ignored.

    >>> plain_rational(r"-\\dfrac{3}{4}"), plain_rational("0.75"), plain_rational(r"17\\%")
    ((Fraction(-3, 4), False), (Fraction(3, 4), True), None)
    """
    if len(s) > 60:
        return None
    t = _UNESCAPED_DOLLAR.sub("", s)
    t = _SPACING.sub("", t)
    t = _LEFT_RIGHT.sub("", t)
    t = _FRAC_VARIANTS.sub(r"\\frac", t)
    t = t.replace("{,}", ",").strip()
    if _THOUSANDS.match(t):
        t = t.replace(",", "")
    t = "".join(t.split())
    for form in _RATIONAL_FORMS:
        m = form.match(t)
        if m is None:
            continue
        g = m.groupdict()
        sign = -1 if g["s"] == "-" else 1
        if g.get("d") is not None:
            return sign * Fraction(g["d"]), True
        q = int(g.get("q") or 1)
        if q == 0:
            return None
        return sign * Fraction(int(g["n"]), q), False
    return None
