"""Scanners for the defect classes a reader finds in composed prompts (issue 16).

The checks (:mod:`composition_rl.compose.checks`) prove a record *correct*; these scanners
look for records that are correct but poor training data, reading only the composed record:

* ``latex_dollars_in_math`` (class 1): ``$Y$`` written where the text is already in math mode
  (``align*``, ``eqnarray*``, ``cases``, ``\\[ \\]``, ``$$ $$`` ...): the dollars break LaTeX.
* ``latex_bare_in_prose``: the reverse, a bare ``Y`` in prose.
* ``notation`` (class 3): the replaced literal was notation, not a quantity: ``f^{-1}``,
  ``\\sqrt[3]{}``, ``f^{(4)}``, ``\\mathbb{R}^3``, an index ``a_1``, an environment argument.
* ``repeated_value`` (class 2, the part a program can see): the later problem still shows
  v2 (another literal that reads as a quantity, or a figure label, with the same value), so
  the chain can be skipped. ``same_value_other_role`` is reported apart: v2's value written
  as a coordinate, a table cell or a list label, which may or may not be the same quantity.

Math mode here is found by its own scan (a stack of open delimiters and environments), not by
the code that chose the constant, so the scanner can catch that code's mistakes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from fractions import Fraction

from composition_rl.compose.spc import Glue, find_glue
from composition_rl.records import Link, Problem
from composition_rl.values import find_constants

__all__ = ["DEFECTS", "glues", "scan_record", "scan_records", "segments"]

DEFECTS = ("latex_dollars_in_math", "latex_bare_in_prose", "notation", "repeated_value")
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


def scan_record(rec: Problem) -> list[tuple[str, str]]:
    """The defects of one composed record: (class, detail) pairs, empty for a clean one."""
    spans = segments(rec)
    if spans is None:
        return [("unreadable", "no glue paragraph")]
    found: list[tuple[str, str]] = []
    for k, (lk, (a, b)) in enumerate(zip(rec.links, spans), 1):
        seg = rec.question[a:b]  # the rewritten later problem alone
        r = _restore(seg, lk)
        if r is None:
            found.append(("unreadable", f"link {k}: {lk.y} not at its offset"))
            continue
        original, places = r
        for off, tok in places:
            in_math = _math_at(original, off)
            if tok.startswith("$") and in_math:
                found.append(("latex_dollars_in_math", f"link {k}: ${lk.y}$ in math mode at {off}"))
            elif not tok.startswith("$") and not in_math:
                found.append(("latex_bare_in_prose", f"link {k}: bare {lk.y} in prose at {off}"))
            before = original[max(0, off - 24) : off]
            for pat, what in _NOTATION_BEFORE:
                if pat.search(before) and (what != "inverse superscript" or lk.v2_literal == "1"):
                    found.append(("notation", f"link {k}: {lk.v2_literal!r} is a {what}"))
                    break
        # v2 still visible: another literal the constant finder reads as a quantity (any
        # flaw), or a figure label, with v2's value, left in the rewritten problem
        v2 = Fraction(lk.v2_expr)
        replaced = {off for off, _ in places}
        # the finder's reading of the problem: the last one with its answer (a multiple-choice
        # problem answered by a letter has its options left unread), earlier ones without
        answer = rec.answer if k == len(rec.links) else ""
        same = [c.offset for c in find_constants(original, answer) if c.value == v2 and c.offset not in replaced]
        labels = [m.group() for m in _visible_numbers(original) if _in_figure(original, m.start()) and _value(m.group()) == v2]
        if same or labels:
            found.append(("repeated_value", f"link {k}: {v2} still written at {(same or ['a figure label'])[0]}"))
        else:
            # the same value in another role (a coordinate, a table cell, a list label): not
            # the replaced quantity by the finder's reading, reported apart
            for m in _visible_numbers(seg):
                if _value(m.group()) == v2:
                    found.append(("same_value_other_role", f"link {k}: {m.group()!r} at {m.start()}"))
                    break
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
