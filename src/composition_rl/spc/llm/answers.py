"""When a model's final answer is the stated one: exact values where both parse, else the
same text once the spelling that carries no meaning is dropped, else (an unbracketed list,
which MATH answers mean as a set) the same items in any order. Check 5 of the ``llm`` engine
compares the model's answers with it (:meth:`~composition_rl.spc.llm.composer.LLMComposer.dependence`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from composition_rl.values import exact_equal, parse_answer_value
from composition_rl.values.derive_shapes import split_top

__all__ = ["same_answer"]


def same_answer(answer: str, golds: Sequence[str]) -> bool:
    r"""Whether a model's final answer is one of ``golds``: equal exact values where both parse,
    else equal text once spaces, dollars, ``\left``/``\right`` and text wrappers are
    dropped, else (two lists of as many items, neither bracketed: "E, H" and ``\text{H, E}``,
    which MATH answers mean as sets) the same items in any order.

    >>> same_answer("E, H", ["\\text{H, E}"]), same_answer("(1, 2)", ["(2, 1)"])
    (True, False)
    >>> same_answer("1,000", ["1000"])
    True
    """
    av = parse_answer_value(answer)
    for g in golds:
        gv = parse_answer_value(g)
        if av is not None and gv is not None:
            if exact_equal(av.value, gv.value):
                return True
        elif _norm(answer) == _norm(g):
            return True
    if av is None:
        items = _set_items(answer)
        for g in golds:
            other = _set_items(g) if items else None
            if other and len(other) == len(items) and _match_all(items, other):
                return True
    return False


_WRAPPER = re.compile(r"\\(?:text|textbf|textrm|mathrm|mbox)\s*\{([^{}]*)\}")


def _norm(t: str) -> str:
    return re.sub(r"\s+|\$|\\left|\\right|\\!|\\,", "", _WRAPPER.sub(r"\1", t))


def _set_items(t: str) -> list[str] | None:
    """The items of an answer written as a list without brackets ("-2, 3", "E, H"), or None
    (one item, or a bracketed tuple or interval, whose order counts)."""
    t = _norm(t).rstrip(".")
    if not t or _bracketed(t):
        return None
    out = split_top(t)
    return out if len(out) > 1 and all(out) else None


def _bracketed(t: str) -> bool:
    """Whether ``t`` is one bracketed tuple, interval or set: an opening ``(``, ``[`` (either
    may close an interval) or ``\\{`` whose matching close is the last character. A braced
    item at either end (``\\frac{1}{2}``, ``30^{\\circ}``) is no bracket."""
    if not (t[0] in "([" or t.startswith("\\{")):
        return False
    depth = 0
    for i, ch in enumerate(t):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return i == len(t) - 1
    return False


def _same_item(a: str, b: str) -> bool:
    """Two items of a list: a labelled one (``x=1``) matches only the same label with the
    same value; others as :func:`same_answer` compares answers."""
    if "=" in a or "=" in b:
        (la, _, va), (lb, _, vb) = a.partition("="), b.partition("=")
        return la == lb and same_answer(va, (vb,))
    return same_answer(a, (b,))


def _match_all(items: list[str], other: list[str]) -> bool:
    """Whether each item equals a distinct item of ``other`` (lists of a few items)."""
    left = list(other)
    for it in items:
        j = next((j for j, o in enumerate(left) if _same_item(it, o)), None)
        if j is None:
            return False
        del left[j]
    return True
