"""What makes a link read naturally: the offset kinds, their ranking, and which q1 may lead.

Sub-step 3 of the paper (Section 3.4) states ``Y = X - d``. Any exact ``d`` is correct, but a
link can still read as no problem writer would write it: an irrational offset built to cancel
q1's answer ("$Z$ is $\\frac{\\sqrt{13}}{2} + \\frac{1}{2}$ less than $Y$"), an offset in the
millions ("$Y$ is $2999980$ less than $X$"), or a q1 whose answer is approximate by
construction ("to two significant figures") used as if exact. :class:`Naturalness` turns
that into explicit, configurable rules:

* a q1 (any position but the last) is *preferred* when its answer is a rational number of
  modest size and its text asks for no rounding; pools are filled with preferred problems
  first (:func:`composition_rl.jobs.compose.pools.build_pools`);
* a link's offset must be within ``max_offset`` and have a denominator of at most
  ``max_denominator``; among the constants that qualify, the engine ranks by offset kind
  (:data:`OFFSET_KINDS`: zero and integer first) before the structural rank of the constant;
* a problem that points at a figure it does not hold (``missing_figure``: "The complete graph
  of $y=f(x)$ ... is shown in red below." with no figure after it) can be solved by nobody,
  and one whose recorded answer is only part of what it asks (``incomplete_answer``: "Enter
  the two smallest solutions, separated by commas." answered ``18``) cannot lend a composed
  record its answer: neither stands anywhere in a chain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache

from composition_rl.values.derive_shapes import list_items
from composition_rl.values.numwords import CARDINALS
from composition_rl.values.parse import inexact_answer

__all__ = ["APPROXIMATE", "OFFSET_KINDS", "Naturalness", "approximate_gold", "approximate_question", "degenerate",
           "incomplete_answer", "inexact_q1",
           "offset_kind", "rounded_integer"]

# The kinds an offset ``d = v1 - v2`` can have, in order of preference ("equal to" and an
# integer read equally well, so they share a rank).
OFFSET_KINDS = ("zero", "integer", "rational", "irrational")
_KIND_RANK = {"zero": 0, "integer": 0, "rational": 1, "irrational": 2}

# A question whose answer is approximate by construction: the solver rounds, so another
# correct solver may get another X (Minerva: "to two significant figures").
APPROXIMATE = re.compile(
    r"significant (?:figure|digit)s?|decimal places?|to the nearest|nearest (?:whole|integer|tenth|hundredth|thousandth)"
    r"|\bround(?:ed|ing)?\b(?! robin)|\bapproximate(?:ly)?\b|\bestimate\b|order of magnitude",
    re.I,
)


# A problem that points at a figure it does not hold ("The complete graph of $y=f(x)$ ... is
# shown in red below." with no [asy] after it, as some MATH and AIME problems are stored):
# nobody can solve it from its text, so it may stand nowhere in a chain, not even
# as the later problem. A figure, a table or a list in the text is one it holds.
_POINTS_AT_FIGURE = re.compile(
    r"\bshown\s+in\s+(?:red|blue|green|black|gr[ae]y|bold)\b"
    r"|\bshown\s+in\s+the\s+(?:\w+\s+)?(?:figure|diagram|picture|graph|drawing)"
    r"|\b(?:in|of)\s+the\s+(?:figure|diagram|picture|drawing)\s+(?:below|above|at\s+(?:the\s+)?(?:right|left)|shown)"
    r"|\bthe\s+(?:figure|diagram|picture|graph|drawing)\s+(?:below|above)\b"
    r"|\b(?:figure|diagram|picture|graph|drawing)\s+(?:is\s+|are\s+)?shown\s+(?:below|above)"
    r"|\bas\s+shown\s+(?:below|above)"
    r"|\bthe\s+(?:figure|diagram)\s+shows\b|\b(?:indicated|marked|labell?ed)\s+in\s+the\s+(?:figure|diagram)", re.I)
_HOLDS_FIGURE = re.compile(r"\[asy\]|\\begin\{(?:tabular|array)|\\bullet|<img|!\[|\\includegraphics", re.I)


@lru_cache(maxsize=1 << 16)
def missing_figure(text: str) -> bool:
    """Whether ``text`` points at a figure it does not hold.

    >>> missing_figure("The complete graph of $y=f(x)$, which consists of five line segments, is shown in red below.")
    True
    >>> missing_figure("The graph of $y = f(x)$ is shown below.\\n\\n[asy]draw((0,0)--(1,1));[/asy]")
    False
    >>> missing_figure("The first $20$ numbers of an arrangement are shown below. $\\bullet$ Row 1: $2,$ $2$")
    False
    """
    m = _POINTS_AT_FIGURE.search(text)
    return m is not None and _HOLDS_FIGURE.search(text) is None


# A gold answer that lists fewer items than its question asks for: MATH train sometimes keeps
# only the last of several boxed items ("List the points in order of increasing
# $x$-coordinate, separated by semicolons." answered `(8,38)` where $(-2, 18)$ is a point too;
# "Enter the two smallest solutions, separated by commas." answered `18`; "Enter the angles of
# the triangle ..." answered `75^\circ`). A composed record takes its answer from the last
# problem and X from the earlier ones, so such a problem may stand nowhere in a chain (its
# answer cannot be the composed record's). Only the sentence that asks for a separated
# list is read, and only a count it states or implies: an order to list in (two or more), a
# number word ("the two smallest"), or the angles of a triangle (three).
_SEP_ASKED = re.compile(r"\bseparated\s+by\s+(commas|semicolons)\b", re.I)
_IN_ORDER = re.compile(r"\bin\s+order\s+of\s+(?:increasing|decreasing)\b|\bin\s+(?:increasing|decreasing|ascending|descending)"
                       r"\s+order\b|\bfrom\s+(?:least|smallest|lowest)\s+to\s+(?:greatest|largest|highest)\b"
                       r"|\bfrom\s+(?:greatest|largest|highest)\s+to\s+(?:least|smallest|lowest)\b", re.I)
_COUNTED = re.compile(r"\bthe\s+(two|three|four|five|six)\s+(?:[a-z]+\s+)?(?:solutions|values|numbers|roots|points|integers)\b",
                      re.I)
_TRIANGLE_ANGLES = re.compile(r"\b(?:the\s+)?angles\s+of\s+(?:the|a|this)\s+triangle\b", re.I)


@lru_cache(maxsize=1 << 16)
def incomplete_answer(question: str, answer: str) -> bool:
    """Whether ``answer`` lists fewer items than ``question`` asks for in its list sentence.

    >>> q = "Find all points where they intersect. List the points in order of increasing $x$-coordinate, separated by semicolons."
    >>> incomplete_answer(q, "(8,38)"), incomplete_answer(q, "(-2,18);(8,38)")
    (True, False)
    >>> incomplete_answer("Find all real solutions. Enter all the solutions, separated by commas.", "3")
    False
    """
    m = _SEP_ASKED.search(question)
    if m is None:
        return False
    start = max(question.rfind(c, 0, m.start()) for c in ".?!") + 1
    ends = [i for i in (question.find(c, m.end()) for c in ".?!") if i >= 0]
    sentence = question[start : min(ends, default=len(question))]
    need = 0
    if _IN_ORDER.search(sentence):
        need = 2
    if (c := _COUNTED.search(sentence)) is not None:
        need = max(need, CARDINALS[c.group(1).lower()])
    if _TRIANGLE_ANGLES.search(sentence):
        need = max(need, 3)
    if need == 0:
        return False
    # the items under whichever separator the answer uses ("(-2, 18), (8, 38)" where
    # semicolons were asked), "3 \pm \sqrt{5}" counted as the two values it writes
    items = list_items(answer.strip(), ",;")
    return sum(2 if "\\pm" in x or "\\mp" in x else 1 for x in items) < need


def approximate_question(text: str) -> bool:
    """Whether ``text`` asks for a rounded or estimated answer.

    >>> approximate_question("Give your answer to two significant figures.")
    True
    >>> approximate_question("A round table seats 6. How many ways?")
    False
    """
    m = APPROXIMATE.search(text)
    if m is None:
        return False
    if m.group().lower() == "round":  # "a round table", "round trip": a shape, not rounding
        after = text[m.end() : m.end() + 12].lower()
        return after.startswith((" your", " to", " the answer", " off", " it"))
    return True


# An approximation sign; a decimal with a non-zero fractional digit, or scientific notation;
# what follows a box when the boxed number is a quantity with a unit (a letter, \AA, \mu or
# a \mathrm/\text word) rather than punctuation or the end of the math.
_APPROX_SIGN = re.compile(r"\\approx|\\simeq|≈")
_MEASURED_NUMBER = re.compile(r"(?<![\d.])\d*\.\d*[1-9]|\\times\s*10\s*\^")
_UNIT_AFTER = re.compile(r"(?:\s|~|\\[,;:! ])*(?:\\(?:mathrm|text|rm|mbox)\s*\{\s*~?\s*[A-Za-z\\]|\\AA|\\mu|[A-Za-z])")


# A problem whose answer is read off its text: an arithmetic step that leaves a number as it is
# (a factor or a divisor 1, a term 0: "1 * 7", "7 - 0", "$x \\cdot 1$"), or an operation on a
# list of one number repeated ("the LCM of these numbers: 20, 20"). It teaches nothing as a
# part, so it neither leads a link nor receives one.
_OP = r"(?:[*×·÷/]|\\cdot|\\times|\\div)"
_IDENTITY_STEP = re.compile(
    r"(?<![\d.\-\w^_{])1\s*(?:[*×·]|\\cdot|\\times)\s*(?=[-\d(\w\\])"  # 1 * a
    r"|" + _OP + r"\s*1(?![\d./\w])(?!\s*(?:[*×·^!]|\\cdot|\\times))"  # a * 1, a / 1
    r"|(?<![\d.\w^_{])0\s*\+\s*(?=[-\d(\w\\])"  # 0 + a
    r"|(?<![\d.\w^_{])0\s*(?:[*×·]|\\cdot|\\times)\s*(?=[-\d(])|(?:[*×·]|\\cdot|\\times)\s*0(?![\d.\w])"  # 0 * a, a * 0
    r"|(?<=[\w)}])\s*[+-]\s*0(?![\d.\w])(?!\s*(?:[*×·/^!]|\\cdot|\\times|\\div))"  # a + 0, a - 0
)
# a step undone by the next: "( -1 * 4 ) / 4", "5 + 3 - 3"
_AFTER_NUMBER = r"(?:(?<=\d)|(?<=\d )|(?<=\))|(?<=\) ))"  # an operator after a number, not after a letter or a brace
_CANCELLING_STEPS = re.compile(_AFTER_NUMBER + r"(?:\*\s*(\d+)\s*\)*\s*/\s*(\d+)|\+\s*(\d+)\s*\)*\s*-\s*(\d+)"
                               r"|-\s*(\d+)\s*\)*\s*\+\s*(\d+))(?![\d.*/(\w^{])")
_FIGURE_CODE = re.compile(r"\[asy\].*?(?:\[/asy\]|$)", re.S)
_ELLIPSIS = re.compile(r"\\(?:[lc]?dots[bc]?|ddots)|\.\.\.|…")
_NUMBER_LIST = re.compile(r"(?:multiple|divisor|factor|gcd|lcm|gcf|maximum|minimum|largest|smallest)\b[^.?!\n\d]*?"
                          r"(-?\d+(?:\s*(?:,\s*(?:and\s+)?|\s+and\s+)-?\d+)+)", re.I)


@lru_cache(maxsize=1 << 16)
def degenerate(question: str, answer: str) -> str:
    """Why ``question``'s answer is read off its text ("" if it is not): the answer is a number
    the text writes, and the text holds an identity step of arithmetic or a list operation on
    one number repeated, which hands that number over unchanged.

    >>> degenerate("Solve the following multiplication: 1 * 7. Give only the result as your final answer.", "7")
    'identity_step'
    >>> degenerate("Find the Least Common Multiple (LCM) of these numbers: 20, 20", "20")
    'repeated_operand'
    >>> degenerate("Calculate -( -( 7 - 0 ) ).", "7"), degenerate("Calculate ( 8 / 1 ).", "8")
    ('identity_step', 'identity_step')
    >>> degenerate("Solve the following multiplication: 0 * 5. Give only the result as your final answer.", "0")
    'identity_step'
    >>> degenerate("Calculate -( -( ( -1 * 4 ) / 4 ) ).", "-1")
    'identity_step'

    A step that leaves a number as it is inside a longer computation is no shortcut:

    >>> degenerate("State the final answer to the following arithmetic problem: 3 - 0 + 6 =", "9")
    ''
    >>> degenerate(r"If I expand $25\\cdot 24 \\cdots 2 \\cdot 1$, how many zeros are there at the end?", "6")
    ''
    >>> degenerate("Compute $0.1 + 0.02$.", "0.12"), degenerate("Find the LCM of these numbers: 15, 30", "30")
    ('', '')
    """
    question = _FIGURE_CODE.sub(" ", question)  # figure code draws, it computes nothing the reader sees
    a = answer.strip()
    if not re.fullmatch(r"-?\d+", a) or not re.search(r"(?<![\d.])" + re.escape(a.lstrip("-")) + r"(?!\.?\d)", question):
        return ""
    # a product or sum written out with an ellipsis ("1 \\cdot 2 \\cdots n") is a pattern, not a step
    if _IDENTITY_STEP.search(question) and not _ELLIPSIS.search(question):
        return "identity_step"
    for m in _CANCELLING_STEPS.finditer(question):
        a, b = [g for g in m.groups() if g is not None]
        if a == b:
            return "identity_step"
    for m in _NUMBER_LIST.finditer(question):
        items = {int(v) for v in re.findall(r"-?\d+", m.group(1))}
        if len(items) == 1:
            return "repeated_operand"
    return ""


def rounded_integer(answers, question: str, solution: str) -> bool:
    """Whether an integer gold is a rounding its worked ``solution`` shows: the computation
    that ends in the box has an approximation sign, or computes a quantity with a unit from
    a decimal or scientific-notation number (a measured value, so the integer keeps only its
    significant figures: ``0.29 / T cm = \\boxed{48} \\AA`` where 0.29/T is 48.3 Å). The
    computation is the text from the last line or sentence break before the box to the box.
    A question that asks for the rounding defines the integer, so it stays eligible.

    >>> rounded_integer(["560"], "What is the threshold wavelength?",
    ...                 r"$=5.6 \\times 10^{-7} m= \\boxed{560} nm$")
    True
    >>> rounded_integer(["65"], "Find the volume.", r"\\[\\frac{1}{3}(30)(6.5) = \\boxed{65}.\\]")
    False
    """
    first = str(answers[0]).strip() if answers else ""
    at = solution.rfind("\\boxed{")
    if not re.fullmatch(r"-?\d+", first) or at < 0 or approximate_question(question):
        return False
    computation = _final_computation(solution)
    if _APPROX_SIGN.search(computation):
        return True
    depth, end = 0, at + len("\\boxed")
    while end < len(solution):  # to the box's closing brace
        depth += {"{": 1, "}": -1}.get(solution[end], 0)
        if depth == 0:
            break
        end += 1
    return bool(_MEASURED_NUMBER.search(computation)) and bool(_UNIT_AFTER.match(solution, end + 1))


# An answer written as an approximation: a sign or a word before its value, or a leading
# "~" (inside an answer, "~" after a value is LaTeX's space: "5~\text{cm}").
_APPROX_ANSWER = re.compile(
    r"\\approx|\\simeq|\\sim(?![a-zA-Z])|\\doteq|≈|^[\s$]*~"
    r"|\b(?:approximately|approx|about|roughly|around|nearly|circa)\b", re.I)
# A solution that computes with a stand-in for pi or e ("$\pi \approx 3$", "using $\pi = 3.14$"):
# whatever it boxes is the stand-in's result, not the problem's. Only these two constants: a
# root or a logarithm given approximately usually bounds an integer that is exact (the greatest
# integer below sqrt(50) is 7 whatever 7.07 is rounded to).
# pi alone (not "16\pi = 20\pi") given a value near it (3, 3.14, 3.1416), or e given 2.7...
_CONSTANT_STANDIN = re.compile(
    r"(?<![\w}\])])\\pi\s*(?:\\approx|\\simeq|≈|=)\s*3(?:\.\d+)?(?![\d.]|\s*\\?[A-Za-z])"
    r"|(?<![\\\w])e\s*(?:\\approx|\\simeq|≈)\s*(?:2\.7\d*|3)(?![\d.])")
# a question that asks for a floor or a ceiling: an approximation in its solution bounds an
# integer that is exact (ceil(pi/3) = 2 because pi is about 3.14)
_FLOOR_ASKED = re.compile(r"\\[lr]floor|\\[lr]ceil|\b(?:greatest|largest|least|smallest) integer|\bfloor\b|\bceiling\b",
                          re.I)


_BREAKS = ("\n", "$$", "\\[", ". ", "\\\\")


def _final_computation(solution: str, reach_back: bool = False) -> str:
    """The text from the last line or sentence break before the last box to the box.

    ``reach_back``: a box on a line of its own (``...\\approx 571.68$\\n$\\boxed{572}$``)
    ends the computation of the line before it, so an empty segment takes in the one before.
    """
    at = solution.rfind("\\boxed{")
    if at < 0:
        return ""
    start = max(solution.rfind(c, 0, at) for c in _BREAKS)
    if reach_back and start > 0 and not re.search(r"[\d=<>]|\\approx", solution[start:at]):
        start = max(solution.rfind(c, 0, start) for c in _BREAKS)
    return solution[max(start, 0) : at]


def approximate_gold(answers, solution: str = "", question: str = "") -> str:
    """Why a gold answer is stated as an approximation ("" if it is not), whatever the
    question asks: its text says so (``approximate_answer``: "\\approx 8.24", "~3", "about 3"),
    the worked solution boxes it as one (``rounded_result``: "\\log_{10} 2000 \\approx
    \\boxed{3.30}"), or reaches it with a stand-in for pi or e (``approximated_constant``).
    Where the ``question`` asks for a floor or a ceiling, an approximation in the solution
    only bounds an exact integer: only the answer's own text counts then.

    A question that asks for rounding defines its rounded answer, but a reader of the composed
    problem may carry the unrounded value into the later one (3.30103 instead of 3.30 gives
    1502.45 instead of 1502): the gold of the composition is then not the only right answer.

    >>> approximate_gold(["~3"]), approximate_gold(["3.30"], r"$\\log_{10} 2000 \\approx \\boxed{3.30}$")
    ('approximate_answer', 'rounded_result')
    >>> approximate_gold(["12"], r"Take $\\pi \\approx 3$. The area is $4 \\cdot 3 = \\boxed{12}$."), approximate_gold([r"5~\\text{cm}"])
    ('approximated_constant', '')
    """
    if any(_APPROX_ANSWER.search(str(a)) for a in answers):
        return "approximate_answer"
    if not solution or _FLOOR_ASKED.search(question):
        return ""
    if _APPROX_SIGN.search(_final_computation(solution, reach_back=True)):
        return "rounded_result"
    if _CONSTANT_STANDIN.search(solution[: solution.rfind("\\boxed{")] if "\\boxed{" in solution else solution):
        return "approximated_constant"
    return ""


def inexact_q1(answers, question: str, solution: str = "") -> str:
    """Why a problem cannot lead a link for its answer ("" if it can), for every engine: its
    gold is stated as an approximation (:func:`approximate_gold`), is no exact value
    (:func:`composition_rl.values.parse.inexact_answer`), or is an integer its worked solution
    reached by rounding (:func:`rounded_integer`). Where the question itself asks for rounding
    and nothing writes the result as an approximation, the question defines X (then only the
    pool preference ``approximate_q1`` applies). Forms that disagree never define X.

    >>> inexact_q1(["0.01", "0.02"], "What is the angular resolution?"), inexact_q1(["9.6"], "to two significant figures", r"\\log 2")
    ('answers_disagree', '')
    """
    if answers and incomplete_answer(question, str(answers[0])):
        return "incomplete_answer"  # it lists fewer items than the question asks: no X can be read
    why = approximate_gold(answers, solution, question)
    if why:
        return why
    why = inexact_answer(answers, solution)
    if why and why != "answers_disagree" and approximate_question(question):
        return ""
    if not why and solution and rounded_integer(answers, question, solution):
        return "rounded_result"
    return why


def offset_kind(d: Fraction | None) -> str:
    """The kind of an offset (None: irrational).

    >>> offset_kind(Fraction(0)), offset_kind(Fraction(4)), offset_kind(Fraction(1, 2)), offset_kind(None)
    ('zero', 'integer', 'rational', 'irrational')
    """
    if d is None:
        return "irrational"
    if d == 0:
        return "zero"
    return "integer" if d.denominator == 1 else "rational"


@dataclass(frozen=True)
class Naturalness:
    """How natural a link must read. Defaults keep the MATH depth-2 run above 84%
    acceptance while removing irrational links, offsets in the hundreds and rounded q1s. Each field's
    help is its documentation; ``crl compose`` generates one flag per field from it."""

    max_offset: int = field(default=100, metadata={
        "help": "largest ``|d|`` a relation may state (\"Y is 2999980 less than X\" is out; offsets in "
                "the hundreds are the commonest reason a link reads unnaturally)."})
    max_denominator: int = field(default=12, metadata={
        "help": "largest denominator of ``d`` (\"\\frac{127}{50}\" and \"\\frac{663}{100}\" are out)."})
    irrational_q1: bool = field(default=False, metadata={
        "help": "allow q1s with irrational answers (every offset is then irrational)."})
    approximate_q1: bool = field(default=False, metadata={
        "help": "allow q1s whose text asks for rounding or significant figures."})
    max_q1: int = field(default=100, metadata={
        "help": "largest ``|v1|`` of a preferred q1 (a larger one is far from most constants, so its "
                "offsets break ``max_offset``: v1 = 19440 lost 6,334 MATH links)."})
    prefer_integer: bool = field(default=True, metadata={
        "help": "rank constants by offset kind (integer before rational) before their structural "
                "rank, and prefer q1s with integer answers in the pools; False keeps the structural "
                "rank alone.",
        "help_no": "rank constants by their structural rank alone and let q1s with fractional answers "
                   "lead as readily as integer ones (by default an integer offset is preferred to a "
                   "rational one first, and integer q1s are preferred in the pools)."})
    zero_offset: bool = field(default=False, metadata={
        "help": "allow a link with a zero offset (\"$Y$ is equal to $X$\"): off by default, the "
                "engine takes another constant or another partner; such a link states no relation.",
        "help_no": "never state a zero offset (the default)."})
    small_offset: int = field(default=10, metadata={
        "help": "offsets with ``|d|`` up to N rank before larger ones when a constant (and a partner) "
                "is chosen: \"Y is 3 less than X\" reads better than \"Y is 96 less than X\"."})

    def __post_init__(self) -> None:
        if self.max_offset < 1:
            raise ValueError(f"max_offset={self.max_offset} must be >= 1")
        if self.max_denominator < 1:
            raise ValueError(f"max_denominator={self.max_denominator} must be >= 1")
        if self.max_q1 < 1:
            raise ValueError(f"max_q1={self.max_q1} must be >= 1")
        if not 0 <= self.small_offset <= self.max_offset:
            raise ValueError(f"small_offset={self.small_offset} must be between 0 and max_offset={self.max_offset}")

    def allows(self, d: Fraction | None) -> bool:
        """Whether an offset may be stated (None: irrational, allowed only with irrational q1s)."""
        if d is None:
            return self.irrational_q1
        return abs(d) <= self.max_offset and d.denominator <= self.max_denominator and (self.zero_offset or d != 0)

    def rank(self, d: Fraction | None) -> int:
        """Sort key of an offset's kind (lower is preferred); 0 for all when not preferring."""
        return _KIND_RANK[offset_kind(d)] if self.prefer_integer else 0

    def size_rank(self, d: Fraction | None) -> int:
        """Sort key of an offset's size: 0 for ``|d| <= small_offset`` (and irrational), else 1."""
        return 0 if d is None or abs(d) <= self.small_offset else 1

    def q1_flaw(self, question: str, v1: Fraction | None) -> str:
        """Why a problem should not lead a link ("" if it may): its value (None: irrational)
        and its text decide."""
        if missing_figure(question):
            return "missing_figure"  # nobody can solve it from its text
        if v1 is not None and v1.denominator == 1 and degenerate(question, str(v1.numerator)):
            return "degenerate"  # its answer is read off its text
        if v1 is None and not self.irrational_q1:
            return "irrational_q1"
        if v1 is not None and (abs(v1) > self.max_q1 or v1.denominator > self.max_denominator):
            return "large_q1"
        if not self.approximate_q1 and approximate_question(question):
            return "approximate_q1"
        if self.prefer_integer and v1 is not None and v1.denominator != 1:
            return "fraction_q1"  # every offset from it is a fraction unless v2 cancels it
        return ""


def add_arguments(group) -> None:
    """``--max-offset``, ``--max-denominator``, ... : one flag per :class:`Naturalness` field."""
    from composition_rl.flags import add_flags

    add_flags(group, Naturalness, prefix="natural_")


def from_args(args) -> Naturalness:
    """The :class:`Naturalness` the flags of :func:`add_arguments` describe."""
    from composition_rl.flags import from_flags

    return from_flags(Naturalness, args, prefix="natural_")
