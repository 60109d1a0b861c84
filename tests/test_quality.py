"""Composition quality: the variable in the right LaTeX form, no shortcut positions,
no notation used as a constant, natural offsets, and the scanners that look for all of it.

Each case is a real MATH train problem (index in ../shared/data/train/math_train.json),
quoted whole or cut at a sentence end."""

from __future__ import annotations

import json
import re
from fractions import Fraction

import pytest

from composition_rl.jobs.compose import ComposeConfig, compose_problems
from composition_rl.jobs.compose.pools import build_pools
from composition_rl.records import Problem
from composition_rl.spc import quality
from composition_rl.spc.checks import run_checks
from composition_rl.spc.natural import Naturalness, approximate_question
from composition_rl.spc.quality import DEFECTS, NOTES, scan_record
from composition_rl.spc.symbolic import SymbolicComposer
from composition_rl.values import find_constants

# (what, MATH index, question, answer, {literal: (math_mode, flaw)} for the literals named)
CASES = [
    ("align* in prose (math 400: the issue's |2x + $Z$|)", 400,
     "How many points of intersection are there between the graphs of the following equations: "
     "\\begin{align*}\ny &=|2x + 5|, \\\\\ny &= -|3x - 2|\n\\end{align*}", "2",
     {"5": (True, "")}),
    ("eqnarray* with \\text (math 5260)", 5260,
     "Given that\n\\begin{eqnarray*}&(1)& x\\text{ and }y\\text{ are both integers between 100 and 999, inclusive;}"
     "\\qquad \\\\     &(3)& z=|x-y|. \\end{eqnarray*}\nHow many distinct values of $z$ are possible?\n", "9",
     {"100": (True, "text_in_math"), "999": (True, "text_in_math")}),
    ("cases inside \\[ \\] (math 15)", 15,
     "Let \\[f(x) =\n\\begin{cases}\nx/2 &\\quad \\text{if } x \\text{ is even}, \\\\\n3x+1 &\\quad \\text{if } x "
     "\\text{ is odd}.\n\\end{cases}\n\\]What is $f(f(f(f(1))))$?", "4",
     {"2": (True, "")}),
    ("array in \\[ \\] (math 0, cut)", 0,
     "Let \\[f(x) = \\left\\{\n\\begin{array}{cl} ax+3, &\\text{ if }x>2, \\\\\nx-5 &\\text{ if } -2 \\le x \\le 2, "
     "\\\\\n2x-b &\\text{ if } x <-2.\n\\end{array}\n\\right.\\]Find $a+b$ if the piecewise function is continuous.", "0",
     {"3": (True, ""), "5": (True, "")}),
    ("gather in prose", -1, "Solve \\begin{gather}\nx + 7 = 12\n\\end{gather} for $x$.", "5", {"7": (True, "")}),
    ("pmatrix in prose", -1, "Compute \\begin{pmatrix} 3 & 4 \\end{pmatrix} times two.", "0",
     {"3": (True, ""), "4": (True, "")}),
    ("$$ display (math 1774): a worked factorial", 1774,
     "Find the last two digits of the following sum: $$5! + 10! + 15! + \\cdots + 100!$$", "20",
     {"5": (True, ""), "10": (True, "")}),
    ("inverse superscript (math 22)", 22,
     "If $f(3)=1$ and $f(2x)=2f(x)$ for all $x$, find $f^{-1}(64)$.", "192",
     {"1": (True, "notation"), "64": (True, "")}),
    ("matrix inverse (math 6743)", 6743,
     "Let $\\mathbf{A} = \\begin{pmatrix} a & 1 \\\\ -2 & d \\end{pmatrix}$ for some real numbers $a$ and $d.$  If\n"
     "\\[\\mathbf{A} + \\mathbf{A}^{-1} = \\mathbf{0},\\]then find $\\det \\mathbf{A}.$", "1",
     {"1": (True, "notation")}),
    ("a radix is notation, and A for 10 a default (math 5461)", 5461,
     "Add $704_{12} + 159_{12}$.  Express your answer in base $12$, using $A$ for $10$ and $B$ for $11$ if necessary.",
     "861_{12}", {"12": (True, "base_notation"), "10": (True, "default_value")}),
    ("answer template (math 64)", 64,
     "Suppose $d\\not=0$.  We can write $\\left(12d+13+14d^2\\right)+\\left(2d+1\\right)$, in the form $ad+b+cd^2$, "
     "where $a$, $b$, and $c$ are integers.  Find $a+b+c$.", "42",
     # no answer_form before the template; 13 sits between the coefficients 12 and 14 (a run)
     {"13": (True, "pattern"), "2": (True, "exponent")}),
    ("answer options with a value answer (math 2164)", 2164,
     "How many triangles with positive area have all their vertices at points $(i,j)$ in the coordinate plane, "
     "where $i$ and $j$ are integers between $1$ and $5$, inclusive?\n$\\textbf{(A)}\\ 2128 \\qquad\\textbf{(B)}\\ "
     "2148 \\qquad\\textbf{(C)}\\ 2160$\n", "2148", {"5": (True, ""), "2128": (True, "choice"), "2160": (True, "choice")}),
    ("a hint (math 874)", 874,
     "Simplify $\\sqrt{28x} \\cdot \\sqrt{15x}$.\n\nNote: When entering a square root with more than one character, "
     "you must use parentheses.  For example, you should enter $\\sqrt{14}$ as \"sqrt(14)\".", "42x\\sqrt{5x}",
     {"14": (True, "hint")}),
    ("a stated fact with no unknown (the issue's 5!=...=120)", -1,
     "Recall $5!=5\\cdot4\\cdot3\\cdot2\\cdot1=120$. How many ways can $7$ people sit in a row?", "5040",
     {"120": (True, "fact"), "7": (True, "")}),
    ("a sum bound inside a subscript (math 3461: a_{95} would show it)", 3461,
     "Each of the numbers $a_1,$ $a_2,$ $\\dots,$ $a_{95}$ is $\\pm 1.$  Find the smallest possible positive value of\n"
     "\\[\\sum_{1 \\le i < j \\le 95} a_i a_j.\\]", "13", {"95": None, "1": (True, "")}),
    ("figure label repeats the value (the issue's 4'')", -1,
     "The circle has radius 4 inches. What is its area?\n[asy]draw(circle((0,0),4));label(\"$4''$\",(2,0),N);[/asy]",
     "16\\pi", {"4": (False, "figure")}),
]


@pytest.mark.parametrize("what,idx,question,answer,expect", CASES, ids=[c[0] for c in CASES])
def test_constants_know_math_mode_and_flaws(what, idx, question, answer, expect):
    got = {c.literal: (c.math_mode, c.flaw) for c in find_constants(question, answer)}
    for lit, want in expect.items():
        assert got.get(lit) == want, (lit, got)


@pytest.mark.shared_data
def test_cases_quote_math_train(shared_data):
    rows = json.loads((shared_data / "train/math_train.json").read_text())
    for what, idx, question, _, _ in CASES:
        if idx >= 0:
            # quoted whole or cut (at a sentence end, or dropping a middle line): the first
            # 30 characters match
            assert rows[idx]["problem"][:30] == question[:30], what


def _compose_pair(q1: Problem, q2: Problem, seed: int = 0, natural: Naturalness | None = None):
    eng = SymbolicComposer(seed=seed, natural=natural or Naturalness())
    return eng, eng.compose((q1, q2), "cand")


Q1 = Problem.new("What is $3 + 4$?", "7")


@pytest.mark.parametrize("what,idx,question,answer,expect", [c for c in CASES if c[3] not in ("0",)][:8],
                         ids=[c[0] for c in CASES if c[3] not in ("0",)][:8])
def test_composed_prompts_have_no_scanned_defect(what, idx, question, answer, expect):
    q2 = Problem.new(question, answer)
    for seed in range(6):
        _, rec = _compose_pair(Q1, q2, seed)
        if isinstance(rec, Problem):
            assert run_checks(rec, (Q1, q2)) is None
            # no defect (a note, such as the 1 of an inverse beside a replaced 1, is no defect)
            assert [c for c, _ in scan_record(rec) if c in DEFECTS] == [], (seed, rec.question)


def test_align_gets_a_bare_variable_and_the_scanner_sees_dollars():
    q2 = Problem.new(CASES[0][2], "2")
    _, rec = _compose_pair(Q1, q2)
    y = rec.links[0].y
    body = rec.question[rec.question.index("\\begin{align*}"):]
    assert y in body and f"${y}$" not in body  # bare inside align*, no dollars
    broken = Problem.from_dict({**rec.to_dict(), "question": rec.question.replace(f"|{y}", f"|${y}$").replace(
        f"{y}|", f"${y}$|")})
    assert ("latex_dollars_in_math" in {c for c, _ in scan_record(broken)})


def test_a_repeated_quantity_is_replaced_everywhere():
    # the three \sqrt 5 with one turned into \sqrt Z
    q2 = Problem.new("Simplify $\\sqrt 5 \\cdot \\sqrt 5 + \\sqrt 5$.", "5 + \\sqrt{5}")
    _, rec = _compose_pair(Q1, q2)
    assert rec.question.endswith("Simplify $\\sqrt Y \\cdot \\sqrt Y + \\sqrt Y$.")
    assert len(rec.links[0].v2_also) == 2
    assert run_checks(rec, (Q1, q2)) is None and scan_record(rec) == []
    assert Problem.from_dict(json.loads(SymbolicComposer().record_json(rec, (Q1, q2)))) == rec
    # one occurrence left as it was: the checks reject, the scanner sees the value
    left = rec.question[: -len("\\sqrt Y$.")] + "\\sqrt 5$."
    bad = Problem.from_dict({**rec.to_dict(), "question": left})
    assert run_checks(bad, (Q1, q2)).reason == "variable_not_found"
    edited = Problem.from_dict({**rec.to_dict(), "question": rec.question.replace("Simplify", "Simplifz")})
    assert run_checks(edited, (Q1, q2)).reason == "substitution_mismatch"
    offs = sorted((rec.links[0].v2_offset, *rec.links[0].v2_also))
    two = Problem.from_dict({**rec.to_dict(), "question": left,
                             "links": [{**rec.links[0].to_dict(), "v2_offset": offs[0], "v2_also": [offs[1]]}]})
    assert scan_record(Problem.from_dict({**two.to_dict(), "question": rec.question})) == []
    assert "repeated_value" in {c for c, _ in scan_record(two)}


def test_notation_is_never_the_constant_and_the_scanner_knows_it():
    q2 = Problem.new(CASES[7][2], "192")
    _, rec = _compose_pair(Q1, q2)
    lk = rec.links[0]
    assert "f^{-1}(" in rec.question and lk.v2_offset != q2.question.index("-1}") + 1  # the 1 of the inverse kept
    q = q2.question
    off = q.index("-1}") + 1
    forged = Problem.from_dict({
        **rec.to_dict(),
        "question": rec.question.split("\n\n")[0] + "\n\n" + rec.question.split("\n\n")[1] + "\n\n" + q[:off] + lk.y + q[off + 1 :],
        "links": [{**lk.to_dict(), "v2": "1", "v2_expr": "1", "v2_offset": off}],
    })
    assert "notation" in {c for c, _ in scan_record(forged)}


def test_approximate_and_irrational_q1s_are_flagged():
    assert approximate_question("Give your answer in Angstroms, to two significant figures.")
    assert approximate_question("Round your answer to the nearest tenth.")
    assert not approximate_question("A round table seats $6$ people.")
    nat = Naturalness()
    assert nat.q1_flaw("x", None) == "irrational_q1"
    assert nat.q1_flaw("to the nearest whole number", Fraction(3)) == "approximate_q1"
    assert nat.q1_flaw("x", Fraction(19440)) == "large_q1"
    assert nat.q1_flaw("x", Fraction(5, 7)) == "fraction_q1"  # its offsets would be fractions
    assert Naturalness(prefer_integer=False).q1_flaw("x", Fraction(5, 7)) == ""


def test_offsets_outside_the_limits_are_refused_and_integers_preferred():
    q2 = Problem.new("Compute $2.5 + 3$.", "5.5")
    eng, rec = _compose_pair(Q1, q2)
    assert rec.links[0].v2_literal == "3"  # integer offset 4 beats the rational 4.5
    far = Problem.new("What is $1000 \\cdot 3000$?", "3000000")
    _, rej = _compose_pair(far, Problem.new("Compute $2 + 3$.", "5"))
    assert rej.reason == "unnatural_offset"
    _, ok = _compose_pair(far, Problem.new("Compute $2 + 3$.", "5"), natural=Naturalness(max_offset=10**7, max_q1=10**7))
    assert isinstance(ok, Problem)
    irr = Problem.new("What is $\\sqrt{2}\\cdot 1$?", "\\sqrt{2}")
    _, rej = _compose_pair(irr, Problem.new("Compute $2 + 3$.", "5"))
    assert rej.reason == "unnatural_offset"
    with pytest.raises(ValueError, match="max_offset=0"):
        Naturalness(max_offset=0)


def test_pool_swaps_flawed_q1s_and_is_unchanged_when_none_is_drawn():
    probs = [Problem.new(f"What is ${i} + 1$?", str(i + 1)) for i in range(200)]
    plain = build_pools([probs, probs], [20, None], 3)
    same = build_pools([probs, probs], [20, None], 3, flaw=lambda p, k: "")
    assert [p.id for p in plain[0]] == [p.id for p in same[0]]
    drawn = {p.id for p in plain[0]}
    bad = set(list(drawn)[:3])
    report: dict = {}
    swapped = build_pools([probs, probs], [20, None], 3, flaw=lambda p, k: "x" if p.id in bad else "", report=report)
    ids = [p.id for p in swapped[0]]
    assert len(ids) == 20 and not bad & set(ids) and len(set(ids) & drawn) == 17
    assert report["position_1"]["swapped"] == 3 and set(report["position_1"]["excluded"]) == bad


def test_stats_report_offset_kinds_and_pool_preference(tmp_path):
    from composition_rl.jobs.compose import run_compose

    probs = [Problem.new(f"What is ${i} + 1$?", str(i + 1)) for i in range(30)]
    probs += [Problem.new("What is $\\sqrt{2} \\cdot 3$?", "3\\sqrt{2}")]
    stats = run_compose(probs, ComposeConfig(pool_size=5, seed=1), tmp_path, progress=False)
    kinds = stats["links"]["offset_kinds"]
    assert sum(v["count"] for v in kinds.values()) == stats["accepted"]
    assert kinds["integer"]["count"] + kinds["zero"]["count"] == stats["accepted"]
    assert "position_1" in stats["pool_preference"]
    res = compose_problems(probs, ComposeConfig(pool_size=5, seed=1))
    assert len(res.accepted) == stats["accepted"]


def test_the_module_docstring_catalogues_every_defect_class():
    named = set(re.findall(r"``(\w+)``", quality.__doc__))
    assert [d for d in DEFECTS + NOTES if d not in named] == []


def test_a_plain_text_problem_gets_a_bare_variable_and_the_scanner_sees_dollars():
    """Issue 54: "6 * $Y$" in a problem that writes no LaTeX is the one TeX of the problem."""
    q2 = Problem.new("Solve the following multiplication: 6 * 58. Give only the result as your final answer.", "348")
    _, rec = _compose_pair(Q1, q2)
    y = rec.links[0].y
    tail = rec.question[rec.question.rindex("\n\n") + 2 :]
    assert f"${y}$" not in tail and re.search(rf"(?:6 \* {y}|{y} \* 58)\.", tail), tail
    assert run_checks(rec, (Q1, q2)) is None and scan_record(rec) == []
    broken = Problem.from_dict({**rec.to_dict(), "question": rec.question[: -len(tail)] + tail.replace(y, f"${y}$")})
    assert "latex_in_plain_text" in {c for c, _ in scan_record(broken)}


def test_default_data_scans_clean_of_latex_in_plain_text_at_depth_2_and_3():
    """Over the default reasoning-gym set (a cut), depth 2 and 3: no ``$Y$`` in plain text, and
    a middle part that lost its answer instructions still reads (not ``unreadable``)."""
    from composition_rl.io.readers import load_reasoning_gym

    problems = load_reasoning_gym(scale=120).problems
    for depth in (2, 3):
        res = compose_problems(problems, ComposeConfig(depth=depth, pool_size=8, seed=0))
        classes = [c for rec in res.accepted for c, _ in scan_record(rec)]
        assert res.accepted and "latex_in_plain_text" not in classes and "unreadable" not in classes, depth
