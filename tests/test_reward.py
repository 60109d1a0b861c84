"""One reward for every trainer: ``crl train``, TRL's GRPOTrainer and verl give each
completion of each record the same reward.

The table is built from the shared data: Minerva records that accept several answer forms
(``6630.65`` and ``6630``), MATH500 and AIME/AMC records, depth-2 compositions of MATH,
graded against worked solutions written as a model writes them (the dataset's own solution
text with its final ``\\boxed{}`` set to an accepted form, to the form only the second answer
accepts, or to a wrong value). Some completions are conversations (one assistant message,
multimodal text parts, a tool call and its result, a tool result after the last turn).

Each path is fed what it gets in training:
- ``crl train``: :class:`VerifierReward` with the columns of ``problem_row`` (jobs/train/data.py);
- TRL: ``make_reward_fn()`` with the columns of ``crl export --format trl``, read back from
  the parquet;
- verl: ``compute_score`` with ``data_source``, ``reward_model.ground_truth`` and
  ``extra_info`` of ``crl export --format verl``, read back from the parquet as verl's
  ``RLHFDataset`` reads it (row dicts, list columns as lists), and the decoded response text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pyarrow.parquet as pq
import pytest

from composition_rl.grading import VerifyConfig, close_shared_verifiers
from composition_rl.grading.reward import accepted_answers, completion_text, score_completions
from composition_rl.integrations import verl as verl_reward
from composition_rl.integrations.trl import make_reward_fn
from composition_rl.io.readers import load_problems
from composition_rl.jobs.export import export
from composition_rl.jobs.train.data import problem_row
from composition_rl.jobs.train.verifier_reward import VerifierReward
from composition_rl.records import Problem

TIMEOUT_S, WORKERS = 5.0, 2

# Minerva records whose last accepted form is not equal to the first (the verifier says
# "incorrect" for one against the other): only a reward that reads every form accepts it.
MINERVA_MULTI = ["cd3425e1c081275e", "1ccbe1ce2e9b3c23", "e5d570c40d69b5df", "a16eb3507d3cc9f0",
                 "b8a8b1d4183bf3e8", "502e2b25597395fc", "dc3c7b97b15fc2ba", "0a53eeda250e0f4b"]


@dataclass(frozen=True)
class Case:
    name: str
    problem: Problem
    text: str  # what the model wrote last (verl's decoded response)
    completion: Any  # what TRL hands the reward: the text, or a conversation around it
    expected: float


def _rebox(solution: str, value: str) -> str:
    """The solution with its last ``\\boxed{...}`` holding ``value`` (a model's final answer)."""
    start = solution.rfind("\\boxed{")
    if start < 0:
        return f"{solution.rstrip()}\n\nThe final answer is $\\boxed{{{value}}}$."
    i, depth = start + len("\\boxed{"), 1
    while i < len(solution) and depth:
        depth += {"{": 1, "}": -1}.get(solution[i], 0)
        i += 1
    return solution[:start] + "\\boxed{" + value + "}" + solution[i:]


def _shapes(i: int, text: str) -> Any:
    """The completion as TRL hands it over: every fourth one a string, the others conversations."""
    kind = i % 4
    if kind == 0:
        return text
    if kind == 1:
        return [{"role": "assistant", "content": text}]
    if kind == 2:  # a multimodal model's reply: text parts
        cut = len(text) // 2
        return [{"role": "assistant", "content": [{"type": "text", "text": text[:cut]},
                                                  {"type": "text", "text": text[cut:]}]}]
    # TRL's tool loop: the model calls a tool, reads the result, then answers
    return [{"role": "assistant", "content": "Let me check the arithmetic with the calculator.",
             "tool_calls": [{"type": "function", "function": {"name": "calc", "arguments": {"expr": "1+1"}}}]},
            {"role": "tool", "name": "calc", "content": "2"},
            {"role": "assistant", "content": text}]


def build_table(shared_data) -> list[Case]:
    cases: list[Case] = []

    def add(name: str, p: Problem, text: str, expected: float) -> None:
        cases.append(Case(name, p, text, _shapes(len(cases), text), expected))

    minerva = {p.id: p for p in load_problems(shared_data / "eval" / "minerva.json").problems}
    for pid in MINERVA_MULTI:
        p = minerva[pid]
        sol = str(p.metadata["solution"])
        add(f"minerva {pid}: the last accepted form", p, _rebox(sol, p.answers[-1]), 1.0)
        add(f"minerva {pid}: the first accepted form", p, _rebox(sol, p.answers[0]), 1.0)
        add(f"minerva {pid}: a wrong value", p, _rebox(sol, "42.5"), 0.0)

    math500 = load_problems(shared_data / "eval" / "math500.parquet").problems
    picked = [p for p in math500 if "\\boxed{" in str(p.metadata.get("solution", ""))][:10]
    for k, p in enumerate(picked):
        sol = str(p.metadata["solution"])
        add(f"math500 {p.id}: its own solution", p, sol, 1.0)
        other = picked[(k + 1) % len(picked)].answer
        add(f"math500 {p.id}: another problem's answer {other}", p, _rebox(sol, other), 0.0)

    for p in load_problems(shared_data / "eval" / "aime25.json").problems[:3]:
        add(f"aime25 {p.id}: zero-padded", p,
            f"Counting the cases gives {p.answer}.\n\nTherefore the answer is $\\boxed{{{int(p.answer):03d}}}$.", 1.0)
        add(f"aime25 {p.id}: off by one", p, f"So we get $\\boxed{{{int(p.answer) + 1}}}$.", 0.0)
    for p in load_problems(shared_data / "eval" / "amc.json").problems[:3]:
        add(f"amc {p.id}: as a decimal", p, f"Adding up, the total is ${p.answer}.0$, so $\\boxed{{{p.answer}.0}}$.", 1.0)
        add(f"amc {p.id}: truncated", p, "We first compute the area of the triangle, which is", 0.0)

    from composition_rl.jobs.compose import ComposeConfig, compose_problems

    pool = load_problems(shared_data / "train" / "math_train.json").problems[:30]
    composed = compose_problems(pool, ComposeConfig(depth=2, max_candidates=20, workers=1)).accepted[:4]
    assert len(composed) == 4
    for p in composed:
        add(f"compose depth 2 {p.id}: the answer", p,
            f"First, $X = {p.links[0].v1_latex}$. Substituting into the second problem, $\\boxed{{{p.answer}}}$.", 1.0)
        add(f"compose depth 2 {p.id}: stopped after q1", p, f"So $X = {p.links[0].v1_latex}$, and then", 0.0)

    # a tool result after the model's last turn is not the model's answer
    p = minerva[MINERVA_MULTI[0]]
    cases.append(Case("minerva: a tool result after the last assistant turn", p, "I am not sure; maybe 0.5.",
                      [{"role": "assistant", "content": "I am not sure; maybe 0.5."},
                       {"role": "tool", "name": "search", "content": f"\\boxed{{{p.answers[-1]}}}"}], 0.0))
    return cases


@pytest.fixture(scope="module")
def table(shared_data) -> list[Case]:
    return build_table(shared_data)


@pytest.fixture(scope="module", autouse=True)
def _release_shared_verifiers():
    yield
    close_shared_verifiers()


def crl_train_rewards(cases: list[Case]) -> list[float]:
    rows = [problem_row(c.problem, "depth1", instruction=True) for c in cases]
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    reward = VerifierReward(timeout_s=TIMEOUT_S, workers=WORKERS)
    return reward(prompts=[r["prompt"] for r in rows], completions=[c.completion for c in cases], **columns)


def trl_rewards(cases: list[Case], tmp_path) -> list[float]:
    rows = pq.read_table(export([c.problem for c in cases], "trl", tmp_path)).to_pylist()
    columns = {k: [r[k] for r in rows] for k in rows[0] if k != "prompt"}
    reward = make_reward_fn(VerifyConfig(timeout_s=TIMEOUT_S, workers=WORKERS))
    return reward(prompts=[r["prompt"] for r in rows], completions=[c.completion for c in cases], **columns)


def verl_rewards(cases: list[Case], tmp_path) -> list[float]:
    rows = pq.read_table(export([c.problem for c in cases], "verl", tmp_path)).to_pylist()
    out = []
    for c, row in zip(cases, rows, strict=True):
        got = verl_reward.compute_score(data_source=row["data_source"], solution_str=c.text,
                                        ground_truth=row["reward_model"]["ground_truth"],
                                        extra_info=dict(row["extra_info"]), timeout_s=TIMEOUT_S, workers=WORKERS)
        assert got["score"] == got["acc"]
        out.append(got["score"])
    return out


@pytest.mark.shared_data
def test_the_table_is_real_and_varied(table):
    assert len(table) >= 50
    assert sum(len(c.problem.answers) > 1 for c in table) >= 20
    assert sum(isinstance(c.completion, str) for c in table) >= 10
    assert sum(isinstance(c.completion, list) for c in table) >= 30
    assert {0.0, 1.0} == {c.expected for c in table}
    assert len({c.name for c in table}) == len(table)


@pytest.mark.shared_data
@pytest.mark.slow
def test_crl_train_trl_and_verl_give_every_case_the_same_reward(table, tmp_path):
    train = crl_train_rewards(table)
    trl = trl_rewards(table, tmp_path)
    verl = verl_rewards(table, tmp_path)
    differ = [(c.name, a, b, v) for c, a, b, v in zip(table, train, trl, verl) if not a == b == v]
    assert not differ, "crl train, TRL, verl disagree on:\n" + "\n".join(map(str, differ))
    wrong = [(c.name, c.text[-80:], got) for c, got in zip(table, train) if got != c.expected]
    assert not wrong, "rewards differ from the table's labels:\n" + "\n".join(map(str, wrong))


# ---------------------------------------------------------------- the shared function itself
def test_completion_text_reads_the_last_assistant_message():
    conv = [{"role": "assistant", "content": "a1"}, {"role": "tool", "content": "t"},
            {"role": "assistant", "content": "a2"}, {"role": "user", "content": "u"}]
    assert completion_text(conv) == "a2"
    assert completion_text({"role": "assistant", "content": None}) == ""
    assert completion_text([{"content": "no role"}]) == "no role"
    assert completion_text([{"role": "tool", "content": "\\boxed{1}"}]) == ""
    with pytest.raises(TypeError, match="int"):
        completion_text(3)


def test_accepted_answers_merges_every_column_once():
    import numpy as np

    p = Problem.new("q", ["6630.65", "6630"])
    assert accepted_answers(p) == ("6630.65", "6630")
    assert accepted_answers("6630.65", np.array(["6630.65\n", "6630\n"], dtype=object)) == ("6630.65", "6630")
    assert accepted_answers(None, [None, ""], 142.0) == ("142",)


@pytest.mark.parametrize("call", ["crl train", "trl", "score_completions"])
def test_a_length_mismatch_is_refused_not_zipped(call):
    completions = ["\\boxed{1}", "\\boxed{2}", "\\boxed{3}"]
    answers = [["1"], ["2"]]
    with pytest.raises(ValueError, match="3 completions but 2"):
        if call == "crl train":
            VerifierReward(timeout_s=TIMEOUT_S, workers=1)(prompts=None, completions=completions, answers=answers)
        elif call == "trl":
            make_reward_fn()(prompts=None, completions=completions, answers=answers)
        else:
            score_completions(completions, answers, verifier=None)


def test_crl_train_refuses_a_row_without_an_answer():
    with pytest.raises(ValueError, match=r"rows \[1\]"):
        VerifierReward(timeout_s=TIMEOUT_S, workers=1)(prompts=None, completions=["a", "b"],
                                                       answers=[["1"], []], answer=["1", None])


def test_verl_reads_the_forms_in_extra_info():
    out = verl_reward.compute_score("minerva", "so $\\boxed{6630}$", "6630.65",
                                    {"answers": ["6630.65", "6630"], "index": 3}, timeout_s=TIMEOUT_S, workers=WORKERS)
    assert out["acc"] == 1.0
    with pytest.raises(ValueError, match="no accepted answer"):
        verl_reward.compute_score("minerva", "x", None, {}, timeout_s=TIMEOUT_S, workers=WORKERS)


def test_the_verl_export_keeps_ground_truth_a_string_and_every_form_in_extra_info(tmp_path):
    p = Problem.new("q", ["6630.65", "6630"])
    (row,) = pq.read_table(export([p], "verl", tmp_path)).to_pylist()
    assert row["reward_model"]["ground_truth"] == "6630.65"  # verl's own scorers read one string
    assert row["extra_info"]["answers"] == ["6630.65", "6630"]
    assert json.loads(json.dumps(row["extra_info"]))["answers"] == list(p.answers)
    assert re.fullmatch(r"[0-9a-f]{16}", row["extra_info"]["id"])


@pytest.mark.parametrize("missing", ["", "  ", "\n", float("nan"), None, [], [""], ["  "], [None, float("nan")]],
                         ids=["empty", "spaces", "newline", "nan", "none", "no-forms", "empty-form", "blank-form",
                              "none-and-nan"])
def test_a_missing_answer_is_no_answer_in_every_spelling(missing):
    # a parquet or pandas column spells "no answer" as "", whitespace or NaN as often as None
    assert accepted_answers(missing) == ()
    assert accepted_answers(missing, "7") == ("7",)


def test_trl_gives_none_for_a_row_without_an_answer_instead_of_killing_the_step():
    reward = make_reward_fn()
    got = reward(prompts=["p", "p", "p"], completions=["\\boxed{7}", "\\boxed{7}", "\\boxed{7}"],
                 answer=["7", "", float("nan")])
    assert got == [1.0, None, None]


def test_verl_reads_the_extra_answers_when_ground_truth_is_empty():
    for gt in ("", "  ", float("nan")):
        out = verl_reward.compute_score("minerva", "so $\\boxed{7}$", gt, {"answers": ["7"]},
                                        timeout_s=TIMEOUT_S, workers=WORKERS)
        assert out["acc"] == 1.0, gt
    with pytest.raises(ValueError, match="no accepted answer"):
        verl_reward.compute_score("minerva", "x", "", {"answers": [""]}, timeout_s=TIMEOUT_S, workers=WORKERS)
