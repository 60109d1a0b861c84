"""A stage with ``compose.first: mastered`` is composed when the curriculum reaches it, with q1
only from the previous stage's prompts whose latest group was solve_all; resume rebuilds the
same stage and restores its cursor."""

from __future__ import annotations

import json

import pytest

from composition_rl.io.files import atomic_write_jsonl, read_jsonl
from composition_rl.jobs.train.config import TrainConfig
from composition_rl.jobs.train.grpo import _Run
from composition_rl.jobs.train.rg_task import RGTask


@pytest.fixture()
def setup(tmp_path):
    task = RGTask(seed=0, test_share=0.25, pool_size=12)
    pool, train = task.pool(), task.base("train")
    atomic_write_jsonl(tmp_path / "pool.jsonl", (p.to_dict() for p in pool))
    atomic_write_jsonl(tmp_path / "train.jsonl", (p.to_dict() for p in train))
    out = tmp_path / "run"
    cfg = TrainConfig.from_dict({
        "preset": "cpu-tiny", "model": "unused", "output_dir": str(out), "progress": False,
        "stages": [
            {"name": "depth1", "data": str(tmp_path / "pool.jsonl"), "max_steps": 5},
            {"name": "depth2", "max_steps": 5,
             "compose": {"from": str(tmp_path / "train.jsonl"), "depth": 2, "first": "mastered",
                         "min_mastered": 3}},
        ],
    })
    out.mkdir()
    return cfg, pool, out


def _rates(out, rows):
    (out / "pass_rates.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_q1_comes_only_from_prompts_last_seen_solve_all_and_resume_restores_the_stage(setup):
    cfg, pool, out = setup
    run = _Run(cfg)
    assert run.streams[1] is None and run.curriculum.stages[1].depth == 2
    mastered = [p.id for p in pool[:4]]
    rows = [{"step": 1, "stage": "depth1", "id": i, "kind": "solve_all"} for i in mastered]
    rows += [{"step": 1, "stage": "depth1", "id": pool[5].id, "kind": "solve_all"},
             {"step": 2, "stage": "depth1", "id": pool[5].id, "kind": "informative"},  # no longer mastered
             {"step": 2, "stage": "depth1", "id": pool[6].id, "kind": "solve_none"}]
    _rates(out, rows)
    run.curriculum.index = 1
    first_draw = run.draw(10)
    built = list(read_jsonl(out / "stages" / "depth2.jsonl"))
    assert built and {r["parents"][0] for r in built} <= set(mastered)
    assert {r["parents"][0] for r in built} == set(mastered)  # every mastered prompt is used as q1
    assert all(r["depth"] == 2 for r in first_draw)
    state = run.state_dict(step=3)

    again = _Run(cfg)  # a resumed run: the stage is rebuilt from the same log, at the same cursor
    again.load_state_dict(state)
    assert again.streams[1] is None and "depth2" in again.pending_streams
    assert again.draw(5) == run.draw(5)


def test_too_few_mastered_prompts_fall_back_to_the_whole_previous_stage(setup, capsys):
    cfg, pool, out = setup
    _rates(out, [{"step": 1, "stage": "depth1", "id": pool[0].id, "kind": "solve_all"}])
    run = _Run(cfg)
    run.say = print
    run.curriculum.index = 1
    run.draw(1)
    q1s = {r["parents"][0] for r in read_jsonl(out / "stages" / "depth2.jsonl")}
    assert len(q1s) > 1 and q1s <= {p.id for p in pool}
    assert "too few" in capsys.readouterr().out


def test_a_first_stage_cannot_compose_from_mastered(tmp_path):
    cfg = TrainConfig.from_dict({
        "preset": "cpu-tiny", "model": "unused", "output_dir": str(tmp_path),
        "stages": [{"name": "d2", "max_steps": 5, "compose": {"from": "x.jsonl", "depth": 2, "first": "mastered"}}],
    })
    with pytest.raises(ValueError, match="needs a stage before it"):
        _Run(cfg)
    with pytest.raises(ValueError, match="compose.first must be 'mastered'"):
        TrainConfig.from_dict({"model": "m", "output_dir": "o", "stages": [
            {"name": "d1", "max_steps": 1, "compose": {"from": "x", "depth": 2, "first": "best"}}]})
