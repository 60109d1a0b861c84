"""Numbers derived from q1 answers that are not one number: the derivations on real
MATH q1s, the wording in the prompt, the engine's records and check 1 on tampered ones."""

from __future__ import annotations

import dataclasses
import json

import pytest
import sympy

from composition_rl.io.readers import load_problems
from composition_rl.jobs.compose import ComposeConfig, run_compose
from composition_rl.jobs.compose.pools import candidate_id
from composition_rl.records import Problem
from composition_rl.spc import text as spc
from composition_rl.spc.base import Rejection
from composition_rl.spc.checks import run_checks
from composition_rl.spc.symbolic import SymbolicComposer
from composition_rl.values import parse_answer_value
from composition_rl.values.derive import (
    DERIVATION_KINDS,
    Derivation,
    DerivedValue,
    derivations,
    derive,
    lead_value,
)

# (MATH train record id, kind, arg, name, exact value): two real q1s per kind. The comment
# gives the answer and the start of the question.
MATH_CASES = [
    ("54d638ae9c787565", "base_value", "", "", "510"),  # 776_8 | greatest 3-digit base 8 integer divisible by ...
    ("f8ef18671e25ee07", "base_value", "", "", "26"),  # 28_9 | largest integer whose square has 3 digits in base 9
    ("feade13233332f57", "choice_count", "", "", "2"),  # \text{B,E} | the line y = 2x + 7 parameterized ...
    ("91ebb48e4291907f", "choice_count", "", "", "4"),  # \text{A,B,C,D} | x = 64 + 96 + ... Which of the following
    ("cbb23213989130c6", "choice_position", "", "", "3"),  # \text{(C)} | the curve r = 1/(1 - cos theta)
    ("8eda6e1a64083de0", "choice_position", "", "", "3"),  # \text{C} | p, q, r invertible ... f^{-1}
    ("95e328b09cc8738b", "choice_value", "", "", "-2*sqrt(3)/3"),  # B | geometric sequence, possible first term
    ("3ef94297b97f87d7", "complex_imag", "", "", "1"),  # -1 + i | sqrt(2) e^{11 pi i/4} in rectangular form
    ("4c7fac62201dda0c", "complex_imag", "", "", "3"),  # 6 + 3i | a 180 degree rotation around the origin
    ("b8cf4c68db554ad9", "complex_real", "", "", "3"),  # 3-i | Machiavelli added 1+3i and 2-4i
    ("911e2959935174b1", "complex_real", "", "", "6"),  # 6-3i | A=4-3i, M=-4+i, S=i, P=2; A-M+S-P
    ("662513a123a54c80", "det", "", "", "0"),  # [[2,4],[1,2]] | the matrix M with real entries such that
    ("0497098ea9e457e8", "det", "", "", "-64"),  # -4 I_3 | the 3x3 matrix M such that
    ("662513a123a54c80", "trace", "", "", "4"),
    ("3098cc0a83e89c91", "expr_value", "x=4", "", "-534"),  # -9x^3+3x^2-2x+2 | h(x) with 9x^3-3x+1+h(x)=...
    ("d93426b812c9c75b", "expr_value", "x=3", "", "1"),  # -3x^2+12x-8 | the parabola with vertex (2,4) ...
    ("188544e3b0016a1d", "interval_left", "", "", "5"),  # [5,10] | all solutions to sqrt(x + 3 - 4 sqrt(x-1)) + ...
    ("43a5955c95609aee", "interval_left", "", "", "3/4"),  # [3/4, 1] | the range of sin^4 x + cos^2 x
    ("f91d3bfd3a8ac977", "interval_length", "", "", "9/8"),  # [0, 9/8] | the range of sin^4 x - sin x cos x + cos^4 x
    ("ea3b735a31cc9a67", "interval_length", "", "", "7"),  # (-6, 1) | x^2+5x<6 in interval notation
    ("bd46723df90eb9c9", "interval_right", "", "", "pi"),  # [0,pi] | all y in [0,pi] with sin(x+y) <= ...
    ("97571ff3457363bf", "interval_right", "", "", "9/8"),  # [-1/8, 9/8] | the range of g(t) = ...
    ("17ce36f4c3eadcb2", "matrix_entry", "2,3", "", "2/3"),  # reflection through the plane P
    ("2ac6957b936683b7", "month", "", "", "5"),  # \text{May} | every 5 months Hal replaces the batteries
    ("e266c75aaac8ae90", "month", "", "", "8"),  # \text{August} | McGwire and Sosa home runs
    ("a34768f2a6486e99", "poly_coeff", "1", "z", "6"),  # 6z | the average of 0, 2z, 4z, 8z, 16z
    ("295cb541c15f0e3b", "poly_coeff", "2", "x", "5"),  # -3x^4+5x^2-8x | h(x) with 3x^4+2x-1+h(x)=5x^2-6x-1
    ("fd08194139b62a3c", "poly_coeff", "1", "y", "-11"),  # 5x - 11y + z - 17 = 0 | the plane through line L, "gcd"
    ("5b205e6d8d3abbd7", "poly_coeff", "0", "", "-18"),  # 2x - y + 2z - 18 = 0 | projections onto w lie on a plane
    ("3098cc0a83e89c91", "poly_degree", "", "x", "3"),  # -9x^3+3x^2-2x+2 | h(x) with 9x^3-3x+1+h(x)=...
    ("2645afb463dd48b2", "set_max", "", "", "6"),  # 4, 6 | x + 1/y = 10, y + 1/x = 5/12: all values of x
    ("3e11c5b11e96f92d", "set_max", "", "", "sqrt(2)"),  # \sqrt{2}, -\sqrt{2} | unit vectors a, b, c ... k
    ("c45fc06817dec135", "set_min", "", "", "-2"),  # 2,-2 | all the solutions to sqrt((2+sqrt3)^x) + ...
    ("f9e718125d8147f2", "set_min", "", "", "-2"),  # 7,-2 | all real solutions to 1/((x-1)(x-2)) + ...
    ("213838c37b508d91", "set_size", "", "", "2"),  # -2, 2 | real values of a where (a+3)/(a^2-4) is undefined
    ("14045d20bb63cffb", "set_sum", "", "", "2"),  # 1 + sqrt2, 1 - sqrt2 | real solutions to x^4+(2-x)^4=34
    ("84e0fff057ad52e3", "set_sum", "", "", "101/8"),  # 5/8, 2, 10 | z, z^2, z^3 form three vertices of a square
    ("1e4eee5e71019c85", "tuple_entry", "2", "", "-2"),  # (2, -2) | circle T with center T(-2,6) reflected
    ("a0aaf046d8bc126f", "tuple_entry", "1", "r", "10*sqrt(2)"),  # (10 sqrt2, 19pi/44) | ... as re^{i theta}
    ("ccb6a105051c8115", "tuple_sum", "", "", "2"),  # (-4,3,3) | constants A, B, C of a partial fraction
    ("a995398a317ac06b", "union_max_end", "", "", "2"),  # (-inf,-1/4) u (2,inf) | solve -4x^2 + 7x + 2 < 0
    ("71b26e979f8d7d41", "union_max_end", "", "", "1"),  # (-inf,-1] u [1,inf) | a line with y-intercept (0,5)
    ("910c94518c983857", "union_min_end", "", "", "-27"),  # (-inf,-27) u (-27,inf) | domain of (x^3-27)/(x+27)
    ("6df156f8549a404c", "union_min_end", "", "", "-1"),  # [-1,0) u (0,1] | domain of tan(arccos(x^2))
    ("4eddd6e111e2551d", "vector_entry", "2", "", "16/29"),  # projection onto w of the line y = 5x/2 + 4
    ("cce44a449d3238ec", "vector_entry", "1", "", "6/7"),  # the projection of (4,-4,-1) onto a line
    # shapes the reader once missed (row = index in math_train.json): ratios, times of day, a date
    ("bf9991f95c3dbfd1", "ratio_term", "1", "", "5"),  # row 6246, 5:6 | squares' areas in ratio 25:36, perimeters
    ("3a561dcfcc6c9902", "ratio_term", "2", "", "60"),  # row 5753, 19:60 | room 19 by 11 feet, length : perimeter
    ("8e83d294bf1af27c", "ratio_value", "", "", "3"),  # row 3127, 3:1 | AC:CB is 3:4 ... the ratio PA:AB is
    ("bf9991f95c3dbfd1", "ratio_value", "", "", "5/6"),
    ("239bd6716575ae0f", "time_minute", "", "", "24"),  # row 6327, 9:24 | laps of 4, 7, 6 minutes from 8:00
    ("66baa25299f852f3", "time_minute", "", "", "34"),  # row 5428, 8\!:\!34 \text{ p.m.} | midnight + 1234 minutes
    ("2e4de6044d904f92", "time_hour", "", "", "5"),  # row 6126, 05\!:\!00 | bells every 15, 20, 25 minutes from noon
    ("66baa25299f852f3", "time_hour", "", "", "8"),  # 8:34 p.m.: 8 on a 12-hour clock
    ("a9840e727616e15b", "time_second", "", "", "6"),  # row 4699, 4\!:\!51\!:\!06 \text{ p.m.} | 3:00:00 p.m. + 6666 s
    ("ae464bdd5e8b4475", "date_day", "", "", "30"),  # row 4862, \text{October 30} | the fifth Monday after Sept 4
    # a day of the week by ISO 8601's number, which the sentence states (Monday = 1)
    ("578bc9a5525fce43", "weekday", "", "", "6"),  # row 4803, \text{Saturday} | Thursday, November 23: December 23
    ("1c63ee00a5f7f8f3", "weekday", "", "", "7"),  # row 4916, \text{Sunday} | 40 days from Tuesday
]

# answers of existing kinds the reader missed (row = index in math_train.json)
MORE_MATH_CASES = [
    ("52e7bfb1d6b1f372", "base_value", "", "", "23"),  # row 5437, 43_5. | 1121_5 / 12_5 in base 5 (a full stop)
    ("cedc558eee6e14e2", "base_value", "", "", "-31"),  # row 5460, -37_8 | 35_8 - 74_8 in base 8 (a sign)
    ("8179fa68aea3fdd3", "det", "", "", "1"),  # row 6914, -I_2 followed by "." | [[1,-1],[1,0]]^3
    ("e39b246108c4d598", "det", "", "", "2"),  # row 6763, [[1,-1],[1,\phantom -1]] | the matrix sending ABCD to A'B'C'D'
    ("c8fb59fdfc400927", "interval_length", "", "", "162"),  # row 60, -80\leq g(x)\leq 82 | the range of g = f^4
    ("c8fb59fdfc400927", "interval_left", "", "", "-80"),
    ("ebbdd6ade208de46", "choice_position", "", "", "8"),  # row 4265, (\text{H}) | "H" for hyperbola
    ("0f442ce6e3808c40", "choice_position", "", "", "5"),  # row 4672, \text{(E)}, | A, B, A-B, A+B prime: the sum is
    ("505e7e6e86580077", "choice_count", "", "", "2"),  # row 5550, \text{A,B} | "listing your choices"
    ("71a3db5100cd1bb1", "choice_count", "", "", "2"),  # row 6102, \text{A, B} | "List the choices"
    # "Let $O$ and $H$ denote ..., respectively." names things; "enter all possible values" asks for a set
    ("e4e3d43e23c2ac97", "set_min", "", "", "60"),  # row 7144, 60^\circ, 120^\circ | AO = AH: all values of angle A
    # "Solve <an equation>." answered by a list is its solutions
    ("5470e69ecbc57300", "set_max", "", "", "1/2"),  # row 7381, 0, \frac{1}{2} | arcsin x + arcsin(1 - x) = arccos x
]


@pytest.fixture(scope="module")
def math_train(shared_data):
    return load_problems(shared_data / "train/math_train.json").problems


@pytest.fixture(scope="module")
def by_id(math_train):
    return {p.id: p for p in math_train}


def test_the_table_covers_every_kind():
    assert {k for _, k, *_ in MATH_CASES} == set(DERIVATION_KINDS)


@pytest.mark.shared_data
@pytest.mark.parametrize("rid,kind,arg,name,value", MATH_CASES + MORE_MATH_CASES,
                         ids=[f"{c[1]}-{c[0]}" for c in MATH_CASES + MORE_MATH_CASES])
def test_derivations_of_real_math_q1s(by_id, rid, kind, arg, name, value):
    p = by_id[rid]
    assert parse_answer_value(p.answer) is None  # not one number: no q1 without a derivation
    d = Derivation(kind, arg, name)
    got = derive(p.answer, p.question, d)
    assert got is not None and sympy.simplify(got - sympy.sympify(value)) == 0, (p.answer, got)
    assert d in [x for x, _ in derivations(p.answer, p.question)]
    # every derivation has its sentence, and the glue reader reads it back
    glue = spc.derived_glue("X", "Y", spc.derived_phrase(kind, arg, name), "3", "less")
    g = spc.find_glue(f"{p.question}\n\n{glue}\n\nrest", "X", "Y")
    assert g is not None and g.derived and g.definition == f"Let $X$ be {spc.derived_phrase(kind, arg, name)}."


@pytest.mark.shared_data
@pytest.mark.parametrize("rid", [
    "92e731d4d6624fe0",  # 4a^3 + a^2 | Simplify $2a(2a^2 + a) - a^2$
    "86cbdfffda55644b",  # (x^4+16)(x^2+4)(x+2)(x-2) | factor x^8-256
    "7f0f1e6130453e47",  # 5x^{26}-15x^9-35x^4+5x^2 | expand (x^22 - ...)(5x^4)
    "639e14b2d12b3bad",  # 3x^2-12 | expand (x+2)(3x-6)
    "b3180e53bf227b97",  # 16x^2+4x+5 | Simplify \[2x+8x^2+9-(4-2x-8x^2).\]
])
def test_an_answer_the_question_already_states_leads_nothing(by_id, rid):
    """Factor, expand, simplify: the answer equals an expression the question writes, so its
    coefficients, values and degree are known without solving (a shortcut, e.g. the x^3
    coefficient of a factored polynomial read off the given one)."""
    p = by_id[rid]
    assert derivations(p.answer, p.question) == ()
    assert lead_value(p.answer, p.question) is None


# the lead each row gets once its answer's shape is read (row = index in math_train.json);
# the first eight are the answer's own value, written in a shape the reader missed
NEW_LEADS = [
    ("774a7de0105f308d", None, "-5/3"),  # row 1645, -\frac{5}{3}. | the vertical asymptotes x = a, x = b: a + b
    ("46b850ce9ab87aff", None, "30"),  # row 2861, 30^\circ. | the degrees in angle DAE
    ("bd14599b939751f6", None, "7"),  # row 6455, 7\text{ hours}. | rearrangements of STEPHAN, twelve a minute
    ("3545bc3a59bcc844", None, "4"),  # row 6605, \mbox{four} | common divisors of 40 and 72
    ("361a3081cc0e28d1", None, "2400"),  # row 5680, 2400 \mbox{ cm}^2 | the area of the mirror
    ("a878b6272bb56a09", None, "37/20"),  # row 5862, 1.85\ \text{USD} | a 200 yen coffee, 108 yen a dollar
    ("89410a80c705686a", None, "24"),  # row 5129, 24_{10} | smallest base-10 integer AA_5 = BB_7
    ("90720f86838957a0", None, "12 + 12*sqrt(3)"),  # row 2623, AB=12+12\sqrt{3} | the length of AB
    ("42c3ab87bb2e4060", "ratio_term", "3"),  # row 3323, 3:5 | QT = 6, TR = 10: areas of PQT and PTR
    ("35d6bec3f0d348b7", "ratio_term", "4"),  # row 3119, 1:4 | the shaded area to the circle on CD
]


@pytest.mark.shared_data
@pytest.mark.parametrize("rid,kind,value", NEW_LEADS, ids=[c[0] for c in NEW_LEADS])
def test_the_leads_of_rows_the_reader_missed(by_id, rid, kind, value):
    p = by_id[rid]
    lv = lead_value(p.answer, p.question)
    assert lv is not None and sympy.simplify(lv.value - sympy.sympify(value)) == 0, (p.answer, lv)
    if kind is None:  # a number: parse_answer_value's, and check 1 reads it again from the answer
        assert not isinstance(lv, DerivedValue) and parse_answer_value(p.answer) == lv
    else:
        assert lv.derivation.kind == kind


@pytest.mark.shared_data
@pytest.mark.parametrize("rid", [
    "bff53a76bc444ca0",  # row 5109, \text{A5}_{11} | Convert 115_{10} to base 11: its value is in the question
    "feb49dec7e9006c1",  # row 2701, 12,9 | "Find the lengths of BP and QT" ... "5 and 3/4, respectively"
    "04e7c46d5e0e0d7a",  # row 2219, 0.56 = 56\% | two values: 0.56 or 56 (percent)?
    "68bd6293c1697168",  # row 4997, \text{orange} | a colour has no numbering a writer agrees on
    "ea9938eb68ce49c9",  # row 3404, \text{odd} | odd, even or neither
    # complex solutions: their number is the degree, their sum Vieta's, known without solving
    "e2ea9b9e56a74059",  # row 3548, 1 + i, 1 - i, -1 + i, -1 - i | the solutions to z^4 = -4
    "2ac16dc4e20b878c",  # row 4439, 4 + i, 4 - i, 4 + i\sqrt5, 4 - i\sqrt5 | (x-3)^4+(x-5)^4=-8
])
def test_rows_that_still_lead_nothing(by_id, rid):
    p = by_id[rid]
    assert lead_value(p.answer, p.question) is None


# answers and questions as MATH writes them (no shared data needed)
SHAPES = [
    # words without a natural numeric reading derive nothing
    (r"\text{even}", "Is $f(x) = 3^{x^2-3} - |x|$ an even function, odd function, or neither?", None),
    (r"\text{no}", "Is it possible?", None),
    (r"\text{Sunday}", "On what day of the week will it be?", ("weekday", "", "", 7)),  # ISO 8601: Monday = 1
    (r"\text{orange}", "What colour is the last bead?", None),
    # a pair and an open interval are written alike: the question decides
    ("(3, 5)", "Find the ordered pair $(a,b)$.", ("tuple_entry", "1", "a", 3)),
    # a named tuple with its values given is the point the question starts from, not the
    # answer's entries (MATH 7081: the answer is rectangular; "the value of rho in the answer"
    # read as 4, the given rho, made three invalid items in a blind audit)
    ("(2, -2 \\sqrt{3}, 0)", "Convert the point $(\\rho,\\theta,\\phi) = \\left( 4, \\frac{5 \\pi}{3}, \\frac{\\pi}{2} "
     "\\right)$ in spherical coordinates to rectangular coordinates.", ("tuple_entry", "1", "", 2)),
    # names of a point the question describes, not the ones it asks the answer in (MATH 7395)
    ("(91,60)", "A certain point has rectangular coordinates $(10,3)$ and polar coordinates $(r, \\theta).$  What "
     "are the rectangular coordinates of the point with polar coordinates $(r^2, 2 \\theta)$?", ("tuple_entry", "1", "", 91)),
    # ... and the asked names win over the described ones (MATH 4248)
    ("(0,3)", "The graphs of $y = x^3 - 3x + 2$ and $x + 4y = 4$ intersect in the points $(x_1,y_1),$ $(x_2,y_2),$ and "
     "$(x_3,y_3).$  If $x_1 + x_2 + x_3 = A$ and $y_1 + y_2 + y_3 = B,$ compute the ordered pair $(A,B).$",
     ("tuple_entry", "2", "B", 3)),
    # ... while a function's arguments written with "=" no longer hide the answer's names (MATH 3514)
    ("(5, 3)", "Let $p(x,y) = x - y$. There is a point $(r,s)$ for which $p(r,s) = 2$. Find the point $(r,s).$",
     ("tuple_entry", "1", "r", 5)),
    ("(3, 5)", "Express your answer in interval notation.", ("interval_length", "", "", 2)),
    # a function's arguments name no tuple: "the set of all possible values of f(x,y,z)" (MATH
    # 3392, answer (1,2)) is an interval, whose right end is no "second entry" (blind audit)
    ("(1,2)", "Let $x,$ $y,$ $z$ be positive real numbers.  Find the set of all possible values of "
     "\\[f(x,y,z) = \\frac{x}{x + y} + \\frac{y}{y + z} + \\frac{z}{z + x}.\\]", ("interval_length", "", "", 1)),
    # a list that does not ask for all values is not a set of solutions
    ("12,9", "Find the lengths of $PQ$ and $QT$, respectively.", None),
    ("-2, 1", "Enter all the solutions, separated by commas.", ("set_max", "", "", 1)),
    # the evaluation point is never a number the question writes ("p(2) = 5" would give it away)
    ("x^2 + 1", "Find the polynomial $p(x)$ with $p(2) = 5$ and $p(3) = 10$.", ("expr_value", "x=4", "", 17)),
    (r"2 \cdot 5", "", None),  # a number: parse_answer_value's, not a derivation
    # an equation's coefficients only where the question fixes its normal form
    ("2x + z - 5 = 0", "Enter your answer in the form $Ax + By + Cz + D = 0,$ where $\\gcd(|A|,|B|,|C|,|D|) = 1.$",
     ("poly_coeff", "1", "x", 2)),
    ("2x + z - 5 = 0", "Find the equation of the plane.", None),
    # letters that are no symbol of the question are a unit, not variables (Minerva's answers)
    (r"4.4677 \times 10^{14} Hz", "Calculate the frequency $(v)$ in Hz, to 4 decimal places.", None),
    # a bare variable derives nothing but itself
    ("b", "Find $b$ in terms of $a$.", None),
    # several variables are set to positive values (R, C, L are physical quantities)
    (r"\frac{1}{RCs + 1}", "Find the transfer function in terms of $R$, $C$ and $s$.",
     ("expr_value", "C=2,R=3,s=4", "", sympy.Rational(1, 25))),
    # "a:b" is a ratio or a time as the question asks; one that asks for neither, or both, gets nothing
    ("2:4", "What is the ratio of boys to girls?", ("ratio_value", "", "", sympy.Rational(1, 2))),
    ("9:24", "What is the ratio of the areas? Express it in the form $a:b$.", ("ratio_value", "", "", sympy.Rational(3, 8))),
    ("9:24", "What time is it now?", ("time_minute", "", "", 24)),
    ("9:24", "Find the two numbers.", None),
    # durations: a ratio, not a time of day (no "what time", clock, a.m./p.m. or "at 8:00")
    ("9:24", "What is the ratio of the time Ann ran to the time Bo ran?", ("ratio_value", "", "", sympy.Rational(3, 8))),
    ("9:24", "What is the ratio of the laps? They start at 8:00.", None),  # a ratio and a time: neither
    ("14:30", "How much time does the trip take?", None),  # a duration
    ("9:24", "Each time she runs a lap, she rests. Find it.", None),
    ("9:24", "They start running at 8:00. What is the earliest time when all three meet?", ("time_minute", "", "", 24)),
    # "2 < 3x + 1 < 7" bounds 3x + 1, and "1 < x^2 < 4" is two intervals: no interval is read
    ("2 < 3x+1 < 7", "Find all $x$.", None),
    ("1 < x^2 < 4", "Find all $x$.", None),
    # values of two unknowns are not a solution set
    ("x = 2, y = 3", "Solve for $x$ and $y$.", None),
    ("3, 4", "Solve\n\\begin{align*} x+y&=7 \\\\ x-y&=-1 \\end{align*}", None),
    # a day of the week bare or with a full stop, as in \text{}
    ("Sunday.", "On what day of the week will it be?", ("weekday", "", "", 7)),
    ("25:10", "At what time do they meet?", None),  # no such time of day
    ("3:3:1", "Find the ratio AN_2 : N_2N_1 : N_1D.", None),  # three terms: no first and second
    # a respectively in the asking sentence still makes a list two answers
    ("12,9", "Let $P$ and $Q$ be points. Find all values of $PQ$ and $QT$, respectively.", None),
    ("12,9", "Let $P$ and $Q$ be the midpoints of $AB$ and $CD$, respectively. Find all values of $x$.",
     ("set_max", "", "", 12)),
    # complex solutions lead nothing: their number is the degree, their sum Vieta's
    ("1+i, 1-i", "Find all solutions.", None),
    ("1 + i, 1 - i, -1 + i, -1 - i", "Find the solutions to $z^4 = -4.$  Enter the solutions, separated by commas.", None),
    (r"\text{February 30}", "What is the date?", None),
]


@pytest.mark.parametrize("answer,question,first", SHAPES)
def test_answer_shapes(answer, question, first):
    menu = derivations(answer, question)
    if first is None:
        assert menu == ()
        return
    d, v = menu[0]
    assert (d.kind, d.arg, d.name, v) == first


def test_lead_value_prefers_modest_rationals_and_guessable_kinds_last():
    # largest and smallest are irrational: a guessable kind with a rational value comes next
    lv = lead_value(r"\sqrt{2}, -\sqrt{2}", "Enter all the solutions, separated by commas.")
    assert isinstance(lv, DerivedValue) and lv.derivation.kind in ("set_sum", "set_size") and lv.value.is_Rational
    # 0 says nothing (the focus of y = 4x^2 - 3 lies on the y-axis): the other entry leads;
    # among values that say something, an integer before a fraction
    lv = lead_value(r"\left( 0, -\frac{47}{16} \right)", "Find the focus of the parabola $y = 4x^2 - 3.$")
    assert (lv.derivation.kind, lv.derivation.arg, lv.value) == ("tuple_entry", "2", sympy.Rational(-47, 16))
    lv = lead_value("(1, 4, -2)", "Find the ordered triple $(p,q,r)$.")
    assert (lv.derivation.name, lv.value) == ("q", 4)
    # "(-3, 5)" answering "find all values of k" is an interval, not a pair
    lv = lead_value("(-3, 5)", r"Find all values of $k$ so that $x^2 - (k - 3) x - k + 6 > 0$ for all $x.$")
    assert lv.derivation.kind == "interval_length" and lv.value == 8
    # the remainder of x^100 / (x+1)^3 has degree 2 whatever it is: not chosen while another fits
    lv = lead_value("4950x^2 + 9800x + 4851", r"Find the remainder when $x^{100}$ is divided by $(x + 1)^3.$")
    assert lv.derivation.kind != "poly_degree"
    assert lead_value("7", "What is 3 + 4?").value == 7 and not isinstance(lead_value("7", ""), DerivedValue)
    with pytest.raises(ValueError, match="known"):
        Derivation("volume")


# ---------------------------------------------------------------- the engine and check 1
Q1 = Problem.new(r"Find all real solutions to $x^2 - x - 6 = 0$. Enter all the solutions, separated by commas.", "-2, 3")
Q2 = Problem.new("Tom has $7$ apples and eats $2$ of them. How many apples are left?", "5")


def _compose(q1=Q1, q2=Q2, **kw):
    eng = SymbolicComposer(**kw)
    return eng.compose((q1, q2), candidate_id((q1, q2)))


def test_a_derived_link_in_the_prompt_and_the_record():
    rec = _compose()
    assert not isinstance(rec, Rejection), rec
    lk = rec.links[0]
    assert dict(lk.v1_derivation) == {"kind": "set_max"} and lk.v1_latex == "3"
    assert f"Let ${lk.x}$ be the largest of the values that answer the problem above." in rec.question
    assert rec.to_dict()["links"][0]["v1_derivation"] == {"kind": "set_max"}
    assert Problem.from_dict(json.loads(json.dumps(rec.to_dict()))) == rec
    assert SymbolicComposer().record_json(rec, (Q1, Q2)) == json.dumps(rec.to_dict(), ensure_ascii=False,
                                                                       sort_keys=True, separators=(",", ":"))
    assert run_checks(rec, (Q1, Q2)) is None
    # without derivation, such a q1 is still rejected as before
    off = _compose(derive_q1=False)
    assert isinstance(off, Rejection) and off.reason == "q1_not_numeric"


def _tamper_link(rec, **changes):
    return dataclasses.replace(rec, links=(dataclasses.replace(rec.links[0], **changes),))


def test_check1_rejects_tampered_derived_links():
    rec = _compose()
    # the record says "smallest" while the text says "largest"
    bad = _tamper_link(rec, v1_derivation=(("kind", "set_min"),))
    assert run_checks(bad, (Q1, Q2)).reason == "derivation_wording"
    # the value does not follow from the answer
    bad = _tamper_link(rec, v1_latex="4", v1_expr="4")
    assert run_checks(bad, (Q1, Q2)).reason == "v1_mismatch"
    # a derivation the answer does not allow
    bad = _tamper_link(rec, v1_derivation=(("kind", "interval_length"),))
    text = rec.question.replace(spc.derived_phrase("set_max"), spc.derived_phrase("interval_length"))
    bad = dataclasses.replace(bad, question=text)
    assert run_checks(bad, (Q1, Q2)).reason == "derivation_invalid"
    # derived wording on a link that records no derivation
    bad = _tamper_link(rec, v1_derivation=())
    assert run_checks(bad, (Q1, Q2)).reason == "derivation_missing"
    # an unknown kind
    bad = _tamper_link(rec, v1_derivation=(("kind", "volume"),))
    assert run_checks(bad, (Q1, Q2)).reason == "derivation_invalid"


@pytest.mark.shared_data
def test_contract_and_determinism_of_derived_q1_runs(math_train, by_id, tmp_path):
    """q1 drawn only from MATH problems whose answer is not one number: every accepted record
    derives v1, passes the checks, and two runs give the same bytes."""
    firsts = [p for p in math_train if parse_answer_value(p.answer) is None]
    cfg = ComposeConfig(depth=2, seed=3, max_candidates=1500, workers=1)
    s1 = run_compose(math_train, cfg, tmp_path / "a", first_pool=firsts, progress=False)
    run_compose(math_train, cfg, tmp_path / "b", first_pool=firsts, progress=False)
    assert (tmp_path / "a/composed.jsonl").read_bytes() == (tmp_path / "b/composed.jsonl").read_bytes()
    rows = [json.loads(x) for x in (tmp_path / "a/composed.jsonl").read_text().splitlines()]
    assert s1["accepted"] == len(rows) > 800
    first_ids = {p.id for p in firsts}
    kinds = set()
    for row in rows:
        c = Problem.from_dict(row)
        parents = [by_id[i] for i in c.parents]
        assert c.parents[0] in first_ids and run_checks(c, parents) is None
        lk = c.links[0]
        d = Derivation.from_dict(dict(lk.v1_derivation))
        kinds.add(d.kind)
        v1 = derive(parents[0].answer, parents[0].question, d)
        assert sympy.simplify(v1 - sympy.sympify(lk.d_expr) - sympy.Rational(lk.v2_expr)) == 0
    assert len(kinds) >= 3, kinds


@pytest.mark.shared_data
def test_the_point_test_never_changes_a_stated_verdict(math_train, monkeypatch):
    """``_stated`` first evaluates the difference at one rational point and skips the sympy
    proof when it is a nonzero number (the proof was most of the pools' time). On
    every MATH answer that is an expression the verdict is the one the proof alone gives, and
    the point test does skip some proofs (else it would be dead code)."""
    from composition_rl.values import derive as derive_mod
    from composition_rl.values.derive_shapes import read_expression, strip_answer

    cases = [(e, p.question) for p in math_train
             if parse_answer_value(p.answer) is None
             and (e := read_expression(strip_answer(p.answer), p.question)) is not None]
    assert len(cases) > 100
    point_test = derive_mod._differ_at_a_point
    skipped = []

    def counted(diff):
        skipped.append(point_test(diff))
        return skipped[-1]

    monkeypatch.setattr(derive_mod, "_differ_at_a_point", counted)
    fast = [derive_mod._stated(e, q) for e, q in cases]
    monkeypatch.setattr(derive_mod, "_differ_at_a_point", lambda diff: False)
    slow = [derive_mod._stated(e, q) for e, q in cases]
    assert fast == slow
    assert 0 < sum(slow) < len(cases)
    assert sum(skipped) > 50  # proofs the point test saved
