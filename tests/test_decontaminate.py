"""Decontamination on real benchmark rows: every planted exact and near duplicate is found
with the row it copies, and the clean training rows are not flagged.

The benchmark rows are ``tests/fixtures/bench30.jsonl`` (the first 5 rows of each of the six
files of ``../shared/data/eval``); the training rows ``tests/fixtures/math300.jsonl`` (MATH
train rows 0-299). Both cuts are checked against the shared data by ``tests/test_fixtures.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import composition_rl as crl
from composition_rl.cli import main as cli
from composition_rl.io.files import atomic_write_jsonl, read_jsonl
from composition_rl.io.readers import load_problems
from composition_rl.jobs.decontaminate import normalize_words
from composition_rl.jobs.refresh import BenchmarkIndex, DecontamConfig
from composition_rl.records import Problem

FIX = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def bench() -> list[Problem]:
    return load_problems(str(FIX / "bench30.jsonl")).problems


@pytest.fixture(scope="module")
def train() -> list[Problem]:
    return load_problems(str(FIX / "math300.jsonl")).problems


def near_duplicates(q: str) -> dict[str, str]:
    """The same problem, written otherwise."""
    words = q.split(" ")
    out = {
        "exact": q,
        "formatting": q.replace(" ", "  ").replace("\\frac", "\\dfrac").replace("$", "$\\,").upper(),
        "lead-in": "Solve the following problem carefully and show your work. " + q,
        "instruction": q + " Put your final answer in a box and simplify it fully.",
        "composed": "What is $2+3$?\n\nCall the answer to this problem $X$. $Y$ is $1$ more than $X$.\n\n" + q,
    }
    if len(normalize_words(q)) >= 30:  # one inserted word breaks up to 8 of a short problem's 8-grams
        out["inserted word"] = " ".join(words[: len(words) // 2] + ["exactly"] + words[len(words) // 2:])
    return out


def test_every_planted_exact_and_near_duplicate_is_found_with_its_row(bench):
    idx = BenchmarkIndex([("bench30", bench)])
    missed = []
    for row, p in enumerate(bench):
        for kind, text in near_duplicates(p.question).items():
            m = idx.match(text)
            if m is None or m.row != row:
                missed.append((row, kind, m and m.row))
    assert missed == []
    assert sum(len(near_duplicates(p.question)) for p in bench) >= 170  # the planted set is not empty


def test_clean_training_rows_are_not_flagged(bench, train):
    idx = BenchmarkIndex([("bench30", bench)])
    assert [i for i, p in enumerate(train) if idx.match(p.question)] == []


def test_the_same_wording_with_another_number_is_another_problem():
    b = Problem.new("A Senate committee has 8 Republicans and 6 Democrats.  In how many ways can we form a "
                    "subcommittee with 3 Republicans and 2 Democrats?", "840")
    idx = BenchmarkIndex([("b", [b])])
    assert idx.match(b.question.replace("3 Republicans", "4 Republicans")) is None
    assert idx.match(b.question.replace("committee has", "committee  has")) is not None
    loose = BenchmarkIndex([("b", [b])], DecontamConfig(numbers=False))
    assert loose.match(b.question.replace("3 Republicans", "4 Republicans")) is not None


def test_a_composition_is_caught_by_its_part_even_with_a_constant_made_a_variable(bench, train):
    """A benchmark problem as q2 of a real composition: one of its numbers became ``Y``."""
    q2 = bench[0]  # MATH500 row 0: "Convert the point $(0,3)$ in rectangular coordinates ..."
    res = crl.compose([train[1], train[2], q2], depth=2, seed=0)
    as_q2 = [r for r in res.accepted if r.parents[-1] == q2.id]
    as_q1 = [r for r in res.accepted if r.parents[0] == q2.id]
    assert as_q2 and as_q1
    idx = BenchmarkIndex([("bench30", bench)])
    for r in as_q2 + as_q1:
        m = idx.match_problem(r)  # its own text alone (no parents at hand, as in crl decontaminate)
        assert m is not None and m.row == 0, r.question
    # the part's own text, when the parents are at hand
    m = idx.match_problem(as_q2[0], [train[1].question, q2.question])
    assert m is not None and m.row == 0


def test_cli_decontaminate_sets_aside_with_the_matching_row_and_counts_add_up(bench, train, tmp_path, capsys):
    planted = [Problem.new(near_duplicates(p.question)["formatting"], p.answer) for p in bench[:6]]
    inp = tmp_path / "train.jsonl"
    atomic_write_jsonl(inp, [{"problem": p.question, "answer": p.answer} for p in train[:40] + planted]
                       + [{"problem": "no answer here"}])
    out = tmp_path / "clean"
    assert cli(["decontaminate", "--input", str(inp), "--benchmarks", str(FIX / "bench30.jsonl"),
                "--out", str(out)]) == 0
    assert "46 prompts" in capsys.readouterr().out
    aside = list(read_jsonl(out / "set_aside.jsonl"))
    assert [(r["match"]["row"], r["match"]["benchmark"]) for r in aside] == [(i, str(FIX / "bench30.jsonl"))
                                                                             for i in range(6)]
    assert all(r["match"]["containment"] >= 0.5 and r["reason"] == "benchmark_overlap" for r in aside)
    clean = list(read_jsonl(out / "clean.jsonl"))
    s = json.loads((out / "summary.json").read_text())
    assert (s["input"], s["clean"], s["set_aside"], s["input_rejects"]) == (46, 40, 6, 1)
    assert len(clean) + len(aside) == s["input"]
    # refusals as the other commands: output onto the input, a bad threshold
    assert cli(["decontaminate", "--input", str(inp), "--benchmarks", str(FIX / "bench30.jsonl"),
                "--out", str(tmp_path), "--decontam-threshold", "0"]) == 2
    assert "threshold" in capsys.readouterr().err


def test_normalization_keeps_numbers_and_drops_latex_spacing():
    assert normalize_words(r"Compute $64{,}328 + 1{,}000$.") == normalize_words("compute 64328 + 1000")
    assert normalize_words(r"$\left(\tfrac{1}{2}\right)$") == normalize_words(r"$(\frac{1}{2})$")
    assert re.sub(r"\s", "", " ".join(normalize_words("x = 3.5"))) == "x3.5"
