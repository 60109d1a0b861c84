"""``crl verl-recipe`` writes a launch script with the paper's settings (no verl needed here;
tests/verl/ checks the overrides against verl's own config composition)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_run import crl, one_error_line

from composition_rl.cli import main
from composition_rl.integrations.verl_recipe import PAPER

# The interpreter named and not checked: without --python the command looks for verl in
# ./.venv-verl (seconds to import), so these tests would run differently where it exists.
# Choosing the interpreter is tested with --python below and in tests/verl.
NO_PROBE = ("--python", "python3", "--no-python-check")


def _stages(tmp_path, depths=(1, 2)):
    from composition_rl.jobs.export import export
    from composition_rl.jobs.train.arithmetic import arithmetic_problems

    stages = []
    for d in depths:
        (tmp_path / f"d{d}").mkdir()
        stages.append(str(export(arithmetic_problems(4, depth=d, seed=d), "verl", tmp_path / f"d{d}")))
    return stages


def test_recipe_scripts_carry_the_paper_settings_and_our_reward(tmp_path):
    stages = _stages(tmp_path)
    out = tmp_path / "recipe"
    assert main(["verl-recipe", "--stages", *stages, "--model", "Qwen/Qwen3-4B-Base", "--out", str(out),
                 "--max-steps", "120", "--threshold", "0.7", "--python", "python3", "--no-python-check"]) == 0
    s1 = (out / "stage_1.sh").read_text()
    for needle in ("verl.trainer.main_ppo", "algorithm.filter_groups.enable=True",
                   "algorithm.filter_groups.metric=acc", "actor_rollout_ref.actor.loss_agg_mode=token-mean",
                   "actor_rollout_ref.actor.clip_ratio_low=0.2", "actor_rollout_ref.actor.clip_ratio_high=0.28",
                   "actor_rollout_ref.actor.use_kl_loss=False", "algorithm.use_kl_in_reward=False",
                   "actor_rollout_ref.rollout.n=8", "data.train_batch_size=256",
                   "actor_rollout_ref.actor.optim.lr=1e-06", "actor_rollout_ref.rollout.temperature=1.0",
                   "reward.custom_reward_function.path=pkg://composition_rl.integrations.verl",
                   "reward.custom_reward_function.name=compute_score", "trainer.total_training_steps=120",
                   f"data.train_files={stages[0]}", "actor_rollout_ref.model.path=Qwen/Qwen3-4B-Base",
                   "algorithm.filter_groups.max_inflight_gen_batches=2"):
        assert needle in s1, needle
    # verl's V1 trainer ignores max_num_gen_batches (and warns); the recipe no longer writes it
    assert "max_num_gen_batches" not in s1 and "custom_sampler" not in s1
    # stage 2 starts from stage 1's merged model
    assert f"actor_rollout_ref.model.path={out / 'merged' / 'depth1'}" in (out / "stage_2.sh").read_text()
    recipe = json.loads((out / "recipe.json").read_text())
    assert recipe["config"]["threshold"] == 0.7 and len(recipe["plan"]) == 2
    assert "python3 -m composition_rl.integrations.verl_recipe drive" in (out / "launch.sh").read_text()
    assert (out / "stage_1.sh").read_text().splitlines()[1] == f"# Stage 1 of 2: depth 1 ({stages[0]}), the paper's settings."
    assert PAPER["algorithm.filter_groups.metric"] == "acc"


def test_dry_run_driver_lists_train_merge_profile_per_stage(tmp_path):
    from composition_rl.integrations.verl_recipe import RecipeConfig, RecipeStage, write_recipe

    cfg = RecipeConfig(model="m", out_dir=str(tmp_path), stages=[RecipeStage("depth1", "a.parquet", 1, 100),
                                                                  RecipeStage("depth2", "b.parquet", 2, 100)])
    write_recipe(cfg)
    r = subprocess.run([sys.executable, "-m", "composition_rl.integrations.verl_recipe", "drive",
                        str(tmp_path / "recipe.json"), "--dry-run"], capture_output=True, text=True, check=True)
    cmds = [line for line in r.stdout.splitlines() if line.startswith("+ ")]
    assert [c.split()[3] for c in cmds] == [
        "verl.trainer.main_ppo", "verl.model_merger", "composition_rl.cli",
        "verl.trainer.main_ppo", "verl.model_merger", "composition_rl.cli"]
    assert all(c.split()[1] == sys.executable for c in cmds)  # one interpreter, never a bare crl/python3
    assert "--input" in cmds[2] and "probes/depth1.jsonl" in cmds[2]


def test_missing_stage_file_is_a_usage_error(tmp_path, capsys):
    assert main(["verl-recipe", "--stages", str(tmp_path / "nope.parquet"), "--model", "m",
                 "--out", str(tmp_path / "o")]) == 2
    assert "not found" in capsys.readouterr().err


def test_stage_depths_come_from_the_data(tmp_path, capsys):
    stages = _stages(tmp_path, depths=(2, 3))
    out = tmp_path / "r"
    assert main(["verl-recipe", "--stages", *stages, "--model", "m", "--out", str(out), *NO_PROBE]) == 0
    recipe = json.loads((out / "recipe.json").read_text())
    assert [(s["name"], s["depth"]) for s in recipe["config"]["stages"]] == [("depth2", 2), ("depth3", 3)]
    assert main(["verl-recipe", "--stages", *stages, "--model", "m", "--out", str(out), *NO_PROBE,
                 "--depths", "1", "2"]) == 2
    assert "--depths says 1, but" in capsys.readouterr().err


def test_online_recipe_swaps_in_our_dataset_and_replay_buffer(tmp_path, capsys):
    import shlex

    (d1,) = _stages(tmp_path, depths=(1,))
    out = tmp_path / "online"
    assert main(["verl-recipe", "--stages", d1, "--model", "m", "--out", str(out), *NO_PROBE,
                 "--online", "k=2", "max_depth=4", "low_weight=0.05"]) == 0
    words = shlex.split((out / "stage_1.sh").read_text().replace("\\\n", " "), comments=True)
    ov = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith("-"))
    assert ov["data.custom_cls.path"] == ov["trainer.v1.sampler.custom_sampler.path"] == \
        "pkg://composition_rl.integrations.verl_online"
    assert (ov["data.custom_cls.name"], ov["trainer.v1.sampler.custom_sampler.name"]) == \
        ("OnlineDataset", "OnlineReplayBuffer")
    assert ov["data.dataloader_num_workers"] == "0"
    assert (ov["+data.online.k"], ov["+data.online.max_depth"], ov["+data.online.low_weight"]) == ("2", "4", "0.05")
    assert ov["+data.online.log_dir"] == str(out.resolve() / "online" / "depth1")
    assert ov["+trainer.v1.sampler.sampler_kwargs.filter_groups"] == "${algorithm.filter_groups}"
    assert json.loads((out / "recipe.json").read_text())["config"]["online"] == {"k": 2, "max_depth": 4,
                                                                                "low_weight": 0.05}
    assert ov["+trainer.v1.sampler.sampler_kwargs.backfill_after"] == "4"  # the default, BACKFILL_AFTER


def test_backfill_after_is_written_for_the_replay_buffer_and_needs_online(tmp_path, capsys):
    (d1,) = _stages(tmp_path, depths=(1,))
    base = ["verl-recipe", "--stages", d1, "--model", "m", *NO_PROBE]
    assert main(base + ["--out", str(tmp_path / "off"), "--online", "--backfill-after", "0"]) == 0
    plan = json.loads((tmp_path / "off" / "recipe.json").read_text())
    assert plan["config"]["backfill_after"] == 0
    assert "+trainer.v1.sampler.sampler_kwargs.backfill_after=0" in plan["plan"][0]["overrides"]
    assert main(base + ["--out", str(tmp_path / "a"), "--backfill-after", "2"]) == 2
    assert "--backfill-after acts on the online mode's replay buffer: add --online" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(base + ["--out", str(tmp_path / "b"), "--online", "--backfill-after", "-1"])
    assert "-1 must be >= 0" in capsys.readouterr().err
    plain = json.loads((tmp_path / "off" / "recipe.json").read_text())  # unchanged by the refusals
    assert plain == plan


def test_online_recipe_refuses_bad_settings_and_several_stages(tmp_path, capsys):
    stages = _stages(tmp_path)
    base = ["verl-recipe", "--model", "m", "--no-python-check"]
    assert main(base + ["--stages", *stages, "--out", str(tmp_path / "a"), "--online"]) == 2
    assert "give one --stages file" in capsys.readouterr().err
    assert main(base + ["--stages", stages[0], "--out", str(tmp_path / "b"), "--online", "kk=2"]) == 2
    assert "KEY one of k, window" in capsys.readouterr().err
    assert main(base + ["--stages", stages[0], "--out", str(tmp_path / "c"), "--online", "k=two"]) == 2
    assert "'two' is not a int" in capsys.readouterr().err
    assert main(base + ["--stages", stages[0], "--out", str(tmp_path / "d"), "--online", "window=1"]) == 2
    assert "window=1 must be >= k=3" in capsys.readouterr().err


@pytest.fixture(scope="module")
def stages(math300, tmp_path_factory):
    d = tmp_path_factory.mktemp("stages")
    assert crl("export", "--input", str(math300["math300.jsonl"]), "--out", str(d / "d1")).returncode == 0
    r = crl("compose", "--input", str(math300["math300.jsonl"]), "--out", str(d / "d2"), "--max-candidates", "200",
            "--export", "verl,trl", "--no-progress")
    assert r.returncode == 0, r.stderr
    return d


def test_verl_recipe_reads_stage_depths_from_the_data(stages, tmp_path):
    r = crl("verl-recipe", "--stages", str(stages / "d2" / "verl.parquet"), "--model", "m", "--out",
            str(tmp_path / "r"), *NO_PROBE)
    assert r.returncode == 0, r.stderr
    assert "Stage 1 of 1: depth 2" in (tmp_path / "r" / "stage_1.sh").read_text()


@pytest.mark.parametrize("stage,extra,needle", [
    ("d2/trl.parquet", (), "not a verl RL parquet"),
    ("d1/problems.jsonl", (), "not a parquet file"),
    ("d1/verl.parquet", ("--gpus", "0"), "--gpus: 0 must be >= 1"),
    ("d1/verl.parquet", ("--python", sys.executable), "cannot import verl"),
])
def test_verl_recipe_refuses_what_verl_cannot_run(stages, tmp_path, stage, extra, needle):
    if "cannot import" in needle:
        from composition_rl.integrations.verl_recipe import has_verl

        if has_verl():
            pytest.skip("this interpreter has verl")
    r = crl("verl-recipe", "--stages", str(stages / stage), "--model", "m", "--out", str(tmp_path / "r"), *extra)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr
    if "cannot import" in needle:
        assert "make verl-env" in r.stderr


def test_depth_1_trainer_data_comes_from_crl_export(stages):
    import pyarrow.parquet as pq

    t = pq.read_table(stages / "d1" / "verl.parquet")
    assert t.num_rows == 300 and {x["depth"] for x in t.column("extra_info").to_pylist()} == {1}
    assert sum(1 for _ in open(stages / "d1" / "problems.jsonl")) == 300
    r = crl("compose", "--input", str(stages / "d1" / "problems.jsonl"), "--depth", "1", "--out", str(stages / "x"))
    assert r.returncode == 2 and "crl export" in one_error_line(r)


def test_cpu_recipe_carries_the_cpu_environment_a_time_limit_and_the_paper_algorithm(tmp_path):
    import shlex

    from composition_rl.integrations.verl_cpu import cpu_env

    (d1,) = _stages(tmp_path, depths=(1,))
    out = tmp_path / "cpu"
    assert main(["verl-recipe", "--stages", d1, "--model", "m", "--out", str(out), *NO_PROBE, "--device", "cpu",
                 "--max-steps", "2"]) == 0
    script = (out / "stage_1.sh").read_text()
    lines = script.splitlines()
    launch = next(i for i, x in enumerate(lines) if "verl.trainer.main_ppo" in x)
    # the environment is exported before the launch, which runs under coreutils' timeout
    assert [x for x in lines[:launch] if x.startswith("export ")] == \
        [f"export {k}={shlex.quote(v)}" for k, v in cpu_env().items()]
    assert lines[launch].startswith("timeout -k 60 1800 python3 -m verl.trainer.main_ppo")
    words = shlex.split(script.replace("\\\n", " "), comments=True)
    ov = dict(w.split("=", 1) for w in words if "=" in w and not w.startswith(("-", "export")))
    assert ov["trainer.n_gpus_per_node"] == "1" and ov["trainer.device"] == "cpu"
    assert ov["+reward.custom_reward_function.reward_kwargs.fallbacks"] == "[prose]"
    assert ov["+actor_rollout_ref.rollout.enable_sleep_mode"] == "False"
    assert ov["algorithm.filter_groups.enable"] == "True" and ov["algorithm.adv_estimator"] == "grpo"
    assert words[-1] == "$@"  # extra overrides given to the script reach verl
    launch_sh = (out / "launch.sh").read_text()
    assert "export VERL_PLATFORM=cpu" in launch_sh  # the driver's launches inherit it
    cfg = json.loads((out / "recipe.json").read_text())["config"]
    assert (cfg["device"], cfg["timeout_s"]) == ("cpu", 1800)
    # the GPU recipe has none of it
    gpu = tmp_path / "gpu"
    assert main(["verl-recipe", "--stages", d1, "--model", "m", "--out", str(gpu), *NO_PROBE]) == 0
    g = (gpu / "stage_1.sh").read_text()
    assert "export " not in g and "timeout " not in g and "trainer.n_gpus_per_node=8" in g


def test_cpu_recipe_refuses_several_gpus_and_takes_its_own_limit(tmp_path):
    (d1,) = _stages(tmp_path, depths=(1,))
    r = crl("verl-recipe", "--stages", d1, "--model", "m", "--out", str(tmp_path / "a"), *NO_PROBE,
            "--device", "cpu", "--gpus", "2")
    assert r.returncode == 2 and "device=cpu runs on one machine as one worker" in one_error_line(r)
    r = crl("verl-recipe", "--stages", d1, "--model", "m", "--out", str(tmp_path / "b"), *NO_PROBE,
            "--device", "cpu", "--timeout", "600")
    assert r.returncode == 0, r.stderr
    assert "timeout -k 60 600 " in (tmp_path / "b" / "stage_1.sh").read_text()
