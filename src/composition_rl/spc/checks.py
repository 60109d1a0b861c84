"""The checks every composed prompt must pass, read from the record itself.

They re-derive everything from the composed text, the links and the parent problems, by a
separate code path from the engine that wrote them (the paper's Section 3.4, "three
verification steps"; here exact instead of LLM self-checks):

1. ``check1_v1``: q1's text is intact and v1 re-parses from q1's answer to the same exact value
   (catches a misread answer: ``2\\frac{1}{4}`` read as 2 times 1/4 instead of 9/4).
2. ``check2_substitution``: putting v2 back for Y in the modified later problem gives the
   original text character for character (catches a variable put in the wrong place, or a
   rewrite that changed another word of the problem).
3. ``check3_relation``: the relation written in the prompt parses back to d, and
   ``v1 - d == v2`` exactly (catches wrong arithmetic: "$Y$ is $3$ less than $X$" where
   v1 = 7 and v2 = 10).
4. ``check4_names_length``: variable names are distinct, clash with no symbol of any chained
   problem, and the prompt respects the length limit (catches a ``Y`` in a problem about a
   point ``Y``).
5. ``check5_dependence``: the later problem's answer is not proved independent of the
   variable (:func:`composition_rl.spc.dependence.decide` on the original text and the
   replaced places), and the record does not say so itself (``metadata["dependence"]``)
   (catches "Compute $\\dbinom{Y}{Y}$.", which is 1 whatever q1 gives).

:func:`run_checks` returns ``None`` for a good record or the first failure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from functools import lru_cache

import sympy

from composition_rl.records import Link, Problem
from composition_rl.spc.base import CHECK_STAGES, Rejection
from composition_rl.spc.dependence import decide
from composition_rl.spc.text import (
    Instruction,
    answer_instructions,
    derived_phrase,
    find_glue,
    shift_offset,
    strip_instructions,
)
from composition_rl.values import (
    Exact,
    constant_value,
    exact_equal,
    exact_positive,
    exact_sub,
    exact_value,
    parse_answer_value,
    parse_number,
    symbols_used,
    to_fraction,
)

__all__ = ["CHECK_STAGES", "exact", "run_checks"]


@lru_cache(maxsize=65536)
def exact(expr: str) -> Exact:
    """Exact value of a stored expression string ("7/2", "7*sqrt(2)", "sqrt(5) + (-7)")."""
    try:
        return Fraction(expr)
    except (TypeError, ValueError):
        v = sympy.sympify(expr, rational=True)
        return Fraction(int(v.p), int(v.q)) if v.is_Rational else v


@lru_cache(maxsize=65536)
def _v1_failure(answer: str, v1_latex: str, v1_expr: str) -> tuple[str, str] | None:
    """Check 1 for one (answer, recorded v1): cached, since a q1 recurs across its pool."""
    av = parse_answer_value(answer)
    if av is None:
        return "q1_not_numeric", f"answer {answer!r} has no exact value"
    v1 = exact_value(v1_latex)
    gt = to_fraction(av.value) if av.value.is_Rational else av.value
    if v1 is None or not exact_equal(gt, v1) or not exact_equal(v1, exact(v1_expr)):
        return "v1_mismatch", f"answer gives {av.value}, record says {v1_latex} / {v1_expr}"
    return None


@lru_cache(maxsize=65536)
def _v2_failure(literal: str, v2_expr: str) -> str | None:
    """Check 2's value part: the literal put back is the recorded v2 (pure, so cached)."""
    # a mixed number (6\\frac{1}{4}) is read as one, not as 6 times 1/4
    lit_value = exact_value(literal) if literal[:1].isdigit() and "frac" not in literal else constant_value(literal)
    if not isinstance(lit_value, Fraction) or lit_value != exact(v2_expr):
        return f"literal {literal!r} is not {v2_expr}"
    return None


@lru_cache(maxsize=1 << 18)
def _relation_failure(direction: str, written_latex: str, d_latex: str, v1_latex: str, v2_expr: str) -> tuple[str, str] | None:
    """Check 3 on strings alone: the relation as written in the prompt (direction and
    magnitude) equals the recorded d, and ``v1 - d == v2`` exactly. A pure function of its
    arguments, so it is cached: the same (v1, v2) pair recurs across a pool."""
    if direction == "equal":
        written: Exact = Fraction(0)
    else:
        mag = exact_value(written_latex)
        if mag is None or not exact_positive(mag):
            return "relation_unparsable", f"cannot read d from {written_latex!r}"
        written = mag if direction == "less" else -mag
    d = exact_value(d_latex)
    if d is None or not exact_equal(written, d):
        return "relation_mismatch", f"text says {written}, record says {d_latex}"
    if not exact_equal(exact_sub(exact_value(v1_latex), written), exact(v2_expr)):
        return "arithmetic_mismatch", "v1 - d != v2"
    return None


@lru_cache(maxsize=256)
def _token_shapes(y: str) -> tuple[str, ...]:
    """The ways an engine may write variable ``y`` in place of a literal (see ``spc.variable_token``)."""
    return (f"${y}$", f"{y} \\cdot ", y)


def _restore_all(seg: str, original: str, lk) -> tuple[str, str] | None:
    """Check 2 for a link that replaced several occurrences: walking the original offsets in
    order, each must hold a token shape of Y in ``seg``; putting the literal back at all of
    them must give the original text. None if it does."""
    lit = lk.v2_literal
    out, pos, shift = [], 0, 0
    for off in sorted((lk.v2_offset, *lk.v2_also)):
        at = off + shift
        # "Y \cdot " only where a bracket follows the literal (spc.variable_token's rule), so
        # that a "Y" followed by the text's own "\cdot" is not misread
        nxt = original[off + len(lit) : off + len(lit) + 12].lstrip()
        shapes = [t for t in _token_shapes(lk.y) if seg.startswith(t, at)]
        if len(shapes) > 1 and not nxt.startswith(("(", "[", "\\left", "\\{")):
            shapes = [t for t in shapes if "cdot" not in t]
        tok = shapes[0] if shapes else None
        if tok is None:
            return "variable_not_found", f"{lk.y} is not at offset {off}"
        out.append(seg[pos:at])
        out.append(lit)
        pos = at + len(tok)
        shift += len(tok) - len(lit)
    out.append(seg[pos:])
    if "".join(out) != original:
        return "substitution_mismatch", f"restoring {lit!r} at {1 + len(lk.v2_also)} places does not give the original text"
    return None


def run_checks(c: Problem, parents: Sequence[Problem], max_chars: int = 8000) -> Rejection | None:
    """Run checks 1-5 on composed record ``c`` whose chain is ``parents`` (q1..qK), for a
    record of any engine. An LLM record (``engine == "llm"``) has a free-text definition in
    its glue, may take v1 from inside a compound answer, may write its constant in words and
    may have had its later problem rephrased (confirmed by the verification call): its links
    are read by :func:`_llm_link_failure`; the rest of the contract is shared."""
    llm = c.engine == "llm"
    K = len(parents)
    links = c.links
    if c.depth != sum(p.depth for p in parents) or len(links) != K - 1 or tuple([p.id for p in parents]) != c.parents:
        return Rejection("check1_v1", "bad_record", f"depth {c.depth}, {len(links)} links, parents {c.parents} do not match the chain")
    text = c.question
    if tuple(c.answers) != tuple(parents[-1].answers):
        return Rejection("check1_v1", "answer_mismatch", "the composed answer is not the last problem's answer")

    # locate the glue paragraphs in order; they split the text into the K problem segments:
    # text[:glues[0].start] is q1, text[glues[k].end : glues[k+1].start] the modified q_{k+2}
    glues = []
    pos = 0
    for k, lk in enumerate(links):
        g = find_glue(text, lk.x, lk.y, pos, free_definition=llm)
        if g is None:
            return Rejection("check3_relation", "relation_missing", f"link {k + 1}: no relation sentence for ${lk.y}$ and ${lk.x}$")
        glues.append(g)
        pos = g.end

    # the answer instructions taken out of the parts before the last, as recorded: each must be
    # one the part holds (spc.answer_instructions), and nothing else of the part may change
    removed = _removed_instructions(c, parents)
    if isinstance(removed, Rejection):
        return removed

    # 1. q1 intact (but for its recorded answer instructions), and v1 from each earlier problem's answer
    q1 = parents[0].question
    q1_text = strip_instructions(q1, removed[0]) if removed[0] else q1
    if glues[0].start != len(q1_text) or not text.startswith(q1_text):
        return Rejection("check1_v1", "q1_modified", "the first problem's text was changed")
    if llm:
        for k, lk in enumerate(links):
            seg = text[glues[k].end : glues[k + 1].start if k + 2 < K else len(text)]
            why = _llm_link_failure(c, k, lk, glues[k], seg, parents)
            if why is not None:
                return why
        return _names_length_failure(text, links, parents, max_chars) or _dependence_failure(c, parents)
    for k, lk in enumerate(links):
        why = (_derived_v1_failure(parents[k], lk, glues[k]) if lk.v1_derivation or glues[k].derived
               else _v1_failure(parents[k].answer, lk.v1_latex, lk.v1_expr))
        if why is not None:
            return Rejection("check1_v1", why[0], f"link {k + 1}: {why[1]}")

    # 2. substituting v2 back restores the later problem exactly
    for k, lk in enumerate(links):
        seg = text[glues[k].end : glues[k + 1].start if k + 2 < K else len(text)]
        why = _substitution_failure(k, lk, seg, parents[k + 1].question, removed[k + 1])
        if why is not None:
            return why

    # 3. the written relation is d, and v1 - d == v2
    for k, (lk, g) in enumerate(zip(links, glues)):
        why = _relation_failure(g.direction, g.d_latex, lk.d_latex, lk.v1_latex, lk.v2_expr)
        if why is not None:
            return Rejection("check3_relation", why[0], f"link {k + 1}: {why[1]}")

    return _names_length_failure(text, links, parents, max_chars) or _dependence_failure(c, parents)


def _substitution_failure(k: int, lk: Link, seg: str, original: str,
                          removed: tuple[Instruction, ...]) -> Rejection | None:
    """Check 2 for link ``k``: writing v2 back into ``seg`` (the composed later part) in place
    of the variable gives the ``original`` later problem exactly (less its ``removed`` answer
    instructions, for a part before the last), and the literal is v2."""
    off, lit = lk.v2_offset, lk.v2_literal
    if removed:  # a part before the last: compare with its text less its instructions
        try:
            off = shift_offset(off, removed)
            lk = replace(lk, v2_offset=off, v2_also=tuple(shift_offset(o, removed) for o in lk.v2_also))
        except ValueError as e:
            return Rejection("check2_substitution", "substitution_mismatch", f"link {k + 1}: {e}")
        original = strip_instructions(original, removed)
    if lk.v2_also:
        why = _restore_all(seg, original, lk)
        if why is not None:
            return Rejection("check2_substitution", why[0], f"link {k + 1}: {why[1]}")
    else:
        # the engine wrote one of the token shapes; the substitution is right if one restores q
        found = False
        for t in _token_shapes(lk.y):
            if seg.startswith(t, off):
                found = True
                if seg[:off] + lit + seg[off + len(t) :] == original:
                    break
        else:
            if not found:
                return Rejection("check2_substitution", "variable_not_found", f"link {k + 1}: {lk.y} is not at offset {off}")
            return Rejection("check2_substitution", "substitution_mismatch", f"link {k + 1}: restoring {lit!r} does not give the original text")
    why = _v2_failure(lit, lk.v2_expr)
    if why is not None:
        return Rejection("check2_substitution", "v2_mismatch", f"link {k + 1}: {why}")
    return None


def _removed_instructions(c: Problem, parents: Sequence[Problem]) -> list[tuple[Instruction, ...]] | Rejection:
    """Per part, the answer instructions the record says were taken out of it
    (``metadata["instructions_removed"]``), checked: each is one of the part's own
    (:func:`spc.answer_instructions`, so only that class of text can go), in order, and the
    last part keeps all of its own."""
    out: list[list[Instruction]] = [[] for _ in parents]
    rows = c.metadata.get("instructions_removed") or []
    if not isinstance(rows, list):
        return Rejection("check1_v1", "instructions_invalid", f"instructions_removed is {type(rows).__name__}, not a list")
    for row in rows:
        try:
            part, start, old, by = row
            ins = Instruction(int(start), str(old), str(by))
        except (TypeError, ValueError):
            return Rejection("check1_v1", "instructions_invalid", f"instructions_removed row {row!r} is not [part, start, text, by]")
        if not isinstance(part, int) or not 1 <= part < len(parents):
            return Rejection("check1_v1", "instructions_invalid", f"instructions_removed row {row!r}: part {part!r} "
                             f"is not one of the parts before the last (1..{len(parents) - 1})")
        if ins not in answer_instructions(parents[part - 1].question):
            return Rejection("check1_v1", "instructions_invalid", f"part {part}: {old!r} at {start} is no answer "
                             "instruction of that problem")
        out[part - 1].append(ins)
    for part in out:
        if part != sorted(part) or len(set(part)) != len(part):
            return Rejection("check1_v1", "instructions_invalid", "instructions_removed is not in order, or repeats one")
    return [tuple(p) for p in out]


def _dependence_failure(c: Problem, parents: Sequence[Problem]) -> Rejection | None:
    """Check 5: no link's later problem is proved independent of its variable, and the record
    does not say that it is (the LLM engine records what its model decided)."""
    if c.metadata.get("dependence") == "independent":
        return Rejection("check5_dependence", "independent", "the record says its answer does not depend on the variable")
    for k, lk in enumerate(c.links):
        if lk.v2_offset < 0:
            continue  # a rephrased problem (LLM): there is no original place to read
        places = tuple(sorted((lk.v2_offset, *lk.v2_also))) if lk.v2_also else (lk.v2_offset,)
        if decide(parents[k + 1].question, places, lk.v2_literal) == "independent":
            return Rejection("check5_dependence", "independent",
                           f"link {k + 1}: the answer is the same for every value of {lk.y}")
    return None


def _names_length_failure(text: str, links, parents: Sequence[Problem], max_chars: int) -> Rejection | None:
    """Check 4: distinct names that clash with no symbol of any parent; the length limit."""
    names = [n for lk in links for n in (lk.x, lk.y)]
    if len(set(names)) != len(names):
        return Rejection("check4_names_length", "name_collision", f"variable names repeat: {names}")
    # each name against each parent's (cached) symbols: no union of the parents' sets per record
    used = [symbols_used(p.question) for p in parents]
    clash = {u for u in {n.upper() for n in names} if any(u in s for s in used)}
    if clash:
        return Rejection("check4_names_length", "name_collision", f"{sorted(clash)} already used as symbols")
    if len(text) > max_chars:
        return Rejection("check4_names_length", "too_long", f"{len(text)} chars > {max_chars}")
    return None


def _llm_link_failure(c: Problem, k: int, lk, g, seg: str, parents: Sequence[Problem]) -> Rejection | None:
    """Checks 1-3 for link ``k`` of an LLM record (segment ``seg`` is its later problem).

    1. v1 is the exact value of the earlier answer or a number written in it.
    2. Putting the literal back for the variable gives the later problem character for
       character (links whose problem the model rephrased, ``v2_offset == -1``, were
       confirmed by the verification call instead and are marked in ``metadata``).
    3. The relation in the text parses back to d, and v1 - d == v2 exactly.
    """
    from composition_rl.spc.llm.answer_numbers import answer_numbers
    from composition_rl.values.numwords import word_number

    K = len(parents)
    v1 = parse_number(lk.v1_latex)
    if v1 is None or not exact_equal(v1, exact(lk.v1_expr)):
        return Rejection("check1_v1", "v1_mismatch", f"link {k + 1}: v1 {lk.v1_latex!r} != {lk.v1_expr!r}")
    if lk.v1_derivation:  # a number derived from the answer, from the menu
        why = _derived_v1_failure(parents[k], lk, g)
        if why is not None:
            return Rejection("check1_v1", why[0], f"link {k + 1}: {why[1]}")
    ok = bool(lk.v1_derivation)
    for a in () if ok else parents[k].answers:
        whole, parts = answer_numbers(a)
        if (whole is not None and exact_equal(whole, v1)) or any(exact_equal(p, v1) for p in parts):
            ok = True
            break
    if not ok:
        return Rejection("check1_v1", "v1_not_in_answer", f"link {k + 1}: {lk.v1_latex} is not in {parents[k].answer!r}")
    v2 = exact(lk.v2_expr)
    lit = parse_number(lk.v2_literal)
    if lit is None and word_number(lk.v2_literal) is not None:
        lit = sympy.Integer(word_number(lk.v2_literal))
    if lit is not None and not exact_equal(lit, v2):
        return Rejection("check2_substitution", "v2_mismatch", f"link {k + 1}: {lk.v2_literal!r} is not {lk.v2_expr}")
    original = parents[k + 1].question
    rephrased = list(c.metadata.get("rephrased", [False] * (K - 1)))
    if lk.v2_offset >= 0:
        y = lk.y
        pat = re.compile(r"(?<![A-Za-z\\])(?:\$" + y + r"\$|" + y + r" \\cdot |" + y + r")(?![A-Za-z])")
        back = pat.sub(lambda _m, s=lk.v2_literal: s, seg)
        # else Y at the recorded places in the shapes the symbolic engine writes: a coefficient
        # glued to a letter ("Yz^2", the 4 of $4z^2$) is no free-standing Y for the pattern
        if (back != original and _restore_all(seg, original, lk) is not None) or not original.startswith(lk.v2_literal, lk.v2_offset):
            return Rejection("check2_substitution", "substitution_mismatch",
                             f"link {k + 1}: restoring {lk.v2_literal!r} does not give the original")
    elif not (k < len(rephrased) and rephrased[k]):
        return Rejection("check2_substitution", "substitution_mismatch",
                         f"link {k + 1}: no offset and not marked as verified rephrase")
    if g.direction == "equal":
        written = sympy.Integer(0)
    else:
        mag = parse_number(g.d_latex)
        if mag is None or not mag.is_positive:
            return Rejection("check3_relation", "relation_unparsable", f"link {k + 1}: cannot read d from {g.d_latex!r}")
        written = mag if g.direction == "less" else -mag
    d = parse_number(lk.d_latex)
    if d is None or not exact_equal(written, d) or not exact_equal(v1 - written, v2):
        return Rejection("check3_relation", "relation_mismatch", f"link {k + 1}: text says {written}, record says {lk.d_latex}")
    return None


def _derived_v1_failure(parent: Problem, lk, g) -> tuple[str, str] | None:
    """Check 1 for a link whose v1 is derived from an answer that is not one number:
    the recorded derivation, applied again to the earlier problem's answer, gives v1 exactly,
    and the glue defines X with that derivation's own wording. A glue with derived wording
    on a link that records no derivation is refused too."""
    if not lk.v1_derivation:
        return "derivation_missing", f"the text derives X ({g.definition!r}) but the record has no derivation"
    return _derivation_failure(parent.answer, parent.question, tuple(lk.v1_derivation), lk.x, g.definition,
                               lk.v1_latex, lk.v1_expr)


@lru_cache(maxsize=1 << 16)
def _derivation_failure(answer: str, question: str, derivation: tuple[tuple[str, str], ...], x: str,
                        definition: str, v1_latex: str, v1_expr: str) -> tuple[str, str] | None:
    """:func:`_derived_v1_failure` past its first test, on strings alone: a pure function, so
    it is cached (a q1 leads its whole pool with the same derivation)."""
    from composition_rl.values.derive import Derivation, derive

    try:
        d = Derivation.from_dict(dict(derivation))
        phrase = derived_phrase(d.kind, d.arg, d.name)
    except (KeyError, ValueError, IndexError) as e:
        return "derivation_invalid", f"derivation {dict(derivation)}: {e}"
    if definition != f"Let ${x}$ be {phrase}.":
        return "derivation_wording", f"the text says {definition!r}, the derivation {d.kind} is worded {phrase!r}"
    v = derive(answer, question, d)
    if v is None:
        return "derivation_invalid", f"answer {answer!r} does not allow {d.kind} {d.arg}".rstrip()
    v1 = exact_value(v1_latex)
    if v1 is None or not exact_equal(to_fraction(v) if v.is_Rational else v, v1) or not exact_equal(v1, exact(v1_expr)):
        return "v1_mismatch", f"{d.kind} of {answer!r} is {v}, record says {v1_latex} / {v1_expr}"
    return None
