"""OnlinePool.backfill (composition_rl.jobs.train.online): which prompts a starving step's refills become,
how many, in what order, served once and kept through a resume. verl's side (the replay buffer
that asks for them) is tested in tests/verl/test_verl_backfill.py."""

from __future__ import annotations

import json

import pytest

from composition_rl.jobs.train.arithmetic import arithmetic_problems
from composition_rl.jobs.train.online import OnlineConfig, OnlinePool
from composition_rl.spc.checks import run_checks


@pytest.fixture(scope="module")
def problems():
    return arithmetic_problems(16, depth=1, seed=0)


def _pool(problems, tmp_path, **cfg):
    return OnlinePool(problems, OnlineConfig(**{"k": 8, "window": 8, "seed": 3, **cfg}),
                      log_path=str(tmp_path / "online.jsonl"))


def test_backfill_composes_only_the_sources_serves_them_first_once_and_logs(problems, tmp_path):
    pool = _pool(problems, tmp_path)
    sources = [p.id for p in problems[:4]]
    new = pool.backfill(5, reversed(sources), 6, note="step 5 starved")
    assert len(new) == 6 and len({p.id for p in new}) == 6
    base = {p.id: p for p in problems}
    for p in new:
        assert p.depth == 2 and set(p.parents) <= set(sources) and p.parents[0] in sources
        assert run_checks(p, [base[i] for i in p.parents]) is None
    # the next draws are exactly the backfill, in order; after it, weighted draws skip them
    assert [p.id for p in pool.draw(4)] == [p.id for p in new[:4]]
    assert [p.id for p in pool.draw(1) + pool.draw(1)] == [p.id for p in new[4:]]
    later = [p.id for _ in range(40) for p in pool.draw(1)]
    assert not set(later) & {p.id for p in new}
    pool.release_backfill()
    assert {p.id for p in new} <= set(pool.live) and not pool.queue
    assert {p.id for _ in range(200) for p in pool.draw(1)} & {p.id for p in new}  # ordinary prompts now
    [row] = [json.loads(x) for x in (tmp_path / "online.jsonl").read_text().splitlines()]
    assert row["event"] == "backfill" and row["step"] == 5 and row["sources"] == sorted(sources)
    assert row["new"] == [p.id for p in new] and row["depths"] == [2] * 6 and row["requested"] == 6
    assert row["reason"].startswith("backfill: step 5 starved; 6 of 6 composed from 4 solve_all")
    m = pool.metrics()
    assert (m["online/backfilled"], m["online/backfilled_total"], m["online/retired"]) == (6.0, 6.0, 0.0)
    assert m["online/injected"] == 6.0 and pool.metrics()["online/backfilled"] == 0.0


def test_backfill_is_seeded_and_a_second_request_gives_new_compositions(problems, tmp_path):
    a, b = _pool(problems, tmp_path / "a"), _pool(problems, tmp_path / "b")
    src = [p.id for p in problems[:5]]
    first = [p.id for p in a.backfill(1, src, 3)]
    assert first == [p.id for p in b.backfill(1, list(reversed(src)), 3)]  # the sources' order is irrelevant
    second = [p.id for p in a.backfill(1, src, 3)]
    assert len(second) == 3 and not set(first) & set(second)
    other = _pool(problems, tmp_path / "c", seed=4)
    assert [p.id for p in other.backfill(1, src, 3)] != first


def test_sources_that_allow_no_composition_give_nothing_and_log_nothing(problems, tmp_path):
    pool = _pool(problems, tmp_path)
    assert pool.backfill(1, [problems[0].id], 4) == []  # one depth-1 part: no partner
    at_max = _pool(problems, tmp_path / "m", max_depth=1)
    assert at_max.backfill(1, [p.id for p in problems[:4]], 4) == []
    assert not (tmp_path / "online.jsonl").exists() and not (tmp_path / "m" / "online.jsonl").exists()
    with pytest.raises(ValueError, match="backfill source.*nope"):
        pool.backfill(1, ["nope"], 2)


def test_a_composed_source_lends_its_depth1_parents_as_partners(problems, tmp_path):
    pool = _pool(problems, tmp_path, max_depth=3)
    [d2] = pool.backfill(1, [p.id for p in problems[:2]], 1)
    pool.release_backfill()
    new = pool.backfill(2, [d2.id], 4)  # q1 = d2; its only depth-1 parts are its own parents
    assert new == []  # both parents are in d2's chain already, so no partner is left
    new = pool.backfill(2, [d2.id, problems[2].id], 4)
    assert new and all(set(p.parents) <= {*d2.parents, problems[2].id} for p in new)
    assert any(p.depth == 3 and p.parents[:2] == d2.parents for p in new)


def test_backfill_survives_a_resume_with_the_log_cut_back(problems, tmp_path):
    a = _pool(problems, tmp_path / "a")
    a.backfill(1, [p.id for p in problems[:4]], 3)
    state = json.loads(json.dumps(a.state_dict()))
    rows = (tmp_path / "a" / "online.jsonl").read_text()
    after = [p.id for p in a.draw(2)]
    a.backfill(2, [p.id for p in problems[4:8]], 2)  # after the checkpoint: to be redone

    b = _pool(problems, tmp_path / "a")
    b.load_state_dict(state)
    assert (tmp_path / "a" / "online.jsonl").read_text() == rows
    assert b.backfilled == a.backfilled[:3] and set(b.backfilled) <= set(b.live)
    assert [p.id for p in b.draw(2)] == after  # the queue came back with the state
    older = {k: v for k, v in state.items() if k != "backfill"}  # a state written before backfill existed
    c = _pool(problems, tmp_path / "c")
    c.load_state_dict(older)
    assert c.backfilled == [] and c.queue == []
