"""The verifier on tables of real cases: equivalent forms are correct, wrong ones incorrect.

Gold answers in the hand-written tables are copied from the datasets named in each
section (MATH train, AIME, AMC, Minerva); the ``shared_data`` tests read the files
themselves and build cases from every gold answer of a kind.
"""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest

from composition_rl.grading import (
    Outcome,
    Verifier,
    VerifyConfig,
    extract_answer,
    gold_forms,
    summarize,
)
from composition_rl.grading.extract import last_boxed, normalize, plain_integer
from composition_rl.values.numbers import plain_number


@pytest.fixture(scope="module")
def verifier():
    with Verifier(VerifyConfig(timeout_s=5.0)) as v:
        yield v


OK, BAD, NA = Outcome.CORRECT, Outcome.INCORRECT, Outcome.NO_ANSWER

# (gold as the dataset stores it, the answer a model writes, expected)
EQUIVALENCE = [
    # fractions (MATH train: \frac{1}{2}, -\frac12, -\dfrac{11}{12}, -\frac{5}{2})
    (r"\frac{1}{2}", r"0.5", OK),
    (r"\frac{1}{2}", r"1/2", OK),
    (r"\frac{1}{2}", r"\dfrac12", OK),
    (r"\frac{1}{2}", r"\frac{1}{3}", BAD),
    (r"\frac{1}{2}", r"1/3", BAD),
    (r"-\frac12", r"-0.5", OK),
    (r"-\frac12", r"\frac12", BAD),
    (r"-\dfrac{11}{12}", r"-11/12", OK),
    (r"-\frac{5}{2}", r"-2.5", OK),
    (r"-\frac{5}{2}", r"2.5", BAD),
    # thousands separators (MATH train: 64,\!328; \$1,\!657; 1,\!000,\!000)
    (r"64,\!328", r"64328", OK),
    (r"64,\!328", r"64,328", OK),
    (r"64,\!328", r"64{,}328", OK),
    (r"64,\!328", r"64,329", BAD),
    (r"\$1,\!657", r"1657", OK),
    (r"1,\!000,\!000", r"10^6", OK),
    # degrees and percent (MATH train: 73^\circ, 17\%)
    (r"73^\circ", r"73", OK),
    (r"73^\circ", r"73^{\circ}", OK),
    (r"73^\circ", r"37^\circ", BAD),
    (r"17\%", r"17", OK),
    (r"17\%", r"17\%", OK),
    (r"17\%", r"0.17", OK),
    (r"17\%", r"71\%", BAD),
    # intervals and unions (MATH train: [0,3), (-\infty,-27)\cup(-27,\infty))
    (r"[0,3)", r"[0, 3)", OK),
    (r"[0,3)", r"(0,3)", BAD),
    (r"[0,3)", r"[0,3]", BAD),
    (r"(-\infty,-27)\cup(-27,\infty)", r"(-\infty, -27) \cup (-27, \infty)", OK),
    (r"(-\infty,-27)\cup(-27,\infty)", r"(-\infty, 27) \cup (27, \infty)", BAD),
    # tuples (MATH train: (3, -1))
    (r"(3, -1)", r"(3,-1)", OK),
    (r"(3, -1)", r"(-1,3)", BAD),
    # matrices and vectors (MATH train)
    (r"\begin{pmatrix} 4 \\ -3 \end{pmatrix}", r"\begin{pmatrix}4\\-3\end{pmatrix}", OK),
    (r"\begin{pmatrix} 4 \\ -3 \end{pmatrix}", r"\begin{pmatrix} -3 \\ 4 \end{pmatrix}", BAD),
    (r"\begin{pmatrix} -20/13 \\ -4/13 \end{pmatrix}", r"\begin{pmatrix} -\frac{20}{13} \\ -\frac{4}{13} \end{pmatrix}", OK),
    # choices (MATH train: \text{(B)}, \text{B}, OK)
    (r"\text{(B)}", r"B", OK),
    (r"\text{(B)}", r"(B)", OK),
    (r"\text{(B)}", r"\text{B}", OK),
    (r"\text{(B)}", r"\textbf{(B)}", OK),
    (r"\text{(B)}", r"C", BAD),
    (r"C", r"\text{(C)}", OK),
    # surds: bare, Math-Verify parses 7\sqrt{2} as 7; we wrap in $...$ (MATH train: 7\sqrt2, 3\sqrt{5})
    (r"7\sqrt{2}", r"7\sqrt{2}", OK),
    (r"7\sqrt{2}", r"7\sqrt2", OK),
    (r"7\sqrt{2}", r"\sqrt{98}", OK),
    (r"7\sqrt{2}", r"7", BAD),
    (r"3\sqrt{5}", r"3", BAD),
    # multiples of pi (MATH train: \frac{25\pi}{2}, \frac{35}{2} \pi, 63\pi)
    (r"\frac{25\pi}{2}", r"12.5\pi", OK),
    (r"\frac{25\pi}{2}", r"\frac{25}{2}\pi", OK),
    (r"\frac{35}{2} \pi", r"17.5\pi", OK),
    (r"63\pi", r"63", BAD),
    (r"63\pi", r"36\pi", BAD),
    # words and units (MATH train)
    (r"\text{Friday}", r"\text{Friday}", OK),
    (r"\text{Friday}", r"\text{Monday}", BAD),
    (r"20\text{ miles}", r"20", OK),
    (r"k = \frac{-33}{2}", r"-16.5", OK),
    # assignments (a common way models box an answer)
    ("5", "x = 5", OK),
    ("5", "x = 6", BAD),
    (r"\frac{3}{4}", "x_1 = 0.75", OK),
    ("2", "x = 2 or x = 3", BAD),
    # integers: AIME24 stores "025"; AIME25 stores ints; AMC stores floats like 142.0
    ("025", "25", OK),
    ("204", "240", BAD),
    (70, "70", OK),
    (70, "71", BAD),
    (142.0, "142", OK),
    (142.0, "142.0", OK),
    (142.0, "143", BAD),
    # lists of accepted forms (Minerva)
    (["0.01\n", "0.02\n"], "0.02", OK),
    (["0.01\n", "0.02\n"], "0.03", BAD),
    (["6630.65\n", "6630\n"], "6630", OK),
    (["7.5 \\times 10^7", "7.5 \\times 10^7\n"], r"7.5 \times 10^{7}", OK),
    (["9.6\n"], "9.7", BAD),
]


def _ids(rows):
    return [f"{i}:{g!r}~{a!r}" for i, (g, a, _) in enumerate(rows)]


@pytest.mark.parametrize("gold,answer,expected", EQUIVALENCE, ids=_ids(EQUIVALENCE))
def test_equivalence_table(verifier, gold, answer, expected):
    r = verifier.score(rf"Working... so the answer is $\boxed{{{answer}}}$.", gold)
    assert r.outcome is expected, r
    assert r.score == (1.0 if expected is OK else 0.0)


def test_table_as_one_batch_matches_single_calls(verifier):
    pairs = [(rf"\boxed{{{a}}}", g) for g, a, _ in EQUIVALENCE]
    results = verifier.score_batch(pairs)
    assert [r.outcome for r in results] == [e for _, _, e in EQUIVALENCE]
    counts = summarize(results)
    assert counts["correct"] == sum(e is OK for _, _, e in EQUIVALENCE)
    assert sum(counts.values()) == len(EQUIVALENCE)


EXTRACTION = [
    (r"first \boxed{3}, then \boxed{\frac{1}{2}}", r"\frac{1}{2}"),
    (r"$\boxed{\left(\frac{1}{2}, \{3\}\right)}$", r"\left(\frac{1}{2}, \{3\}\right)"),
    (r"\boxed{\{1,2\}} done", r"\{1,2\}"),
    (r"\fbox{42}", "42"),
    (r"\boxed {7}", "7"),
    ("The area is 12.\nAnswer: $12$", "12"),
    ("so\n**Final Answer:** 3/4.", "3/4"),
    (r"unclosed at the end \boxed{\frac{1}{2}", None),
    (r"empty \boxed{}", None),
    ("no answer here at all", None),
    ("", None),
]


@pytest.mark.parametrize("text,expected", EXTRACTION)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_extraction_fallbacks_are_configurable(verifier):
    text = "We find the answer is 12."
    assert extract_answer(text) is None
    assert extract_answer(text, fallbacks=("answer_is",)) == "12"
    assert extract_answer("Answer: 5", fallbacks=()) is None
    with pytest.raises(ValueError, match="known"):
        VerifyConfig(fallbacks=("nope",))


def test_no_answer_and_unparseable(verifier):
    assert verifier.score("I ran out of tokens while comput", "5").outcome is NA
    assert verifier.score(r"so \boxed{", "5").outcome is NA
    assert verifier.score(r"\boxed{???}", "5").outcome is BAD


def test_last_box_wins_over_earlier_ones(verifier):
    r = verifier.score(r"maybe \boxed{3}; no, it is \boxed{4}", "4")
    assert r.outcome is OK and r.extracted == "4"
    assert verifier.score(r"maybe \boxed{4}; no, it is \boxed{3}", "4").outcome is BAD


def test_fast_paths_decide_without_math_verify(verifier):
    assert verifier.score(r"\boxed{64,\!328}", r"64,\!328").via == "string"
    r = verifier.score(r"\boxed{025}", 25)
    assert (r.outcome, r.via) == (OK, "integer")
    r = verifier.score(r"\boxed{26}", 25)
    assert (r.outcome, r.via) == (BAD, "integer")
    r = verifier.score(r"\boxed{3/4}", r"-\frac{-3}{4}")
    assert (r.outcome, r.via) == (OK, "rational")
    r = verifier.score(r"\boxed{0.7}", r"\frac{3}{4}")
    assert (r.outcome, r.via) == (BAD, "rational")
    # within Math-Verify's 6-decimal rounding: left to Math-Verify, which accepts it
    r = verifier.score(r"\boxed{0.333333}", r"\frac13")
    assert (r.outcome, r.via) == (OK, "math_verify")
    r = verifier.score(r"\boxed{x = 0.5}", r"\frac12")
    assert (r.outcome, r.via) == (OK, "rational")  # an assignment is read by its right side
    r = verifier.score(r"\boxed{\frac{\sqrt{4}}{4}}", r"\frac12")
    assert (r.outcome, r.via) == (OK, "math_verify")


def test_gold_forms_of_every_stored_type():
    assert gold_forms(r"\frac{3}{4}") == (r"\frac{3}{4}",)
    assert gold_forms(70) == ("70",)
    assert gold_forms(142.0) == ("142",)
    assert gold_forms(2.5) == ("2.5",)
    assert gold_forms(["9.6\n", "9.6", " 9.60"]) == ("9.6", "9.60")
    for bad in (None, "", "  ", [], True, float("nan")):
        with pytest.raises(ValueError):
            gold_forms(bad)


def test_normalize_and_plain_integer():
    assert normalize(r"\left( 3, -1 \right)") == "(3,-1)"
    assert normalize(r"1,\!000,\!000") == "1000000"
    assert normalize("(1,234)") == "(1,234)"  # a tuple keeps its comma
    assert normalize("e") == "e"  # Euler's number is not choice (E)
    assert plain_integer("0007") == "7" and plain_integer("+3") == "3" and plain_integer("1e3") is None
    assert plain_number(r"\frac{-3}{4}")[0] == plain_number("-0.75")[0]
    for not_plain in (r"17\%", r"30^\circ", r"\frac{1}{0}", "2^3", r"\$5", "1e5", "x"):
        assert plain_number(not_plain) is None, not_plain


# ---------------------------------------------------------------- cases built from the data files
def _load(path):
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    return json.loads(path.read_text())


EVAL_FILES = ["eval/math500.parquet", "eval/aime24.json", "eval/aime25.json", "eval/amc.json", "eval/minerva.json", "eval/olympiad_bench.json"]


@pytest.mark.shared_data
def test_every_stored_gold_form_verifies_against_itself(verifier, shared_data):
    """Contract: each accepted form of every eval answer, boxed, scores correct (all types)."""
    pairs = []
    for name in EVAL_FILES:
        for row in _load(shared_data / name):
            for form in gold_forms(row["answer"]):
                pairs.append((rf"... so the answer is $\boxed{{{form}}}$", row["answer"]))
    results = verifier.score_batch(pairs)
    bad = [(p[1], r) for p, r in zip(pairs, results) if r.outcome is not OK]
    assert len(pairs) > 1500 and not bad, bad[:5]


@pytest.mark.shared_data
def test_integer_answers_off_by_one_are_incorrect(verifier, shared_data):
    golds = [r["answer"] for n in ("eval/aime24.json", "eval/aime25.json", "eval/amc.json") for r in _load(shared_data / n)]
    golds = [g for g in golds if float(g).is_integer()]
    results = verifier.score_batch([(rf"\boxed{{{int(float(g)) + 1}}}", g) for g in golds])
    assert len(golds) > 100 and all(r.outcome is BAD for r in results)


def _math_train(shared_data):
    return [r["answer"] for r in _load(shared_data / "train/math_train.json") if isinstance(r["answer"], str)]


@pytest.mark.shared_data
def test_equivalent_rewrites_of_real_math_answers(verifier, shared_data):
    """Every gold of a kind from MATH train, rewritten the way models write it."""
    golds = _math_train(shared_data)
    cases = []  # (gold, answer, expected)
    for g in golds:
        if m := re.fullmatch(r"(-?)\\d?frac\{(\d+)\}\{(\d+)\}", g):
            sign, a, b = m.groups()
            cases += [(g, f"{sign}{a}/{b}", OK), (g, f"{sign}{int(a) + 1}/{b}", BAD)]
        elif m := re.fullmatch(r"(\d+)\^\\circ", g):
            cases += [(g, m.group(1), OK), (g, str(int(m.group(1)) + 10), BAD)]
        elif m := re.fullmatch(r"(\d+) ?\\%", g):
            cases += [(g, m.group(1), OK), (g, str(int(m.group(1)) + 1), BAD)]
        elif m := re.fullmatch(r"\\text\{\(([A-E])\)\}", g):
            other = "A" if m.group(1) != "A" else "B"
            cases += [(g, m.group(1), OK), (g, other, BAD)]
        elif m := re.fullmatch(r"(\d+)\\sqrt\{?(\d+)\}?", g):
            a, b = int(m.group(1)), int(m.group(2))
            cases += [(g, rf"\sqrt{{{a * a * b}}}", OK), (g, str(a), BAD)]
        elif m := re.fullmatch(r"(\d{1,3}(?:,\\!\d{3})+)", g):
            digits = m.group(1).replace(r",\!", "")
            cases += [(g, digits, OK), (g, str(int(digits) + 1), BAD)]
    kinds = len(cases)
    results = verifier.score_batch([(rf"\boxed{{{a}}}", g) for g, a, _ in cases])
    bad = [(g, a, e, r.outcome) for (g, a, e), r in zip(cases, results) if r.outcome is not e]
    assert kinds > 600 and not bad, bad[:10]


def test_last_boxed_handles_thousands_of_nested_braces_linearly():
    inner = "{" * 5000 + "1" + "}" * 5000
    assert last_boxed(r"\boxed{" + inner + "}") == inner


@pytest.mark.shared_data
def test_rational_fast_path_agrees_with_math_verify_on_real_answers(shared_data):
    """In-process: for plain-number MATH answers, the exact path gives Math-Verify's verdict."""
    import random

    from composition_rl.grading.compare import Scorer

    golds = sorted({g for g in _math_train(shared_data) if plain_number(g) is not None})
    rng = random.Random(0)
    scorer = Scorer()
    pairs = [(g, rng.choice(golds)) for g in rng.sample(golds, 150)]
    pairs += [(g, str(float(plain_number(g)[0]))) for g in rng.sample(golds, 150)]
    decided = 0
    for gold, answer in pairs:
        fast = scorer.score(rf"\boxed{{{answer}}}", (gold,))
        if fast.via in ("rational", "integer", "string"):
            decided += 1
            assert (fast.outcome == "correct") == scorer._math_verify(answer, (gold,)), (gold, answer)
    assert decided > 250


# ---------------------------------------------------------------- multi-part answers and fallbacks
# Answer shapes from MATH train golds: a set of solutions ("-2,1", MATH's "Enter all the
# solutions, separated by commas"), an ordered pair ("(3,-1)"), points and tuples.
MULTI = [
    # several boxes joined by plain connectors are one answer, compared as a set
    (r"so $\boxed{1},\boxed{2},\boxed{3}$", r"\{1,2,3\}", OK),
    (r"the roots are \boxed{-2} and \boxed{1}.", "-2,1", OK),
    (r"the roots are \boxed{1} and \boxed{-2}.", "-2,1", OK),  # a set: order free
    (r"the roots are \boxed{1} and \boxed{-3}.", "-2,1", BAD),
    (r"$\boxed{(2, 2)} \quad \text{and} \quad \boxed{(6, 2)}$", "(6, 2), (2, 2)", OK),
    (r"$\boxed{(2, 2)} \quad \text{and} \quad \boxed{(2, 6)}$", "(6, 2), (2, 2)", BAD),  # tuples stay ordered
    # boxed coordinates against a gold tuple: its entries, in order
    (r"$x = \boxed{3}$, $y = \boxed{-1}$", "(3,-1)", OK),
    (r"$x = \boxed{-1}$, $y = \boxed{3}$", "(3,-1)", BAD),
    # anything but a plain connector between boxes: the last box alone is the answer
    (r"first \boxed{3}, then \boxed{4}", "4", OK),
    (r"maybe \boxed{3}; no, it is \boxed{4}", "4", OK),
    (r"Part (a): \boxed{3}. Part (b): \boxed{4}.", "4", OK),
    # a "final answer is" written after the last box is the final answer
    (r"$0.04 \cdot 10,000 = \boxed{200}$ ... Final Answer: The final answer is $10,455$. I hope it is correct.", "10455", OK),
]


@pytest.mark.parametrize("response,gold,expected", MULTI, ids=[f"{i}" for i in range(len(MULTI))])
def test_multi_part_answers(verifier, response, gold, expected):
    assert verifier.score(response, gold).outcome is expected


def test_multi_part_extraction():
    from composition_rl.grading.extract import extract_parts, final_boxes

    assert final_boxes(r"\boxed{(1, 2)}, \boxed{(2, 1)}, \boxed{(-1, -20)}") == ("(1, 2)", "(2, 1)", "(-1, -20)")
    assert final_boxes(r"\($y_1 = \boxed{x + 5} \) and \( y_2 = \boxed{3x - 2} \)") == ("x + 5", "3x - 2")
    assert final_boxes(r"\boxed{\boxed{1}}") == ("1",)  # a box inside a box is not a second part
    assert final_boxes(r"\boxed{1} no no no no no \boxed{2}") == ("2",)
    assert final_boxes(r"\boxed{1} " + "x" * 200 + r" \boxed{2}") == ("2",)
    assert extract_parts(r"so \boxed{1}, \boxed{2}") == ("1", "2")
    assert extract_answer(r"so \boxed{1}, \boxed{2}") == "1, 2"


def test_a_gold_written_as_a_solution_is_read_by_its_boxes(verifier):
    gold = r"This factors as $(n - 1)(n + 2) = 0,$ so the solutions are $n = \boxed{1,-2}.$"
    assert verifier.score(r"\boxed{-2} \quad \text{and} \quad \boxed{1}", gold).outcome is OK
    assert verifier.score(r"\boxed{1}", gold).outcome is BAD


WHOLE = [
    # (response, gold, outcome with fallbacks=("whole",))
    ("7,425,000", "7425000", OK),
    ("1 000", "1000", OK),
    ("1000.0", "1000", OK),
    ("$1,000.99", "1000.99", OK),
    (".4", "0.4", OK),
    ("$(3,2)$", "(3,2)", OK),
    (r"\frac{10}{9}", "10/9", OK),
    ("28 percent", r"28\%", OK),
    ("Answer $9$", "9", OK),
    (r"Therefore $x \geq 5$ is the solution.", "x >= 5", OK),
    (r"The identity matrix is $\begin{pmatrix}1 & 0 \\ 0 & 1\end{pmatrix}$.", r"\begin{pmatrix}1 & 0 \\ 0 & 1\end{pmatrix}", OK),
    ("$5$", "6", BAD),
    # not a single expression: two numbers in prose, two spans, an inline span over a newline, too long
    ("the number is not 10 which is 12", "12", NA),
    ("$x = 3$ and $y = 4$", "4", NA),
    ("Answer $ \n 9 \n $", "9", NA),
    ("We compute. " * 30 + "$9$", "9", NA),
    ("AZYUK2A", "2", NA),
]


@pytest.mark.parametrize("response,gold,expected", WHOLE, ids=[f"{i}" for i in range(len(WHOLE))])
def test_whole_response_fallback(response, gold, expected):
    v = _whole_verifier()
    assert v.score(response, gold).outcome is expected



def _whole_verifier():
    from composition_rl.grading import shared_verifier

    return shared_verifier(VerifyConfig(timeout_s=5.0, fallbacks=("whole",)))


def test_whole_is_off_by_default(verifier):
    assert VerifyConfig().fallbacks == ("answer_line",)
    assert verifier.score("7,425,000", "7425000").outcome is NA
    assert extract_answer("$(3,2)$") is None and extract_answer("$(3,2)$", ("whole",)) == "(3,2)"


@pytest.mark.parametrize("fallback,template", [
    ("answer_line", "We add them up.\nAnswer: {}"),
    ("answer_is", "So the answer is {}."),
    ("whole", "{}"),
])
@pytest.mark.parametrize("written,gold", [("7,425,000", "7425000"), ("1 000", "1000"), ("1000.0", "1000"),
                                          (r"1,\!000", "1000"), ("$1,000$", "1000")])
def test_every_fallback_reads_separators_spaces_and_trailing_zeros(fallback, template, written, gold):
    v = _whole_verifier() if fallback == "whole" else _fallback_verifier(fallback)
    r = v.score(template.format(written), gold)
    assert r.outcome is OK, (fallback, written, r)


def _fallback_verifier(name):
    from composition_rl.grading import shared_verifier

    return shared_verifier(VerifyConfig(timeout_s=5.0, fallbacks=(name,)))


def test_answer_phrases_in_the_minerva_format():
    text = r"... Final Answer: The final answer is $\left( \frac{1}{5}, \frac{1}{6} \right)$. I hope it is correct."
    assert extract_answer(text, ("answer_is",)) == r"\left( \frac{1}{5}, \frac{1}{6} \right)"
    assert extract_answer("Final Answer: The largest $n$ is 34.") == "34"
    assert extract_answer("Final Answer: 12 apples") == "12 apples"
