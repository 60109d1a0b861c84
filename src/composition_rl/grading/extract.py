"""Pulling the final answer out of a response, and the string normalisation of the fast path.

Pure string work: no sympy, no Math-Verify, so it is cheap to import anywhere. Plain numbers
are read by the one reader, :func:`composition_rl.values.numbers.plain_number`. The worker
process (``composition_rl.grading.compare``) runs it under the per-item time bound, because
even linear string work on a 1 MB response is not free.

Extraction order: the last ``\\boxed{...}`` (or ``\\fbox{...}``) with nested braces matched,
together with the boxes joined to it by a plain connector (``\\boxed{1}, \\boxed{2}``,
``\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}``: a multi-part final answer, read
as a collection as Math-Verify reads it); a "final answer is X" written after the last box
overrides it. If the response has no box, the configured fallbacks in order (see
:data:`FALLBACKS`).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterator, Sequence

from composition_rl.registry import Registry
from composition_rl.values.numbers import grouped

__all__ = [
    "FALLBACKS",
    "decimal_comma",
    "extract_answer",
    "extract_final",
    "extract_parts",
    "final_boxes",
    "gold_forms",
    "last_boxed",
    "normalize",
    "plain_integer",
]

_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")


def _last(matches: Iterator[re.Match]) -> re.Match | None:
    tail = deque(matches, maxlen=1)
    return tail[0] if tail else None


def _close(text: str, i: int) -> int | None:
    r"""Index of the ``}`` that closes the group opened just before ``text[i]``, or None.
    Escaped braces (``\{ \}``) are set delimiters, not grouping: they are skipped."""
    depth = 1
    n = len(text)
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
                return i
        i += 1
    return None


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
    end = _close(text, last.end())
    return None if end is None else text[last.end() : end]


# What may stand between two boxes of one multi-part answer: math delimiters, spacing,
# \text{} wrappers, punctuation, "and"/"or", and a label such as "y_2 =" before the next box.
# Anything else ("; no, it is", "then", a sentence) means the earlier box was a step or a
# first try, and only the last box is the answer.
_GAP_NOISE = re.compile(
    r"\\(?:quad|qquad|[,;:! ]|[()\[\]]|text(?:rm|bf|normal)?\s*\{|mbox\s*\{|mathrm\s*\{)|\\\\|[${}&~]"
)
_GAP_OK = re.compile(
    r"(?:[\s,;]|(?<![A-Za-z])(?:and|or)(?![A-Za-z]))*(?:[A-Za-z](?:_\w+)?\s*=\s*)?", re.IGNORECASE
)
_MAX_GAP = 80
_MAX_PARTS = 32  # Math-Verify joins up to 6; this only bounds a pathological run of boxes


def final_boxes(text: str) -> tuple[str, ...] | None:
    """The boxes of the final answer: the last closed box and the boxes before it that are
    joined to it by a plain connector, in order; None when the last box is missing or open.

    >>> final_boxes(r"$\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}$")
    ('(2, 2)', '(6, 2)')
    >>> final_boxes(r"maybe \\boxed{3}; no, it is \\boxed{4}")
    ('4',)
    """
    got = _final_boxes(text)
    return None if got is None else got[0]


def _final_boxes(text: str) -> tuple[tuple[str, ...], int] | None:
    """:func:`final_boxes` and the index just after the last box."""
    starts = list(_BOX_RE.finditer(text))
    if not starts:
        return None
    last = starts[-1]
    end = _close(text, last.end())
    if end is None:
        return None
    parts = [text[last.end() : end]]
    nxt = last.start()
    for m in reversed(starts[:-1]):
        if len(parts) >= _MAX_PARTS:
            break
        close = _close(text, m.end())
        # a box that holds the next one, or sits far from it, ends the group
        if close is None or close >= nxt or nxt - close > _MAX_GAP:
            break
        gap = _GAP_NOISE.sub(" ", text[close + 1 : nxt])
        if _GAP_OK.fullmatch(gap) is None:
            break
        parts.append(text[m.end() : close])
        nxt = m.start()
    parts.reverse()
    return tuple(parts), end + 1


FALLBACKS: Registry[Callable[[str], str | None]] = Registry("answer fallback")

# Line-anchored and using [ \t]* (never \s*) so that a megabyte of newlines stays linear.
_ANSWER_LINE_RE = re.compile(
    r"^[ \t>*#_-]*(?:final[ \t]+answer|answer)[ \t*_]*[:：][ \t*_]*(?P<a>[^\n]+)$",
    re.IGNORECASE | re.MULTILINE,
)
_ANSWER_IS_RE = re.compile(
    r"(?:final[ \t]+answer|the[ \t]+answer)[ \t]+is[ \t:]*(?P<a>[^\n]+)", re.IGNORECASE
)
# "Final Answer: The final answer is $X$. I hope it is correct." (the Minerva few-shot format)
_HOPE = re.compile(r"[ \t]*\.?[ \t]*I hope it is correct.*$", re.IGNORECASE)
_FINAL_AFTER_BOX = re.compile(r"final[ \t]+answer(?:[ \t*_]*[:：]|[ \t]+is)", re.IGNORECASE)
# One math span: $$..$$ and \[..\] may cross lines; $..$ and \(..\) may not (as in
# Math-Verify: an inline span over a newline is usually an unbalanced dollar).
_SPAN = re.compile(
    r"(?<!\\)\$\$(?P<a>.+?)(?<!\\)\$\$|\\\[(?P<b>.+?)\\\]"
    r"|(?<![\\$])\$(?P<c>(?:\\\$|[^$\n])+?)(?<!\\)\$|\\\((?P<d>[^\n]+?)\\\)",
    re.DOTALL,
)
_PERCENT_WORD = re.compile(r"^[ \t]*(?:\\?%|percent(?:age)?|pct)(?![A-Za-z])", re.IGNORECASE)
_PHRASE = re.compile(r"[A-Za-z' \t\n.,:;!?*()-]*")  # prose around a span: no digits, no math
_MAX_PHRASE_WORDS = 10
_WORD_RUN = re.compile(r"[A-Za-z]{2,}")
_LATEX_WORDS = re.compile(r"\\[A-Za-z]+|\\text[a-z]*\{[^{}]*\}")


def _span_content(m: re.Match) -> str:
    return next(g for g in m.groups() if g is not None).strip()


def _one_span(s: str) -> str | None:
    """The math of ``s`` when ``s`` is one math span with at most a short phrase around it
    ("Answer $9$", "Therefore $x \\geq 5$ is the solution."); a percent word right after
    the span stays with it. None otherwise (two spans, numbers or math in the prose)."""
    spans = list(_SPAN.finditer(s))
    if len(spans) != 1:
        return None
    m = spans[0]
    content, after = _span_content(m), s[m.end() :]
    pct = _PERCENT_WORD.match(after)
    if pct is not None:
        content, after = content + r"\%", after[pct.end() :]
    outside = s[: m.start()] + " " + after
    if _PHRASE.fullmatch(outside) is None or len(outside.split()) > _MAX_PHRASE_WORDS:
        return None
    return content or None


def _bare_expression(s: str) -> str | None:
    """``s`` when it is one expression written without math delimiters (``7,425,000``,
    ``1 000``, ``\\frac{10}{9}``, ``28 percent``, a single word such as ``odd``); None when
    it holds prose (two words or more)."""
    t = s.strip()
    if t.count("$") == 1 and (t.startswith("$") or t.endswith("$")):
        t = t.strip("$").strip()  # a currency sign: "$1,000.99"
    if "$" in t or "\n" in t or not t:
        return None
    m = re.search(r"[ \t]*(?:\\?%|percent(?:age)?|pct)$", t, re.IGNORECASE)
    if m is not None and m.start() > 0:
        t = t[: m.start()] + r"\%"
    if re.fullmatch(r"[A-Za-z]{1,20}", t):  # a one-word answer
        return t
    if _WORD_RUN.search(_LATEX_WORDS.sub(" ", t)):
        return None
    return t


_MAX_CLEAN = 2000
_IS_TAIL = re.compile(r"(?:^|\s)is:?[ \t]+(?P<x>[^\n]+)$")


_GO_ON = object()  # _span_or_is_tail could not decide: the caller reads on


def _span_or_is_tail(s: str):
    """``s`` when it is one math span (its content), else what follows a last "is" when that
    alone is one span or expression ("The largest $n$ is 34"); ``_GO_ON`` when neither holds.
    Shared by the fallback cleaner and the prose reader so the two read these alike."""
    whole = _SPAN.fullmatch(s)
    if whole is not None:
        return _span_content(whole) or None
    tail = _IS_TAIL.search(s)
    if tail is not None:
        x = tail.group("x").strip()
        m = _SPAN.fullmatch(x)
        if m is not None:
            return _span_content(m) or None
        if not _SPAN.search(x) and (got := _bare_expression(x)) is not None:
            return got
    return _GO_ON


def _clean_fallback(s: str) -> str | None:
    """The answer in a fallback's capture: cut "I hope it is correct", drop trailing
    punctuation and Markdown emphasis, unwrap one math span, and take what follows a last
    "is" when that alone is one span or expression ("The largest $n$ is 34")."""
    if len(s) > _MAX_CLEAN:  # a pathological line: no span analysis (keeps it linear)
        s = s.strip().strip("*_").strip().rstrip(".").strip()
        return s or None
    s = _HOPE.sub("", s).strip().strip("*_").strip()
    s = s.rstrip(".").strip()
    if not s:
        return None
    got = _span_or_is_tail(s)
    if got is not _GO_ON:
        return got
    if (got := _one_span(s)) is not None:
        return got
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


_WHOLE_MAX_CHARS = 300


@FALLBACKS.register("whole")
def _whole(text: str) -> str | None:
    """A short response (at most 300 characters) that is its own answer: one expression
    (``7,425,000``, ``$(3,2)$``, ``\\frac{10}{9}``), or one math span with at most a short
    phrase around it (``Answer $9$``). Off by default: a policy under RL could learn to
    answer without a box, which this would reward."""
    s = text.strip()
    if not s or len(s) > _WHOLE_MAX_CHARS:
        return None
    if _SPAN.search(s):
        return _one_span(s)
    return _bare_expression(s)


# ------------------------------------------------------------- prose endings (``prose``)
# The phrases that close an unboxed answer: "Final Answer: X" anywhere, "Answer: X" and
# "**Answer:** X" at a line start, "the answer is X" and "the final answer is X".
_PROSE_MARKER = re.compile(
    r"final[ \t]+answer[ \t*_]*[:：]"
    r"|^[ \t>*#_-]*answer[ \t*_]*[:：]"
    r"|(?:final|the)[ \t]+answer[ \t]+is(?![A-Za-z])[ \t:]*",
    re.IGNORECASE | re.MULTILINE,
)
# Words that turn the phrase around ("the answer is not 12 but 13", "... is no longer 5"):
# the number next to them is not the answer, so nothing is read.
_NEGATION = re.compile(r"(?<![A-Za-z])(?:not|no|never|isn't|wasn't|cannot|can't|incorrect|wrong)(?![A-Za-z])|n't",
                       re.IGNORECASE)
# The end of the first sentence: a period (or ! ?) followed by a space or the end; a decimal
# point is followed by a digit, so it never ends a sentence.
_SENTENCE_END = re.compile(r"(?<=\S)[.!?](?=\s|$)")
_NUMBER = re.compile(r"(?<![\w.^_])-?\d+(?:,\d{3})*(?:\.\d+)?(?![\w^_])")
_LAST_LINE_MAX_CHARS = 100
# a Markdown heading, quote or bullet before a last line ("#### 72", "> 12", "- 12"); a minus
# sign is kept: "-5" is an answer, "- 5" a bullet
_LINE_MARKUP = re.compile(r"^(?:#{1,6}|>|[-*+](?=[ \t]))[ \t]*")


def _prose_capture(s: str) -> str | None:
    """The answer in what follows an answer phrase, or None when it is not one clean answer.

    Read: one math span or one expression (``$34$``, ``\\frac{10}{9}``), what follows a last
    "is" when that alone is one ("The largest $n$ is 34"), one span with a short phrase
    around it, or a sentence whose only number is the answer ("Jane started 3 hours ago").
    Refused: a negation anywhere ("not 12 but 13"), two numbers or spans in prose, words
    without a number ("see above"). Only the first sentence counts ("12. This was AMC 2019").
    """
    s = _HOPE.sub("", s[:_MAX_CLEAN])
    end = _SENTENCE_END.search(s)
    if end is not None:
        s = s[: end.start()]
    s = s.strip().strip("*_").strip().rstrip(".").strip()
    if not s or _NEGATION.search(s):
        return None
    got = _span_or_is_tail(s)
    if got is not _GO_ON:
        return got
    if _SPAN.search(s):
        return _one_span(s)
    if (got := _bare_expression(s)) is not None:
        return got
    numbers = _NUMBER.findall(s)
    return numbers[0] if len(numbers) == 1 else None


def _last_marker(text: str) -> str | None:
    """The answer after the last answer phrase of ``text``, if that phrase holds a clean one.
    An earlier phrase is never used: "The answer is 12. ... The answer is not 12" gives none."""
    last = _last(_PROSE_MARKER.finditer(text))
    if last is None:
        return None
    line_end = text.find("\n", last.end())
    return _prose_capture(text[last.end() : line_end if line_end >= 0 else len(text)])


@FALLBACKS.register("last_line")
def _last_line(text: str) -> str | None:
    """The last non-empty line when it holds only a number or an expression (``12``,
    ``#### 72``, ``$\\frac{3}{4}$``, ``x = 5``): at most 100 characters, no words, a digit or
    a LaTeX command in it (a lone word such as ``Hello`` is not an answer)."""
    tail = text.rstrip()
    line = tail[tail.rfind("\n") + 1 :].strip()
    line = _LINE_MARKUP.sub("", line).strip("*_ \t").rstrip(".").strip()
    if not line or len(line) > _LAST_LINE_MAX_CHARS:
        return None
    whole = _SPAN.fullmatch(line)
    if whole is not None:
        line = _span_content(whole)
    elif "$" in line and _bare_expression(line) is None:
        return None
    got = _bare_expression(line)
    if got is None or not re.search(r"\d|\\[A-Za-z]", got):
        return None
    return got


@FALLBACKS.register("prose")
def _prose(text: str) -> str | None:
    """The common endings of an unboxed response, in this order: the last answer phrase
    ("Final Answer: X", "Answer: X" or "**Answer:** X" at a line start, "the answer is X",
    "the final answer is X") when it holds one clean answer; else a last line that is only a
    number or an expression (``last_line``); else a short response that is its own answer
    (``whole``). Off by default, and never for RL rewards (see docs/verification.md)."""
    got = _last_marker(text)
    if got is None and _PROSE_MARKER.search(text) is None:
        got = _last_line(text) or _whole(text)
    return got


def decimal_comma(s: str) -> str | None:
    """``s`` with its comma read as a decimal point, when it cannot be a thousands separator:
    one comma between digits, and not a group of three digits after one to three leading
    digits that do not start with 0 (``1,000`` and ``12,345`` are thousands). None otherwise.

    Only a reading: whether it applies is decided by the comparison (a number written with
    a point on the other side; a comma in a box is a list, as MATH writes ``-2,1``).

    >>> decimal_comma("1,22"), decimal_comma("0,111"), decimal_comma("1000,99"), decimal_comma("1,000")
    ('1.22', '0.111', '1000.99', None)
    """
    m = re.fullmatch(r"([+-]?)(\d+),(\d+)", s.strip())
    if m is None:
        return None
    if grouped(m.group()):  # the one thousands rule (values.numbers)
        return None
    sign, whole, frac = m.groups()
    return f"{sign}{whole}.{frac}"


def extract_final(text: str, fallbacks: Sequence[str] = ("answer_line",)) -> tuple[tuple[str, ...], str] | None:
    """:func:`extract_parts` and where the answer came from: ``"box"``, or the name of the
    fallback that read it. A final box that is empty (``The answer is \\boxed{}.``) is no
    answer, so the fallbacks are tried as if there were no box.

    >>> extract_final("7 + 5 = 12\\nThe answer is \\\\boxed{}.\\nAnswer: 12", ("answer_line",))
    (('12',), 'answer_line')
    """
    got = _final_boxes(text)
    if got is not None:
        boxes, tail_at = got
        if _FINAL_AFTER_BOX.search(text, tail_at):
            later = _answer_line(text[tail_at:]) or _answer_is(text[tail_at:])
            # only a clean restatement overrides the box: one expression, not '"$12 $ and $13 $"'
            # and not "5 apples" after \boxed{5}
            if later and not any(c in later for c in '$"') and _bare_expression(later) is not None:
                return (later,), "box"
        parts = tuple(b.strip() for b in boxes if b.strip())
        if parts:
            return parts, "box"
    for name in fallbacks:
        answer = FALLBACKS.get(name)(text)
        # an empty box stays in the text, so that "The final answer is within \boxed{}." reads
        # nothing; a reading that holds it is no answer either
        if answer and _BOX_RE.search(answer) is None:
            return (answer,), name
    return None


def extract_parts(text: str, fallbacks: Sequence[str] = ("answer_line",)) -> tuple[str, ...] | None:
    """The final answer written in ``text``, as its parts: the boxes of a multi-part boxed
    answer (see :func:`final_boxes`), else one part from the first fallback that matches.

    A "final answer is X" written after the last box (``\\boxed{255} ... Final Answer: The
    final answer is $10,455$.``) is the final answer, as Math-Verify reads it.

    >>> extract_parts(r"\\boxed{1},\\boxed{2},\\boxed{3}")
    ('1', '2', '3')
    """
    got = extract_final(text, fallbacks)
    return None if got is None else got[0]


def extract_answer(text: str, fallbacks: Sequence[str] = ("answer_line",)) -> str | None:
    """The final answer written in ``text``: the last box (with the boxes joined to it,
    comma-separated), else the first fallback that matches.

    Args:
        text: a model response.
        fallbacks: names from :data:`FALLBACKS`, tried in order when there is no box.

    Returns:
        the answer as written (LaTeX, unnormalised), or ``None`` when there is none.

    >>> extract_answer(r"... so the total is $\\boxed{64,\\!328}$.")
    '64,\\\\!328'
    >>> extract_answer("Thus\\nFinal Answer: 12 apples")
    '12 apples'
    >>> extract_answer(r"\\boxed{(2, 2)} \\quad \\text{and} \\quad \\boxed{(6, 2)}")
    '(2, 2), (6, 2)'
    >>> extract_answer("I could not finish the") is None
    True
    """
    parts = extract_parts(text, fallbacks)
    return None if parts is None else ", ".join(parts)


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
_INT = re.compile(r"^[+-]?\d+$")
_BRACED_COMMA = re.compile(r"\s*\{\s*,\s*\}\s*")  # 14{,}916 and 14 {, }916


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
    s = _BRACED_COMMA.sub(",", s).strip()
    # "64,\!328" and "64,328" are one number; "64, 328" (a space after the comma) is a list.
    if grouped(s.rstrip(".")):  # the one thousands rule (values.numbers): "0,111" groups nothing
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
