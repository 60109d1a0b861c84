"""Stage data: Problem JSONL round-trips, on-the-fly composition, seeded resumable streams."""

from __future__ import annotations

import json
import logging

from cli_run import crl
from fakes.openai_server import FakeOpenAIServer

from composition_rl.io.files import atomic_write_jsonl
from composition_rl.jobs.train.config import StageConfig
from composition_rl.jobs.train.data import PromptStream, load_stage_problems, stage_depth
from composition_rl.records import Problem


def _base(tmp_path):
    probs = [Problem.new(f"What is ${a}+{b}$?", str(a + b), source="t") for a, b in
             [(3, 4), (2, 5), (6, 1), (8, 9), (12, 30), (7, 7)]]
    path = tmp_path / "base.jsonl"
    atomic_write_jsonl(path, [p.to_dict() for p in probs])
    return probs, path


def test_problem_jsonl_round_trips(tmp_path):
    probs, path = _base(tmp_path)
    assert load_stage_problems(StageConfig("d1", 5, data=str(path))) == probs


def test_a_stage_composed_on_the_fly_has_the_stage_depth(tmp_path):
    _, path = _base(tmp_path)
    st = StageConfig("d2", 5, compose={"from": str(path), "depth": 2, "max_candidates": 20})
    st.validate()
    got = load_stage_problems(st)
    assert got and all(p.depth == 2 and len(p.parents) == 2 for p in got)
    assert stage_depth(st, got) == 2


def test_a_composed_stage_takes_the_risk_policy(tmp_path):
    """compose.risks reaches the engine: a later problem whose only constant is a count
    written as a word composes under "last" and is rejected under "reject"."""
    import pytest

    probs = [Problem.new("What is $3+4$?", "7", source="t"),
             Problem.new("A box holds five pens. How many pens are in the box?", "5", source="t")]
    path = tmp_path / "words.jsonl"
    atomic_write_jsonl(path, [p.to_dict() for p in probs])
    box = probs[1].id
    last = StageConfig("d2", 5, compose={"from": str(path), "depth": 2, "pool_size": 2})
    last.validate()
    assert [p.parents[-1] for p in load_stage_problems(last)].count(box) == 1  # "five" became the variable
    strict = StageConfig("d2", 5, compose={"from": str(path), "depth": 2, "pool_size": 2, "risks": "reject"})
    strict.validate()
    assert [p.parents[-1] for p in load_stage_problems(strict)].count(box) == 0
    with pytest.raises(ValueError, match="risks='sometimes'"):
        load_stage_problems(StageConfig("d2", 5, compose={"from": str(path), "depth": 2, "risks": "sometimes"}))


def test_streams_are_seeded_cover_every_problem_per_epoch_and_resume():
    probs = [Problem.new(f"q{i}", str(i)) for i in range(5)]
    a = PromptStream(probs, "s", seed=1)
    first = [r["id"] for r in a.draw(5)]
    assert sorted(first) == sorted(p.id for p in probs)
    assert [r["id"] for r in PromptStream(probs, "s", seed=1).draw(5)] == first
    a.draw(2)
    b = PromptStream(probs, "s", seed=1)
    b.load_state_dict(a.state_dict())
    assert [r["id"] for r in b.draw(6)] == [r["id"] for r in a.draw(6)]


def _numbered(body: dict) -> list[str]:
    return [f"The answer is \\boxed{{{i}}}" for i in range(int(body.get("n") or 1))]


def test_profile_and_train_say_which_rows_they_dropped(tmp_path, caplog):
    from composition_rl.jobs.train.data import read_problems

    f = tmp_path / "bad.jsonl"
    f.write_text(json.dumps({"problem": "What is 1+1?", "answer": "2"}) + "\n{bad json\n"
                 + json.dumps({"problem": "no answer"}) + "\n")
    with caplog.at_level(logging.INFO, logger="composition_rl"):
        assert len(read_problems(f)) == 1
    said = caplog.text
    assert "2 of 3 rows rejected, 1 problems kept" in said and "line 2 is not valid JSON" in said
    with FakeOpenAIServer(_numbered) as srv:
        r = crl("profile", "--model", "m", "--base-url", srv.url, "--input", str(f), "--out", str(tmp_path / "p"),
                "-n", "1", "--no-progress")
    assert r.returncode == 0 and "2 of 3 rows rejected" in r.stderr
