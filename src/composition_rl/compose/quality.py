"""Scanners for the defect classes a reader finds in composed prompts.

The checks (:mod:`composition_rl.compose.checks`) prove a record *correct*; these scanners
look for records that are correct but poor training data, reading only the composed record
and its parents' texts (``crl audit RUN --scan`` runs them over a set, ``--where CLASS``
samples one class):

* ``latex_dollars_in_math``: ``$Y$`` written where the text is already in math mode
  (``align*``, ``eqnarray*``, ``cases``, ``\\[ \\]``, ``$$ $$`` ...): the dollars break LaTeX.
* ``latex_bare_in_prose``: the reverse, a bare ``Y`` in prose: it renders as an upright
  letter, a word rather than a number (in a problem that writes some LaTeX).
* ``latex_in_plain_text``: ``$Y$`` in a problem that writes no LaTeX at all ("6 * $Y$",
  ``spc.plain_text``): the one TeX of the problem; there the variable is written bare.
* ``notation``: the replaced literal was notation, not a quantity: ``f^{-1}``,
  ``\\sqrt[3]{}``, ``f^{(4)}``, ``\\mathbb{R}^3``, an index ``a_1``, an environment argument.
* ``repeated_value`` (the part a program can see): the later problem still shows
  v2 (another literal that reads as a quantity with the same value), so the chain can be
  skipped. ``same_value_other_role`` is reported apart: v2's value written as a table cell
  or a list label, which may or may not be the same quantity.
* ``tex_token``: the variable stands where TeX reads a different number: a
  multi-digit literal in a one-token argument (``\\frac W`` for the 49 of ``\\frac 49``), a
  digit glued to a control word (``\\sqrt2``), a digit run it only began (``x^23``).
* ``exponent``, ``radix``: the variable is a power ("Factor $t^Y-49$") or a base of
  notation ("its base-$Y$ representation"): notation, and another kind of problem for each Y.
* ``role_mix``: one variable replaced literals in different roles (a term and a divisor, a
  count in prose and a term in a formula: "the $Y$ distinct solutions of $(x-5)(Yx+9) = ...$"
  changes the problem twice).
* ``figure``: the figure code still writes v2 (a label, a coordinate, a radius).
* ``sums_to_one``: the variable is a share of shares that sum to 1 (or 100%), a count
  the other counts of its sentence add up to, the count of a list that follows it ("$Y$ of
  the members, Penelope and Quentin"), or a count after "these" or "those", which counts
  what the text has introduced ("these $Y$ pieces of string").
* ``pattern``: the variable is a term its neighbours determine (``1, 2, Y, 4``;
  ``1 + Y + \\cdots + 100``).
* ``worked_example``: the variable sits in a worked example ("For example, if she rolls a
  $Y$ and a 3, she can either form 36 or 63."), whose own text shows its value.
* ``default_value``: v2 is the value its context fixes by default ("a standard $Y$-sided
  die", a deck of 52 cards).
* ``standard_constant``: v2 is the constant of a well-known formula the problem states (the
  2 of Euler's $V-E+F=2$, the 4 of $4\\pi r^2$, the 32 of Fahrenheit).
* ``zero``: v2 is 0, the value any reader guesses first (``=0``, ``\\ge 0``).
* ``answer_range``: v2 is the modulus of a residue question, or the end N of the range 0..N it
  states for the answer: one shows the other; or the end of a full turn (360 degrees, 2 pi).
* ``grammar``: v2 is a count of 1 before a singular noun ("$Y$ foot").
* ``independent``: the answer is proved not to depend on the variable (check 5's reading:
  "What is the sum of the roots of $x^2 - 4x + Y = 0$?" is 4 for every Y), so q1 can be
  skipped.
* ``unnatural_offset``: the relation states ``|d| > 100`` or a denominator above 12 ("$Y$ is
  $2999980$ less than $X$"), as no problem writer would.

Math mode here is found by its own scan (a stack of open delimiters and environments), not by
the code that chose the constant, so the scanner can catch that code's mistakes.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from fractions import Fraction

from composition_rl.compose.dependence import decide
from composition_rl.compose.natural import Naturalness
from composition_rl.compose.spc import (
    Glue,
    Instruction,
    find_glue,
    plain_text,
    restore_instructions,
    shift_offset,
)
from composition_rl.records import Link, Problem
from composition_rl.values import find_constants
from composition_rl.values.constants import UNGROUPED_ROLES

__all__ = ["DEFECTS", "glues", "scan_record", "scan_records", "segments"]

DEFECTS = (
    "latex_dollars_in_math", "latex_bare_in_prose", "latex_in_plain_text", "notation", "repeated_value",
    "tex_token", "exponent", "radix", "role_mix", "figure", "sums_to_one", "pattern", "worked_example",
    "default_value", "independent", "unnatural_offset", "standard_constant", "zero", "answer_range", "grammar",
)
# reported, not a defect by the finder's reading: v2's value also written in another role
NOTES = ("same_value_other_role",)

_ENVS = (
    "equation", "align", "alignat", "eqnarray", "gather", "multline", "flalign", "displaymath", "math",
    "cases", "dcases", "rcases", "matrix", "pmatrix", "bmatrix", "Bmatrix", "vmatrix", "Vmatrix",
    "smallmatrix", "array", "split", "aligned", "gathered", "alignedat", "subarray",
)
_OPEN_ENV = re.compile(r"\\begin\s*\{(" + "|".join(_ENVS) + r")\*?\}")
_TEXT_CMD = re.compile(r"\\(?:text|textrm|textbf|textit|textsf|texttt|textnormal|mbox|hbox)\s*\{$")
_NOTATION_BEFORE = (
    (re.compile(r"\^\s*\{?\s*-\s*$"), "inverse superscript"),
    (re.compile(r"\\sqrt\s*\[\s*$"), "root index"),
    (re.compile(r"\^\s*\{\s*\(\s*$"), "derivative order"),
    (re.compile(r"\\mathbb\s*\{?\s*[A-Z]\s*\}?\s*\^\s*\{?\s*$"), "dimension"),
    (re.compile(r"_\s*$|_\s*\{[^{}$]*$"), "index"),
    (re.compile(r"\\begin\s*\{[a-zA-Z*]+\}\s*\{\s*$"), "environment argument"),
)
_BRACKETS = ("(", "[", "\\left", "\\{")
_NUM = re.compile(r"(?<![\d.,])(?:\d{1,3}(?:(?:,|\{,\}|,\\!)\d{3})+|\d+(?:\.\d+)?)(?![\d])")
_FIGURE = re.compile(r"\[asy\].*?(?:\[/asy\]|\Z)", re.S)
_STRING = re.compile(r'"[^"\n]*"')


def _math_at(text: str, pos: int) -> bool:
    """Whether ``text[pos]`` is in math mode (and not in a ``\\text{}`` inside math): a scan
    of the delimiters before it, innermost first."""
    stack: list[str] = []  # "$", "$$", "\\]", "\\)", "env:<name>", "text:<depth>"
    i = 0
    while i < pos:
        ch = text[i]
        if ch == "\\":
            m = _OPEN_ENV.match(text, i)
            if m and not (stack and not stack[-1].startswith("text")):
                stack.append("env:" + m.group(1))
                i = m.end()
                continue
            if stack and stack[-1].startswith("env:") and text.startswith("\\end", i):
                m = re.match(r"\\end\s*\{([a-zA-Z]+)\*?\}", text[i:])
                if m and "env:" + m.group(1) == stack[-1]:
                    stack.pop()
                    i += m.end()
                    continue
            two = text[i : i + 2]
            if two in ("\\[", "\\(") and not stack:
                stack.append("\\]" if two == "\\[" else "\\)")
            elif stack and two == stack[-1]:
                stack.pop()
            i += 2
            continue
        if ch == "$":
            tok = "$$" if text.startswith("$$", i) else "$"
            if stack and stack[-1] == tok:
                stack.pop()
            elif not stack or stack[-1].startswith("text"):
                stack.append(tok)
            i += len(tok)
            continue
        if ch == "{" and stack and not stack[-1].startswith("text") and _TEXT_CMD.search(text[max(0, i - 12) : i + 1]):
            stack.append("text:1")
        elif stack and stack[-1].startswith("text"):
            depth = int(stack[-1][5:]) + (ch == "{") - (ch == "}")
            stack[-1] = f"text:{depth}"
            if depth == 0:
                stack.pop()
        i += 1
    return bool(stack) and not stack[-1].startswith("text")


def glues(rec: Problem) -> list[Glue] | None:
    """The relation paragraphs of a composed record in order; None if one cannot be found
    (the checks would reject such a record)."""
    text = rec.question
    out, pos = [], 0
    for lk in rec.links:
        g = find_glue(text, lk.x, lk.y, pos)
        if g is None:
            return None
        out.append(g)
        pos = g.end
    return out


def segments(rec: Problem) -> list[tuple[int, int]] | None:
    """(start, end) in ``rec.question`` of each rewritten later problem, one per link."""
    gs = glues(rec)
    if gs is None:
        return None
    return [(g.end, gs[k + 1].start if k + 1 < len(gs) else len(rec.question)) for k, g in enumerate(gs)]


def _restore(seg: str, lk: Link) -> tuple[str, list[tuple[int, str]]] | None:
    """The original later problem, and (offset in it, token written) per replaced place.

    ``Y \\cdot `` and ``Y`` followed by the text's own ``\\cdot`` look alike, so the shapes are
    tried place by place with backtracking: the first assignment that finds Y at every
    recorded offset is taken."""
    lit = lk.v2_literal
    offs = sorted((lk.v2_offset, *lk.v2_also))
    shapes = (f"${lk.y}$", f"{lk.y} \\cdot ", lk.y)

    def walk(i: int, shift: int) -> list[str] | None:
        if i == len(offs):
            return []
        at = offs[i] + shift
        for tok in shapes:
            # "Y \cdot " is written only before a bracket (spc.variable_token): elsewhere the
            # \cdot after Y is the text's own
            if tok.endswith("cdot ") and not seg[at + len(tok) :].lstrip().startswith(_BRACKETS):
                continue
            if seg.startswith(tok, at):
                rest = walk(i + 1, shift + len(tok) - len(lit))
                if rest is not None:
                    return [tok, *rest]
        return None

    toks = walk(0, 0)
    if toks is None:
        return None
    out, pos, shift, places = [], 0, 0, []
    for off, tok in zip(offs, toks):
        at = off + shift
        out += [seg[pos:at], lit]
        places.append((off, tok))
        pos = at + len(tok)
        shift += len(tok) - len(lit)
    out.append(seg[pos:])
    return "".join(out), places


def _value(s: str) -> Fraction:
    return Fraction(re.sub(r"\{,\}|,\\!|,", "", s))


def _in_figure(text: str, pos: int) -> bool:
    return any(m.start() <= pos < m.end() for m in _FIGURE.finditer(text))


def _visible_numbers(text: str):
    """Numbers a reader sees: in the text, and in figures only inside label strings (figure
    coordinates are not shown); indices, exponents and numbers glued to letters (3rd, 10a)
    are other quantities."""
    figures = [(m.start(), m.end()) for m in _FIGURE.finditer(text)]
    strings = [(m.start(), m.end()) for a, b in figures for m in _STRING.finditer(text, a, b)]
    for m in _NUM.finditer(text):
        s = m.start()
        if any(a <= s < b for a, b in figures) and not any(a <= s < b for a, b in strings):
            continue
        pre = text[max(0, s - 2) : s]
        if pre.endswith(("_", "^", "_{", "^{")):
            continue
        if (s and text[s - 1].isalpha()) or (m.end() < len(text) and text[m.end()].isalpha()):
            continue
        yield m


# -- the shortcut classes: each read from the original later problem and the replaced places,
# by code of its own (the finder's rules live in values/constants.py and values/shortcuts.py)
_NATURAL = Naturalness()
_MAX_OFFSET, _MAX_DENOMINATOR = _NATURAL.max_offset, _NATURAL.max_denominator
_ONE_TOKEN_SLOT = re.compile(r"(?:\\[dt]?frac|\\[dt]?binom|\\sqrt|\^|_)\s*$|\\[dt]?(?:frac|binom)\s*(?:\{[^{}]*\}|\w)\s*$")
_CONTROL_WORD = re.compile(r"\\[A-Za-z]+$")
_SECOND_DIGIT = re.compile(r"\\[dt]?(?:frac|binom)\s*\d$")  # the 9 of \frac49 follows its first argument
_BASE_BEFORE = re.compile(r"\bbase[\s~-]*\$?\{?\s*$", re.I)
_DEGREES_AFTER = re.compile(r"\s*(?:\^\s*\{?\s*\\circ|°|\\degree|\$?\s*degrees?\b)")
_PERCENT = re.compile(r"\s*(?:\\%|%|\$?\s*percent\b)")
_PAIR = re.compile(r"(?<![A-Za-z\\])\(\s*-?\s*[\d.]+\s*,\s*-?\s*[\d.]+\s*(?:,\s*-?\s*[\d.]+\s*)?\)")
_STYLE = re.compile(r"\b(?:linewidth|fontsize|unitsize|size|opacity|gray|grey|rgb|rgba|cmyk|arrowsize|dotsize|"
                    r"Arrows?|ArcArrows?|EndArrow|BeginArrow|MidArrow|scale|xscale|yscale|defaultpen|pen|fill|filldraw|"
                    r"markscalefactor|pathticks|dashpattern|currentpen)\s*\([^()]*\)")
_CUE = re.compile(r"\b(?:for example|for instance|such as|e\.g\.|as an example|an example is|example:)", re.I)
_SHARE = re.compile(r"\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}|(?<![\w.])(\d+)\s*/\s*(\d+)(?![\d.])"
                    r"|(?<![\d.])(0?\.\d+)(?!\d)|(?<![\d.])(\d+(?:\.\d+)?)\s*(?:\\%|%)")
_SHARE_WORDS = re.compile(r"probab|chance|likel|percent|%|fraction|pie|spinner|random|portion", re.I)
_SEPARATOR = re.compile(r"\s|\$|,|;|\+|-|\\[,;!: ]|\\(?:cdot|times|quad|qquad|left|right|[dt]?frac|[dt]?binom|choose)(?![A-Za-z])"
                        r"|\\\{|\\\}|[()\[\]{}&]|\band\b|\bor\b")
_DOTS = re.compile(r"\\[lc]?dots[bc]?|\.\.\.|…")
_POWER = re.compile(r"\^\s*(?:\{[^{}]*\}|\\?\w)")
_INNER = re.compile(r"\{[^{}]*\}")


def _no_powers(text: str) -> str:
    """``text`` without superscripts: innermost braces first, so ``^{\\frac{1}{2}}`` goes too."""
    prev = None
    while prev != text and "^" in text:
        prev = text
        text = _POWER.sub("", text)
        if "^{" in text:  # a nested group: flatten one level and try again
            text = re.sub(r"\^\s*\{((?:[^{}]|\{[^{}]*\})*)\}", "", text)
    return text


def _tex_token(q: str, off: int, lit: str) -> str:
    """Why the literal at ``off`` is not one TeX token (so Y there reads as another number)."""
    pre = q[max(0, off - 16) : off]
    end = off + len(lit)
    if lit[:1].isdigit() and len(lit) > 1 and _ONE_TOKEN_SLOT.search(pre):
        return f"{lit!r} fills a one-token TeX argument (TeX reads only {lit[0]!r} there)"
    if lit[:1].isdigit() and _CONTROL_WORD.search(pre):
        return f"{lit!r} is glued to {_CONTROL_WORD.search(pre).group()!r}"
    if len(lit) == 1 and lit.isdigit() and (_ONE_TOKEN_SLOT.search(pre) or _SECOND_DIGIT.search(pre)):
        return ""  # one digit is one TeX argument: \frac 4Y is 4/Y
    if q[end : end + 1].isdigit() or (off and q[off - 1].isdigit()):
        return f"{lit!r} is part of a longer digit run"
    if lit[:1].isdigit() and (_MIXED_AFTER.match(q, end) or _MIXED_BEFORE.search(q[max(0, off - 24) : off])):
        return f"{lit!r} is part of a mixed number"
    if re.search(r"(?:\d|(?<![\\A-Za-z])[A-Za-z])\\,$", q[max(0, off - 4) : off]) or re.match(
            r"\\,(?:\d|[A-Za-z](?![A-Za-z]))", q[end : end + 4]):
        return f"{lit!r} is a digit group of a larger number"
    return ""


# a mixed number, 6\\frac{1}{4}: the whole part before \\frac, or an argument of a \\frac that
# follows a whole part (the scanner's own reading, apart from the finder's)
_MIXED_AFTER = re.compile(r"\s*\\[dt]?frac\s*(?:\{\s*\d+\s*\}|\d)\s*(?:\{\s*\d+\s*\}|\d)")
_MIXED_BEFORE = re.compile(r"(?<![\w.}\\^_])\d+\s*\\[dt]?frac\s*(?:\{\s*\d+\s*\}\s*\{?|\d\s*\{?|\{)\s*$")

# the argument of a command that is no arithmetic (\\choose 2, \\sin 30): not a term of a sum
_ARGUMENT_OF = re.compile(r"\\(?!(?:cdot|times|div|pm|mp|le|ge|leq|geq|neq|approx|left|right|quad|qquad|[lc]?dots[bc]?"
                          r"|[dt]?frac|sqrt)\b)[A-Za-z]+\s*$")
_GLUED_OPERATOR = re.compile(r"\\(?:cdot|times|div|pm|[lc]?dots)$")


def _in_group(q: str, off: int, mark: str, reach: int = 200) -> bool:
    """Whether ``off`` is right after ``mark`` (``^`` or ``_``) or inside a braced group that
    one opens, at any depth (``^{\\frac{1}{2}}``); the scan stops at a ``$``."""
    if re.search(re.escape(mark) + r"\s*$", q[max(0, off - 4) : off]):
        return True
    depth, i = 0, off - 1
    while i >= 0 and off - i < reach:
        c = q[i]
        if c == "}":
            depth += 1
        elif c == "{":
            if depth == 0:
                if re.search(re.escape(mark) + r"\s*$", q[max(0, i - 4) : i]):
                    return True
            else:
                depth -= 1
        elif c == "$":
            return False
        i -= 1
    return False


def _in_subscript(q: str, off: int) -> bool:
    return _in_group(q, off, "_", 60)


def _in_superscript(q: str, off: int) -> bool:
    return _in_group(q, off, "^")


def _scan_role(q: str, off: int, lit: str, in_math: bool) -> str:
    """The role a replaced place plays, by the scanner's own reading: exponent, radix,
    prose, denominator, angle, percent, coordinate or term."""
    if in_math and _in_superscript(q, off):
        return "exponent"
    pre = q[max(0, off - 16) : off]
    if _BASE_BEFORE.search(pre):
        return "radix"
    end = off + len(lit)
    if _DEGREES_AFTER.match(q, end):
        return "angle"
    if _PERCENT.match(q, end):
        return "percent"
    if not in_math or (q[off - 1 : off] == "$" and q[end : end + 1] == "$"):
        return "prose"
    tail = pre.rstrip()
    if tail.endswith(("/", "\\div")) or (re.search(r"\\[dt]?frac\s*\{[^{}]*\}\s*\{\s*$", pre) and q[end:].lstrip()[:1] == "}"):
        return "denominator"
    if any(m.start() < off < m.end() for m in _PAIR.finditer(q, max(0, off - 24), min(len(q), end + 24))):
        return "coordinate"
    return "term"


def _figure_numbers(q: str) -> set[Fraction]:
    out: set[Fraction] = set()
    for m in _FIGURE.finditer(q):
        code = _STYLE.sub(" ", m.group())
        out.update(Fraction(x.group()) for x in re.finditer(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)", code))
    return out


def _offset(expr: str) -> Fraction | None:
    try:
        return Fraction(expr)
    except (ValueError, ZeroDivisionError):
        return None  # irrational


_SENTENCE = re.compile(r"[.?!](?=[\s$)]|\Z)|\n")
_ASKING = re.compile(r"\s*(?:What|How|Find|Compute|Determine|Express|Enter|Give|Calculate|Evaluate|Simplify|Which|"
                     r"Show|Prove|Suppose|Given|Now|Assume|Let|In how many|If)\b")


def _in_example(q: str, off: int) -> bool:
    """Whether ``off`` is inside a worked example: a cue earlier in its sentence, or in one
    of the three sentences before it in its paragraph, with no sentence from the cue's on
    asking the question."""
    para = q.rfind("\n", 0, off) + 1
    ends = [m.end() for m in _SENTENCE.finditer(q, para)]
    starts = [para, *ends]
    i = max(j for j, st in enumerate(starts) if st <= off)
    own_end = ends[i] if i < len(ends) else len(q)
    if _CUE.search(q, starts[i], off):
        return True
    if "?" in q[starts[i] : own_end] or _ASKING.match(q, starts[i]):
        return False
    for j in range(i - 1, max(-1, i - 4), -1):
        if _CUE.search(q, starts[j], ends[j]):
            return True
        if "?" in q[starts[j] : ends[j]] or _ASKING.match(q, starts[j]):
            return False
    return False


_THESE = re.compile(r"\b(?:these|those)\s*\$?\s*$", re.I)
# up to three words between a count and its list ("of the members,"), then the items: names,
# quoted strings or math spans, each after the first behind a comma, "and" or "or"
_COUNTED = re.compile(r"\$?(?:\s+[a-z]+){1,3}\s*[,:(]?")
_ITEM = re.compile(r"\s*(?:``[^`']{1,20}''|\"[^\"]{1,20}\"|\$[^$]{1,12}\$|[A-Z][a-z]{0,12}\b|\d+(?:\.\d+)?(?![\d.]))")
_ITEM_SEP = re.compile(r"\s*(?:,\s*(?:and|or)\b|,|and\b|or\b)")


def _count_items(q: str, pos: int) -> int:
    """How many items a list starting at ``pos`` holds (0 when none starts there)."""
    n = 0
    while True:
        it = _ITEM.match(q, pos)
        if it is None:
            return n
        n += 1
        pos = it.end()
        if it.group().rstrip().endswith((",''", ',"')):  # ``splargh,'' holds its comma
            sep = re.match(r"\s*(?:and|or)?", q[pos:])
            pos += sep.end()
            continue
        sep = _ITEM_SEP.match(q, pos)
        if sep is None:
            return n
        pos = sep.end()


def _revealed(q: str, places: list[int], lit: str, v2: Fraction):
    """(class, why) for each shortcut class the replaced places fall in."""
    # worked_example: an example cue before the place in its sentence, or in an earlier
    # sentence of its paragraph when no sentence from there on asks the question
    for off in places:
        if _in_example(q, off):
            yield "worked_example", f"{lit!r} at {off} is inside a worked example"
            break
    # sums_to_one: a share holding a place, in shares of which some sum to exactly 1
    shares = []
    for m in _SHARE.finditer(q):
        g = m.groups()
        if g[0] or g[2]:
            num, den = (g[0], g[1]) if g[0] else (g[2], g[3])
            v = Fraction(int(num), int(den)) if int(den) else None
        else:
            v = Fraction(g[4]) if g[4] else Fraction(g[5]) / 100
        if v is not None and 0 < v < 1:
            shares.append((v, m.start(), m.end()))
    mine = [i for i, (_, a, b) in enumerate(shares) if any(a <= off < b for off in places)]
    if mine and len(shares) <= 12 and _SHARE_WORDS.search(q):
        others = [v for i, (v, _, _) in enumerate(shares) if i not in mine]
        for i in mine:
            need = 1 - shares[i][0]
            reach = {Fraction(0)}
            for v in others:
                reach |= {r + v for r in reach if r + v <= need}
            if need > 0 and need in reach:
                yield "sums_to_one", f"{lit!r} is a share of shares summing to 1"
                break
    # sums_to_one, a listed count: a count after "these"/"those", or one a few words before
    # the list of exactly that many items it counts
    if v2.denominator == 1 and v2 >= 2:
        for off in places:
            end = off + len(lit)
            if _math_at(q, off) and not (q[off - 1 : off] == "$" and q[end : end + 1] == "$"):
                continue  # a term of a formula, not a count in prose
            if _THESE.search(q, max(0, off - 8), off):
                yield "sums_to_one", f"{lit!r} at {off} counts what 'these'/'those' points back to"
                break
            m = _COUNTED.match(q, off + len(lit))
            if m is not None and v2 <= 12 and _count_items(q, m.end()) == v2:
                yield "sums_to_one", f"{lit!r} at {off} counts the list that follows it"
                break
    # pattern: a place whose neighbours (joined by separators only) form a sequence with it
    pairs = [(m.start(), m.end()) for m in _PAIR.finditer(q)]  # points are data, not sequences
    nums = [m for m in _NUM.finditer(q) if not _in_superscript(q, m.start()) and not _in_figure(q, m.start())
            and not any(a < m.start() < b for a, b in pairs) and not _in_subscript(q, m.start())
            and not _ARGUMENT_OF.search(q, max(0, m.start() - 12), m.start())
            and not q[m.end() : m.end() + 1].isalpha() and not (m.start() and q[m.start() - 1].isalpha()
                                                                   and not _GLUED_OPERATOR.search(q, 0, m.start()))]
    starts = [m.start() for m in nums]
    for off in places:
        if off not in starts:
            continue
        i = starts.index(off)

        def joined(a: int, b: int) -> bool:
            gap = _no_powers(q[nums[a].end() : nums[b].start()])
            return len(gap) <= 30 and not re.search(r"[.?!]\s|\n\s*\n", _DOTS.sub(",", gap)) and \
                _SEPARATOR.sub("", _DOTS.sub("", gap)) == ""

        vals = [Fraction(_value(m.group())) for m in nums]
        for step in (1, 2):  # neighbours, or every other number (2 \cdot 2^2 + 3 \cdot 2^3 + ...)
            for lo in (i - 2 * step, i - step, i):
                hi = lo + 2 * step
                if lo < 0 or hi >= len(nums) or not all(joined(x, x + 1) for x in range(lo, hi)):
                    continue
                x, y, z = vals[lo], vals[lo + step], vals[hi]
                if not (x == y == z) and (y - x == z - y or (x and y and z and y * y == x * z)):
                    yield "pattern", f"{lit!r} is in the progression {nums[lo].group()}, {nums[lo + step].group()}, {nums[hi].group()}"
                    return
        # two joined terms with an ellipsis right after or right before them (only separators
        # between): the opening or closing terms of a run
        for a, b in ((i, i + 1), (i - 1, i)):
            if 0 <= a and b < len(nums) and joined(a, b) and vals[a] != vals[b]:  # equal terms: a repeat
                after = q[nums[b].end() : nums[b + 1].start() if b + 1 < len(nums) else len(q)]
                before = q[nums[a - 1].end() if a >= 1 else 0 : nums[a].start()]
                m = _DOTS.search(after)
                if m is not None and _SEPARATOR.sub("", _no_powers(after[: m.start()])) == "":
                    yield "pattern", f"{lit!r} is one of the terms {nums[a].group()}, {nums[b].group()} before an ellipsis"
                    return
                last = ([None, *_DOTS.finditer(before)])[-1]
                if last is not None and _SEPARATOR.sub("", before[last.end() :]) == "":
                    yield "pattern", f"{lit!r} is one of the terms {nums[a].group()}, {nums[b].group()} after an ellipsis"
                    return
    # zero, standard_constant, answer_range, grammar, default_value: each by the tables and
    # tests below, written apart from the rules in values/shortcuts.py that keep such
    # literals out, so that a count here is a second opinion on those rules
    if v2 == 0:
        yield "zero", f"{lit!r} is 0"
    if any(_formula_constant(q, off, lit) or _forced_polyhedron_count(q, off) for off in places):
        yield "standard_constant", f"{lit!r} is the constant of a formula the problem states"
    if _range_end_or_modulus(q, v2) or any(_full_turn(q, off, lit) for off in places):
        yield "answer_range", f"{lit!r} is a modulus, the end of the range 0..N its residue must lie in, or a full turn"
    if v2 == 1 and any(_count_of_one(q, off, lit) for off in places):
        yield "grammar", f"{lit!r} is a count of 1 before a singular noun"
    if v2.denominator == 1 and any(_default_of_context(q, off, lit, int(v2)) for off in places):
        yield "default_value", f"{v2} is a value its context fixes"


# -- standard_constant: well-known formulas written out, each as (text before, the constant,
# text after), compared with the problem's text with blanks and dollars taken out
_FORMULAS: tuple[tuple[str, str, str], ...] = (
    *((f"{lhs}=", "2", "") for lhs in ("V-E+F", "V+F-E", "F-E+V", "F+V-E", "-E+V+F", "-E+F+V")),  # Euler's
    ("", "2", "\\pir"), ("", "4", "\\pir^2"),  # a circle's 2 pi r, a sphere's 4 pi r^2
    ("\\frac{", "5", "}{9}(F-32)"), ("\\frac{5}{9}(F-", "32", ")"),  # Fahrenheit to Celsius and back
    ("\\frac{", "9", "}{5}C+32"), ("\\frac{9}{5}C+", "32", ""),
)
_BLANKS = re.compile(r"[\s$]+")


def _formula_constant(q: str, off: int, lit: str) -> bool:
    """Whether the literal at ``off`` is the constant of a formula of :data:`_FORMULAS`."""
    for before, const, after in _FORMULAS:
        if const != lit:
            continue
        left = _BLANKS.sub("", q[max(0, off - 3 * len(before) - 8) : off])
        right = _BLANKS.sub("", q[off + len(lit) : off + len(lit) + 3 * len(after) + 8])
        rest = left[: len(left) - len(before)]
        if left.endswith(before) and right.startswith(after) and not rest[-1:].isdigit() and rest[-1:] != "." \
                and not _letter_follows(q, off + len(lit), len(after)):  # 2\pi r, not 2\pi radians
            return True
    return False


def _letter_follows(q: str, pos: int, n: int) -> bool:
    """Whether a letter directly follows the first ``n`` characters of ``q[pos:]`` that are not
    blanks or dollars (the formula's text ends inside a word)."""
    while n and pos < len(q):
        n -= not _BLANKS.fullmatch(q[pos])
        pos += 1
    return bool(n == 0 and q[pos : pos + 1].isalpha() and q[pos - 1 : pos].isalpha())


_SOLID_COUNT = re.compile(r"(?<![\d.])(\d+)\$?\s*(vertices|edges|faces)\b")


def _forced_polyhedron_count(q: str, off: int) -> bool:
    """Whether ``off`` holds one of a solid's stated vertex, edge and face counts, which
    Euler's V - E + F = 2 ties together: any two give the third."""
    found: dict[str, list[tuple[int, int]]] = {}
    for m in _SOLID_COUNT.finditer(q):
        found.setdefault(m.group(2), []).append((m.start(1), int(m.group(1))))
    if sorted(found) != ["edges", "faces", "vertices"] or any(len(v) != 1 for v in found.values()):
        return False
    (v_at, v), (e_at, e), (f_at, f) = found["vertices"][0], found["edges"][0], found["faces"][0]
    return v - e + f == 2 and off in (v_at, e_at, f_at)


# -- answer_range: a residue question that states its answer's range 0..N shows the modulus
# N + 1 (N itself for a strict bound); a full turn bounds an angle
_ABOUT_RESIDUES = re.compile(r"\bmod|\bresidue|\\equiv", re.I)  # not "congruent rectangles"
_ZERO = re.compile(r"(?<![\d.,])0(?![\d.])")
_RANGE_GAP = re.compile(r"(?:\s|\$|,|\\[lc]?dots|\.\.\.|\\leq?|\\lt|<|\bto\b|\band\b|\b[a-z]\b|(?<![\d.])\d+(?![\d.]))*")
_RANGE_WORD = re.compile(r",|\\le|<|\\lt|\bto\b|\band\b")


def _range_end_or_modulus(q: str, v2: Fraction) -> bool:
    """Whether ``v2`` is N or N + 1 for a range 0..N a residue question states ("from 0 to
    55", ``0 \\le n \\le 5``, ``0,1,2,\\ldots,22,23``)."""
    if v2.denominator != 1 or not _ABOUT_RESIDUES.search(q):
        return False
    for z in _ZERO.finditer(q):
        gap = _RANGE_GAP.match(q, z.end(), min(len(q), z.end() + 60)).group()
        ends = [int(n) for n in re.findall(r"(?<![\d.])\d+(?![\d.])", gap)]
        if ends and _RANGE_WORD.search(gap) and v2 in (ends[-1], ends[-1] + 1):
            return True
    return False


_TURN_AFTER = {"360": re.compile(r"\s*(?:\^\s*\{?\s*\\circ|degrees)"), "2": re.compile(r"\s*\\pi\b")}
_FROM_ZERO_BELOW = re.compile(r"(?<![\d.])0\s*(?:\^\s*\{?\s*\\circ\s*\}?)?\s*(?:\\leq?|<|\\lt)[^$<]{1,20}(?:\\leq?|<|\\lt)\s*$")


def _full_turn(q: str, off: int, lit: str) -> bool:
    """Whether the literal at ``off`` is the upper end of ``0 \\le x < 360^\\circ`` or ``0 \\le
    \\theta < 2\\pi``: the range of an angle, which every reader knows."""
    after = _TURN_AFTER.get(lit)
    return bool(after and after.match(q, off + len(lit)) and _FROM_ZERO_BELOW.search(q[max(0, off - 40) : off]))


# -- grammar: "radius $Y$ foot" says Y = 1: a count of 1 in prose right before a singular noun
_NEXT_WORD = re.compile(r"\s*\$?\s*(?:\\text\s*\{\s*)?([A-Za-z]+)(-?)")
_NO_NOUN = frozenset("""
a an the and or but nor to from into onto of on in at by for with than as if when where while that which who whose
so is are was were be been has have had do does did can could will would shall should may might must not no only
more less fewer larger smaller greater higher lower other another each every per times plus minus mod modulo
through over under between after before above below also then there this these those what how
exactly just about nearly almost approximately twice
""".split())


def _count_of_one(q: str, off: int, lit: str) -> bool:
    """Whether the 1 at ``off`` is a count in prose right before a singular noun (``1 foot``,
    ``1 boy``); not a dimension (``1 by 1``), a price, a unit of two letters (``1 cm``) or a
    word such as "to" or "more"."""
    end = off + len(lit)
    if _math_at(q, off) and not (q[off - 1 : off] == "$" and q[end : end + 1] == "$"):
        return False  # a term of a formula
    if q[max(0, off - 3) : off].rstrip("$ ").endswith("\\$") or re.search(r"\bby\s*\$?\s*$", q[max(0, off - 8) : off]):
        return False
    m = _NEXT_WORD.match(q, end)
    if m is None or m.group(2):
        return False
    w = m.group(1).lower()
    return len(w) > 2 and w not in _NO_NOUN and not (w.endswith("s") and not w.endswith("ss"))


# -- default_value: (value, how the word right after it starts, words one of which its
# sentence holds besides; none: the word is enough): the units and sets whose size every
# reader knows. _SHAPES: the counts a shape the problem names fixes.
_DEFAULT_CONTEXTS: tuple[tuple[int, tuple[str, ...], tuple[str, ...]], ...] = (
    (52, ("card",), ("deck", "standard")), (13, ("card",), ("suit",)), (13, ("rank",), ()), (4, ("suit",), ()),
    (6, ("sided", "faced", "side", "face"), ("die", "dice", "cube")), (60, ("minute",), ("hour",)),
    (60, ("second",), ("minute",)), (24, ("hour",), ("day",)), (7, ("day",), ("week",)), (12, ("month",), ("year",)),
    (12, ("inch",), ("foot",)), (365, ("day",), ("year",)), (3, ("feet",), ("yard",)), (100, ("centimeter",), ("meter",)),
    (100, ("cent",), ("dollar",)), (1000, ("meter",), ("kilometer",)), (1000, ("gram",), ("kilogram",)),
    (1000, ("milliliter",), ("liter",)), (16, ("ounce",), ("pound",)), (5280, ("feet",), ("mile",)),
    (26, ("letter",), ("alphabet",)), (360, ("degree", "circ"), ("circle", "full")),
)
_SHAPES: tuple[tuple[str, dict[str, int]], ...] = (
    *((name, dict.fromkeys(("side", "sided", "vertice", "vertex", "angle", "corner"), n)) for name, n in (
        ("triangle", 3), ("quadrilateral", 4), ("rectangle", 4), ("square", 4), ("parallelogram", 4), ("rhombus", 4),
        ("trapezoid", 4), ("kite", 4), ("pentagon", 5), ("hexagon", 6), ("heptagon", 7), ("octagon", 8),
        ("nonagon", 9), ("decagon", 10), ("dodecagon", 12))),
    *((name, {"face": 6, "side": 6, "edge": 12, "vertice": 8, "corner": 8}) for name in ("cube", "box", "cuboid")),
    ("tetrahedr", {"face": 4, "edge": 6, "vertice": 4, "corner": 4}),
    ("octahedr", {"face": 8, "edge": 12, "vertice": 6, "corner": 6}),
    ("cylind", {"end": 2, "base": 2}), ("segment", {"endpoint": 2, "end": 2}),
)
_AFTER_VALUE = re.compile(r"(?:\s|\$|-|\\text\s*\{|\^\s*\{?\s*\\)*([A-Za-z]+)")
_LETTER_FOR = re.compile(r"\b[A-F]\$?\s+(?:for|to represent|to denote)\s*\$?\s*$")


def _default_of_context(q: str, off: int, lit: str, v: int) -> bool:
    """Whether the value ``v`` at ``off`` is fixed by its context: a unit or set of
    :data:`_DEFAULT_CONTEXTS`, a count a shape of :data:`_SHAPES` the problem names fixes
    (with the count's noun right after it), or a digit a letter names (``A`` for 10)."""
    if 10 <= v <= 15 and _LETTER_FOR.search(q, max(0, off - 40), off):
        return True
    m = _AFTER_VALUE.match(q, off + len(lit))
    if m is None:
        return False
    word = m.group(1).lower()
    noun = word[:-1] if word.endswith("s") and not word.endswith("ss") else word
    start = max(q.rfind(". ", 0, off), q.rfind("\n", 0, off), 0)
    stops = [x for x in (q.find(". ", m.end()), q.find("?", m.end()), q.find("\n", m.end())) if x >= 0]
    rest = (q[start:off] + " " + q[m.end() : min(stops, default=len(q))]).lower()  # the sentence, but the value
    for value, after, around in _DEFAULT_CONTEXTS:
        if value == v and word.startswith(after) and (not around or any(w in rest for w in around)):
            return True
    low = q.lower()
    return any(counts.get(noun) == v and shape in low for shape, counts in _SHAPES)


def scan_record(rec: Problem, parents: Sequence[Problem] | None = None) -> list[tuple[str, str]]:
    """The defects of one composed record: (class, detail) pairs, empty for a clean one.
    ``parents`` (the chain, in order) lets ``independent`` read each later problem's own
    text; without them the original is restored from the record."""
    spans = segments(rec)
    if spans is None:
        return [("unreadable", "no glue paragraph")]
    found: list[tuple[str, str]] = []
    for k, (lk, (a, b)) in enumerate(zip(rec.links, spans), 1):
        seg = rec.question[a:b]  # the rewritten later problem alone
        # a part before the last lost its answer instructions (recorded): read it at their offsets
        taken = [Instruction(*row[1:]) for row in rec.metadata.get("instructions_removed") or () if row[0] == k + 1]
        try:
            mapped = (dataclasses.replace(lk, v2_offset=shift_offset(lk.v2_offset, taken),
                                          v2_also=tuple(shift_offset(o, taken) for o in lk.v2_also)) if taken else lk)
            r = _restore(seg, mapped)
            if r is not None and taken:
                offs = sorted((lk.v2_offset, *lk.v2_also))
                r = restore_instructions(r[0], taken), [(o, tok) for o, (_, tok) in zip(offs, r[1])]
        except ValueError:
            r = None
        if r is None:
            found.append(("unreadable", f"link {k}: {lk.y} not at its offset"))
            continue
        original, places = r
        plain = plain_text(original)
        roles = set()
        for off, tok in places:
            in_math = _math_at(original, off)
            if plain:
                if tok.startswith("$"):
                    found.append(("latex_in_plain_text", f"link {k}: ${lk.y}$ in a problem without LaTeX at {off}"))
            elif tok.startswith("$") and in_math:
                found.append(("latex_dollars_in_math", f"link {k}: ${lk.y}$ in math mode at {off}"))
            elif not tok.startswith("$") and not in_math:
                found.append(("latex_bare_in_prose", f"link {k}: bare {lk.y} in prose at {off}"))
            before = original[max(0, off - 24) : off]
            for pat, what in _NOTATION_BEFORE:
                if pat.search(before) and (what != "inverse superscript" or lk.v2_literal == "1"):
                    found.append(("notation", f"link {k}: {lk.v2_literal!r} is a {what}"))
                    break
            why = _tex_token(original, off, lk.v2_literal)
            if why:
                found.append(("tex_token", f"link {k}: {why}"))
            role = _scan_role(original, off, lk.v2_literal, in_math)
            if role == "exponent":
                found.append(("exponent", f"link {k}: {lk.y} is a power at {off}"))
            elif role == "radix":
                found.append(("radix", f"link {k}: {lk.y} is a base of notation at {off}"))
            roles.add(role)
        if len(roles - {"exponent", "radix"}) > 1:
            found.append(("role_mix", f"link {k}: {lk.y} replaced a {' and a '.join(sorted(roles))}"))
        v2 = Fraction(lk.v2_expr)
        replaced = {off for off, _ in places}
        # v2 still visible: another literal the constant finder reads as a quantity (not a
        # power or a radix, which are notation, nor the start of an index range, a quantity
        # of its own), left in the rewritten problem; the finder's
        # reading of the last problem takes its answer (a multiple-choice problem answered by
        # a letter has its options left unread)
        answer = rec.answer if k == len(rec.links) else ""
        same = [c.offset for c in find_constants(original, answer)
                if c.value == v2 and c.offset not in replaced and c.role not in UNGROUPED_ROLES]
        if same:
            found.append(("repeated_value", f"link {k}: {v2} still written at {same[0]}"))
        else:
            # the same value in another role (a table cell, a list label): not the replaced
            # quantity by the finder's reading, reported apart
            for m in _visible_numbers(seg):
                if _value(m.group()) == v2 and not _in_figure(seg, m.start()):
                    found.append(("same_value_other_role", f"link {k}: {m.group()!r} at {m.start()}"))
                    break
        if lk.v2_literal[:1].isdigit() and v2 in _figure_numbers(original):  # a count in words is no coordinate
            found.append(("figure", f"link {k}: the figure code writes {v2}"))
        for cls, why in _revealed(original, sorted(replaced), lk.v2_literal, v2):
            found.append((cls, f"link {k}: {why}"))
        later = parents[k].question if parents is not None else original
        if decide(later, tuple(sorted(replaced)), lk.v2_literal) == "independent":
            found.append(("independent", f"link {k}: the answer is the same for every value of {lk.y}"))
        d = _offset(lk.d_expr)
        if d is None or abs(d) > _MAX_OFFSET or d.denominator > _MAX_DENOMINATOR:
            found.append(("unnatural_offset", f"link {k}: d = {lk.d_latex}"))
    return found


def scan_records(records: Iterable[Problem]) -> tuple[int, Counter[str], dict[str, list[tuple[str, str]]]]:
    """Scan many records: (records scanned, defects by class, up to 5 examples per class)."""
    n = 0
    counts: Counter[str] = Counter()
    examples: dict[str, list[tuple[str, str]]] = {}
    for rec in records:
        n += 1
        seen = set()
        for cls, detail in scan_record(rec):
            if cls in seen:
                continue
            seen.add(cls)
            counts[cls] += 1
            ex = examples.setdefault(cls, [])
            if len(ex) < 5:
                ex.append((rec.id, detail))
    return n, counts, examples
