"""GRPO on the tiny model, end to end through TRL: it learns, dynamic sampling holds, the
curriculum advances, metrics are complete every step, and a killed run resumes.

One training run (module fixture) serves the learning, metrics, dynamic-sampling and
curriculum checks; the resume test makes its own short runs.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl")

from fakes.tiny_policy import sampled_reward, tiny_policy_dir  # noqa: E402

from composition_rl.io.files import read_jsonl  # noqa: E402
from composition_rl.jobs.train import trl_adapter  # noqa: E402
from composition_rl.jobs.train.arithmetic import arithmetic_problems  # noqa: E402
from composition_rl.jobs.train.config import TrainConfig  # noqa: E402
from composition_rl.jobs.train.grpo import run_training  # noqa: E402
from composition_rl.jobs.train.metrics import REQUIRED_KEYS  # noqa: E402

# Every test here runs GRPO through TRL on the tiny model: minutes on 2 cores.
pytestmark = pytest.mark.slow

LEARN_STEPS = 10
EASY = {"depth": 1, "n": 8, "seed": 5, "digits": 1}  # the fixed easy set: 8 one-digit a±b
# Learning margins (rewards in [0, 1]). Measured on this seed: the policy's sampled reward
# on the set goes 0.23 -> 0.49, and the per-step training reward 0.26 -> 0.45 (first vs last 3).
POLICY_MARGIN = 0.15
TRAINING_MARGIN = 0.10


def _timeless(rows):
    """Metrics rows without their wall-clock fields: what two equal runs must share."""
    return [{k: v for k, v in r.items() if not k.endswith("_seconds")} for r in rows]


def _config(model, out, stages, **over):
    raw = {
        "preset": "cpu-tiny",
        "model": str(model),
        "output_dir": str(out),
        "seed": 0,
        "progress": False,
        "stages": stages,
        "grpo": {"prompts_per_step": 8, "num_generations": 8, "max_completion_length": 40,
                 "learning_rate": 2e-4},
        "dynamic_sampling": {"oversample": 1.0, "max_rounds": 2},
        "curriculum": {"mode": "auto", "threshold": 0.75, "window": 3},
    }
    for k, v in over.items():
        raw[k] = {**raw[k], **v} if isinstance(v, dict) and isinstance(raw.get(k), dict) else v
    return TrainConfig.from_dict(raw)


@pytest.fixture(scope="module")
def trained(pytestconfig, tmp_path_factory):
    """One run: a fixed easy set of 8 one-digit problems, then a depth-2 stage."""
    model = tiny_policy_dir(pytestconfig)
    out = tmp_path_factory.mktemp("grpo")
    batches = []
    real = trl_adapter.assemble_batch

    def spy(parts, num_generations, pad_token_id, **kw):
        batch = real(parts, num_generations, pad_token_id, **kw)
        batches.append(batch["advantages"].view(-1, num_generations).clone())
        return batch

    mp = pytest.MonkeyPatch()
    mp.setattr(trl_adapter, "assemble_batch", spy)
    try:
        cfg = _config(model, out, [
            {"name": "easy", "arithmetic": EASY, "max_steps": LEARN_STEPS},
            {"name": "composed", "arithmetic": {"depth": 2, "n": 64, "seed": 5, "digits": 1}, "max_steps": 2},
        ])
        metrics = run_training(cfg, resume=False, log=None)
    finally:
        mp.undo()
    return {"model": model, "out": out, "metrics": list(read_jsonl(metrics)), "batches": batches}


def test_grpo_raises_mean_reward_on_a_fixed_easy_set(trained):
    easy = [r["reward_mean"] for r in trained["metrics"] if r["stage"] == "easy"]
    assert len(easy) == LEARN_STEPS, easy
    first, last = sum(easy[:3]) / 3, sum(easy[-3:]) / 3
    assert last >= first + TRAINING_MARGIN, f"training reward {first:.3f} -> {last:.3f} (per step: {easy})"
    # The trained policy itself (saved after the composed stage too) samples better answers.
    problems = arithmetic_problems(EASY["n"], 1, seed=EASY["seed"], digits=1)
    before = sampled_reward(trained["model"], problems)
    after = sampled_reward(trained["out"] / "final", problems)
    assert after >= before + POLICY_MARGIN, f"sampled reward {before:.3f} -> {after:.3f}"


def test_metrics_have_the_required_fields_every_step(trained):
    rows = trained["metrics"]
    assert [r["step"] for r in rows] == list(range(1, len(rows) + 1))
    for r in rows:
        for k in REQUIRED_KEYS:
            assert k in r, (k, r)
        assert abs(r["solve_all"] + r["solve_none"] + r["informative"] - 1.0) < 1e-9
        assert r["response_length"] > 0
        # where the step's time went: scoring is part of every round's generate-and-score time
        assert 0 < r["reward_seconds"] < r["gen_seconds"] < r["step_seconds"]
        assert str(r["depth"]) in r["per_depth"]
        assert sum(d["groups"] for d in r["per_depth"].values()) == r["groups"]
    pass_rates = list(read_jsonl(trained["out"] / "pass_rates.jsonl"))
    assert len(pass_rates) == sum(r["groups"] for r in rows)
    assert {p["step"] for p in pass_rates} == {r["step"] for r in rows}
    assert (trained["out"] / "solve_rates.png").stat().st_size > 1000


def test_trained_batches_hold_no_zero_variance_group_unless_the_bound_was_hit(trained):
    rows, batches = trained["metrics"], trained["batches"]
    assert len(batches) == len(rows)
    for r, adv in zip(rows, batches):
        zero = int((adv.abs().sum(dim=1) == 0).sum())
        assert zero == r["filled_uninformative"], (r["step"], zero, r)
        if not r["bound_hit"]:
            assert zero == 0 and r["trained_informative"] == r["trained_groups"] == 8
        assert r["rounds"] <= 2
    assert any(r["rounds"] > 1 for r in rows), "no step needed a refill round"


def test_curriculum_transition_is_logged_and_takes_effect_next_step(trained):
    rows = trained["metrics"]
    transitions = list(read_jsonl(trained["out"] / "transitions.jsonl"))
    assert transitions[0]["from_stage"] == "easy" and transitions[0]["to_stage"] == "composed"
    assert transitions[0]["kind"] in ("threshold", "budget") and transitions[0]["reason"]
    t = transitions[0]["step"]
    assert all(r["stage"] == "easy" and r["depth"] == 1 for r in rows if r["step"] <= t)
    after = [r for r in rows if r["step"] > t]
    assert after and all(r["stage"] == "composed" and r["depth"] == 2 for r in after)
    assert all(set(r["per_depth"]) == {"2"} for r in after)
    assert transitions[-1]["to_stage"] is None  # the last stage's budget ended the run
    if transitions[0]["kind"] == "threshold":  # it fired on the rolling window, not before
        easy = [r["solve_all"] for r in rows if r["step"] <= t]
        assert sum(easy[-3:]) / 3 >= 0.75 and all(
            sum(easy[i - 3 : i]) / 3 < 0.75 for i in range(3, len(easy))
        )


def test_a_killed_run_resumes_from_its_checkpoint_without_losing_or_duplicating_steps(pytestconfig, tmp_path):
    model = tiny_policy_dir(pytestconfig)
    stages = [{"name": "easy", "arithmetic": EASY, "max_steps": 3}]
    cfg = _config(model, tmp_path, stages, save_steps=2, plot=False,
                  grpo={"prompts_per_step": 2, "max_completion_length": 24})
    run_training(cfg, resume=False, log=None)
    ckpts = tmp_path / "checkpoints"
    assert (ckpts / "checkpoint-3" / "crl_state.json").exists()
    # Simulate a kill after step 3's metrics were written but before its checkpoint landed.
    import shutil

    shutil.rmtree(ckpts / "checkpoint-3")
    before = list(read_jsonl(tmp_path / "metrics.jsonl"))
    assert [r["step"] for r in before] == [1, 2, 3]
    state = json.loads((ckpts / "checkpoint-2" / "crl_state.json").read_text())
    assert state["step"] == 2 and state["streams"]["easy"]["cursor"] > 0
    lines = []
    run_training(cfg, resume="auto", log=lines.append)
    assert any("resuming from" in m and "checkpoint-2" in m for m in lines)
    after = list(read_jsonl(tmp_path / "metrics.jsonl"))
    assert [r["step"] for r in after] == [1, 2, 3]
    assert after[:2] == before[:2]
    assert (ckpts / "checkpoint-3" / "crl_state.json").exists()
    # A rerun of the finished run trains nothing and leaves the logs alone.
    lines = []
    run_training(cfg, resume="auto", log=lines.append)
    assert any("nothing to do" in m for m in lines)
    assert list(read_jsonl(tmp_path / "metrics.jsonl")) == after


def test_same_config_and_seed_give_the_same_metrics(pytestconfig, tmp_path):
    model = tiny_policy_dir(pytestconfig)
    stages = [{"name": "easy", "arithmetic": EASY, "max_steps": 2}]
    runs = []
    for name in ("a", "b"):
        cfg = _config(model, tmp_path / name, stages, plot=False, grpo={"prompts_per_step": 2, "max_completion_length": 24})
        rows = list(read_jsonl(run_training(cfg, resume=False, log=None)))
        runs.append(_timeless(rows))
        runs[-1].append(list(read_jsonl(tmp_path / name / "pass_rates.jsonl")))
    assert runs[0] == runs[1]


def test_save_on_transition_leaves_the_switch_s_checkpoint_and_no_other(pytestconfig, tmp_path):
    model = tiny_policy_dir(pytestconfig)
    stages = [{"name": "easy", "arithmetic": EASY, "max_steps": 2},
              {"name": "composed", "arithmetic": {"depth": 2, "n": 16, "seed": 5, "digits": 1}, "max_steps": 1}]
    cfg = _config(model, tmp_path, stages, plot=False, save_on_transition=True, curriculum={"mode": "manual"},
                  grpo={"prompts_per_step": 2, "max_completion_length": 16})
    run_training(cfg, resume=False, log=None)
    ckpts = sorted(p.name for p in (tmp_path / "checkpoints").glob("checkpoint-*"))
    assert ckpts == ["checkpoint-2", "checkpoint-3"], ckpts  # the easy -> composed switch, and the end
    state = json.loads((tmp_path / "checkpoints" / "checkpoint-2" / "crl_state.json").read_text())
    assert state["step"] == 2 and state["curriculum"]["index"] == 1 and not state["curriculum"]["finished"]
    assert (tmp_path / "checkpoints" / "checkpoint-2" / "optimizer.pt").is_file()
    # the end's checkpoint: a rerun finds the run finished instead of training the last stage again
    lines = []
    run_training(cfg, resume="auto", log=lines.append)
    assert any("nothing to do" in m for m in lines), lines


def test_a_branch_from_the_switch_continues_that_run_or_another_stage(pytestconfig, tmp_path):
    """--branch-from the switch's checkpoint: with the source's own config the branch's next step
    is the source's (weights, optimizer, RNG and streams carried); with a depth-1-only config it
    trains on at depth 1 from the same point; a config that would have switched earlier is refused."""
    model = tiny_policy_dir(pytestconfig)
    easy = {"name": "easy", "arithmetic": EASY, "max_steps": 2}
    composed = {"name": "composed", "arithmetic": {"depth": 2, "n": 16, "seed": 5, "digits": 1}, "max_steps": 2}
    small = {"prompts_per_step": 2, "max_completion_length": 16}
    src = tmp_path / "src"
    run_training(_config(model, src, [easy, composed], plot=False, save_on_transition=True,
                         curriculum={"mode": "manual"}, grpo=small), resume=False, log=None)
    source_rows = list(read_jsonl(src / "metrics.jsonl"))
    assert [r["depth"] for r in source_rows] == [1, 1, 2, 2]
    ckpt = src / "checkpoints" / "checkpoint-2"

    same = tmp_path / "same"
    lines = []
    run_training(_config(model, same, [easy, composed], plot=False, curriculum={"mode": "manual"}, grpo=small),
                 log=lines.append, branch_from=ckpt)
    assert any("branched from" in m and "step 2" in m for m in lines), lines
    assert _timeless(read_jsonl(same / "metrics.jsonl")) == _timeless(source_rows)
    # the same end weights: steps 3-4 updated from the carried AdamW state (a fresh optimizer's
    # first steps move every weight by about the learning rate, and differ here)
    from safetensors.torch import load_file

    ours, theirs = load_file(same / "final" / "model.safetensors"), load_file(src / "final" / "model.safetensors")
    assert ours.keys() == theirs.keys() and all((ours[k] == theirs[k]).all() for k in ours)
    assert json.loads((same / "branch.json").read_text())["step"] == 2

    arm = tmp_path / "arm"
    run_training(_config(model, arm, [{**easy, "max_steps": 10}], plot=False,
                         curriculum={"mode": "manual", "total_steps": 4}, grpo=small), log=None, branch_from=ckpt)
    rows = list(read_jsonl(arm / "metrics.jsonl"))
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and [r["depth"] for r in rows] == [1, 1, 1, 1]
    assert _timeless(rows[:2]) == _timeless(source_rows[:2])
    assert [t["to_stage"] for t in read_jsonl(arm / "transitions.jsonl")] == [None]  # only the total budget's end

    assert (arm / "checkpoints" / "checkpoint-4").is_dir()  # a rerun of the finished branch trains nothing
    lines = []
    run_training(_config(model, arm, [{**easy, "max_steps": 10}], plot=False,
                         curriculum={"mode": "manual", "total_steps": 4}, grpo=small), log=lines.append, branch_from=ckpt)
    assert any("nothing to do" in m for m in lines), lines

    with pytest.raises(ValueError, match="other seed than its source"):
        run_training(_config(model, tmp_path / "seed", [{**easy, "max_steps": 10}], plot=False, seed=1,
                             curriculum={"mode": "manual", "total_steps": 4}, grpo=small), log=None, branch_from=ckpt)
    with pytest.raises(ValueError, match="total step budget"):
        run_training(_config(model, tmp_path / "short", [{**easy, "max_steps": 10}], plot=False,
                             curriculum={"mode": "manual", "total_steps": 2}, grpo=small), log=None, branch_from=ckpt)
    early = tmp_path / "early"
    with pytest.raises(ValueError, match="would have moved easy -> composed at step 1"):
        run_training(_config(model, early, [{**easy, "max_steps": 1}, composed], plot=False,
                             curriculum={"mode": "manual"}, grpo=small), log=None, branch_from=ckpt)
    assert not (early / "checkpoints").exists()
