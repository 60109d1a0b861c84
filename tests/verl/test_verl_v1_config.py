"""The generated stage scripts, composed by verl itself: each script's arguments are handed to
``python -m verl.trainer.main_ppo ... --cfg job --resolve`` (verl's entry point and Hydra
config, no GPU, no network), and the effective settings are read back from what it prints.

The paper's numbers (seed 000, Section 4.1 / B.1): GRPO, batch 256, group size 8, learning
rate 1e-6, dynamic sampling on acc (Eq. 5). Seed 000 writes the clip as one symmetric epsilon
without a value; the 0.2 / 0.28 clip-higher pair is the recipe's own choice (verl_recipe.PAPER).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

pytest.importorskip("verl.utils.config", reason="verl is not installed here; run with .venv-verl "
                    "(scripts/setup_verl_venv.sh)")
import yaml  # noqa: E402

from composition_rl.integrations.verl_recipe import RecipeConfig, RecipeStage, write_recipe  # noqa: E402
from composition_rl.jobs.export import export  # noqa: E402
from composition_rl.jobs.train.arithmetic import arithmetic_problems  # noqa: E402
from composition_rl.jobs.train.online import OnlineConfig  # noqa: E402

pytestmark = pytest.mark.verl


def script_args(path) -> list[str]:
    """The arguments a stage script passes to ``-m verl.trainer.main_ppo``, as bash would (run
    with no arguments of its own: its trailing ``"$@"`` adds none)."""
    words = shlex.split(path.read_text().replace("\\\n", " "), comments=True)
    return [w for w in words[words.index("verl.trainer.main_ppo") + 1 :] if w != "$@"]


def effective(args: list[str], cwd) -> dict:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    r = subprocess.run([sys.executable, "-m", "verl.trainer.main_ppo", *args, "--cfg", "job", "--resolve"],
                       capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return yaml.safe_load(r.stdout)


def assert_paper_settings(c: dict) -> None:
    assert c["trainer"]["use_v1"] is True  # the V1 trainer is the one these settings must suit
    a = c["algorithm"]
    assert a["adv_estimator"] == "grpo" and a["use_kl_in_reward"] is False
    fg = a["filter_groups"]
    assert fg["enable"] is True and fg["metric"] == "acc"
    # V1 bounds dynamic sampling with max_inflight_gen_batches; max_num_gen_batches > 0 would
    # only make it log "ignored by the built-in V1 ReplayBuffer"
    assert fg["max_inflight_gen_batches"] == 2 and fg["max_num_gen_batches"] == 0
    assert c["reward"]["custom_reward_function"]["path"] == "pkg://composition_rl.integrations.verl"
    assert c["reward"]["custom_reward_function"]["name"] == "compute_score"
    actor = c["actor_rollout_ref"]["actor"]
    assert actor["optim"]["lr"] == 1e-6
    assert (actor["clip_ratio_low"], actor["clip_ratio_high"]) == (0.2, 0.28)
    assert actor["loss_agg_mode"] == "token-mean" and actor["use_kl_loss"] is False
    assert c["actor_rollout_ref"]["rollout"]["n"] == 8 and c["data"]["train_batch_size"] == 256
    assert c["actor_rollout_ref"]["rollout"]["temperature"] == 1.0


@pytest.fixture(scope="module")
def parquets(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    paths = []
    for d in (1, 2):
        (out / f"d{d}").mkdir()
        paths.append(export(arithmetic_problems(6, depth=d, seed=d), "verl", out / f"d{d}"))
    return paths


def test_stage_script_composes_to_the_paper_settings_in_verl(parquets, tmp_path):
    cfg = RecipeConfig(model="Qwen/Qwen3-4B-Base", out_dir=str(tmp_path / "r"), python=sys.executable,
                       stages=[RecipeStage("depth1", str(parquets[0]), 1), RecipeStage("depth2", str(parquets[1]), 2)])
    write_recipe(cfg)
    c = effective(script_args(tmp_path / "r" / "stage_2.sh"), tmp_path)
    assert_paper_settings(c)
    assert c["data"]["train_files"] == str(parquets[1])
    assert c["actor_rollout_ref"]["model"]["path"] == str(tmp_path / "r" / "merged" / "depth1")
    assert c["trainer"]["v1"]["sampler"]["custom_sampler"] == {"path": None, "name": None}  # verl's own buffer
    assert c["data"]["custom_cls"]["path"] is None


def test_online_stage_script_selects_our_sampler_and_dataset_in_verl(parquets, tmp_path):
    online = {"k": 2, "max_depth": 4}
    cfg = RecipeConfig(model="Qwen/Qwen3-4B-Base", out_dir=str(tmp_path / "r"), python=sys.executable,
                       stages=[RecipeStage("depth1", str(parquets[0]), 1)], online=online)
    write_recipe(cfg)
    c = effective(script_args(tmp_path / "r" / "stage_1.sh"), tmp_path)
    assert_paper_settings(c)
    pkg = "pkg://composition_rl.integrations.verl_online"
    sampler = c["trainer"]["v1"]["sampler"]
    assert sampler["custom_sampler"] == {"path": pkg, "name": "OnlineReplayBuffer"}
    assert c["trainer"]["v1"]["trainer_mode"] == "sync"  # OnlineReplayBuffer is the sync one
    assert c["data"]["custom_cls"] == {"path": pkg, "name": "OnlineDataset"}
    assert c["data"]["dataloader_num_workers"] == 0
    settings = dict(c["data"]["online"])
    log_dir = settings.pop("log_dir")
    assert log_dir == str(tmp_path / "r" / "online" / "depth1")
    assert OnlineConfig.from_dict(settings) == OnlineConfig(**online)
    kw = sampler["sampler_kwargs"]
    # the interpolations resolved to the one source of each setting
    assert kw["online_log_dir"] == log_dir and kw["train_batch_size"] == 256
    assert kw["filter_groups"] == c["algorithm"]["filter_groups"]


def test_cpu_stage_script_composes_in_verl_with_the_workarounds(parquets, tmp_path):
    """``--device cpu``: the paper's algorithm with a tiny batch, and every workaround's override
    accepted by verl's own config (the launch itself is tests/verl/test_verl_cpu_launch.py)."""
    from composition_rl.integrations.verl_cpu import cpu_env

    cfg = RecipeConfig(model="m", out_dir=str(tmp_path / "r"), python=sys.executable, n_gpus_per_node=1,
                       stages=[RecipeStage("depth1", str(parquets[0]), 1)], device="cpu", timeout_s=600)
    write_recipe(cfg)
    script = (tmp_path / "r" / "stage_1.sh").read_text()
    assert all(f"export {k}=" in script for k in cpu_env())
    assert "timeout -k 60 600 " in script
    c = effective(script_args(tmp_path / "r" / "stage_1.sh"), tmp_path)
    a, rollout = c["algorithm"], c["actor_rollout_ref"]["rollout"]
    assert a["adv_estimator"] == "grpo" and a["filter_groups"]["enable"] and a["filter_groups"]["metric"] == "acc"
    assert c["actor_rollout_ref"]["model"]["override_config"]["attn_implementation"] == "sdpa"
    assert rollout["enable_sleep_mode"] is False and rollout["free_cache_engine"] is False
    assert c["ray_kwargs"]["ray_init"]["num_gpus"] == 1
    assert (c["trainer"]["n_gpus_per_node"], c["trainer"]["nnodes"], c["trainer"]["device"]) == (1, 1, "cpu")
    assert c["data"]["train_batch_size"] == 4 and rollout["n"] == 2
    assert c["reward"]["custom_reward_function"]["reward_kwargs"] == {"fallbacks": ["prose"]}
