"""The text of Sequential Prompt Composition (Composition-RL, Section 3.4).

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
import string
from functools import lru_cache
from typing import NamedTuple

__all__ = [
    "DEFINITIONS",
    "DERIVED_PHRASES",
    "derived_glue",
    "derived_phrase",
    "VARIABLE_NAMES",
    "definition_glue",
    "Glue",
    "find_glue",
    "glue_text",
    "join",
    "relation_sentence",
    "variable_token",
    "withheld_note",
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


# Sub-step 1 for a v1 derived from an answer that is not one number (see
# ``values.derive``): the noun phrase a problem writer would use for each derivation. The
# definition sentence is "Let $X$ be <phrase>." (:func:`derived_glue`); the checks rebuild the
# phrase from the recorded derivation and compare it with the text, and :func:`find_glue`
# reads these sentences from the same templates. ``{ordinal}`` is "first", "second", ...;
# ``{name}`` the variable as the problem writes it; ``{point}`` "x = 2" or "h = 2$ and $r = 3".
DERIVED_PHRASES: dict[str, str] = {
    "interval_length": "the length of the interval that answers the problem above",
    "interval_left": "the left endpoint of the interval that answers the problem above",
    "interval_right": "the right endpoint of the interval that answers the problem above",
    "union_max_end": "the largest finite endpoint of the intervals that make up the answer to the problem above",
    "union_min_end": "the smallest finite endpoint of the intervals that make up the answer to the problem above",
    "tuple_entry": "the {ordinal} entry of the answer to the problem above",
    "tuple_entry:named": "the value of ${name}$ in the answer to the problem above",
    "tuple_sum": "the sum of the entries of the answer to the problem above",
    "set_max": "the largest of the values that answer the problem above",
    "set_min": "the smallest of the values that answer the problem above",
    "set_sum": "the sum of the values that answer the problem above",
    "set_size": "the number of values that answer the problem above",
    "choice_value": "the number given in the correct option of the problem above",
    "choice_position": "the position in the alphabet of the letter that answers the problem above (A = 1, B = 2, and so on)",
    "choice_count": "the number of letters in the answer to the problem above",
    "expr_value": "the value of the answer to the problem above at ${point}$",
    "poly_coeff": "the coefficient of ${name}^{{{arg}}}$ in the answer to the problem above",
    "poly_coeff:1": "the coefficient of ${name}$ in the answer to the problem above",
    "poly_coeff:0": "the constant term of the answer to the problem above",
    "poly_degree": "the degree of the polynomial that answers the problem above",
    "matrix_entry": "the entry in row {row}, column {col} of the matrix that answers the problem above",
    "trace": "the trace of the matrix that answers the problem above",
    "det": "the determinant of the matrix that answers the problem above",
    "vector_entry": "the {ordinal} entry of the vector that answers the problem above",
    "complex_real": "the real part of the answer to the problem above",
    "complex_imag": "the imaginary part of the answer to the problem above",
    "base_value": "the value, written in base ten, of the number that answers the problem above",
    "month": "the number of the month that answers the problem above (January = 1, February = 2, and so on)",
    "ratio_value": "the value of the ratio that answers the problem above (its first term divided by its second)",
    "ratio_term": "the {ordinal} term of the ratio that answers the problem above, written in lowest terms",
    "time_hour": "the hour of the time that answers the problem above, on a 12-hour clock",
    "time_minute": "the number of minutes past the hour in the time that answers the problem above",
    "time_second": "the number of seconds past the minute in the time that answers the problem above",
    "date_day": "the day of the month in the date that answers the problem above",
    "weekday": "the number of the day of the week that answers the problem above (Monday = 1, Tuesday = 2, and so on to Sunday = 7)",
}
_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth")


def derived_phrase(kind: str, arg: str = "", name: str = "") -> str:
    """The noun phrase for a derivation (see :data:`DERIVED_PHRASES` and
    :class:`composition_rl.values.Derivation`).

    >>> derived_phrase("tuple_entry", "2", "q")
    'the value of $q$ in the answer to the problem above'
    >>> derived_phrase("expr_value", "h=2,r=3")
    'the value of the answer to the problem above at $h = 2$ and $r = 3$'
    """
    key = kind
    if kind == "tuple_entry" and name:
        key = "tuple_entry:named"
    elif kind == "poly_coeff" and arg in ("0", "1"):
        key = "poly_coeff:" + arg
    template = DERIVED_PHRASES.get(key)
    if template is None:
        raise ValueError(f"no wording for derivation kind {kind!r}; known: {', '.join(sorted(DERIVED_PHRASES))}")
    fields = {"name": name, "arg": arg}
    if kind in ("tuple_entry", "vector_entry", "ratio_term"):
        fields["ordinal"] = _ORDINALS[int(arg) - 1]
    elif kind == "matrix_entry":
        fields["row"], fields["col"] = arg.split(",")
    elif kind == "expr_value":
        fields["point"] = "$ and $".join(a.replace("=", " = ") for a in arg.split(","))
    return template.format(**fields)


def derived_glue(x: str, y: str, phrase: str, d_abs_latex: str, direction: str) -> str:
    """The glue paragraph of a derived v1: "Let $X$ be <phrase>. <relation>"."""
    return definition_glue(x, y, phrase, d_abs_latex, direction)


def definition_glue(x: str, y: str, definition: str, d_abs_latex: str, direction: str) -> str:
    """The glue paragraph with a free-text definition of X (the LLM engine's: "the number of
    red marbles in the problem above"), read back by ``find_glue(..., free_definition=True)``."""
    return f"Let ${x}$ be {definition}. {relation_sentence(x, y, d_abs_latex, direction)}"


def withheld_note(token: str) -> str:
    """The sentence put before a later problem asked alone, its variable's value withheld (the
    solver probe, and check 5's blind call): the variable stays, as an unknown. ``token`` is
    the variable as the sentence writes it (``$Y$`` in prose, ``Y`` where the caller's text
    writes it bare)."""
    return f"Here {token} stands for a number whose value is not given."


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
    definition: str = ""  # the definition sentence as written ("Let $X$ be ...")
    derived: bool = False  # the definition is one of DERIVED_PHRASES' (read by the default pattern)


_DEF_ALTS = "|".join(
    re.escape(t).replace(r"\{x\}", "(?P=x)").replace(r"\{unit\}", r"(?: \([^\n]*?\))?")
    for t in DEFINITIONS
)
# the derived definitions, their fields read as any text on the line
_FIELD = "\x00"
_DERIVED_ALTS = "|".join(
    "Let \\$(?P=x)\\$ be "
    + re.escape(t.format(**{f: _FIELD for _, f, _, _ in string.Formatter().parse(t) if f})).replace(_FIELD, "[^\\n]+?")
    + "\\."
    for t in DERIVED_PHRASES.values()
)


# what stands for the definition in a free-text glue (definition_glue): one line, shortest match
_FREE_DEF = r"Let \$(?P=x)\$ be [^\n]+?\."


@lru_cache(maxsize=1024)
def _glue_pattern(x: str, y: str, free_definition: bool = False) -> re.Pattern[str]:
    alts = _FREE_DEF if free_definition else _DEF_ALTS + "|(?P<derived>" + _DERIVED_ALTS + ")"
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
    d, direction, eq, definition = m.group("d", "dir", "eq", "def")
    derived = not free_definition and m.group("derived") is not None
    return Glue(m.start(), m.end(), x, y, d or "", "equal" if eq else direction, definition, derived)
