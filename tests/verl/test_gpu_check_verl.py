"""The GPU check's verl launch, composed by verl itself: the arguments ``scripts/gpu_check.py
verl-launch`` hands to ``python -m verl.trainer.main_ppo`` (``crl verl-recipe --online``'s stage
with the check's sizes merged in) are resolved with ``--cfg job --resolve`` (no GPU, no network),
and the effective settings read back. The online launch is the plain one plus the online keys
(tests/test_gpu_check.py checks both key lists), so it is the one composed here."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl.utils.config", reason="verl is not installed here; run with .venv-verl "
                    "(scripts/setup_verl_venv.sh)")
import yaml  # noqa: E402

from composition_rl.integrations.verl_recipe import RecipeConfig, RecipeStage, write_recipe  # noqa: E402
from composition_rl.jobs.export import export  # noqa: E402
from composition_rl.jobs.train.arithmetic import arithmetic_problems  # noqa: E402

pytestmark = pytest.mark.verl

REPO = Path(__file__).resolve().parents[2]


def _gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "scripts" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_gpu_checks_online_launch_composes_in_verl_with_one_gpus_sizes(tmp_path):
    gc = _gpu_check()
    run = tmp_path / "run"
    parquet = export(arithmetic_problems(8, depth=1, seed=0), "verl", tmp_path)
    online = dict(kv.split("=") for kv in gc.ONLINE_SETTINGS)
    cfg = RecipeConfig(model=str(tmp_path / "model"), out_dir=str(run / "verl-online" / "recipe"),
                       stages=[RecipeStage("depth1", str(parquet), 1, max_steps=gc.STEPS)], n_gpus_per_node=1,
                       python=sys.executable, online={k: int(v) for k, v in online.items()})
    write_recipe(cfg)
    o = gc.options_from(["--run-dir", str(run)])
    argv = gc.verl_launch_argv(str(run / "verl-online" / "recipe" / "recipe.json"),
                               gc.verl_settings(o, str(run), "verl-online"))
    r = subprocess.run([*argv, "--cfg", "job", "--resolve"], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 0, r.stderr[-3000:]
    c = yaml.safe_load(r.stdout)
    ar = c["actor_rollout_ref"]
    assert ar["rollout"]["tensor_model_parallel_size"] == 1 and ar["rollout"]["enforce_eager"] is True
    assert ar["model"]["override_config"]["attn_implementation"] == "sdpa"
    assert c["data"]["train_batch_size"] == 8 and ar["actor"]["ppo_mini_batch_size"] == 8
    assert (c["data"]["max_prompt_length"], c["data"]["max_response_length"]) == (512, 1024)
    t = c["trainer"]
    assert (t["n_gpus_per_node"], t["total_training_steps"], t["save_freq"]) == (1, gc.STEPS, -1)
    # the paper's algorithm and the online pool are still there
    assert c["algorithm"]["filter_groups"]["enable"] is True and ar["rollout"]["n"] == 8
    assert t["v1"]["sampler"]["custom_sampler"]["name"] == "OnlineReplayBuffer"
    assert c["data"]["online"]["k"] == 1


def test_the_step_lines_are_read_as_verls_console_logger_writes_them():
    import numpy as np
    from verl.utils.logger.aggregate_logger import concat_dict_to_str

    gc = _gpu_check()
    metrics = {"critic/score/mean": np.float64(0.375), "timing_s/step": 12.5, "perf/throughput": np.float32(850.0),
               "training/global_step": 3}
    line = f"(TaskRunner pid=1234) {concat_dict_to_str(metrics, step=3)}"
    assert gc.verl_steps(line) == {3: {"critic/score/mean": 0.375, "timing_s/step": 12.5, "perf/throughput": 850.0,
                                       "training/global_step": 3.0}}
