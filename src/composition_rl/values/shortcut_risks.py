"""Shortcut risks: constants a chain may still replace, but only last.

A :mod:`shortcut rule <composition_rl.values.shortcuts>` flags a literal the rest of the text
gives away, and such a literal is never replaced. A risk is weaker: the literal may give its
value away, so a chain replaces it only when no other constant of the later problem allows a
natural offset (``crl compose --risks last``), or never (``--risks reject``).

* ``figure_count``: a count of things a figure draws ("[[Y]] concentric circles", "a [[Z]]
  by [[Z]] grid"): a reader may count them in the picture.
* ``bound``: the literal right after "fewer than", "at most", "between", "<", "\\le" ...
* ``word_number``: a count written as a word ("two dice").

:func:`shortcut_risks` gives each token of
:func:`composition_rl.values.find_constants` its first risk ("" if none).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from composition_rl.values.shortcuts import after_by, has_figure

__all__ = ["RISKS", "RISK_POLICIES", "after_bound", "drawn_count", "shortcut_risks"]

# -- risks: constants a chain may still replace, but only when no other constant of the
# later problem allows a natural offset (in a 260-record hunt, shortcuts were 57% of the
# records whose later problem has a figure, and 40% of those whose variable was a bound,
# against about 21% of the rest). A risk costs no coverage: a problem whose only constants
# carry one is still composed.
RISKS = ("figure_count", "bound", "word_number")
# what an engine does with a constant that carries a risk (``crl compose --risks``): "last", replace
# it only when no other constant allows a natural offset; "reject", never replace it
RISK_POLICIES = ("last", "reject")

# a count of things a figure draws: "[[Y]] concentric circles", "[[W]] unit squares", "a
# [[Z]] by [[Z]] grid": a reader may count them in the picture. A measure ("radius 5
# inches", "25 square units", "40 degrees") is no count of drawn things.
_DRAWN = re.compile(r"\s*\$?\s*(?:\\text\s*\{\s*)?([a-z-]+)(?:\s+([a-z-]+))?")
_BY = re.compile(r"\s*\$?\s*-?\s*by\s*-?\s*\$?\s*\d")
_MEASURES = frozenset("""
inches inch feet foot cm centimeters centimetres mm millimeters meters metres km kilometers miles yards units unit
degrees radians seconds minutes hours days weeks months years dollars cents pounds ounces grams kilograms liters
litres gallons quarts pints cups percent times mph squared cubed square cubic
""".split())


def _plural_object(w: str | None) -> bool:
    return bool(w) and w.endswith("s") and not w.endswith("ss") and w not in _MEASURES


def drawn_count(q: str, s: int, lit: str) -> bool:
    """Whether the count ``lit`` at ``s`` (in prose, in a problem with a figure) counts things
    the figure draws: a plural noun right after it, or after one word ("concentric circles",
    "unit squares"), that is no measure; or a side of a grid ("a 4 by 4 grid")."""
    e = s + len(lit)
    if _BY.match(q, e) or after_by(q, s):
        return True
    m = _DRAWN.match(q, e)
    if m is None or (m.group(1) in _MEASURES and not (m.group(1) == "unit" and _plural_object(m.group(2)))):
        return False
    return _plural_object(m.group(1)) or _plural_object(m.group(2))


# a bound: the literal right after "fewer than", "at most", "over", "between", "<", "\le" ...
_BOUND_WORDS = ("less than", "fewer than", "greater than", "more than", "larger than", "smaller than", "bigger than",
                "at most", "at least", "below", "above", "over", "under", "exceeds", "exceed", "exceeding", "up to",
                "between", "<", ">", "\\le", "\\leq", "\\ge", "\\geq", "\\lt", "\\gt", "\\leqslant", "\\geqslant")
_BETWEEN_AND = re.compile(r"\bbetween\s+\$?[^$\s]{1,12}\$?\s+and$")


def after_bound(q: str, s: int) -> bool:
    """Whether the literal at ``s`` comes right after a bound's words (spaces, a dollar or
    ``\\text{`` between)."""
    pre = q[max(0, s - 32) : s].rstrip()
    if pre.endswith("$"):
        pre = pre[:-1].rstrip()
    if pre.endswith("{") and pre[:-1].rstrip().endswith("\\text"):
        pre = pre[: pre.rfind("\\text")].rstrip()
    low = pre.lower()
    if not low.endswith(_BOUND_WORDS):
        return bool(low.endswith("and") and _BETWEEN_AND.search(low))
    for w in _BOUND_WORDS:
        if low.endswith(w):
            before = low[: -len(w)][-1:]
            if not (w[0].isalpha() and before.isalpha()):  # "clover", "thunder" are no bounds
                return True
    return False


def shortcut_risks(q: str, toks, blocks: Sequence[tuple[int, int]]) -> list[str]:
    """Per token of ``q``, the first of :data:`RISKS` that applies, or ""."""
    out = [""] * len(toks)
    figure = has_figure(q, blocks)
    for j, t in enumerate(toks):
        if figure and t.role == "prose" and isinstance(t.key, int) and 2 <= t.key <= 30 and drawn_count(q, t.s, t.lit):
            out[j] = "figure_count"
        elif after_bound(q, t.s):
            out[j] = "bound"
        elif t.lit[0].isalpha():
            # a count written as a word ("two dice", "three of the sides"): shortcuts in 14 of 31
            # blind-judged records against 19% of the others (docs/composition.md, "A third risk")
            out[j] = "word_number"
    return out
