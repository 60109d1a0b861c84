"""The solver probe (``composition_rl.jobs.probe``, ``crl probe``) on real compositions of MATH rows
(tests/fixtures/math300.jsonl) with a scripted solver: for each record it returns the
record's answer in a planned number of its k samples, so the pass rates, and which records
are rejected as guessable, are known in advance. Grading goes through the project's real
verifier."""

from __future__ import annotations

import json
from difflib import SequenceMatcher
from pathlib import Path

import pytest
from cli_run import crl
from fakes.openai_server import FakeOpenAIServer

from composition_rl.grading import VerifyConfig, close_shared_verifiers, shared_verifier
from composition_rl.io.files import atomic_write_jsonl, read_jsonl
from composition_rl.io.readers import ReaderConfig, load_problems
from composition_rl.jobs.compose.pipeline import ComposeConfig, compose_problems
from composition_rl.jobs.probe import ProbeConfig, probe_records, withheld_question
from composition_rl.jobs.profile import RunMismatch
from composition_rl.records import Problem
from composition_rl.rollout.base import Completion
from composition_rl.spc.text import find_glue

FIXTURE = Path(__file__).parent / "fixtures" / "math300.jsonl"
K = 4
PLAN = [0, 1, 2, 3, 4, 2]  # correct samples of K, record by record: tau 0.5 rejects 2/4 and up


@pytest.fixture(scope="module")
def problems() -> list[Problem]:
    return load_problems(str(FIXTURE), ReaderConfig()).problems


@pytest.fixture(scope="module")
def records(problems) -> list[Problem]:
    accepted = compose_problems(problems[:60], ComposeConfig(depth=2, pool_size=5, seed=0)).accepted
    seen: dict[str, Problem] = {}  # one record per later problem, so each prompt is one record's
    for rec in accepted:
        seen.setdefault(rec.parents[-1], rec)
    return list(seen.values())[: len(PLAN)]


@pytest.fixture(scope="module")
def verifier():
    yield shared_verifier(VerifyConfig(timeout_s=5.0))
    close_shared_verifiers()


def planned(records: list[Problem]) -> dict[str, tuple[str, int]]:
    """withheld question -> (the record's answer, correct samples planned)."""
    return {withheld_question(r): (r.answer, c) for r, c in zip(records, PLAN)}


def replies(plan: dict[str, tuple[str, int]], prompt: str, n: int) -> list[str]:
    q = next(q for q in plan if q.strip() in prompt)
    gold, c = plan[q]
    return [f"So the answer is $\\boxed{{{gold}}}$." if i < c else "I cannot tell: $\\boxed{-987654}$."
            for i in range(n)]


class ScriptedSolver:
    """A rollout backend that answers from the plan and counts the prompts it was asked."""

    name = "scripted"

    def __init__(self, plan):
        self.plan = plan
        self.prompts: list[str] = []

    def generate(self, prompts, n, sampling):
        self.prompts += prompts
        return [[Completion(t, tokens=8) for t in replies(self.plan, p, n)] for p in prompts]

    def close(self):
        pass


def test_the_withheld_question_is_the_later_problem_alone_with_its_variable_unknown(records, problems):
    assert len(records) == len(PLAN)
    by_id = {p.id: p for p in problems}
    for rec in records:
        link = rec.links[-1]
        text = withheld_question(rec)
        note, _, later = text.partition("\n\n")
        assert note == f"Here ${link.y}$ stands for a number whose value is not given."
        glue = find_glue(rec.question, link.x, link.y)
        assert rec.question.endswith(later) and later == rec.question[glue.end:]
        # the first problem and the relation (which states the value's offset) are gone
        assert rec.question[:glue.start] not in text and f"${link.x}$" not in text
        # the later problem as written, up to the variable, which stands where the value was
        q2 = by_id[rec.parents[-1]].question
        first = min((link.v2_offset, *link.v2_also))
        assert later[:first] == q2[:first] and link.y in later[first:first + 4]
        assert q2[first:].startswith(link.v2_literal)
    assert withheld_question(Problem.new("What is $2+2$?", "4")) is None  # not a composed record


def test_records_at_or_above_tau_are_rejected_as_guessable_with_their_pass_rate(records, verifier, tmp_path):
    solver = ScriptedSolver(planned(records))
    res = probe_records(records, solver, verifier, tmp_path, ProbeConfig(k=K, tau=0.5, chunk=4), progress=False)
    expect = {r.id for r, c in zip(records, PLAN) if c / K >= 0.5}
    assert {row["id"] for row in res.rejected} == expect
    assert [p.id for p in res.kept] == [r.id for r in records if r.id not in expect]
    assert len(res.kept) + len(res.rejected) == len(records) and not res.unprobed
    by_id = {r.id: c for r, c in zip(records, PLAN)}
    for row in res.rejected:
        assert (row["stage"], row["reason"], row["k"]) == ("probe", "guessable", K)
        assert row["candidates"] == list(next(r.parents for r in records if r.id == row["id"]))
        assert row["pass_rate"] == by_id[row["id"]] / K and row["correct"] == by_id[row["id"]]
        assert Problem.from_dict(row["problem"]).question == next(r.question for r in records if r.id == row["id"])
    assert res.summary["rejected_guessable"] == len(expect) and res.summary["pass_rate_counts"] == {
        str(c): PLAN.count(c) for c in sorted(set(PLAN))}
    # the solver saw only the later problems, never a first problem or a relation
    assert len(solver.prompts) == len(records)
    assert not any("Let $X$ be" in p or "less than $X$" in p or "more than $X$" in p for p in solver.prompts)


def test_a_rerun_reuses_the_pass_rates_and_another_solver_setting_is_refused(records, verifier, tmp_path):
    probe_records(records, ScriptedSolver(planned(records)), verifier, tmp_path, ProbeConfig(k=K), progress=False)
    again = ScriptedSolver(planned(records))
    res = probe_records(records, again, verifier, tmp_path, ProbeConfig(k=K, tau=0.75), progress=False)
    assert again.prompts == []  # nothing asked twice
    assert {row["id"] for row in res.rejected} == {r.id for r, c in zip(records, PLAN) if c >= 3}
    with pytest.raises(RunMismatch):
        probe_records(records, again, verifier, tmp_path, ProbeConfig(k=2), progress=False)


def test_config_refuses_impossible_values():
    with pytest.raises(ValueError, match="tau=0"):
        ProbeConfig(tau=0)
    with pytest.raises(ValueError, match="k=0"):
        ProbeConfig(k=0)
    with pytest.raises(ValueError, match="chunk=0"):
        ProbeConfig(chunk=0)


def test_crl_probe_through_an_endpoint(records, tmp_path):
    plan = planned(records)
    plain = Problem.new("What is $2+2$?", "4")  # not composed: kept, unprobed, counted
    inp = tmp_path / "composed.jsonl"
    atomic_write_jsonl(inp, [r.to_dict() for r in [*records, plain]])
    out = tmp_path / "probe"

    def respond(body):
        return replies(plan, body["messages"][-1]["content"], int(body.get("n") or 1))

    with FakeOpenAIServer(respond) as srv:
        r = crl("probe", "--input", str(inp), "--probe-base-url", srv.url, "--probe-model", "fake-model",
                "-k", str(K), "--out", str(out), "--no-progress", "--keep-responses")
    assert r.returncode == 0, r.stderr
    guessable = {rec.id for rec, c in zip(records, PLAN) if c / K >= 0.5}
    assert f"{len(guessable)} guessable" in r.stdout and "1 without a readable relation kept unprobed" in r.stdout
    assert {row["id"] for row in read_jsonl(out / "rejected.jsonl")} == guessable
    kept = [d["id"] for d in read_jsonl(out / "kept.jsonl")]
    assert kept == [rec.id for rec in [*records, plain] if rec.id not in guessable]
    # what the solver said is kept for reading: k replies per withheld problem
    assert all(len(row["responses"]) == K for row in read_jsonl(out / "profile.jsonl"))


@pytest.mark.slow
def test_crl_compose_with_the_probe_moves_guessable_records_to_rejected(problems, tmp_path):
    pool = problems[:60]
    inp = tmp_path / "in.jsonl"
    atomic_write_jsonl(inp, [{"problem": p.question, "answer": p.answer} for p in pool])
    guessable = {p.id for i, p in enumerate(pool) if i % 2 == 0}  # later problems the solver "knows"

    def respond(body):
        prompt = body["messages"][-1]["content"]
        best = max(pool, key=lambda p: SequenceMatcher(None, p.question, prompt, autojunk=False).ratio())
        answer = best.answer if best.id in guessable else "-987654"
        return [f"So $\\boxed{{{answer}}}$."] * int(body.get("n") or 1)

    out = tmp_path / "d2"
    with FakeOpenAIServer(respond) as srv:
        r = crl("compose", "--input", str(inp), "--depth", "2", "--pool-size", "5", "--max-candidates", "40",
                "--seed", "0", "--out", str(out), "--export", "trl", "--no-progress",
                "--probe-base-url", srv.url, "--probe-model", "fake-model", "--probe-k", "2")
    assert r.returncode == 0, r.stderr
    composed = [Problem.from_dict(d) for d in read_jsonl(out / "composed.jsonl")]
    probed = [row for row in read_jsonl(out / "rejected.jsonl") if row["reason"] == "guessable"]
    assert composed and probed
    assert all(p.parents[-1] not in guessable for p in composed)
    assert all(row["candidates"][-1] in guessable and row["pass_rate"] == 1.0 for row in probed)
    stats = json.loads((out / "stats.json").read_text())
    assert stats["accepted"] == len(composed) and stats["rejected_by_reason"]["guessable"] == len(probed)
    assert stats["accepted"] + stats["rejected"] == stats["candidates"]
    assert stats["funnel"][-1] == {"stage": "probe", "kept": len(composed)}
    import pyarrow.parquet as pq

    assert pq.read_table(out / "trl.parquet").num_rows == len(composed)


def test_crl_compose_refuses_a_probe_url_without_a_solver_name(tmp_path):
    r = crl("compose", "--input", str(FIXTURE), "--out", str(tmp_path / "o"), "--probe-base-url", "http://x")
    assert r.returncode == 2 and "--probe-base-url needs --probe-model" in r.stderr


def test_crl_probe_says_when_the_solver_never_answers_in_the_form_and_takes_fallback(records, tmp_path, capsys):
    """A solver that writes "The answer is 7." without a box gives no answer to grade: the
    probe must say so, not report "0 guessable" as if every record needed q1; --fallback
    prose reads those replies."""
    plan = planned(records)
    inp = tmp_path / "composed.jsonl"
    atomic_write_jsonl(inp, [r.to_dict() for r in records])

    def respond(body):
        q = next(q for q in plan if q.strip() in body["messages"][-1]["content"])
        return [f"The answer is {plan[q][0]}."] * int(body.get("n") or 1)

    from composition_rl.cli import main

    replies_n = K * len(records)
    with FakeOpenAIServer(respond) as srv:
        base = ["probe", "--input", str(inp), "--probe-base-url", srv.url, "--probe-model", "fake-model",
                "-k", str(K), "--no-progress"]
        assert main([*base, "--out", str(tmp_path / "boxed")]) == 0
        boxed = capsys.readouterr()
        assert main([*base, "--out", str(tmp_path / "prose"), "--fallback", "prose"]) == 0
        prose = capsys.readouterr()
    assert "0 guessable" in boxed.out
    assert f"no answer in {replies_n} of {replies_n} replies" in boxed.err and "--fallback" in boxed.err
    summary = json.loads((tmp_path / "boxed" / "probe_summary.json").read_text())
    assert summary["no_answer"] == replies_n and summary["replies"] == replies_n
    assert f"{len(records)} guessable" in prose.out and "no answer in" not in prose.out + prose.err
