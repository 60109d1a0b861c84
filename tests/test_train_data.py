"""Stage data: Problem JSONL round-trips, on-the-fly composition, seeded resumable streams."""

from __future__ import annotations

from composition_rl.io.files import atomic_write_jsonl
from composition_rl.records import Problem
from composition_rl.train.config import StageConfig
from composition_rl.train.data import PromptStream, load_stage_problems, stage_depth


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
