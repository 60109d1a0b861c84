"""The text of Sequential Prompt Composition (seed 000, Section 3.4).

``Compose(q1, q2) = q1_bar (+) r (+) q2_bar`` where ``q1_bar`` is q1 followed by a definition of
a variable X for v1 (sub-step 1), ``q2_bar`` is q2 with the constant v2 replaced by Y
(sub-step 2), and ``r`` states "Y is d less than X" with ``d = v1 - v2`` (sub-step 3). The
answer is q2's. Depth K applies it recursively: ``SPC(q1..qK) = Compose(q1, SPC(q2..qK))``.

This module owns the wording, so that every engine writes, and every check reads, one format:
each link sits in its own paragraph (the *glue*) between the two problem texts::

    {q1}

    Let $X$ be the answer to the problem above. $Y$ is $6$ less than $X$.

    {q2 with one constant replaced by Y}
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

__all__ = [
    "DEFINITIONS",
    "VARIABLE_NAMES",
    "definition_glue",
    "Glue",
    "find_glue",
    "glue_text",
    "join",
    "relation_sentence",
    "variable_token",
]

# Sub-step 1 phrasings; {unit} is "" or a parenthesised unit note.
DEFINITIONS: tuple[str, ...] = (
    "Let ${x}$ be the answer to the problem above{unit}.",
    "Denote the answer to the problem above by ${x}${unit}.",
    "Call the answer to this problem ${x}${unit}.",
    "Let ${x}$ denote the value you obtain above{unit}.",
)

# Preferred variable names, in order; X, Y first as in the paper's example. Every engine
# draws its names from here, and the checks read them back.
VARIABLE_NAMES: tuple[str, ...] = tuple("XYZWUVPQRSTMNKLGHJ")

_UNIT_NOTES = {
    "": "",
    "dollars": " (in dollars)",
    "percent": " (as a percentage, without the \\% sign)",
    "degrees": " (in degrees)",
}


def unit_note(unit: str) -> str:
    return _UNIT_NOTES.get(unit, f" (in {unit})")


def relation_sentence(x: str, y: str, d_abs_latex: str, direction: str) -> str:
    """Sub-step 3: ``direction`` is "less" (d > 0), "more" (d < 0) or "equal" (d == 0)."""
    if direction == "equal":
        return f"${y}$ is equal to ${x}$."
    if direction not in ("less", "more"):
        raise ValueError(f"direction={direction!r} must be 'less', 'more' or 'equal'")
    return f"${y}$ is ${d_abs_latex}$ {direction} than ${x}$."


@lru_cache(maxsize=1 << 16)
def glue_text(x: str, y: str, d_abs_latex: str, direction: str, variant: int, unit: str = "") -> str:
    """The paragraph that defines X and states how Y relates to it."""
    definition = DEFINITIONS[variant % len(DEFINITIONS)].format(x=x, unit=unit_note(unit))
    return f"{definition} {relation_sentence(x, y, d_abs_latex, direction)}"


def definition_glue(x: str, y: str, definition: str, d_abs_latex: str, direction: str) -> str:
    """The glue paragraph with a free-text definition of X (the LLM engine's: "the number of
    red marbles in the problem above"), read back by ``find_glue(..., free_definition=True)``."""
    return f"Let ${x}$ be {definition}. {relation_sentence(x, y, d_abs_latex, direction)}"


def join(q1_text: str, glue: str, rest: str) -> str:
    """``q1_bar (+) r (+) q2_bar`` as one prompt."""
    return f"{q1_text}\n\n{glue}\n\n{rest}"


def variable_token(y: str, math_mode: bool, next_text: str) -> str:
    """What replaces the literal: ``Y`` in math mode (``Y \\cdot `` before a bracket, so that
    ``3(x+1)`` does not become the function application ``Y(x+1)``), ``$Y$`` in prose."""
    if not math_mode:
        return f"${y}$"
    nxt = next_text.lstrip()
    if nxt.startswith(("(", "[", "\\left", "\\{")):
        return f"{y} \\cdot "
    return y


class Glue(NamedTuple):
    """A parsed glue paragraph: where it sits and what it states (a NamedTuple: the checks
    build one per record)."""

    start: int
    end: int  # index just after the paragraph's trailing blank line
    x: str
    y: str
    d_latex: str  # as written ("" when the relation is "equal to")
    direction: str  # less / more / equal


_DEF_ALTS = "|".join(
    re.escape(t).replace(r"\{x\}", "(?P=x)").replace(r"\{unit\}", r"(?: \([^\n]*?\))?")
    for t in DEFINITIONS
)


# what stands for the definition in a free-text glue (definition_glue): one line, shortest match
_FREE_DEF = r"Let \$(?P=x)\$ be [^\n]+?\."


@lru_cache(maxsize=1024)
def _glue_pattern(x: str, y: str, free_definition: bool = False) -> re.Pattern[str]:
    alts = _FREE_DEF if free_definition else _DEF_ALTS
    return re.compile(
        r"\n\n(?P<def>(?:" + alts.replace("(?P=x)", re.escape(x)) + r")) "
        r"\$" + re.escape(y) + r"\$ is (?:\$(?P<d>[^$\n]+)\$ (?P<dir>less|more) than|(?P<eq>equal to)) "
        r"\$" + re.escape(x) + r"\$\.\n\n"
    )


def find_glue(text: str, x: str, y: str, start: int = 0, free_definition: bool = False) -> Glue | None:
    """Locate the glue paragraph for the link (x, y) in a composed prompt.

    The pattern is built from the same templates the composer writes, so text an engine wrote
    in any other shape is not recognised (and the checks reject it). With
    ``free_definition`` the definition sentence is :func:`definition_glue`'s
    ("Let $X$ be <one line>.") instead of one of :data:`DEFINITIONS`.
    """
    pat = _glue_pattern(x, y, free_definition)
    m = pat.search(text, start)
    if m is None:
        return None
    d, direction, eq = m.group("d", "dir", "eq")
    return Glue(m.start(), m.end(), x, y, d or "", "equal" if eq else direction)
