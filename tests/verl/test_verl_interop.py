"""verl 0.9.1 interop, run in .venv-verl (scripts/setup_verl_venv.sh):

    .venv-verl/bin/python -m pytest -m verl tests/verl

- verl's own ``RLHFDataset`` loads our exported parquet with a local tokenizer;
- verl's own custom-reward loading finds and calls our ``compute_score``;
- the launch script's overrides pass verl's Hydra config composition and ``validate_config``.

In the main .venv (no verl) these skip with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# Import a real verl module: this folder is itself named "verl" and would satisfy a bare
# `import verl` as a namespace package where verl is not installed.
pytest.importorskip("verl.utils.config", reason="verl is not installed here; run with .venv-verl "
                    "(scripts/setup_verl_venv.sh)")
import verl  # noqa: E402

from composition_rl.integrations.verl_recipe import (  # noqa: E402
    REWARD_NAME,
    REWARD_PATH,
    RecipeConfig,
    RecipeStage,
    stage_overrides,
    write_recipe,
)
from composition_rl.jobs.export import export  # noqa: E402
from composition_rl.jobs.train.arithmetic import arithmetic_problems  # noqa: E402

pytestmark = pytest.mark.verl


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("verl")
    problems = arithmetic_problems(12, depth=2, seed=3)
    return out, problems, export(problems, "verl", out)


def test_verl_rl_dataset_loads_our_parquet_with_a_local_tokenizer(exported, tokenizer, tmp_path):
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    _, problems, parquet = exported
    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 512, "filter_overlong_prompts": True,
                            "filter_overlong_prompts_workers": 1, "cache_dir": str(tmp_path)})
    ds = RLHFDataset(data_files=[str(parquet)], tokenizer=tokenizer, config=cfg)
    assert len(ds) == len(problems)
    row = ds[0]
    assert row["reward_model"]["ground_truth"] == problems[0].answer
    assert row["raw_prompt"][0]["role"] == "user" and problems[0].question in row["raw_prompt"][0]["content"]
    assert row["extra_info"]["id"] == problems[0].id
    # The tokenizer really is used: a prompt budget below every prompt's length filters all rows.
    tiny = OmegaConf.merge(cfg, {"max_prompt_length": 8})
    assert len(RLHFDataset(data_files=[str(parquet)], tokenizer=tokenizer, config=tiny)) == 0


def test_verl_custom_reward_loading_finds_and_calls_our_compute_score():
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    cfg = OmegaConf.create({"reward": {"custom_reward_function": {"path": REWARD_PATH, "name": REWARD_NAME,
                                                                  "reward_kwargs": {}}}})
    fn = get_custom_reward_fn(cfg)
    good = fn(data_source="tiny-arithmetic", solution_str="X=3+4=7. \\boxed{7}", ground_truth="7", extra_info={})
    bad = fn(data_source="tiny-arithmetic", solution_str="\\boxed{8}", ground_truth="7", extra_info={})
    assert good["score"] == 1.0 and bad["score"] == 0.0
    assert good["acc"] and not bad["acc"]  # the key algorithm.filter_groups.metric=acc reads


def test_every_accepted_answer_reaches_our_reward_through_verls_dataset(tokenizer, tmp_path):
    """A record with two accepted forms: verl's RLHFDataset hands ground_truth (one string,
    for verl's own scorers) and extra_info (every form) to the reward as its managers do."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from composition_rl.records import Problem

    parquet = export([Problem.new("What is the velocity in km/s?", ["6630.65", "6630"])], "verl", tmp_path)
    cfg = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 512, "cache_dir": str(tmp_path)})
    row = RLHFDataset(data_files=[str(parquet)], tokenizer=tokenizer, config=cfg)[0]
    assert row["reward_model"]["ground_truth"] == "6630.65"
    fn = get_custom_reward_fn(OmegaConf.create({"reward": {"custom_reward_function": {
        "path": REWARD_PATH, "name": REWARD_NAME, "reward_kwargs": {}}}}))
    out = fn(data_source=row["data_source"], solution_str="so \\boxed{6630}",
             ground_truth=row["reward_model"]["ground_truth"], extra_info=row["extra_info"])
    assert out["acc"] == 1.0


def test_launch_overrides_pass_verl_config_composition_and_validation(exported, tmp_path):
    from hydra import compose, initialize_config_dir
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    out, _, parquet = exported
    cfg = RecipeConfig(model="Qwen/Qwen3-4B-Base", out_dir=str(tmp_path),
                       stages=[RecipeStage("depth1", str(parquet), 1), RecipeStage("depth2", str(parquet), 2)])
    launch = write_recipe(cfg)
    plan = json.loads((tmp_path / "recipe.json").read_text())["plan"]
    config_dir = str(Path(verl.__file__).parent / "trainer" / "config")
    for i, stage in enumerate(plan):
        assert stage["overrides"] == stage_overrides(cfg, i, cfg.model if i == 0 else
                                                     str(tmp_path / "merged" / "depth1"), 200)
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            composed = compose(config_name="ppo_trainer", overrides=stage["overrides"])
        validate_config(composed, use_reference_policy=need_reference_policy(composed),
                        use_critic=need_critic(composed))
        a = composed.algorithm
        assert a.adv_estimator == "grpo" and a.filter_groups.enable and a.filter_groups.metric == "acc"
        actor = composed.actor_rollout_ref.actor
        assert actor.loss_agg_mode == "token-mean" and not actor.use_kl_loss
        assert (actor.clip_ratio_low, actor.clip_ratio_high) == (0.2, 0.28)
        assert composed.actor_rollout_ref.rollout.n == 8 and composed.data.train_batch_size == 256
        assert composed.reward.custom_reward_function.path == REWARD_PATH
        assert need_reference_policy(composed) is False  # no KL anywhere
    assert "verl_recipe drive" in launch.read_text()


def test_launch_dry_run_works_through_this_environment(exported, tmp_path):
    """The documented cluster path: crl export (depth 1) and crl compose --export verl
    (depth 2) data, `crl verl-recipe --python <this venv>`, then `bash launch.sh --dry-run`
    from another folder with a clean environment (no PYTHONPATH): the scripts reach verl
    and composition_rl through the interpreter alone."""
    import os
    import subprocess
    import sys

    from composition_rl.jobs.export import export
    from composition_rl.jobs.train.arithmetic import arithmetic_problems

    (tmp_path / "d1").mkdir()
    d1 = export(arithmetic_problems(6, depth=1, seed=1), "verl", tmp_path / "d1")
    _, _, d2 = exported
    out = tmp_path / "recipe"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = "/usr/bin:/bin"  # no venv on PATH: a bare python3 would lack both packages
    r = subprocess.run([sys.executable, "-m", "composition_rl.cli", "verl-recipe", "--stages", str(d1), str(d2),
                        "--model", "Qwen/Qwen3-4B-Base", "--out", str(out), "--python", sys.executable],
                       capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    recipe = json.loads((out / "recipe.json").read_text())
    assert [s["depth"] for s in recipe["config"]["stages"]] == [1, 2]  # read from the data
    r = subprocess.run(["bash", str(out / "launch.sh"), "--dry-run"], capture_output=True, text=True, env=env,
                       cwd="/")
    assert r.returncode == 0, r.stderr
    assert "warning" not in r.stderr  # verl was found by the recipe's interpreter
    cmds = [line.split() for line in r.stdout.splitlines() if line.startswith("+ ")]
    assert [c[3] for c in cmds] == ["verl.trainer.main_ppo", "verl.model_merger", "composition_rl.cli"] * 2
    assert {c[1] for c in cmds} == {sys.executable}
    assert "dry run: one chunk" in r.stdout and "exhausted" not in r.stdout
