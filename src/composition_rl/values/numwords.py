"""The one table of English number words, and the one reader of them.

Answers write counts as words (``\\mbox{four}``), problems write quantities in prose ("a
bakery sells three kinds of rolls"), and a model's reply may name a constant in words
("twenty-five"). All of them read the words of :data:`CARDINALS` through :func:`word_number`
or take the subset they may replace from it (:data:`composition_rl.values.literals.WORD_NUMBERS`).
"""

from __future__ import annotations

import re

__all__ = ["CARDINALS", "SCALES", "word_number"]

_UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
          "seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
CARDINALS: dict[str, int] = {w: i for i, w in enumerate(_UNITS)} | {w: 10 * (i + 2) for i, w in enumerate(_TENS)}
"""zero to nineteen and the tens to ninety: every word a cardinal below 100 is built from."""
SCALES: dict[str, int] = {"hundred": 100, "thousand": 1000, "million": 1_000_000}


_ONES = {w: v for w, v in CARDINALS.items() if 1 <= v <= 9}
_TEENS = {w: v for w, v in CARDINALS.items() if 10 <= v <= 19}
_TENS = {w: v for w, v in CARDINALS.items() if v >= 20}


def _below_thousand(words: list[str], i: int) -> tuple[int, int] | None:
    """The group at ``words[i:]`` worth 1 to 999 (``[one-nine hundred [and]] [tens [one-nine]
    | ten-nineteen | one-nine]``) and the index after it; None when no group starts there."""
    n, value, start = len(words), 0, i
    if i + 1 < n and words[i] in _ONES and words[i + 1] == "hundred":
        value, i = 100 * _ONES[words[i]], i + 2
        if i + 1 < n and words[i] == "and":  # "one hundred and five": "and" before the rest only
            i += 1
    if i < n and words[i] in _TENS:
        value, i = value + _TENS[words[i]], i + 1
        if i < n and words[i] in _ONES:
            value, i = value + _ONES[words[i]], i + 1
    elif i < n and (words[i] in _TEENS or words[i] in _ONES):
        value, i = value + CARDINALS[words[i]], i + 1
    if i == start or (i > start and words[i - 1] == "and"):
        return None
    return value, i


def word_number(text: str) -> int | None:
    """A cardinal written in well-formed English words, or None.

    Well-formed: groups of 1 to 999 (``five``, ``twenty-three``, ``two hundred five``, ``one
    hundred and five``), each but the last followed by a scale, the scales in falling order
    (``three thousand four hundred``, ``one million two hundred thousand``); ``zero`` alone.
    Refused: two numbers side by side (``five five``, ``nineteen ninety``, ``twenty
    twenty``), a scale twice or out of order (``one hundred hundred``, ``thousand
    thousand``, ``one thousand two million``), a scale with nothing before it, ``a hundred``
    (an article is no number word) and ``eleven hundred`` (a multiple of a hundred is written
    with one to nine before it here).

    >>> word_number("five"), word_number("Twenty-three"), word_number("two hundred five"), word_number("lots")
    (5, 23, 205, None)
    >>> word_number("five five"), word_number("nineteen ninety"), word_number("one hundred hundred")
    (None, None, None)
    """
    words = [w for w in re.split(r"[\s-]+", text.strip().lower()) if w]
    if words == ["zero"]:
        return 0
    total, i, last_scale = 0, 0, None
    while i < len(words):
        got = _below_thousand(words, i)
        if got is None:
            return None
        group, i = got
        if i == len(words):
            return total + group
        scale = SCALES.get(words[i])
        if scale is None or scale == 100 or (last_scale is not None and scale >= last_scale):
            return None
        total, i, last_scale = total + group * scale, i + 1, scale
        if i + 1 < len(words) and words[i] == "and":  # "one thousand and five"
            i += 1
    return total if words else None
