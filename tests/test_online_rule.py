"""The online rule (composition_rl.jobs.train.online) on scripted pass-rate sequences, its resumable state,
and the compositions it injects for retired prompts (checked like any other composition)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from composition_rl.jobs.train.arithmetic import arithmetic_problems
from composition_rl.jobs.train.online import (
    OnlineConfig,
    OnlineTracker,
    compose_from_retired,
    weighted_draw,
)
from composition_rl.spc.checks import run_checks

# (name, config overrides, visits as (correct, n), expected action after the last visit, streak)
SEQUENCES = [
    ("two_solve_all_of_k3", {}, [(8, 8), (8, 8)], "keep", 2),
    ("three_solve_all_retire", {}, [(8, 8), (8, 8), (8, 8)], "retire", 3),
    ("streak_broken_by_7_of_8", {}, [(8, 8), (8, 8), (7, 8), (8, 8), (8, 8)], "keep", 2),
    ("streak_rebuilt_after_break", {}, [(8, 8), (8, 8), (7, 8), (8, 8), (8, 8), (8, 8)], "retire", 3),
    # 3/3 at n=1: Wilson lower 0.438 < 0.5, the streak alone is not evidence; 4/4 gives 0.510
    ("tiny_groups_need_more_visits", {}, [(1, 1)] * 3, "keep", 3),
    ("tiny_groups_retire_at_4_of_4", {}, [(1, 1)] * 4, "retire", 4),
    ("k1_single_visit", {"k": 1}, [(8, 8)], "retire", 1),
    # one 0/8 visit: Wilson upper 0.324, not yet stuck; two: 0/16 -> 0.194 < 0.25
    ("one_solve_none_kept", {}, [(0, 8)], "keep", 0),
    ("two_solve_none_down_weighted", {}, [(0, 8), (0, 8)], "down_weight", 0),
    ("earlier_success_keeps_upper_high", {}, [(4, 8), (0, 8), (0, 8)], "keep", 0),
    ("down_weighted_prompt_scores_again", {}, [(0, 8), (0, 8), (3, 8)], "keep", 0),
    # the window forgets: with window=3 the 4/8 is gone after 3 more visits
    ("window_forgets_old_success", {"window": 3}, [(4, 8), (0, 8), (0, 8), (0, 8)], "down_weight", 0),
    ("goldilocks_stays", {}, [(3, 8), (5, 8), (4, 8), (6, 8)], "keep", 0),
]


@pytest.mark.parametrize("name,overrides,visits,action,streak", SEQUENCES, ids=[s[0] for s in SEQUENCES])
def test_rule_on_scripted_sequences(name, overrides, visits, action, streak):
    t = OnlineTracker(OnlineConfig(**overrides))
    for step, (c, n) in enumerate(visits, 1):
        v = t.observe("p", c, n, step=step)
    assert (v.action, v.streak) == (action, streak), v.reason
    expected_weight = {"retire": 0.0, "down_weight": t.config.low_weight, "keep": 1.0}[action]
    assert t.weight("p") == expected_weight
    assert v.visits == len(visits)
    assert v.interval[0] <= v.pass_rate <= v.interval[1]


def test_a_retired_prompt_is_retired_once_and_late_groups_change_nothing():
    t = OnlineTracker(OnlineConfig(k=2))
    actions = [t.observe("p", 8, 8, step=s).action for s in (1, 2, 3)]
    assert actions == ["keep", "retire", "retired"]
    assert t.retired == {"p": 2}
    assert t.observe("p", 0, 8, step=4).action == "retired" and t.weight("p") == 0.0


def test_prompts_are_tracked_independently():
    t = OnlineTracker(OnlineConfig(k=2))
    for s in (1, 2):
        t.observe("easy", 8, 8, step=s)
        t.observe("hard", 0, 8, step=s)
        t.observe("mid", 4, 8, step=s)
    assert [t.weight(i) for i in ("easy", "hard", "mid", "never_seen")] == [0.0, 0.1, 1.0, 1.0]


def test_bad_group_and_bad_settings_raise_with_the_values():
    t = OnlineTracker()
    with pytest.raises(ValueError, match=r"prompt 'q7'.*9/8"):
        t.observe("q7", 9, 8)
    with pytest.raises(ValueError, match="window=2 must be >= k=3"):
        OnlineConfig(window=2)
    with pytest.raises(ValueError, match="low_weight=0"):
        OnlineConfig(low_weight=0)
    with pytest.raises(ValueError, match="unknown online setting.*kk; known: k, window"):
        OnlineConfig.from_dict({"kk": 3})


def test_state_round_trips_through_json_and_continues_identically():
    cfg = OnlineConfig(k=2, window=4)
    script = [("a", 8, 8), ("b", 0, 8), ("c", 4, 8), ("a", 8, 8), ("b", 0, 8), ("c", 8, 8), ("b", 2, 8),
              ("c", 8, 8), ("d", 1, 1), ("c", 8, 8)]
    first = OnlineTracker(cfg)
    for step, (i, c, n) in enumerate(script[:5], 1):
        first.observe(i, c, n, step)
    resumed = OnlineTracker(cfg)
    resumed.load_state_dict(json.loads(json.dumps(first.state_dict())))
    assert resumed.state_dict() == first.state_dict()
    for step, (i, c, n) in enumerate(script[5:], 6):
        assert resumed.observe(i, c, n, step) == first.observe(i, c, n, step)
    assert resumed.state_dict() == first.state_dict() and first.retired == {"a": 4, "c": 8}
    with pytest.raises(ValueError, match="other settings.*'k': \\(2, 3\\)"):
        OnlineTracker(OnlineConfig()).load_state_dict(first.state_dict())


def test_weighted_draw_is_seeded_distinct_and_respects_weights():
    ids, w = ["kept", "low", "retired"], [1.0, 0.1, 0.0]
    a = [weighted_draw(ids, w, 1, seed=3, salt=s)[0] for s in range(2000)]
    assert a == [weighted_draw(ids, w, 1, seed=3, salt=s)[0] for s in range(2000)]
    n = Counter(a)
    # one draw of 1: P(low) = 0.1 / 1.1; the retired id is never drawn
    assert n["retired"] == 0 and 0.05 < n["low"] / n["kept"] < 0.15
    five = weighted_draw(["a", "b", "c", "d", "e"], [1.0] * 5, 5, seed=3, salt=0)
    assert sorted(five) == ["a", "b", "c", "d", "e"] and five != weighted_draw(list("abcde"), [1.0] * 5, 5, 3, salt=1)
    # more than the drawable ids: every round of keys is distinct, the retired one never comes
    many = weighted_draw(ids, w, 7, seed=3, salt=0)
    assert len(many) == 7 and all(set(many[i:i + 2]) == {"kept", "low"} for i in (0, 2, 4))
    with pytest.raises(ValueError, match="nothing to draw"):
        weighted_draw(["x"], [0.0], 1, seed=0, salt=0)


@pytest.fixture(scope="module")
def pool():
    return arithmetic_problems(40, depth=1, seed=0)


def test_compositions_of_a_retired_prompt_have_it_as_q1_and_pass_the_checks(pool):
    cfg = OnlineConfig(partners=3, max_depth=3)
    by_id = {p.id: p for p in pool}
    q1 = pool[5]
    d2 = compose_from_retired(q1, pool, cfg)
    assert len(d2) == 3 and len({p.id for p in d2}) == 3
    for c in d2:
        assert c.parents[0] == q1.id and c.depth == 2 and c.question.startswith(q1.question)
        assert c.answers == by_id[c.parents[1]].answers
        assert run_checks(c, [by_id[i] for i in c.parents]) is None
    # a retired depth-2 composition grows its lineage: a flat depth-3 chain that still checks out
    d3 = compose_from_retired(d2[0], pool, cfg)
    assert d3
    for c in d3:
        assert c.depth == 3 and c.parents[:2] == d2[0].parents and len(c.links) == 2
        assert c.question.startswith(d2[0].question)
        assert run_checks(c, [by_id[i] for i in c.parents]) is None
    assert compose_from_retired(d3[0], pool, cfg) == []  # max_depth reached
    # deterministic, and exclude skips what the pool already holds
    assert compose_from_retired(q1, pool, cfg) == d2
    again = compose_from_retired(q1, pool, cfg, exclude=[d2[0].id])
    assert d2[0].id not in {p.id for p in again} and again[:2] == d2[1:]


def test_an_ancestor_missing_from_the_pool_is_an_error(pool):
    d2 = compose_from_retired(pool[0], pool, OnlineConfig())[0]
    with pytest.raises(ValueError, match=f"prompt {d2.id}: ancestor"):
        compose_from_retired(d2, pool[1:], OnlineConfig())


def _simulate(pool, steps, start=1, per_step=6):
    """Seeded policy: depth-1 prompts are mostly solved, deeper ones less; one outcome per
    (prompt, step, draw), so two pools fed the same draws see the same outcomes."""
    import random

    drawn = []
    for step in range(start, start + steps):
        for j in range(per_step):
            [p] = pool.draw()
            skill = {1: 0.97, 2: 0.9, 3: 0.02}[p.depth]
            rng = random.Random(f"{p.id}:{step}:{j}")
            pool.observe(step, [(p.id, sum(rng.random() < skill for _ in range(8)), 8)])
            drawn.append((step, p.id))
    return drawn


def test_pool_retires_injects_logs_and_never_draws_a_retired_prompt(pool, tmp_path):
    from composition_rl.io.files import read_jsonl
    from composition_rl.jobs.train.online import OnlinePool

    log = tmp_path / "online.jsonl"
    op = OnlinePool(pool, OnlineConfig(k=2, max_depth=3), log_path=str(log))
    q = pool[3]
    assert op.observe(1, [(q.id, 8, 8)]) == [] and q.id in op.live
    (ret,) = op.observe(2, [(q.id, 8, 8)])
    assert q.id not in op.live and op.tracker.weight(q.id) == 0.0
    (row,) = read_jsonl(log)
    assert row == ret and row["step"] == 2 and row["retired"] == q.id and row["retired_depth"] == 1
    assert row["depth"] == 2 and len(row["new"]) == 2 and row["visits"] == 2 and row["pass_rate"] == 1.0
    assert all(op.problems[i].parents[0] == q.id and op.problems[i].depth == 2 and i in op.live for i in row["new"])
    assert q.id not in {p.id for _ in range(300) for p in op.draw()}
    op.metrics()  # a new step
    drawn = _simulate(op, 30)
    m = op.metrics()
    rows = list(read_jsonl(log))
    assert m["online/retired_total"] == len(rows) > 5
    assert m["online/injected_total"] == sum(len(r["new"]) for r in rows) == len(op.injected)
    assert m["online/retired"] == len(rows) - 1  # this step's: all but the first
    assert m["online/live_depth_3"] >= 1 and m["online/live"] == len(op.live)
    assert m["online/step_groups"] == 30 * 6 and 0 < m["online/step_informative_share"] < 1
    assert sum(op.groups.values()) == 2 + 30 * 6  # the run's groups: the two visits of q, then the simulation
    assert m["online/informative_share"] == op.groups["informative"] / (2 + 30 * 6)
    assert {r["retired_depth"] for r in rows} >= {1, 2}
    assert all(r["depth"] == r["retired_depth"] + 1 <= 3 for r in rows if r["new"])
    retired_at = {r["retired"]: r["step"] for r in rows}
    assert all(step <= retired_at.get(i, step) for step, i in drawn)  # never drawn after its retirement
    with pytest.raises(ValueError, match="step 7: group for prompt 'nope', which is not in the online pool"):
        op.observe(7, [("nope", 1, 8)])


def test_pool_resume_restores_draws_state_and_log_exactly(pool, tmp_path):
    import json

    from composition_rl.jobs.train.online import OnlinePool

    cfg = OnlineConfig(k=2, max_depth=3, seed=5)
    a = OnlinePool(pool, cfg, log_path=str(tmp_path / "a" / "online.jsonl"))
    _simulate(a, 12)
    saved = json.loads(json.dumps(a.state_dict()))
    tail_a = _simulate(a, 12, start=13)

    b_log = tmp_path / "b" / "online.jsonl"
    b = OnlinePool(pool, cfg, log_path=str(b_log))
    _simulate(b, 15)  # a crashed run got further than its checkpoint; its later log rows must go
    b.load_state_dict(saved)
    tail_b = _simulate(b, 12, start=13)
    assert tail_b == tail_a
    assert b.state_dict() == a.state_dict()
    assert b_log.read_bytes() == (tmp_path / "a" / "online.jsonl").read_bytes()
    assert a.log_rows > 0
    with pytest.raises(ValueError, match="another starting pool"):
        OnlinePool(pool[:-1], cfg).load_state_dict(saved)
    with pytest.raises(ValueError, match="lacks start, log_rows"):
        OnlinePool(pool, cfg).load_state_dict({k: v for k, v in saved.items() if k not in ("start", "log_rows")})


def test_a_lineage_at_max_depth_retires_without_successors(pool, tmp_path):
    from composition_rl.jobs.train.online import OnlinePool

    op = OnlinePool(pool, OnlineConfig(k=1, max_depth=2), log_path=str(tmp_path / "online.jsonl"))
    op.observe(1, [(pool[0].id, 8, 8)])
    child = op.injected[0]
    op.observe(2, [(child, 8, 8)])
    rows = [json.loads(x) for x in (tmp_path / "online.jsonl").read_text().splitlines()]
    assert rows[1]["retired"] == child and rows[1]["new"] == [] and rows[1]["depth"] is None
    assert "no successors (depth 2, max_depth 2)" in rows[1]["reason"]


def test_the_module_examples_run():
    import doctest

    import composition_rl.jobs.train.online as online

    assert doctest.testmod(online).failed == 0
