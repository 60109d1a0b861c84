"""The one table of English number words, and the one reader of them.

Answers write counts as words (``\\mbox{four}``), problems write quantities in prose ("a
bakery sells three kinds of rolls"), and a model's reply may name a constant in words
("twenty-five"). All of them read the words of :data:`CARDINALS` through :func:`word_number`
or take the subset they may replace from it (:data:`composition_rl.values.constants.WORD_NUMBERS`).
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


def word_number(text: str) -> int | None:
    """A cardinal written in English words, or None.

    >>> word_number("five"), word_number("Twenty-three"), word_number("two hundred five"), word_number("lots")
    (5, 23, 205, None)
    """
    words = re.split(r"[\s-]+", text.strip().lower().replace(" and ", " "))
    if not words or words == [""]:
        return None
    total = cur = 0
    seen = False
    for w in words:
        if w in CARDINALS:
            cur += CARDINALS[w]
        elif w in SCALES and seen:
            scale = SCALES[w]
            if scale == 100:
                cur *= 100
            else:
                total += cur * scale
                cur = 0
        else:
            return None
        seen = True
    return total + cur
