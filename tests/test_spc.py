"""The composition text (spc/text.py): answer instructions taken out of the parts before the
last, and how a variable is written in a problem that writes no LaTeX."""

from __future__ import annotations

import re

import pytest

from composition_rl.spc import text as spc

# Real problem texts: one per template of each default reasoning-gym generator
# (reasoning-gym 0.1.25, DEFAULT_RG_SPECS, seed 0) and rows of MATH train and Minerva
# (../shared/data). Each with the instructions a part before the last loses, as (text, by).
CASES = [
    ("chain_sum", "State the final answer to the following arithmetic problem: 15 - 43 - 75 =",
     [("State the final answer to", "Solve")]),
    ("basic_arithmetic", "Calculate -5 * 9 * -7.", []),
    ("products", "Solve the following multiplication: 16 * 21. Give only the result as your final answer.",
     [(" Give only the result as your final answer.", "")]),
    ("simple_equations", "Solve for u: 10*u + 10 = 160", []),
    ("simple_equations", "Find the value of g in the equation: 19*g - 1 = 18", []),
    ("simple_equations", "Determine the value of l that satisfies: 8 - 3*l = -4", []),
    ("lcm", "Find the Least Common Multiple (LCM) of these numbers: 24, 29", []),
    ("gsm_symbolic", "A stack is made out of 2 black blocks, 2 times as many white blocks, and an unknown number of "
     "green blocks. If there are 11 blocks in the stack in total, how many green blocks are there? Give the result "
     "as your final answer. Do not include units.",
     [(" Give the result as your final answer.", ""), (" Do not include units.", "")]),
    ("gsm_symbolic", "How much money is Robert missing if he has $150 and the conference costs $680? Give the result "
     "as your final answer. Do not include units.",
     [(" Give the result as your final answer.", ""), (" Do not include units.", "")]),
    # MATH train: a form of writing the number goes (X is the value, whatever its form) ...
    ("math", "Find the value of $x$ that satisfies $\\frac{\\sqrt{3x+5}}{\\sqrt{6x+5}}=\\frac{\\sqrt{5}}{3}$. "
     "Express your answer as a common fraction.", [(" Express your answer as a common fraction.", "")]),
    ("math", "What is the distance, in units, between the points $(-3, -4)$ and $(4, -5)$? Express your answer in "
     "simplest radical form.", [(" Express your answer in simplest radical form.", "")]),
    ("math", "A point $P$ is randomly selected from the square region with vertices at $(\\pm 2, \\pm 2)$. What is "
     "the probability that $P$ is within one unit of the origin? Express your answer as a common fraction in terms "
     "of $\\pi$.", [(" Express your answer as a common fraction in terms of $\\pi$.", "")]),
    ("math", "A jar contains $29\\frac{5}{7}$ tablespoons of peanut butter. If one serving of peanut butter is 2 "
     "tablespoons, how many servings of peanut butter does the jar contain? Express your answer as a mixed number.",
     [(" Express your answer as a mixed number.", "")]),
    ("math", "Solve for $z$ in the following equation: $1-iz = -1 + iz$ (where $i^2 = -1$). Simplify your answer as "
     "much as possible.", [(" Simplify your answer as much as possible.", "")]),
    # ... what fixes the value stays: a rounding, a base, a structure a derived X reads, a unit
    ("math", "Calculate $\\sqrt{\\sqrt[3]{0.000064}}$. Express your answer as a decimal to the nearest tenth.", []),
    ("math", "What is $\\frac{1357_{9}}{100_{4}}-2460_{8}+5678_{9}$? Express your answer in base 10.", []),
    ("math", "An ellipse has foci at $(0, 2)$ and $(3, 0)$. It has two $x$-intercepts, one of which is the origin. "
     "What is the other one? Enter your answer as an ordered pair.", []),
    ("math", "An isosceles triangle has side lengths 8 cm, 8 cm and 10 cm.  The longest side of a similar triangle "
     "is 25 cm. What is the perimeter of the larger triangle, in centimeters?", []),
    # Minerva: a worked example's "The final answer is ..." is the problem's own text, not an order
    ("minerva", "Flux $=\\boxed{7e37} \\mathrm{erg}$\n\nFinal answer: The final answer is 7e37. I hope it is "
     "correct.\n\nSubproblem 1: What is the luminosity?", []),
    # a chat-style boxed request
    ("boxed", "What is $3+4$? Please reason step by step, and put your final answer within \\boxed{}.",
     [(" Please reason step by step, and put your final answer within \\boxed{}.", "")]),
]


def _words(text: str) -> list[str]:
    return re.findall(r"\S+", text)


@pytest.mark.parametrize("source,question,expected", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_answer_instructions_on_real_problems(source, question, expected):
    found = spc.answer_instructions(question)
    assert [(i.text, i.by) for i in found] == expected
    text, found2 = spc.lead_text(question)
    assert found2 == found
    # nothing else changes: the recorded instructions put back give the problem byte for byte
    assert spc.restore_instructions(text, found) == question
    # and no word of the problem is lost: what is gone is exactly the instructions' words
    kept = _words(text)
    gone = [w for i in found for w in _words(i.text)]
    added = [w for i in found for w in _words(i.by)]
    assert sorted(kept + gone) == sorted(_words(question) + added)
    assert not re.search(r"final answer|give only the result|do not include units|\\boxed\{\}", text, re.I) \
        or source == "minerva"


def test_the_last_instruction_is_the_only_one_left():
    """Every part but the last loses its instructions: the composed prompt asks once, at its end."""
    q1 = CASES[2][1]  # products
    text, found = spc.lead_text(q1)
    assert text == "Solve the following multiplication: 16 * 21." and len(found) == 1
    # a text that is an instruction and nothing else is left alone (nothing of it is a problem)
    assert spc.answer_instructions("Give only the result as your final answer.") == ()


def test_an_instruction_that_writes_a_number_stays():
    """A number word is a constant the finder may replace; a sentence holding one is not taken
    out, so a variable never falls inside a removed instruction."""
    q = "Find both roots. Give the two results as your final answer."
    assert spc.answer_instructions(q) == ()


def test_restoring_from_a_text_that_does_not_hold_the_rewrite_fails_loudly():
    text, found = spc.lead_text(CASES[0][1])
    assert text.startswith("Solve the following")
    with pytest.raises(ValueError, match="does not hold"):
        spc.restore_instructions("Compute" + text[5:], found)


def test_an_offset_maps_past_the_instructions_and_never_into_one():
    q = CASES[0][1]  # "State the final answer to" -> "Solve": 20 characters shorter
    text, found = spc.lead_text(q)
    off = q.index("43")
    assert text[spc.shift_offset(off, found):].startswith("43")
    with pytest.raises(ValueError):
        spc.shift_offset(3, found)


@pytest.mark.parametrize("question,plain", [
    ("Solve the following multiplication: 16 * 21. Give only the result as your final answer.", True),
    ("How much money is Robert missing if he has $150 and the conference costs $680?", True),
    ("A ticket costs €12 and a snack $3.50.", True),
    ("What is $3+4$?", False),
    ("A pen costs $\\$5$.", False),
    ("Let $x$ be 5. Find $2x$.", False),
    ("The price is $5$ dollars.", False),
])
def test_plain_text_is_a_problem_that_writes_no_latex(question, plain):
    assert spc.plain_text(question) is plain


def test_a_variable_in_a_plain_text_problem_is_written_bare():
    assert spc.variable_token("Y", False, " * 58", plain=True) == "Y"
    assert spc.variable_token("Y", False, " apples") == "$Y$"
    assert spc.variable_token("Y", True, "(x+1)") == "Y \\cdot "


def test_the_reader_still_reads_the_old_definition_wording():
    """"Call the answer to this problem" ("this" could be either problem) is no longer written,
    but records composed with it still read back."""
    assert all("this problem" not in d for d in spc.DEFINITIONS)
    old = "What is 2?\n\nCall the answer to this problem $X$. $Y$ is $1$ less than $X$.\n\nWhat is $Y$?"
    g = spc.find_glue(old, "X", "Y")
    assert g is not None and g.definition == "Call the answer to this problem $X$."
    new = "What is 2?\n\n" + spc.glue_text("X", "Y", "1", "less", 2) + "\n\nWhat is $Y$?"
    assert "the problem above" in new and spc.find_glue(new, "X", "Y") is not None
