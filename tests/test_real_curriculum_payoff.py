"""benchmarks/real_curriculum: the held-out sets are what the design says, the deciding interval
is computed over the same problems in both arms, and the curriculum summary finds the switch.

The sets are read from the committed files and checked against reasoning-gym itself (the
training prompts the real-cpu preset builds), so a set that leaked a training expression fails.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HERE = REPO / "benchmarks" / "real_curriculum"
_spec = importlib.util.spec_from_file_location("real_curriculum_payoff", HERE / "payoff.py")
payoff = importlib.util.module_from_spec(_spec)
sys.modules["real_curriculum_payoff"] = payoff
_spec.loader.exec_module(payoff)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_held_out_family_shares_no_expression_with_the_training_prompts():
    pytest.importorskip("reasoning_gym")
    from composition_rl.jobs.train.config import load_config
    from composition_rl.jobs.train.data import load_stage_problems

    _spec2 = importlib.util.spec_from_file_location("real_curriculum_heldout", HERE / "heldout.py")
    heldout = importlib.util.module_from_spec(_spec2)
    _spec2.loader.exec_module(heldout)
    cfg = load_config(HERE / "curriculum.yaml")
    train = load_stage_problems(cfg.stages[0])  # the preset's 64 prompts, as crl train builds them
    seen = {heldout.expression(p.question) for p in train}
    family = _rows(HERE / "heldout_basic_arithmetic.jsonl")
    assert len(family) == 186 and len({r["question"] for r in family}) == 186
    assert not seen & {heldout.expression(r["question"]) for r in family}
    for r in family:  # the gold is the expression's value
        assert int(r["answer"]) == eval(heldout.expression(r["question"]).replace("--", "+"))  # noqa: S307 (digits and +/- only)
    other = _rows(HERE / "heldout_chain_sum3.jsonl")
    assert len(other) == 150 and all(heldout.expression(r["question"]).count("+") + heldout.expression(
        r["question"]).count("-") >= 2 for r in other)


def test_paired_difference_and_its_interval():
    a = {f"p{i}": (1.0 if i % 2 else 0.5) for i in range(40)}
    b = {f"p{i}": 0.5 for i in range(40)}
    d = payoff.paired(a, b)
    assert d["diff"] == pytest.approx(0.25) and d["problems"] == 40
    assert 0 < d["lo"] < 0.25 < d["hi"] <= 0.5
    assert payoff.paired(b, b) == {"diff": 0.0, "lo": 0.0, "hi": 0.0, "problems": 40}
    with pytest.raises(ValueError, match="different problems"):
        payoff.paired(a, {k: v for k, v in list(b.items())[:-1]})


def test_curriculum_summary_finds_the_switch_and_the_depth2_reward():
    rows = [{"step": s, "depth": 1 if s <= 6 else 2, "solve_all": 0.6, "informative": 0.3, "solve_none": 0.1,
             "reward_mean": 0.05 * s if s > 6 else 0.7, "step_seconds": 10.0 + s, "generated_tokens": 100, "generated": 20}
            for s in range(1, 17)]
    out = payoff.curriculum_summary(rows, [], rows[:8])
    assert out["switch_step"] == 6 and out["depth2"]["steps"] == 10 and out["depth1"]["steps"] == 6
    assert out["depth2_first5"]["reward_mean"] == pytest.approx(0.45)  # steps 7-11
    assert out["depth2_last5"]["reward_mean"] == pytest.approx(0.7)  # steps 12-16
    assert out["depth2_first5"]["correct"] == 45 and out["depth2_first5"]["sampled"] == 100
    assert out["depth2_last5"]["correct"] == 70 and 0 < out["depth2_rise_p"] < 0.001
    assert payoff.two_proportion_p(4, 224, 11, 220) == pytest.approx(0.061, abs=0.001)
    assert payoff.two_proportion_p(5, 50, 5, 50) == pytest.approx(1.0)
    assert [r["step"] for r in out["around_switch"]] == list(range(2, 12))
    assert out["arm_depth1"]["steps"] == 2
