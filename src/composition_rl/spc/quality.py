"""Scanners for the defect classes a reader finds in composed prompts.

The checks (:mod:`composition_rl.spc.checks`) prove a record *correct*; these scanners
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

from composition_rl.records import Link, Problem
from composition_rl.spc.dependence import decide
from composition_rl.spc.natural import Naturalness
from composition_rl.spc.quality_shortcuts import revealed
from composition_rl.spc.quality_text import (
    FIGURE,
    NUMBER,
    POINT,
    in_figure,
    in_superscript,
    math_at,
    number_value,
)
from composition_rl.spc.text import (
    Glue,
    Instruction,
    find_glue,
    plain_text,
    restore_instructions,
    shift_offset,
)
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

_NOTATION_BEFORE = (
    (re.compile(r"\^\s*\{?\s*-\s*$"), "inverse superscript"),
    (re.compile(r"\\sqrt\s*\[\s*$"), "root index"),
    (re.compile(r"\^\s*\{\s*\(\s*$"), "derivative order"),
    (re.compile(r"\\mathbb\s*\{?\s*[A-Z]\s*\}?\s*\^\s*\{?\s*$"), "dimension"),
    (re.compile(r"_\s*$|_\s*\{[^{}$]*$"), "index"),
    (re.compile(r"\\begin\s*\{[a-zA-Z*]+\}\s*\{\s*$"), "environment argument"),
)
_BRACKETS = ("(", "[", "\\left", "\\{")
_STRING = re.compile(r'"[^"\n]*"')


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



def _visible_numbers(text: str):
    """Numbers a reader sees: in the text, and in figures only inside label strings (figure
    coordinates are not shown); indices, exponents and numbers glued to letters (3rd, 10a)
    are other quantities."""
    figures = [(m.start(), m.end()) for m in FIGURE.finditer(text)]
    strings = [(m.start(), m.end()) for a, b in figures for m in _STRING.finditer(text, a, b)]
    for m in NUMBER.finditer(text):
        s = m.start()
        if any(a <= s < b for a, b in figures) and not any(a <= s < b for a, b in strings):
            continue
        pre = text[max(0, s - 2) : s]
        if pre.endswith(("_", "^", "_{", "^{")):
            continue
        if (s and text[s - 1].isalpha()) or (m.end() < len(text) and text[m.end()].isalpha()):
            continue
        yield m


# -- the scan's own readings of a replaced place (the shortcut classes are in quality_shortcuts.py)
_NATURAL = Naturalness()
_MAX_OFFSET, _MAX_DENOMINATOR = _NATURAL.max_offset, _NATURAL.max_denominator
_ONE_TOKEN_SLOT = re.compile(r"(?:\\[dt]?frac|\\[dt]?binom|\\sqrt|\^|_)\s*$|\\[dt]?(?:frac|binom)\s*(?:\{[^{}]*\}|\w)\s*$")
_CONTROL_WORD = re.compile(r"\\[A-Za-z]+$")
_SECOND_DIGIT = re.compile(r"\\[dt]?(?:frac|binom)\s*\d$")  # the 9 of \frac49 follows its first argument
_BASE_BEFORE = re.compile(r"\bbase[\s~-]*\$?\{?\s*$", re.I)
_DEGREES_AFTER = re.compile(r"\s*(?:\^\s*\{?\s*\\circ|°|\\degree|\$?\s*degrees?\b)")
_PERCENT = re.compile(r"\s*(?:\\%|%|\$?\s*percent\b)")
_STYLE = re.compile(r"\b(?:linewidth|fontsize|unitsize|size|opacity|gray|grey|rgb|rgba|cmyk|arrowsize|dotsize|"
                    r"Arrows?|ArcArrows?|EndArrow|BeginArrow|MidArrow|scale|xscale|yscale|defaultpen|pen|fill|filldraw|"
                    r"markscalefactor|pathticks|dashpattern|currentpen)\s*\([^()]*\)")



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


def _scan_role(q: str, off: int, lit: str, in_math: bool) -> str:
    """The role a replaced place plays, by the scanner's own reading: exponent, radix,
    prose, denominator, angle, percent, coordinate or term."""
    if in_math and in_superscript(q, off):
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
    if any(m.start() < off < m.end() for m in POINT.finditer(q, max(0, off - 24), min(len(q), end + 24))):
        return "coordinate"
    return "term"


def _figure_numbers(q: str) -> set[Fraction]:
    out: set[Fraction] = set()
    for m in FIGURE.finditer(q):
        code = _STYLE.sub(" ", m.group())
        out.update(Fraction(x.group()) for x in re.finditer(r"(?<![\w.])\d+(?:\.\d+)?(?!\w)", code))
    return out


def _offset(expr: str) -> Fraction | None:
    try:
        return Fraction(expr)
    except (ValueError, ZeroDivisionError):
        return None  # irrational



def _place_defects(k: int, lk: Link, original: str, places: list[tuple[int, str]]) -> list[tuple[str, str]]:
    """How link ``k`` wrote its variable at each replaced place of the ``original`` later
    problem: the LaTeX of the token, notation, a TeX token, its role (and a mix of roles)."""
    found: list[tuple[str, str]] = []
    plain = plain_text(original)
    roles = set()
    for off, tok in places:
        in_math = math_at(original, off)
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
    return found


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
        found.extend(_place_defects(k, lk, original, places))
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
                if number_value(m.group()) == v2 and not in_figure(seg, m.start()):
                    found.append(("same_value_other_role", f"link {k}: {m.group()!r} at {m.start()}"))
                    break
        if lk.v2_literal[:1].isdigit() and v2 in _figure_numbers(original):  # a count in words is no coordinate
            found.append(("figure", f"link {k}: the figure code writes {v2}"))
        for cls, why in revealed(original, sorted(replaced), lk.v2_literal, v2):
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
