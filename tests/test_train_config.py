"""Training configs: presets, merging, validation messages that name the bad values."""

from __future__ import annotations

import pytest

from composition_rl.jobs.train.config import TrainConfig, load_config, preset_names

BASE = {"model": "m", "output_dir": "o", "stages": [{"name": "d1", "data": "d1.jsonl", "max_steps": 3}]}


def test_presets_ship_and_the_paper_preset_has_the_paper_hyperparameters():
    assert {"paper", "cpu-tiny"} <= set(preset_names())
    g = TrainConfig.from_dict({**BASE, "preset": "paper"}).grpo
    assert (g.num_generations, g.prompts_per_step, g.learning_rate, g.temperature) == (8, 256, 1e-6, 1.0)
    assert (g.beta, g.epsilon, g.epsilon_high, g.loss_type) == (0.0, 0.2, 0.28, "dapo")


def test_file_values_override_the_preset_and_relative_data_resolves_to_the_file(tmp_path):
    p = tmp_path / "train.yaml"
    p.write_text(
        "preset: cpu-tiny\nmodel: m\noutput_dir: o\n"
        "stages:\n  - {name: d1, data: d1.jsonl, max_steps: 2}\n"
        "grpo: {learning_rate: 5.0e-5}\ncurriculum: {threshold: 0.5}\n"
    )
    cfg = load_config(p)
    assert cfg.grpo.learning_rate == 5e-5 and cfg.grpo.num_generations == 8  # preset kept
    assert cfg.curriculum.threshold == 0.5 and cfg.curriculum.window == 3
    assert cfg.stages[0].data == str(tmp_path / "d1.jsonl")


@pytest.mark.parametrize(
    "change, msg",
    [
        ({"preset": "nope"}, "unknown preset 'nope'; known: "),
        ({"grpo": {"lr": 1}}, r"grpo: unknown key\(s\) \['lr'\]"),
        ({"grpo": {"num_generations": 1}}, "num_generations must be >= 2, got 1"),
        ({"grpo": {"scale_rewards": "batch"}}, "scale_rewards"),
        ({"grpo": {"prompts_per_step": 3, "num_generations": 3, "gradient_accumulation_steps": 2}}, r"\(9\)"),
        ({"dynamic_sampling": {"band": [0.0, 1.0]}}, r"0 < lo <= hi < 1, got \[0.0, 1.0\]"),
        ({"curriculum": {"mode": "eyeball"}}, "'eyeball'"),
        ({"stages": [{"name": "a", "max_steps": 1}]}, "exactly one of data=, arithmetic=, compose= or reasoning_gym="),
        ({"stages": [{"name": "a", "data": "x", "max_steps": 1}, {"name": "a", "data": "y", "max_steps": 1}]},
         "unique"),
        ({"colour": "red"}, r"unknown key\(s\) \['colour'\]"),
    ],
)
def test_invalid_configs_name_the_problem(change, msg):
    with pytest.raises(ValueError, match=msg):
        TrainConfig.from_dict({**BASE, **change})


def test_grpo_settings_pass_through_to_trl_by_name(tmp_path):
    """Every GRPO setting but our own two is a GRPOConfig field under the same name and reaches
    TRL with the configured value (a TRL rename would show up here, not as a silently dropped
    setting)."""
    import dataclasses

    from trl import GRPOConfig

    from composition_rl.jobs.train.config import GRPOSettings, TrainConfig
    from composition_rl.jobs.train.grpo import _grpo_args

    theirs = {f.name for f in dataclasses.fields(GRPOConfig)}
    ours = {f.name for f in dataclasses.fields(GRPOSettings)} - {"prompts_per_step", "trl"}
    assert ours <= theirs, sorted(ours - theirs)
    cfg = TrainConfig.from_dict({"preset": "cpu-tiny", "model": "m", "output_dir": str(tmp_path),
                                 "grpo": {"epsilon_high": 0.31, "warmup_steps": 3, "max_grad_norm": 0.5,
                                          "trl": {"top_k": 7}},
                                 "stages": [{"name": "d1", "data": "d1.jsonl", "max_steps": 5}]})
    args = _grpo_args(cfg, 9)
    assert (args.epsilon_high, args.warmup_steps, args.max_grad_norm, args.top_k, args.max_steps) == (0.31, 3, 0.5, 7, 9)
    assert args.per_device_train_batch_size == cfg.grpo.prompts_per_step * cfg.grpo.num_generations


# SmolLM2-135M-Instruct's own endings, sampled while choosing the real-cpu task (docs/training.md):
# right answers, unboxed or with the box left empty
UNBOXED = [
    ("To add 6 and 10, we need to add their individual components. Adding 6 and 10 results in 16. "
     "So, our final answer is 16.", "16"),
    ("1 + 5 = 6\n\nJustification: The answer is 6.", "6"),
    ("7 + 5 = 12, so the answer is \\boxed{}. The answer is 12.", "12"),
]


def test_the_reward_reads_unboxed_prose_endings_only_when_the_config_asks():
    from composition_rl.jobs.train.verifier_reward import VerifierReward

    completions, answers = [c for c, _ in UNBOXED], [[a] for _, a in UNBOXED]
    boxed_only = TrainConfig.from_dict({**BASE, "verify_workers": 1}).validate()
    prose = TrainConfig.from_dict({**BASE, "verify_workers": 1, "verify_fallbacks": ["prose"]}).validate()
    assert boxed_only.verify_config().fallbacks == ("answer_line",)
    assert VerifierReward(config=boxed_only.verify_config())(None, completions, answers=answers) == [0.0, 0.0, 0.0]
    assert VerifierReward(config=prose.verify_config())(None, completions, answers=answers) == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match=r"unknown answer fallback\(s\) \['words'\]; known: .*'prose'"):
        TrainConfig.from_dict({**BASE, "verify_fallbacks": ["words"]}).validate()
