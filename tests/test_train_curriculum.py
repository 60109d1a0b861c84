"""The depth curriculum advances when rolling solve_all crosses the threshold, and not before."""

from __future__ import annotations

import pytest

from composition_rl.jobs.train.curriculum import Curriculum, StageSpec


def _stages(budget=20):
    return [StageSpec("depth1", 1, budget), StageSpec("depth2", 2, budget), StageSpec("depth3", 3, budget)]


def test_advances_exactly_when_rolling_solve_all_reaches_threshold():
    c = Curriculum(_stages(), threshold=0.6, window=3)
    # Rolling means over the last 3: (0.2,0.5,0.7)=0.467, (0.5,0.7,0.5)=0.567, (0.7,0.5,0.7)=0.633.
    seq = [0.2, 0.5, 0.7, 0.5, 0.7]
    fired = [c.observe(i + 1, x) for i, x in enumerate(seq)]
    assert fired[:4] == [None, None, None, None]
    assert fired[4] is not None and fired[4].kind == "threshold"
    assert fired[4].from_stage == "depth1" and fired[4].to_stage == "depth2" and fired[4].step == 5
    assert "0.63 >= 0.60" in fired[4].reason
    assert c.stage.name == "depth2" and c.history == []


def test_no_advance_before_the_window_is_full_even_if_above_threshold():
    c = Curriculum(_stages(), threshold=0.5, window=4)
    assert [c.observe(i, 1.0) for i in (1, 2, 3)] == [None, None, None]
    t = c.observe(4, 1.0)
    assert t is not None and t.kind == "threshold"


def test_a_single_high_step_does_not_advance_when_the_window_mean_is_below():
    c = Curriculum(_stages(), threshold=0.75, window=3)
    for i, x in enumerate([0.0, 0.0, 1.0, 0.0, 0.9]):
        assert c.observe(i + 1, x) is None, f"advanced at step {i + 1}"
    assert c.stage.name == "depth1"


def test_budget_exhaustion_advances_with_its_reason_and_the_last_stage_ends_training():
    c = Curriculum(_stages(budget=2), threshold=0.9, window=5)
    assert c.observe(1, 0.1) is None
    t = c.observe(2, 0.1)
    assert t.kind == "budget" and t.to_stage == "depth2" and "budget of 2" in t.reason
    c.observe(3, 0.0)
    c.observe(4, 0.0)
    c.observe(5, 0.0)
    end = c.observe(6, 0.0)
    assert end.to_stage is None and c.finished
    assert [x.to_stage for x in c.transitions] == ["depth2", "depth3", None]
    with pytest.raises(RuntimeError):
        c.observe(7, 0.0)


def test_last_stage_does_not_advance_on_threshold():
    c = Curriculum([StageSpec("only", 1, 5)], threshold=0.5, window=1)
    assert c.observe(1, 1.0) is None and not c.finished


def test_manual_schedule_ignores_solve_all():
    c = Curriculum(_stages(budget=3), mode="manual", threshold=0.1, window=1)
    assert c.observe(1, 1.0) is None and c.observe(2, 1.0) is None
    t = c.observe(3, 1.0)
    assert t.kind == "manual" and t.to_stage == "depth2"


def test_state_round_trip_continues_the_same_window():
    a = Curriculum(_stages(), threshold=0.6, window=3)
    for i, x in enumerate([0.9, 0.9, 0.1, 0.5, 0.6]):
        a.observe(i + 1, x)
    b = Curriculum(_stages(), threshold=0.6, window=3)
    b.load_state_dict(a.state_dict())
    assert b.observe(6, 0.8) == a.observe(6, 0.8)


@pytest.mark.parametrize(
    "kw, msg",
    [({"threshold": 0.0}, "threshold"), ({"window": 0}, "window"), ({"mode": "sometimes"}, "mode")],
)
def test_bad_settings_are_rejected(kw, msg):
    with pytest.raises(ValueError, match=msg):
        Curriculum(_stages(), **kw)


def test_total_steps_caps_the_run_in_whatever_stage_it_is():
    # budgets of 20 each would allow 60 steps; the cap ends the run at 7, in stage depth2
    c = Curriculum(_stages(), threshold=0.5, window=2, total_steps=7)
    assert c.max_total_steps == 7
    fired = [c.observe(i + 1, x) for i, x in enumerate([0.6, 0.6, 0.1, 0.1, 0.1, 0.1, 0.1])]
    assert fired[1].kind == "threshold" and fired[1].to_stage == "depth2"
    assert fired[2:6] == [None] * 4
    assert fired[6].kind == "budget" and fired[6].to_stage is None and fired[6].from_stage == "depth2"
    assert "total step budget of 7" in fired[6].reason and c.finished


def test_total_steps_survives_a_resume_and_old_states_derive_it():
    c = Curriculum(_stages(), threshold=0.5, window=2, total_steps=5)
    for i, x in enumerate([0.6, 0.6, 0.1]):
        c.observe(i + 1, x)
    state = c.state_dict()
    again = Curriculum(_stages(), threshold=0.5, window=2, total_steps=5)
    again.load_state_dict(state)
    assert again.steps_done == 3
    old = {k: v for k, v in state.items() if k != "steps_done"}  # written before the field existed
    older = Curriculum(_stages(), threshold=0.5, window=2, total_steps=5)
    older.load_state_dict(old)
    assert older.steps_done == 3
    assert older.observe(4, 0.1) is None and older.observe(5, 0.1).reason.startswith("total step budget")


def test_min_steps_holds_a_saturated_stage_until_it_has_run_that_long():
    c = Curriculum([StageSpec("depth1", 1, 20, min_steps=6), StageSpec("depth2", 2, 20)], threshold=0.5, window=3)
    # the window is full and above threshold from step 3, but the stage must run 6 steps
    assert [c.observe(i, 0.9) for i in range(1, 6)] == [None] * 5
    t = c.observe(6, 0.9)
    assert t is not None and t.kind == "threshold" and t.step == 6 and c.stage.name == "depth2"


def test_min_steps_must_fit_the_budget():
    with pytest.raises(ValueError, match="min_steps"):
        StageSpec("depth1", 1, 5, min_steps=6)


def test_min_steps_reaches_the_curriculum_from_a_train_config(tmp_path):
    from composition_rl.jobs.train.config import TrainConfig

    with pytest.raises(ValueError, match="stage 'd1': min_steps"):
        TrainConfig.from_dict({"preset": "cpu-tiny", "model": "m", "output_dir": str(tmp_path),
                               "stages": [{"name": "d1", "data": "d1.jsonl", "max_steps": 5, "min_steps": 9}]})
    cfg = TrainConfig.from_dict({"preset": "cpu-tiny", "model": "m", "output_dir": str(tmp_path),
                                 "stages": [{"name": "d1", "data": "d1.jsonl", "max_steps": 5, "min_steps": 4}]})
    assert cfg.stages[0].min_steps == 4
