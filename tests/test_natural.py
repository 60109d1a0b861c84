"""q1 eligibility (spc/natural.py): an integer gold its worked solution reaches by rounding
a measured quantity cannot lead a chain (a reader recomputing q1 gets 48.3 Å, not 48)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from composition_rl.spc.natural import inexact_q1, rounded_integer

MINERVA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "eval" / "minerva.json"


@pytest.mark.parametrize("answer, question, solution, rounded", [
    # Minerva idx 52: 0.29/T cm is 48.3 Å
    ("48", "Find the wavelength.", "\\[\n  \\lambda_{\\max }=0.29 / T \\mathrm{~cm}=\\boxed{48} \\AA\n\\]", True),
    # Minerva idx 146: hc / 3.57e-19 J is 5.56e-7 m, written 5.6e-7 m = 560 nm
    ("560", "What is the threshold wavelength?",
     "$\\lambda=\\frac{hc}{3.57 \\times 10^{-19}}=5.6 \\times 10^{-7} m= \\boxed{560} nm$", True),
    # Minerva idx 225: an erf(0.30) = 0.3286 ~ 0.33 reading; the exact depth is about 262 um
    ("258", "What is x?", "\\operatorname{erf}(0.30)=0.3286 \\approx 0.33 \\\\\nx=2.58 \\times 10^{-2} "
     "\\mathrm{~cm}=\\boxed{258} \\mu \\mathrm{m}", True),
    ("7", "What is x?", "so $x \\approx \\boxed{7}$.", True),
    # exact: decimal arithmetic without a unit (MATH), a decimal answer (its own rule), rounding asked for
    ("65", "Find the volume.", "\\[\\frac{1}{3}Bh = \\frac{1}{3}(30)(6.5) = (10)(6.5) = \\boxed{65}.\\]", False),
    ("12", "Simplify.", "$\\frac{2.4}{0.2} = \\boxed{12}$.", False),
    ("48", "Give the wavelength to the nearest angstrom.", "$0.29 / T \\mathrm{~cm}=\\boxed{48} \\AA$", False),
    ("4.8", "Find it.", "$0.29 / T \\mathrm{~cm}=\\boxed{4.8} \\mu m$", False),
    ("48", "Find it.", "$6 \\cdot 8 = \\boxed{48}$ cm", False),
])
def test_rounded_integer(answer, question, solution, rounded):
    """Breaks when an integer gold computed from a measured decimal leads again."""
    assert rounded_integer([answer], question, solution) is rounded
    assert (inexact_q1([answer], question, solution) == "rounded_result") is rounded


@pytest.mark.shared_data
def test_the_minerva_rows_it_excludes():
    """The rows listed in docs/composition.md ("Integer answers reached by rounding")."""
    if not MINERVA.is_file():
        pytest.skip(f"{MINERVA} not found")
    rows = json.loads(MINERVA.read_text(encoding="utf-8"))
    out = [r["idx"] for r in rows
           if rounded_integer([a.strip() for a in r["answer"]] if isinstance(r["answer"], list) else [r["answer"]],
                              r["problem"], r["solution"])]
    assert out == [24, 52, 120, 146, 152, 151, 192, 225, 224, 241]


def test_a_fractional_offset_gives_way_to_a_partner_with_a_whole_one():
    """"$Y$ is $\\frac{9}{2}$ more than $X$", built to cancel q1's fraction, read unnaturally in
    both halves of a blind audit: when no constant gives the drawn q1 a whole offset, a reserve
    partner whose answer gives the same constant one within --small-offset comes first;
    without one, or for a decimal constant (no integer partner gives it a whole offset), the
    fraction stays."""
    from composition_rl.records import Problem
    from composition_rl.spc.checks import run_checks
    from composition_rl.spc.symbolic import SymbolicComposer

    half = Problem.new("What is $3 + \\frac{1}{2}$?", "\\frac{7}{2}")
    rect = Problem.new("A rectangle has width $6$ and length $8$. What is its perimeter?", "28")
    rod = Problem.new("A rod is $0.2$ meters long. How many centimeters long is it?", "20")
    eng = SymbolicComposer()
    assert eng.compose((half, rect), "a").links[0].d_expr == "-9/2"  # no partner: the fraction
    reserve = [Problem.new(f"What is ${n} + 1$?", str(n + 1)) for n in (3, 40)]
    eng.partners[0] = reserve
    rec = eng.compose((half, rect), "a")
    assert rec.parents[0] == reserve[0].id and rec.links[0].d_expr == "-4"  # 4 is within 10 of 8; 41 is not
    assert rec.metadata["candidate_parents"] == [half.id, rect.id] and run_checks(rec, (reserve[0], rect)) is None
    assert SymbolicComposer.link_stats(eng.take_tally())["partners"]["swapped"] == 1
    kept = eng.compose((half, rod), "a")
    assert kept.parents[0] == half.id and kept.links[0].d_expr == "33/10"
    # a whole offset within --small-offset only: "$Y$ is $33$ less than $X$" is no better
    eng = SymbolicComposer()
    eng.partners[0] = reserve[1:]
    assert eng.compose((half, rect), "a").parents[0] == half.id


# (answer, question, solution, why): a gold stated as an approximation, or reached through one,
# is no exact X whatever the question asks; exact golds around them stay eligible
APPROXIMATE_GOLDS = [
    # MATH train: the answer field itself says "approximately"
    ("\\approx 8.24 \\text{ mph}", "How fast does Laura run?", "", "approximate_answer"),
    ("~3", "About how many hours?", "", "approximate_answer"),
    ("\\sim 3", "How many?", "", "approximate_answer"),
    ("approximately 3", "How many?", "", "approximate_answer"),
    ("about 3", "How many?", "", "approximate_answer"),
    # rounding asked for, but the box is an approximation of log10 2000 = 3.30103...: a reader
    # who carries 3.30103 into the later problem gets 1502.45 where the gold says 1502
    ("3.30", "What is $\\log_{10} 2000$, to the nearest hundredth?",
     "$\\log_{10} 2000 = 3 + \\log_{10} 2 \\approx \\boxed{3.30}$", "rounded_result"),
    ("3", "What is $\\log_{10} 2000$, to the nearest whole number?",
     "$\\log_{10} 2000 \\approx \\boxed{3}$", "rounded_result"),
    # AIME 1983-2023: the box on a line of its own after "1200 - 200\pi \approx 571.68"
    ("572", "What is the integer that is nearest the area of $A$?",
     "the area is $40^2-(200\\pi + 400) \\Rightarrow 1200 - 200\\pi \\approx 571.68$\n$\\boxed{572}$",
     "rounded_result"),
    # an integer reached with pi taken as 3
    ("12", "A circle has radius $2$. What is its area?",
     "We take $\\pi \\approx 3$.\nThe area is $\\pi r^2 = 3 \\cdot 4$, so it is $\\boxed{12}$.", "approximated_constant"),
    ("157", "A circle has radius $5$. To the nearest whole number, what is twice its area?",
     "Using $\\pi = 3.14$, twice the area is $2 \\cdot 3.14 \\cdot 25$.\nThat is $\\boxed{157}$.",
     "approximated_constant"),
    # exact: a LaTeX space, a variable named e, a bound on a root, a question that asks for rounding
    ("5~\\text{cm}", "How long?", "", ""),
    ("3", "Let $a, b, c, d, e$ be integers with $e = 3$. What is $e$?", "We have $e = 3$, so $\\boxed{3}$.", ""),
    ("7", "What is the greatest integer less than $\\sqrt{50}$?",
     "Since $49 < 50 < 64$, $7 < \\sqrt{50} < 8$.\nThe answer is $\\boxed{7}$.", ""),
    ("3.3", "Compute $33/10$ as a decimal.", "$33/10 = \\boxed{3.3}$", ""),
    ("12\\pi", "A circle has radius $2\\sqrt{3}$. What is its area?", "$\\pi r^2 = \\boxed{12\\pi} \\approx 37.7$", ""),
    # MATH500: pi's value bounds a ceiling; "36\pi-16\pi = 20\pi" and "2 \pi=8076 \alpha" give pi no value
    ("12", "Let $f(n) = \\lceil n \\rceil$. Find $f(\\pi/3) + 10$.",
     "Since we know that $\\pi \\approx 3.14$, $\\frac{\\pi}{3}$ is slightly greater than $1$.\nSo $\\boxed{12}$.", ""),
    ("7", "Find the area ratio.", "The ring is $36\\pi-16\\pi = 20\\pi$ and $3^2\\pi = 9\\pi$.\nSo $\\boxed{7}$.", ""),
    ("5", "Find it.", "Let $0 \\leq \\theta<2 \\pi=8076 \\alpha$.\nSo $\\boxed{5}$.", ""),
]


@pytest.mark.parametrize("answer, question, solution, why", APPROXIMATE_GOLDS)
def test_a_gold_reached_by_approximation_cannot_lead(answer, question, solution, why):
    assert inexact_q1([answer], question, solution) == why


def test_the_symbolic_engine_rejects_an_approximate_q1_with_the_reason():
    from composition_rl.records import Problem
    from composition_rl.spc.symbolic import SymbolicComposer

    q2 = Problem.new("A rectangle has width $6$ and length $8$. What is its perimeter?", "28")
    for answer, question, solution, why in APPROXIMATE_GOLDS:
        q1 = Problem.new(question, answer, metadata={"solution": solution} if solution else {})
        res = SymbolicComposer().compose((q1, q2), "c")
        if why:
            assert res.reason == f"q1_{why}" and res.stage == "check1_v1", (answer, res)
            assert f"({why})" in res.detail
        else:
            assert not getattr(res, "reason", "").startswith("q1_approx"), (answer, res)


# Issue 54: a part whose answer is read off its text. Real texts of the default reasoning-gym
# generators (seed 0) and MATH train rows that hold an identity step but are no shortcut.
@pytest.mark.parametrize("question, answer, why", [
    ("Solve the following multiplication: 1 * 7. Give only the result as your final answer.", "7", "identity_step"),
    ("Find the Least Common Multiple (LCM) of these numbers: 20, 20", "20", "repeated_operand"),
    ("State the final answer to the following arithmetic problem: 8 + 0 =", "8", "identity_step"),
    ("Calculate -( -( 7 - 0 ) ).", "7", "identity_step"),
    ("Calculate ( 8 / 1 ).", "8", "identity_step"),
    ("Calculate 1 * 72.", "72", "identity_step"),
    ("Solve the following multiplication: 0 * 5. Give only the result as your final answer.", "0", "identity_step"),
    # the identity step does not hand the answer over: a longer computation
    ("State the final answer to the following arithmetic problem: 3 - 0 + 6 =", "9", ""),
    ("Calculate -8 * 1 * -8.", "64", ""),
    ("Find the Least Common Multiple (LCM) of these numbers: 15, 30", "30", ""),
    ("Solve for u: 10*u + 10 = 160", "15", ""),
    # MATH train: a product written out with an ellipsis, a board's dimensions, figure code
    ("For each positive integer $n$, let $n!$ denote the product $1\\cdot 2\\cdot 3\\cdot\\,\\cdots\\,\\cdot (n-1)\\cdot n$."
     "\n\nWhat is the remainder when $9!$ is divided by $11$?", "1", ""),
    ("A $7\\times 1$ board is completely covered by $m\\times 1$ tiles without overlap. How many tilings?", "8", ""),
    ("The wheel shown below. [asy] real s = 4; dot(1 * dir( 90), linewidth(4)); [/asy] How many paths of 4 steps?",
     "4", ""),
])
def test_degenerate_parts_are_those_whose_answer_is_read_off_the_text(question, answer, why):
    from composition_rl.spc.natural import degenerate

    assert degenerate(question, answer) == why


def test_a_zero_offset_is_not_a_natural_link_unless_asked_for():
    from fractions import Fraction

    from composition_rl.spc.natural import Naturalness

    assert not Naturalness().allows(Fraction(0)) and Naturalness().allows(Fraction(3))
    assert Naturalness(zero_offset=True).allows(Fraction(0))
    assert Naturalness().q1_flaw("Calculate 1 * 72.", Fraction(72)) == "degenerate"
