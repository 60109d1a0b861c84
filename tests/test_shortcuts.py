"""Compositions that really need q1: the named shortcut rules (values/shortcuts.py), the risks
(values/shortcut_risks.py), and the scanners that look for all of it (spc/quality.py,
``crl audit``). Constants read as TeX reads them, one role per replaced value and natural
offsets are in ``test_shortcuts_constants.py``; check 5 (does the answer depend on the
variable?) in ``test_shortcuts_dependence.py``.

Each table row is real MATH train text: (what it shows, the record's index in
../shared/data/train/math_train.json, a snippet quoted from it, ...). ``test_snippets_quote_math_train``
holds every snippet to its record. A row with index -1 is no MATH text and says why."""

from __future__ import annotations

import json
import re

import pytest

from composition_rl.cli import main
from composition_rl.jobs.audit import CLASSES, sample, scan
from composition_rl.jobs.compose import ComposeConfig, run_compose
from composition_rl.records import Problem
from composition_rl.spc.base import Rejection
from composition_rl.spc.checks import run_checks
from composition_rl.spc.quality import DEFECTS, scan_record
from composition_rl.spc.symbolic import SymbolicComposer
from composition_rl.values import FLAWS, constant_value, constants, find_constants, shortcuts
from composition_rl.values.shortcuts import SHORTCUT_RULES


def _at(question: str, literal: str, nth: int = 0):
    """The ``nth`` constant of ``question`` whose literal is ``literal``."""
    found = [c for c in find_constants(question, "") if c.literal == literal]
    assert len(found) > nth, (literal, [c.literal for c in find_constants(question, "")])
    return found[nth]


# -- 2. the named shortcut rules ------------------------------------------------------------
# (what, MATH index, snippet, literal, which occurrence, the flaw it must get)
SHORTCUTS = [
    ("worked_example: 'For example, Feb. 7 ...' (the 7 of the example)", 6196,
     "For example, Feb. 7 or 2/7 is a prime date. How many prime dates occurred in 2007?", "7", 0, "worked_example"),
    ("worked_example: 'such as 3663'", 2223,
     "A palindrome is an integer that reads the same forward and backward, such as 3663. What percent of the "
     "palindromes between 100 and 500 contain at least one 5?", "3663", 0, "worked_example"),
    ("figure: the radius 10 is drawn as Circle((0,0),10)", 2596,
     "Two circles of radius 10 cm overlap such that each circle passes through the center of the other, as shown. "
     "How long, in cm, is the common chord (dotted segment) of the two circles? Express your answer in simplest "
     "radical form.\n\n[asy]\ndraw(Circle((0,0),10),linewidth(1));\ndraw(Circle((10,0),10),linewidth(1));\n"
     "dot((0,0));\ndot((10,0));\ndraw((5,8.66)--(5,-8.66),linetype(\"0 4\")+linewidth(1));\n\n[/asy]",
     "10", 0, "figure"),
    ("sums_to_one: 40% + 25% + 35% chances", 1933,
     "A weather forecast predicts that for each day from Monday to Friday this week, there is a $40\\%$ chance of "
     "sun, a $25\\%$ chance of getting 4 inches of rain, and a $35\\%$ chance of getting 10 inches of rain.",
     "25", 0, "sums_to_one"),
    ("sums_to_one: 20 members = 10 boys + 10 girls", 1928,
     "The Grammar club has 20 members: 10 boys and 10 girls.  A 4-person committee is chosen at random.",
     "20", 0, "sums_to_one"),
    ("sums_to_one: nine people = four + three + the two remaining", 2254,
     "Nine people sit down at random seats around a round table. Four of them are math majors, three others are "
     "physics majors, and the two remaining people are biology majors.", "two", 0, "sums_to_one"),
    ("sums_to_one: a count followed by the list it counts", 279,
     "What is the largest possible value of the sum of the four products $ab$, $bc$, $cd$ and $da$?",
     "four", 0, "sums_to_one"),
    ("pattern: 1, 10 and 19 (an arithmetic sequence)", 77,
     "The first three terms of an arithmetic sequence are 1, 10 and 19, respectively.", "10", 0, "pattern"),
    ("pattern: the bases 1, 2, 3 before an ellipsis (the issue's 1^Y + 2^Y + Y^Y)", 4983,
     "Find the remainder when $1^3 + 2^3 + 3^3 + \\dots + 100^3$ is divided by 6.", "2", 0, "pattern"),
    ("pattern: 1 + 3 + 5 + ... + 15 + 17", 673,
     "Calculate the sum $1 + 3 + 5 + \\cdots + 15 + 17$.", "15", 0, "pattern"),
    ("pattern: divisible by 10, 11, and 12", 6703,
     "Find the smallest positive integer divisible by $10$, $11$, and $12$.", "11", 0, "pattern"),
    ("pattern: every other term, 1/3, 1/9, 1/27", 659,
     "Find the sum of the first five terms in the geometric sequence $\\frac13,\\frac19,\\frac1{27},\\dots$.",
     "9", 0, "pattern"),
    ("default_value: a standard deck of 52 cards", 1751,
     "Three cards are dealt at random from a standard deck of 52 cards.", "52", 0, "default_value"),
    ("default_value: a standard 6-sided die", 1861,
     "Alli rolls a standard $6$-sided die twice.", "6", 0, "default_value"),
    ("default_value: 'A triangle has three sides' (a count the shape fixes)", 38,
     "A triangle has three sides of the following side lengths: $7$, $10$, and $x^2$.", "three", 0, "default_value"),
    ("default_value: 'the four vertices of a rectangle'", 727,
     "Three of the four vertices of a rectangle are $(5, 11)$, $(16, 11)$ and $(16, -2)$.", "four", 0,
     "default_value"),
    ("default_value: 'a convex heptagon (7-sided polygon)'", 6071,
     "How many distinct diagonals of a convex heptagon (7-sided polygon) can be drawn?", "7", 0, "default_value"),
    ("default_value: triangles by connecting 'three different vertices' (a triangle has three)", 2009,
     "How many distinct triangles can be constructed by connecting three different vertices of a cube?", "three", 0,
     "default_value"),
    ("default_value: a box's $12$ edges (derived audit: 'a box's 12 edges')", 1335,
     "A rectangular box has a volume of $4320$ cubic inches and a surface area of $1704$ square inches. The sum of "
     "the lengths of its $12$ edges is $208$ inches.", "12", 0, "default_value"),
    # the residual classes of the 60-record blind audit (docs/composition.md)
    ("sums_to_one: 'Two of the members, Penelope and Quentin' (the names are the items)", 2452,
     "Two of the members, Penelope and Quentin, will only be officers if the other one is also an officer.",
     "Two", 0, "sums_to_one"),
    ("sums_to_one: '3 officers: chairman, vice-chairman, and sergeant-at-arms' (plain words after a colon)", 2452,
     "It needs to select 3 officers: chairman, vice-chairman, and sergeant-at-arms.", "3", 0, "sums_to_one"),
    ("sums_to_one: 'these two pieces' after one piece and another", 6089,
     "One piece of string is 1.5 inches long and another piece of string is 4.5 inches long. What is the average "
     "length, in inches, of these two pieces of string?", "two", 0, "sums_to_one"),
    ("sums_to_one: 'the six digits 2, 2, 2, 3, 7, and 9' (plain numbers as items)", 2463,
     "the age of the rock is formed from the six digits 2, 2, 2, 3, 7, and 9, and the rock's age begins with an "
     "odd digit.", "six", 0, "sums_to_one"),
    ("sums_to_one: 'two vertices at $(0,5)$ and $(8,5)$' (a point is one item)", 3365,
     "An equilateral triangle has two vertices at $(0,5)$ and $(8,5)$.", "two", 0, "sums_to_one"),
    ("standard_constant: the 2 of Euler's V-E+F=2", 2932,
     "Euler's formula states that for a convex polyhedron with $V$ vertices, $E$ edges, and $F$ faces, $V-E+F=2$.",
     "2", 0, "standard_constant"),
    ("standard_constant: the 4 of a sphere's 4\\pi r^2", 2777,
     "The surface area of a sphere with radius $r$ is $4\\pi r^2$.", "4", 0, "standard_constant"),
    ("standard_constant: the 5 of C = 5/9 (F - 32)", 5283,
     "The formula for converting a Fahrenheit temperature $F$ to the corresponding Celsius temperature $C$ is "
     "$C = \\frac{5}{9}(F-32).$", "5", 0, "standard_constant"),
    ("standard_constant: 26 vertices, 60 edges, 36 faces (V - E + F = 2 forces each)", 2990,
     "A convex polyhedron $P$ has $26$ vertices, $60$ edges, and $36$ faces", "60", 0, "standard_constant"),
    ("zero: the right-hand side of 2x^2+3x-5=0", 1594,
     "Let $d$ and $e$ denote the solutions of $2x^{2}+3x-5=0$.", "0", 0, "zero"),
    ("zero: the bound x, y, z \\ge 0", 7391,
     "Find the volume of the region in space defined by\n\\[|x + y + z| + |x + y - z| \\le 8\\]and $x,$ $y,$ "
     "$z \\ge 0.$", "0", 0, "zero"),
    ("zero: x^2 - 5x + 6 < 0", 3562,
     "The real number $x$ satisfies $x^2 - 5x + 6 < 0.$", "0", 0, "zero"),
    # the third round: classes a 200-record shortcut hunt found (docs/composition.md)
    ("answer_range: the modulus 24 beside the range $0,1,2,\\ldots,22,23$", 4748,
     "Determine the residue of $-811\\pmod{24}$. Your answer should be an integer in the range "
     "$0,1,2,\\ldots,22,23$.", "24", 0, "answer_range"),
    ("answer_range: 'between 0 and 34' shows the modulus 35", 4743,
     "Find $4^{-1} \\pmod{35}$, as a residue modulo 35.  (Give an answer between 0 and 34, inclusive.)",
     "34", 0, "answer_range"),
    ("answer_range: $0 \\le n \\le 5$ beside \\pmod{6}", 4844,
     "Find the integer $n$, $0 \\le n \\le 5$, such that \\[n \\equiv -3736 \\pmod{6}.\\]", "6", 0, "answer_range"),
    ("answer_range: a full turn, $0^\\circ \\le x < 360^\\circ$", 2591,
     "How many values of $x$ with $0^\\circ \\le x < 360^\\circ$ satisfy $\\sin x = -0.73$?", "360", 0, "answer_range"),
    ("grammar: 'radius 1 foot' ('$Y$ foot' tells Y = 1)", 2601,
     "A hemisphere-shaped bowl with radius 1 foot is filled full with chocolate.", "1", 0, "grammar"),
    ("grammar: '$1$ part lemon juice' ('$Y$ part' tells Y = 1)", 5882,
     "To make lemonade, I use a ratio of $7$ parts water to $1$ part lemon juice.", "1", 0, "grammar"),
    ("grammar: 'at least 1 boy'", 1928,
     "What is the probability that the committee has at least 1 boy and at least 1 girl?", "1", 0, "grammar"),
]


def _snippet(what: str) -> str:
    """The snippet of the one SHORTCUTS row whose description starts with ``what``."""
    (row,) = [c for c in SHORTCUTS if c[0].startswith(what)]
    return row[2]


@pytest.mark.parametrize("what,idx,snippet,literal,nth,flaw", SHORTCUTS, ids=[c[0] for c in SHORTCUTS])
def test_each_shortcut_rule_flags_its_real_case(what, idx, snippet, literal, nth, flaw):
    assert _at(snippet, literal, nth).flaw == flaw


def test_every_rule_has_a_case_and_is_a_flaw():
    assert set(SHORTCUT_RULES) <= set(FLAWS)
    assert {c[5] for c in SHORTCUTS} == set(SHORTCUT_RULES)


def test_the_module_docstrings_catalogue_every_rule():
    # the rule modules read as catalogues: the shortcut rules in the order they are tried,
    # and every flaw named in the catalogue of constants or of shortcuts
    assert re.findall(r"^\* ``(\w+)``", shortcuts.__doc__, re.M) == list(SHORTCUT_RULES)
    named = set(re.findall(r"``(\w+)``", constants.__doc__ + shortcuts.__doc__))
    assert [f for f in FLAWS if f not in named] == []


@pytest.mark.parametrize("what,idx,snippet,literal,nth", [
    ("a palindrome that is no example: the 5 asked about", 2223,
     "A palindrome is an integer that reads the same forward and backward, such as 3663. What percent of the "
     "palindromes between 100 and 500 contain at least one 5?", "100", 0),
    ("two points of one diameter make no sequence", 10,
     "The points $(9, -5)$ and $(-3, -1)$ are the endpoints of a diameter of a circle.", "9", 0),
    # beside each residual class of the blind audit, a literal that stays replaceable
    ("the club's 22 members count no list", 2452,
     "My school's Physics Club has 22 members.  It needs to select 3 officers: chairman, vice-chairman, and "
     "sergeant-at-arms.", "22", 0),
    ("a length of one piece of string", 6089,
     "One piece of string is 1.5 inches long and another piece of string is 4.5 inches long. What is the average "
     "length, in inches, of these two pieces of string?", "1.5", 0),
    ("Euler's polyhedron has 32 faces: data, not the formula", 2932,
     "Euler's formula states that for a convex polyhedron with $V$ vertices, $E$ edges, and $F$ faces, $V-E+F=2$. "
     "A particular convex polyhedron has 32 faces, each of which is either a triangle or a pentagon.", "32", 0),
    ("the hemisphere's radius 6 beside the sphere's 4\\pi r^2", 2777,
     "The surface area of a sphere with radius $r$ is $4\\pi r^2$. Including the area of its circular base, what is "
     "the total surface area of a hemisphere with radius 6 cm?", "6", 0),
    ("the 5 of 2x^2+3x-5=0 beside its 0", 1594,
     "Let $d$ and $e$ denote the solutions of $2x^{2}+3x-5=0$.", "5", 0),
    ("a coefficient glued to its variable: the 20 of kx^2+20x+k=0", 408,
     "For which positive integer values of $k$ does $kx^2+20x+k=0$ have rational solutions?", "20", 0),
    ("the residue's argument -811 beside its range", 4748,
     "Determine the residue of $-811\\pmod{24}$. Your answer should be an integer in the range "
     "$0,1,2,\\ldots,22,23$.", "811", 0),
    ("a strict bound 0 <= n < 50 is the modulus itself: replaced with it", 4734,
     "Suppose $173\\cdot 927\\equiv n\\pmod{50}$, where $0\\le n< 50$.  What is the value of $n$?", "50", 0),
    ("the -0.73 of sin x beside a full turn", 2591,
     "How many values of $x$ with $0^\\circ \\le x < 360^\\circ$ satisfy $\\sin x = -0.73$?", "0.73", 0),
    ("a polygon named by its count only: 'the first has 38 sides'", 696,
     "Two regular polygons have the same perimeter. If the first has 38 sides", "38", 0),
    ("the side lengths of a triangle are data", 38,
     "A triangle has three sides of the following side lengths: $7$, $10$, and $x^2$.", "10", 0),
    ("one value repeated before an ellipsis is a repeat, not a run (all three 27s are replaced)", 3676,
     "\\[\\log_2 (27 + \\log_2 (27 + \\log_2 (27 + \\cdots))),\\]assuming it is positive.", "27", 0),
    ("a 1 before a preposition shows no grammar: 'from 1 to 50'", 558,
     "Jo adds up all the positive integers from 1 to 50.", "1", 0),
    ("a 1 before an abbreviated unit: '1 cm long'", 2679,
     "The four smaller squares have sides 1 cm long, either parallel to or coinciding with the sides of the large "
     "square.", "1", 0),
    ("a dimension: 'a $1$ by $1$ by $1$ cube'", 2115,
     "The sum of the areas of all triangles whose vertices are also vertices of a $1$ by $1$ by $1$ cube is", "1", 2),
    ("the 3 of 3x beside its 0 (one quantity with the other 3: both are replaced)", 1594,
     "Let $d$ and $e$ denote the solutions of $2x^{2}+3x-5=0$.", "3", 0),
])
def test_rules_leave_the_rest_alone(what, idx, snippet, literal, nth):
    assert _at(snippet, literal, nth).flaw == ""


@pytest.mark.parametrize("snippet,literal,singular", [
    ("A hemisphere-shaped bowl with radius 1 foot is filled full with chocolate.", "1", True),  # MATH 2601
    ("Zachary paid for a $\\$1$ burger with 32 coins and received no change.", "1", False),  # 338: a price
    ("Jo adds up all the positive integers from 1 to 50.", "1", False),  # 558
])
def test_the_grammar_reading_the_rule_and_its_scanner_share(snippet, literal, singular):
    from composition_rl.values.shortcuts import singular_after

    s = snippet.index(literal)
    assert singular_after(snippet, s, s + len(literal)) is singular


# -- risks: replaced only when nothing else allows a natural offset ---------------------------
@pytest.mark.parametrize("what,idx,snippet,literal,risk", [
    ("figure_count: '11 unit squares' the figure draws (its figure code shortened)", 2508,
     "The shaded region shown consists of 11 unit squares and rests along the $x$-axis and the $y$-axis. "
     "[asy]\ndefaultpen(linewidth(0.7));\n[/asy]", "11", "figure_count"),
    ("bound: 'more than 50 and fewer than 100'", 5155,
     "The number of students in Teresa's graduating class is more than 50 and fewer than 100", "100", "bound"),
    ("word_number: 'the two solutions of $|x + 5| = 20$' (an absolute value equation has two)", 27,
     "What is the positive difference between the two solutions of $|x + 5| = 20$?", "two", "word_number"),
    ("no risk: the same problem's 20, in digits", 27,
     "What is the positive difference between the two solutions of $|x + 5| = 20$?", "20", ""),
    ("no risk: a measure in a figure problem, 'radius 10 cm' (figure code shortened)", 2596,
     "Two circles of radius 10 cm overlap such that each circle passes through the center of the other, as shown. "
     "[asy]\ndraw(Circle((0,0),10),linewidth(1));\n[/asy]", "10", ""),
])
def test_risks_of_real_math_constants(what, idx, snippet, literal, risk):
    assert _at(snippet, literal).risk == risk


def test_a_constant_with_a_risk_is_replaced_only_when_no_other_allows_a_natural_offset():
    q1 = Problem.new("What is $3 + 4$?", "7")
    both = Problem.new("How many integers more than 5 and less than 20 are divisible by 3?", "5")
    only = Problem.new("How many positive integers are less than 9?", "8")
    eng = SymbolicComposer()
    # 5 (a bound) and 3 are both within the small offset of 7; the bound is never the pick
    assert {eng.compose((q1, both), cid).links[0].v2_literal for cid in "abcdefgh"} == {"3"}
    # the risk comes before the size of the offset: 60 (|d| = 53) over the bound 5 (|d| = 2)
    far = Problem.new("How many positive integers less than 5 are factors of 60?", "4")
    assert {eng.compose((q1, far), cid).links[0].v2_literal for cid in "abcdefgh"} == {"60"}
    # a count in words (MATH 27) gives way to a number in digits: the 5 of |x + 5| (|d| = 2)
    two = Problem.new("What is the positive difference between the two solutions of $|x + 5| = 20$?", "40")
    assert {eng.compose((q1, two), cid).links[0].v2_literal for cid in "abcdefgh"} == {"5"}
    # a bound alone is still replaced: a risk costs no coverage, and stats.json counts it
    eng.take_tally()
    assert eng.compose((q1, only), "a").links[0].v2_literal == "9"
    assert SymbolicComposer.link_stats(eng.take_tally())["risks"] == {"none": 0, "figure_count": 0, "bound": 1,
                                                                      "word_number": 0}


def test_a_risky_constant_gives_way_to_a_partner_whose_answer_fits_a_plain_one():
    """MATH's aluminium cans: the pool's q1 (answer 3) fits only "Three" (a count in words);
    a reserve partner whose answer lies near 243 takes its place, so the link replaces 243.
    Without a reserve, or when only risky constants remain, the risky one is still replaced."""
    cans = Problem.new("Three aluminum cans can be recycled to make a new can. How many new cans can eventually "
                       "be made from 243 aluminum cans? (Remember that the first new cans that are made can then "
                       "be recycled into even newer cans!)  Do not include the original 243 cans in your count.", "121")
    # (4, not 3: "Three" at 3 would be a zero offset, which is never stated)
    q1 = Problem.new("Evaluate $\\log_4256$.", "4")
    reserve = [Problem.new(f"What is ${n} + 1$?", str(n + 1)) for n in (7, 239, 400)]
    eng = SymbolicComposer()
    assert {eng.compose((q1, cans), cid).links[0].v2_literal for cid in "abcd"} == {"Three"}
    eng.partners[0] = reserve
    eng.take_tally()
    recs = [eng.compose((q1, cans), cid) for cid in "abcd"]
    assert {r.links[0].v2_literal for r in recs} == {"243"}
    assert {r.parents[0] for r in recs} == {reserve[1].id}  # 240: |d| = 3; 8 and 401 are too far
    assert all(run_checks(r, (reserve[1], cans)) is None for r in recs)
    tally = SymbolicComposer.link_stats(eng.take_tally())
    assert tally["partners"]["swapped"] == 4 and tally["risks"]["word_number"] == 0
    # a later problem whose constants all carry a risk keeps its pool partner
    only = Problem.new("How many positive integers are less than nine?", "8")
    rec = eng.compose((q1, only), "a")
    assert rec.parents[0] == q1.id and rec.links[0].v2_literal == "nine"



def test_a_swap_that_cannot_complete_the_chain_keeps_the_drawn_q1_and_a_decimal_constant_is_no_reason_to_swap():
    """Review findings on the swap above. Depth 3: the partner for the middle position is also
    the later problem of the first link; one without a safe constant ("a four-hour shift": a
    number inside a word) would reject a chain that was accepted, so the chain keeps its
    drawn problem and the risky constant. A constant without a risk that is a decimal gives
    a rational offset, which ranks before no risk: swapping for it bought nothing."""
    cans = Problem.new("Three aluminum cans can be recycled to make a new can. How many new cans can eventually "
                       "be made from 243 aluminum cans? (Remember that the first new cans that are made can then "
                       "be recycled into even newer cans!)  Do not include the original 243 cans in your count.", "121")
    q1 = Problem.new("What is $3 + 4$?", "7")
    mid = Problem.new("What is $10 - 6$?", "4")  # 1 from "Three" (3 would be a zero offset)
    shift = Problem.new("How many minutes are in a four-hour shift?", "240")
    eng = SymbolicComposer()
    assert not eng.safe_constants(shift)
    eng.partners[1] = [shift]
    eng.take_tally()
    rec = eng.compose((q1, mid, cans), "c")
    assert rec.parents == (q1.id, mid.id, cans.id) and rec.links[1].v2_literal == "Three"
    tally = SymbolicComposer.link_stats(eng.take_tally())
    assert tally["partners"]["swapped"] == 0 and tally["risks"]["word_number"] == 1  # counted once, as accepted
    good = Problem.new("What is $238 + 2$?", "240")
    eng.partners[1] = [shift, good]
    picked = {eng.compose((q1, mid, cans), cid).parents[1] for cid in "abcdefgh"}
    assert picked <= {mid.id, good.id} and good.id in picked  # a hash picks among the reserve; never the shift
    pizzas = Problem.new("Three friends share $4.5$ pizzas equally. How many pizzas does each friend get?", "1.5")
    eng = SymbolicComposer()
    eng.partners[0] = [Problem.new("What is $2 + 2$?", "4"), Problem.new("What is $2 + 3$?", "5")]
    three = Problem.new("What is $1 + 3$?", "4")  # 1 from "Three"
    rec = eng.compose((three, pizzas), "c")
    assert rec.links[0].v2_literal == "Three" and rec.parents == (three.id, pizzas.id)
    assert SymbolicComposer.link_stats(eng.take_tally())["partners"]["swapped"] == 0


def test_risks_reject_never_replaces_a_risky_constant_and_says_why(tmp_path):
    q1 = Problem.new("What is $3 + 4$?", "7")
    only = Problem.new("How many positive integers are less than 9?", "8")
    two = Problem.new("What is the positive difference between the two solutions of $|x + 5| = 20$?", "40")
    eng = SymbolicComposer(risks="reject")
    rej = eng.compose((q1, only), "a")
    assert isinstance(rej, Rejection) and (rej.stage, rej.reason) == ("constant", "risky_constant")
    assert {eng.compose((q1, two), cid).links[0].v2_literal for cid in "abcdefgh"} == {"5"}
    with pytest.raises(ValueError, match="risks='sometimes'"):
        ComposeConfig(risks="sometimes")
    # the flag, end to end: the bound-only problem is rejected and counted, the other composes
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"question": p.question, "answer": p.answer}) + "\n" for p in (q1, only, two)))
    assert main(["compose", "--input", str(src), "--depth", "2", "--pool-size", "3", "--risks", "reject",
                 "--out", str(tmp_path / "out"), "--workers", "1"]) == 0
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["rejected_by_reason"].get("risky_constant", 0) >= 1
    assert stats["links"]["risks"] == {"none": stats["accepted"], "figure_count": 0, "bound": 0, "word_number": 0}


def test_risks_reject_reaches_the_llm_and_auto_engines():
    """Under --risks reject the model may not pick a risky constant either: the LLM engine's
    allowed places drop them, and auto passes the option to both halves."""
    from composition_rl.jobs.compose.run import build_engine
    from composition_rl.spc.llm import LLMComposeConfig

    two = Problem.new("What is the positive difference between the two solutions of $|x + 5| = 20$?", "40")
    for risks, literals in (("last", {"two", "5", "20"}), ("reject", {"5", "20"})):
        cfg = ComposeConfig(engine="auto", risks=risks)
        auto = build_engine(cfg, llm_config=LLMComposeConfig(model="m"))
        assert auto.symbolic.risks == auto.llm.risks == risks
        assert set(auto.llm._allowed(two)) == literals


# -- 6. the scanners -----------------------------------------------------------------------
def test_every_defect_class_is_found_in_a_record_forged_to_have_it():
    q1 = Problem.new("What is $3 + 4$?", "7")

    def forged(q2_text: str, literal: str, nth: int = 0, d: str = "0", y: str = "Y", token=None):
        """A record replacing the ``nth`` ``literal`` of q2 with Y, whatever the rules say."""
        off = [i for i in range(len(q2_text)) if q2_text.startswith(literal, i)][nth]
        tok = token or (y if _in_math(q2_text, off) else f"${y}$")
        text = f"What is $3 + 4$?\n\nLet $X$ be the answer to the problem above. ${y}$ is $" + d + "$ less than $X$.\n\n"
        text += q2_text[:off] + tok + q2_text[off + len(literal):]
        return Problem.from_dict({
            "id": "f", "question": text, "answer": "1", "answers": ["1"], "depth": 2, "parents": [q1.id, "q2"],
            "engine": "symbolic", "links": [{"x": "X", "y": y, "v1": "7", "v1_expr": "7", "v2": literal,
                                             "v2_expr": str(constant_value(literal) or literal), "d": d,
                                             "d_expr": d, "v2_offset": off}]})

    cases = {
        "tex_token": forged("Compute $\\frac 49 + 1$.", "49", d="-42"),
        "exponent": forged("Expand $(x+1)^2$.", "2", d="5"),
        "radix": forged("Convert $2014_{10}$ to base 9.", "9", d="-2"),
        "figure": forged(_snippet("figure: the radius 10"), "10", d="-3"),
        "sums_to_one": forged(_snippet("sums_to_one: 40%"), "25", d="-18"),
        "pattern": forged(_snippet("pattern: 1, 10 and 19"), "10", d="-3"),
        "worked_example": forged(_snippet("worked_example: 'For example"), "7", d="0"),
        "default_value": forged(_snippet("default_value: a standard deck"), "52", d="-45"),
        "independent": forged("Compute $\\dbinom{8}{0}$.", "8", d="-1"),
        "unnatural_offset": forged("Compute $2 + 500$.", "500", d="-493"),
        "repeated_value": forged("A box of $6$ eggs costs $6$ dollars more than $x$.", "6", d="1"),
        "zero": forged("Solve $x^2 - 5x + 6 = 0$.", "0", d="7"),
        "standard_constant": forged(_snippet("standard_constant: the 2 of Euler"), "2", d="5"),
        "answer_range": forged(_snippet("answer_range: the modulus 24"), "24", d="-17"),
        "grammar": forged(_snippet("grammar: 'radius 1 foot'"), "1", d="6"),
    }
    # the listed counts of sums_to_one: the count of the list that follows, and "these N"
    listed = [forged(_snippet("sums_to_one: 'Two of the members"), "Two", d="5"), forged(_snippet("sums_to_one: 'these two pieces'"), "two", d="5")]
    for rec in listed:
        assert "sums_to_one" in {c for c, _ in scan_record(rec)}, scan_record(rec)
    for cls, rec in cases.items():
        assert cls in {c for c, _ in scan_record(rec)}, (cls, scan_record(rec))
    assert set(cases) | {"latex_dollars_in_math", "latex_bare_in_prose", "latex_in_plain_text", "notation",
                         "role_mix"} == set(DEFECTS)
    clean = SymbolicComposer().compose((q1, Problem.new("A farm has $40$ cows and $7$ horses. How many animals?",
                                                         "47")), "c")
    assert scan_record(clean) == []


def _in_math(text: str, off: int) -> bool:
    from composition_rl.values import in_math

    return in_math(text, off)


def test_crl_audit_scans_every_class_and_samples_one(tmp_path, capsys):
    probs = [Problem.new(q, a) for q, a in (
        ("What is $3 + 4$?", "7"), ("Compute $2 \\cdot 6$.", "12"), ("If $x + 5 = 9$, what is $x$?", "4"),
        ("A box holds 8 red and 3 blue balls. How many balls are there?", "11"),
        ("Each of three friends has $4$ apples. How many apples in all?", "12"))]
    run_compose(probs, ComposeConfig(pool_size=5, seed=0), tmp_path / "run", progress=False)
    res = scan(tmp_path / "run")
    assert res["records"] > 0 and set(res["classes"]) == set(CLASSES)
    assert all(res["classes"][c] == 0 for c in DEFECTS)
    assert main(["audit", str(tmp_path / "run"), "--scan", "--json", str(tmp_path / "scan.json")]) == 0
    assert json.loads((tmp_path / "scan.json").read_text())["classes"] == res["classes"]
    assert "pattern" in capsys.readouterr().out
    # --where: only records of that class (none here), and an unknown class is refused with the list
    assert sample(tmp_path / "run", 5, 0, where="pattern") == []
    with pytest.raises(ValueError, match="known: latex_dollars_in_math"):
        sample(tmp_path / "run", 5, 0, where="typo")
    assert main(["audit", str(tmp_path / "run"), "--where", "same_value_other_role", "--sample", "3",
                 "--out", str(tmp_path / "w.csv")]) == 0


@pytest.mark.shared_data
def test_snippets_quote_math_train(shared_data):
    rows = json.loads((shared_data / "train/math_train.json").read_text())
    for what, idx, snippet, *_ in [*SHORTCUTS]:
        if idx >= 0:
            assert snippet in rows[idx]["problem"], what
