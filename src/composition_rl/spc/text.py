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
from collections.abc import Sequence
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
    "Instruction",
    "answer_instructions",
    "join",
    "lead_text",
    "plain_text",
    "restore_instructions",
    "shift_offset",
    "strip_instructions",
    "relation_sentence",
    "variable_token",
    "withheld_note",
]

# Sub-step 1 phrasings; {unit} is "" or a parenthesised unit note.
DEFINITIONS: tuple[str, ...] = (
    "Let ${x}$ be the answer to the problem above{unit}.",
    "Denote the answer to the problem above by ${x}${unit}.",
    "Call the answer to the problem above ${x}${unit}.",
    "Let ${x}$ denote the value you obtain above{unit}.",
)
# phrasings written before and still read back (records composed then pass the checks): "this
# problem" could be either problem, the one above or the one that follows
_READ_ONLY_DEFINITIONS: tuple[str, ...] = ("Call the answer to this problem ${x}${unit}.",)

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
    """The parenthetical a definition adds for ``unit`` (``" (in dollars)"``; ``""`` for none)."""
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


def variable_token(y: str, math_mode: bool, next_text: str, plain: bool = False) -> str:
    """What replaces the literal: ``Y`` in math mode (``Y \\cdot `` before a bracket, so that
    ``3(x+1)`` does not become the function application ``Y(x+1)``), ``$Y$`` in prose, and
    ``Y`` everywhere in a problem that writes no LaTeX at all (``plain``, see
    :func:`plain_text`: "6 * Y", "costs €Y", not "6 * $Y$")."""
    if plain:
        return y
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
    for t in DEFINITIONS + _READ_ONLY_DEFINITIONS
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


# -- how a problem writes numbers -------------------------------------------------------------

# a dollar sign that opens a math span, not a price: "$5$ apples" and "$x$" open math, "$150"
# in "he has $150 and ..." is a currency sign (a digit follows and no span closes before a
# space-separated word); a backslash is a TeX command or an escaped \$
_TEX_MARK = re.compile(r"\\|\$(?!\d[\d,.]*(?:\s|[.,;:?!)]|$))")


@lru_cache(maxsize=1 << 16)
def plain_text(question: str) -> bool:
    """Whether ``question`` writes no LaTeX: no backslash, and every ``$`` is a currency sign
    before a plain number. In such a problem a variable is written as the problem writes its
    numbers, bare (``6 * Y``), and a LaTeX ``$Y$`` would be the only TeX in it.

    >>> plain_text("Solve the following multiplication: 6 * 58. Give only the result as your final answer.")
    True
    >>> plain_text("How much money is Robert missing if he has $150 and the conference costs $680?")
    True
    >>> plain_text("What is $3+4$?"), plain_text("A pen costs $\\\\$5$."), plain_text("Let $x$ be 5.")
    (False, False, False)
    """
    return _TEX_MARK.search(question) is None


# -- answer instructions ----------------------------------------------------------------------
#
# A composed prompt asks for one final answer, at its end (the last part's own instruction, or
# the one a chat template adds). An instruction of an earlier part ("Give only the result as your
# final answer.") asks the solver to stop half-way, so every part but the last loses its
# answer-format instructions when composed. They are a class of text found by what it does, not
# by where it comes from: a sentence that says how to deliver the answer and carries no quantity
# of the problem (no digit, no math, no question mark). Sentences that fix the *value* of the
# answer stay: a unit ("in centimeters", "as a percent"), a base, a rounding, a listing order,
# an ordered pair (a derived X reads its entries). Only whole sentences go, with the space
# before them, so no word of the problem is lost; one clause is rewritten instead of removed,
# an order to "state the final answer to" what follows, which becomes "Solve" what follows.

# a form of writing a number that does not change its value
_FORM = (r"(?:as\s+an?\s+(?:common\s+|improper\s+|reduced\s+|simplified\s+)?fraction"
         r"|as\s+a\s+mixed\s+number|in\s+(?:its\s+)?simplest\s+(?:radical\s+|fractional\s+)?form|in\s+simplified\s+form"
         r"|in\s+(?:its\s+)?lowest\s+terms|in\s+terms\s+of\s+\$\\pi\$|in\s+simplest\s+terms)")
_INSTRUCTION_SENTENCES = re.compile(
    r"(?:"
    # "Give the result as your final answer." "Put your final answer within \boxed{}."
    # (an order: "The final answer is 4." in a worked example is the problem's own text)
    r"(?:please\s+)?(?:give|state|write|put|provide|present|return|output|enter|report|place)\b"
    r"(?:\s+[a-z]+){0,5}?\s+(?:your|the)\s+final\s+answer\b[^.?!\n\d$=]*"
    r"|[^.?!\n\d$=]*\\boxed\{\}[^.?!\n\d$=]*"
    # "Do not include units." "Give your answer without units."
    r"|do\s+not\s+include\s+(?:the\s+)?units?|(?:give|write|state)\s+(?:your|the)\s+answer\s+without\s+(?:the\s+)?units?"
    # "Express your answer as a common fraction." "... in simplest radical form."
    r"|(?:express|write|give|leave|enter)\s+(?:your|the)\s+answer\s+" + _FORM + r"(?:,?\s+(?:and\s+|or\s+)?" + _FORM + r")*"
    r"|simplify\s+your\s+answer(?:\s+as\s+much\s+as\s+possible)?"
    r")\.(?=\s|$)",
    re.I,
)
# where an instruction sentence may start: the start of the text or of a line, or after a
# sentence's end and spaces (the space before it goes with it)
_SENTENCE_START = re.compile(r"(?:^|(?<=[.?!:])[ \t]+|(?<=\n))")
# "State the final answer to the following arithmetic problem: 3 - 4 =": the order to answer
# becomes an order to solve; the problem after it stays word for word
_ANSWER_TO = re.compile(r"(?:^|(?<=[.?!])[ \t]+|(?<=\n))(?P<verb>(?:state|give|provide|write|find)\s+the\s+final\s+answer\s+(?:to|of|for))\s+",
                        re.I)


# number words the constant finder reads (values.literals.WORD_NUMBERS, "one" left out there too)
_NUMBER_WORD = re.compile(r"\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen"
                          r"|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety"
                          r"|hundred|thousand|million|dozen)\b", re.I)


class Instruction(NamedTuple):
    """One answer instruction taken out of a part: ``text`` at ``start`` of the part's own text
    (its original), replaced by ``by`` ("" for a removed sentence)."""

    start: int
    text: str
    by: str = ""

    def to_list(self) -> list:
        """The fields as a JSON list ``[start, text, by]``."""
        return [self.start, self.text, self.by]


@lru_cache(maxsize=1 << 16)
def answer_instructions(question: str) -> tuple[Instruction, ...]:
    """The answer-format instructions of ``question``, in order (see the class above).

    >>> answer_instructions("Solve the following multiplication: 7 * 4. Give only the result as your final answer.")
    (Instruction(start=42, text=' Give only the result as your final answer.', by=''),)
    >>> [i.text for i in answer_instructions("How many? Give the result as your final answer. Do not include units.")]
    [' Give the result as your final answer.', ' Do not include units.']
    >>> answer_instructions("State the final answer to the following arithmetic problem: 4 - 1 =")
    (Instruction(start=0, text='State the final answer to', by='Solve'),)
    >>> answer_instructions("What is $\\\\frac{1}{2}+\\\\frac{1}{3}$? Express your answer in centimeters.")
    ()
    """
    out: list[Instruction] = []
    for m in _ANSWER_TO.finditer(question):
        out.append(Instruction(m.start("verb"), m.group("verb"), "Solve"))
    for start in _SENTENCE_START.finditer(question):
        m = _INSTRUCTION_SENTENCES.match(question, start.end())
        if m is None or _NUMBER_WORD.search(m.group()):
            continue  # a sentence that writes a number ("Give the two results ...") may hold a quantity
        a = start.start()
        if a == 0 or question[a - 1] == "\n":  # at the start of the text or of a line: no space before it
            end = m.end()
            while end < len(question) and question[end] in " \t":
                end += 1  # the space after it goes with it instead
            out.append(Instruction(a, question[a:end]))
        else:
            out.append(Instruction(a, question[a : m.end()]))
    out.sort()
    if len(out) == 1 and not out[0].by and out[0].text.strip() == question.strip():
        return ()  # the whole text is an instruction: nothing of it is a problem, leave it alone
    return tuple(out)


def lead_text(question: str) -> tuple[str, tuple[Instruction, ...]]:
    """A part's text as it stands before a later part: its answer instructions taken out, and
    the instructions (to record on the composed record).

    >>> lead_text("A box holds 3 pens. How many? Give the result as your final answer. Do not include units.")[0]
    'A box holds 3 pens. How many?'
    """
    found = answer_instructions(question)
    return (strip_instructions(question, found) if found else question), found


def strip_instructions(question: str, found: Sequence[Instruction]) -> str:
    """``question`` with the instructions ``found`` (some of :func:`answer_instructions`, in
    order) taken out or rewritten."""
    out, pos = [], 0
    for ins in found:
        out += [question[pos : ins.start], ins.by]
        pos = ins.start + len(ins.text)
    out.append(question[pos:])
    return "".join(out)


def shift_offset(offset: int, found: Sequence[Instruction]) -> int:
    """Where ``offset`` of a part's original text lies in its :func:`lead_text` (an offset
    inside an instruction is an error: instructions hold no quantity)."""
    out = offset
    for ins in found:
        if ins.start + len(ins.text) <= offset:
            out += len(ins.by) - len(ins.text)
        elif ins.start < offset + 1 and offset < ins.start + len(ins.text):
            raise ValueError(f"offset {offset} lies inside the answer instruction {ins.text!r}")
    return out


def restore_instructions(text: str, found: Sequence[Instruction | Sequence]) -> str:
    """A part's original text from its :func:`lead_text` and the recorded instructions
    (``[start, text, by]`` lists, as a record stores them, or :class:`Instruction`)."""
    out, pos, shift = [], 0, 0
    for start, old, by in sorted(tuple(i) for i in found):
        at = start + shift
        if text[at : at + len(by)] != by:
            raise ValueError(f"the text does not hold {by!r} where the instruction {old!r} was")
        out += [text[pos:at], old]
        pos = at + len(by)
        shift += len(by) - len(old)
    out.append(text[pos:])
    return "".join(out)
