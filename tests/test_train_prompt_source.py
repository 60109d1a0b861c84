"""Where dynamic sampling's prompts come from (jobs/train/prompt_source.py): a user's dataset (the
dataloader's batch first, then seeded refills that resume) and the online pool (it sees each
round's outcomes and retires what was mastered). No model: the rounds are scripted."""

from __future__ import annotations

import pytest

from composition_rl.jobs.train.arithmetic import arithmetic_problems
from composition_rl.jobs.train.dynamic_sampling import GroupRecord
from composition_rl.jobs.train.online import OnlineConfig, OnlinePool
from composition_rl.jobs.train.prompt_source import DatasetSource, PoolSource

ROWS = [{"prompt": f"q{i}", "answer": str(i)} for i in range(5)]


def test_the_dataloader_batch_comes_first_then_every_row_once_per_epoch():
    src = DatasetSource(ROWS, seed=3)
    batch = [{"prompt": "from the dataloader", "answer": "1"}]
    src.start_step(batch)
    first = src.draw(1)
    assert first == batch and first[0] is not batch[0]  # a copy: TRL may change the rows it gets
    refills = [r["prompt"] for r in src.draw(5)] + [r["prompt"] for r in src.draw(5)]
    assert sorted(refills[:5]) == sorted(refills[5:]) == [f"q{i}" for i in range(5)]
    assert refills[:5] != refills[5:]  # a new permutation per epoch
    # the next step's batch replaces anything the last step did not use
    src.start_step([{"prompt": "a", "answer": "1"}, {"prompt": "b", "answer": "2"}])
    assert [r["prompt"] for r in src.draw(1)] == ["a"]
    src.start_step([{"prompt": "c", "answer": "3"}])
    assert [r["prompt"] for r in src.draw(1)] == ["c"]


def test_refills_resume_where_the_saved_state_left_them():
    src = DatasetSource(ROWS, seed=0)
    src.draw(7)
    state = src.state_dict()
    expected = src.draw(6)
    again = DatasetSource(ROWS, seed=0)
    again.load_state_dict(state)
    assert again.draw(6) == expected
    assert DatasetSource(ROWS, seed=1).draw(5) != DatasetSource(ROWS, seed=0).draw(5)


def test_an_empty_dataset_is_refused():
    with pytest.raises(ValueError, match="refills from the training dataset, which is empty"):
        DatasetSource([])


def _group(row, scores, rnd=0):
    rate = sum(scores) / len(scores)
    kind = "solve_all" if rate == 1 else "solve_none" if rate == 0 else "informative"
    return GroupRecord(id=row["id"], depth=row["depth"], stage=row["stage"], scores=scores, pass_rate=rate, kind=kind,
                       kept=kind == "informative", round=rnd, mean_length=3.0)


def test_the_pool_sees_each_round_and_replaces_a_mastered_prompt_with_compositions():
    probs = arithmetic_problems(6, depth=1, seed=0)
    pool = OnlinePool(probs[:2], OnlineConfig(k=1), partners=probs)
    src = PoolSource(pool, instruction=False)
    src.start_step([{"prompt": "ignored", "answer": "0"}])  # the dataloader only paces the steps
    rows = src.draw(2)
    assert sorted(r["id"] for r in rows) == sorted(p.id for p in probs[:2])
    assert {r["prompt"][0]["content"] for r in rows} == {p.question for p in probs[:2]}
    solved, stuck = rows
    src.observe(1, [_group(solved, [1.0] * 4), _group(stuck, [1.0, 0.0, 0.0, 0.0])])
    assert pool.retired_total == 1 and solved["id"] not in pool.live
    assert len(pool.injected) == 2 and {pool.problems[i].depth for i in pool.injected} == {2}
    drawn = {r["id"] for r in src.draw(3)}
    assert drawn == {stuck["id"], *pool.injected}
    m = src.metrics()
    assert m["online/retired"] == 1.0 and m["online/injected"] == 2.0 and m["online/live_depth_2"] == 2.0
    # with the instruction, the rows read like `crl export --format trl`'s
    from composition_rl.jobs.export import to_trl

    assert PoolSource(pool).draw(1)[0]["prompt"] in [r["prompt"] for r in to_trl(list(pool.problems.values()))]
