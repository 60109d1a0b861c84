"""jobs/train/grpo.py: what a training run's checkpoints were trained from. A resume with another
curriculum, skip setting or stage list is refused before anything is loaded, and a checkpoint
without a stage's state says so instead of a KeyError."""

from __future__ import annotations

import dataclasses

import pytest

from composition_rl.io.identity import RunMismatch
from composition_rl.jobs.train.config import StageConfig, TrainConfig


class _Loaded(Exception):
    """Raised where the run would load the model: the identity was accepted."""


def _cfg(out) -> TrainConfig:
    return TrainConfig(model="org/model", output_dir=str(out), progress=False, plot=False,
                       stages=[StageConfig(name="d1", max_steps=4, arithmetic={"depth": 1, "n": 8}),
                               StageConfig(name="d2", max_steps=4, arithmetic={"depth": 2, "n": 8})])


def test_a_training_run_resumes_only_with_its_curriculum_skip_and_stages(tmp_path, monkeypatch):
    from composition_rl.io import hf_model
    from composition_rl.jobs.train.grpo import run_training

    def load(model):
        raise _Loaded(model)

    monkeypatch.setattr(hf_model, "load_causal_lm", load)
    cfg = _cfg(tmp_path / "run")
    with pytest.raises(_Loaded):
        run_training(cfg)  # records what the run is made from
    (tmp_path / "run" / "metrics.jsonl").write_text('{"step": 1}\n')  # and now it holds work
    d1, d2 = cfg.stages
    changed = {
        "curriculum": dataclasses.replace(cfg, curriculum=dataclasses.replace(cfg.curriculum, threshold=0.5)),
        "skip": dataclasses.replace(cfg, skip=dataclasses.replace(cfg.skip, enabled=True)),
        "stages": dataclasses.replace(cfg, stages=[d1, dataclasses.replace(d2, name="hard")]),  # a renamed stage
    }
    for field, other in changed.items():
        with pytest.raises(RunMismatch, match=rf"made with other settings \({field}: "):
            run_training(other)
    with pytest.raises(_Loaded):
        run_training(cfg)  # the same settings resume


def test_a_checkpoint_without_a_stage_s_state_is_one_clear_error(tmp_path):
    from composition_rl.jobs.train.grpo import _Run

    run = _Run(_cfg(tmp_path))
    state = run.state_dict(step=3)
    state["streams"] = {"easy" if k == "d1" else k: v for k, v in state["streams"].items()}
    with pytest.raises(ValueError, match=r"no state for stage 'd1' \(it has: d2, easy\)"):
        run.load_state_dict(state)
