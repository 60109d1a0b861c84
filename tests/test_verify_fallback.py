"""Answers without a box: what the ``prose`` fallback reads, what it refuses, and the
decimal comma, case by case.

The responses are the shapes real models write when they drop the box: "The answer is X",
the Minerva few-shot ending ("Final Answer: The final answer is $X$. I hope it is
correct."), "**Answer:** X", GSM8K's "#### X", a last line that is only the number, and
SmolLM2-135M-Instruct's "The answer is \\boxed{}." (an empty box). Cases marked "Math-Verify"
are from its own tests (tests/fixtures/math_verify_cases.py, by file and line).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from composition_rl.grading import Verifier, VerifyConfig
from composition_rl.grading.compare import Scorer
from composition_rl.grading.extract import FALLBACKS, decimal_comma, extract_answer, extract_final

sys.path.insert(0, str(Path(__file__).parent / "fixtures"))
from math_verify_cases import CASES  # noqa: E402

PROSE = ("prose",)


# Replies of SmolLM2-135M-Instruct (Q4_1 GGUF, loaded by transformers, greedy, the rollout_boxed
# prompt "... put your final answer within \\boxed{}."), copied as generated.
SMOL_7_PLUS_5 = "1. 7 + 5 = 12\n2. 12 + 1 = 13\n\nSo, the answer is 13."
SMOL_12_TIMES_3 = "12 * 3 = 36\n\nSo the answer is 36."
SMOL_HALF_OF_50 = ("To solve this problem, we need to break it down step by step. First, we calculate 50 as 100, "
                   "which is half of 50.\n\nNow, we can find half of 50 by dividing 50 by 2, which gives us 25."
                   "\n\nSo, the answer is 25.\n\nThis is the final step within the specified constraints.")
SMOL_EMPTY_BOX = ("So, 4 apples * 6 apples = 24 apples.\n\nSo, Tom has 24 apples.\n\n"
                  "The final answer is within \\boxed{}.")
SMOL_2_POW_5 = ("2^5 = 2 * 2 * 2 = 100\n\nNow, we can multiply 100 by 2:\n\n100 * 2 = 200\n\n"
                "So, 2^5 is equal to 100 * 2 = 200.\n\nIn other words, 2^5 is equal to 100 * 2 = 200.")


def _case(file: str, line: int) -> tuple[str, str]:
    """(prediction, gold) of one Math-Verify test case."""
    c = next(c for c in CASES if c[0] == f"tests/{file}" and c[1] == line)
    return c[4], c[3]


# (response, what `prose` reads or None) -- read: an explicit answer phrase or a last line
# that is only the answer
READ = [
    pytest.param("7 + 5 = 12.\nThe answer is 12.", "12", id="the-answer-is"),
    pytest.param("Final Answer: The largest $n$ is 34.", "34", id="final-answer-the-x-is-n"),
    pytest.param("So we are done.\n**Answer:** $\\frac{3}{4}$", "\\frac{3}{4}", id="bold-answer-span"),
    pytest.param("Final Answer: The final answer is $10,455$. I hope it is correct.", "10,455", id="minerva"),
    pytest.param("Natalia sold 48/2 = 24 clips in May.\n48 + 24 = 72\n#### 72", "72", id="gsm8k-hashes"),
    pytest.param("We add the two numbers.\n\n-5", "-5", id="last-line-negative"),
    pytest.param("The roots are found above.\n$x = 5$", "x = 5", id="last-line-span"),
    pytest.param("Final Answer: Jane started growing Sphere 3 hours ago. I hope it is correct.", "3",
                 id="one-number-sentence"),
    pytest.param("The answer is 12. This problem appeared in AMC 2019.", "12", id="year-after-the-answer"),
    pytest.param("... is 19. Final Answer: The maximum number of points is 19. <|im_start|>user", "19",
                 id="final-answer-mid-line"),
    pytest.param("The answer is \\boxed{13}.\nThe answer is 12.", "13", id="a-box-wins"),
    pytest.param(SMOL_7_PLUS_5, "13", id="smollm2-7+5"),  # the model's own (wrong) answer
    pytest.param(SMOL_12_TIMES_3, "36", id="smollm2-12x3"),
    pytest.param(SMOL_HALF_OF_50, "25", id="smollm2-a-sentence-after-the-answer"),
]

# (response, why nothing is read)
REFUSED = [
    pytest.param("the answer is not 12 but 13", id="negation"),
    pytest.param("The answer is 12.\nWait, the answer is not 12.", id="the-last-phrase-decides"),
    pytest.param("The answer is $5$ and $6$", id="two-spans-in-one-phrase"),
    pytest.param("The divisors of 6 are\n1, 2, 3, 6\nSo there are four of them.", id="list-inside-the-reasoning"),
    pytest.param("This was asked in 2019, and it depends on n.", id="year-in-prose"),
    pytest.param("The final answer is 3 apples and 4 pears.", id="two-numbers"),
    pytest.param("Answer: see above", id="no-number"),
    pytest.param("7 + 5 = 12. The answer is \\boxed{}.", id="empty-box-nothing-after-it"),
    pytest.param("First, 2 + 2 = 4. Then we multiply by 3 to get the", id="cut-off"),
    pytest.param(_case("test_all.py", 82)[0], id="math-verify-test_all-82"),  # the number is not 10 which is 1,000.99€
    pytest.param(_case("test_all.py", 72)[0], id="math-verify-test_all-72"),  # Soucis : 2,74 $ a..
    pytest.param("A rule from a textbook:\nHello", id="a-word-as-last-line"),
    pytest.param(SMOL_EMPTY_BOX, id="smollm2-the-final-answer-is-within-an-empty-box"),
    pytest.param(SMOL_2_POW_5, id="smollm2-no-answer-phrase"),
]


@pytest.mark.parametrize("response,expected", READ)
def test_prose_reads_the_final_answer(response, expected):
    assert extract_answer(response, PROSE) == expected


@pytest.mark.parametrize("response", REFUSED)
def test_prose_refuses_what_is_not_one_final_answer(response):
    assert extract_answer(response, PROSE) is None


def test_prose_reads_the_long_math_verify_endings():
    # long responses whose last phrase is "Final Answer: ... is N" in the middle of a line
    for line, expected in ((663, "120"), (740, "19")):
        pred, gold = _case("test_all.py", line)
        assert len(pred) > 300 and gold == f"${expected}$"
        assert extract_answer(pred, PROSE) == expected


def test_a_box_is_required_without_fallbacks():
    assert extract_final("The answer is 12.", ()) is None
    assert extract_final("The answer is \\boxed{}.\nAnswer: 12", ()) is None
    assert extract_final("The answer is \\boxed{}.\nAnswer: 12", ("answer_line",)) == (("12",), "answer_line")
    assert extract_final("\\boxed{12}", ()) == (("12",), "box")


def test_prose_is_registered_and_named_in_the_config():
    assert {"prose", "last_line"} <= set(FALLBACKS.names())
    assert VerifyConfig(fallbacks="prose").fallbacks == ("prose",)
    with pytest.raises(ValueError, match="prose"):
        VerifyConfig(fallbacks=("prosy",))


@pytest.mark.parametrize(
    "comma,read",
    [("1,22", "1.22"), ("0,111", "0.111"), ("1000,99", "1000.99"), ("-2,5", "-2.5"),
     ("1,000", None), ("12,345", None), ("1,000,000", None), ("2, 5", None), ("1.5", None)],
)
def test_decimal_comma_reading(comma, read):
    assert decimal_comma(comma) == read


@pytest.fixture(scope="module")
def scorer():
    return Scorer(fallbacks=PROSE)


# (response, gold, outcome): the decimal comma both ways, and where it is refused
@pytest.mark.parametrize(
    "response,gold,outcome",
    [
        pytest.param(*_case("test_all.py", 70), "correct", id="math-verify-1000,99-vs-1000.99"),
        pytest.param(*_case("test_all.py", 71), "correct", id="math-verify-1.22-vs-gold-1,22"),
        pytest.param(*_case("test_all.py", 87), "correct", id="math-verify-0.111-vs-gold-0,111"),
        pytest.param("The answer is $2,5$.", "2.5", "correct", id="comma-in-a-phrase"),
        pytest.param("1,000", "1000", "correct", id="thousands"),
        pytest.param("1,000", "1.0", "incorrect", id="thousands-not-a-decimal-comma"),
        pytest.param("2, 5", "2.5", "incorrect", id="a-space-makes-a-list"),
        pytest.param("\\boxed{1,22}", "1.22", "incorrect", id="a-comma-in-a-box-is-a-list"),
        pytest.param("1,5", "\\frac{3}{2}", "incorrect", id="only-against-a-decimal-point"),
        pytest.param("0,111", "111", "incorrect", id="0,111-groups-nothing"),
        # a known false acceptance (docs/verification.md): a MATH list gold against an unboxed decimal
        pytest.param("-2.1", "-2,1", "correct", id="known-false-accept-list-gold"),
        pytest.param("The answer is 12.", "12", "correct", id="prose-correct"),
        pytest.param("The answer is 12.", "13", "incorrect", id="prose-incorrect"),
        pytest.param("7 + 5 = 12. The answer is \\boxed{}.", "12", "no_answer", id="empty-box-stays-no-answer"),
    ],
)
def test_scores_with_prose(scorer, response, gold, outcome):
    assert scorer.score(response, (gold,)).outcome == outcome


@pytest.mark.slow
def test_the_verifier_reads_prose_only_when_asked():
    pairs = [("Thus the sum is found.\nThe answer is 12.", "12"), ("1000,99", "1000.99")]
    with Verifier(VerifyConfig(workers=1, fallbacks=PROSE)) as v:
        assert [r.outcome.value for r in v.score_batch(pairs)] == ["correct", "correct"]
    with Verifier(VerifyConfig(workers=1, fallbacks=())) as v:
        assert [r.outcome.value for r in v.score_batch(pairs)] == ["no_answer", "no_answer"]


# ------------------------------------------------------------------ the commands


def _unboxed_reply(body: dict) -> str:
    """What a small chat model writes when it drops the box (SmolLM2-135M's shape)."""
    return "7 + 5 = 12.\nThe answer is 12."


@pytest.mark.slow
@pytest.mark.parametrize("command", ["profile", "eval"])
def test_profile_and_eval_read_prose_behind_the_fallback_option(command, tmp_path, capsys):
    from fakes.openai_server import FakeOpenAIServer

    from composition_rl.cli import main as crl
    from composition_rl.io.files import atomic_write_jsonl

    inp = tmp_path / "in.jsonl"
    atomic_write_jsonl(inp, [{"problem": "What is 7 + 5?", "answer": "12"}])
    source = ["--input", str(inp)] if command == "profile" else ["--benchmark", str(inp)]
    with FakeOpenAIServer(_unboxed_reply) as srv:
        base = [command, "--base-url", srv.url, "--model", "m", *source, "-n", "2", "--no-progress"]
        assert crl([*base, "--out", str(tmp_path / "boxed")]) == 0
        assert crl([*base, "--out", str(tmp_path / "prose"), "--fallback", "prose"]) == 0
        capsys.readouterr()
        # a rerun into a folder under other fallbacks is refused, naming them
        assert crl([*base, "--out", str(tmp_path / "prose")]) == 2
        assert "fallbacks" in capsys.readouterr().err

    def accuracy(out) -> float:
        if command == "profile":
            rows = [json.loads(x) for x in (out / "profile.jsonl").read_text().splitlines()]
            return rows[0]["pass_rate"]
        return json.loads((out / "results.json").read_text())["benchmarks"]["in"]["avg@2"]

    assert (accuracy(tmp_path / "boxed"), accuracy(tmp_path / "prose")) == (0.0, 1.0)


@pytest.mark.parametrize("command", ["profile", "eval", "score"])
def test_an_unknown_fallback_is_refused_before_any_work(command, tmp_path, capsys):
    from composition_rl.cli import main as crl
    from composition_rl.io.files import atomic_write_jsonl

    inp = tmp_path / "in.jsonl"
    atomic_write_jsonl(inp, [{"problem": "What is 7 + 5?", "answer": "12", "response": "12"}])
    out = tmp_path / ("o.jsonl" if command == "score" else "o")
    args = {"profile": ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--input", str(inp)],
            "eval": ["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--benchmark", str(inp)],
            "score": ["--input", str(inp)]}[command]
    assert crl([command, *args, "--out", str(out), "--fallback", "prosy", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "prosy" in err and "prose" in err  # the known names are listed
    assert not out.exists()
