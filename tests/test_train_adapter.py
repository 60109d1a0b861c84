"""The TRL adapter fails loudly when the pinned TRL changes under it."""

from __future__ import annotations

import pytest

trl = pytest.importorskip("trl")

from composition_rl.jobs.train import trl_adapter  # noqa: E402
from composition_rl.jobs.train.config import DynamicSamplingConfig  # noqa: E402
from composition_rl.jobs.train.trl_adapter import (  # noqa: E402
    PINNED_TRL,
    TRLCompatError,
    check_batch_keys,
    check_trl_compat,
)


def test_installed_trl_is_the_pinned_one_and_has_the_hooks_we_override():
    assert trl.__version__ == PINNED_TRL
    check_trl_compat()


def test_a_different_trl_version_is_refused(monkeypatch):
    monkeypatch.setattr(trl_adapter.trl, "__version__", "1.17.0")
    with pytest.raises(TRLCompatError, match=r"written for trl 1\.16\.x"):
        check_trl_compat()


def test_a_patch_release_of_the_same_series_is_accepted(monkeypatch):
    monkeypatch.setattr(trl_adapter.trl, "__version__", "1.16.3")
    check_trl_compat()


def test_a_changed_hook_signature_is_refused(monkeypatch):
    def changed(self, inputs, extra):  # pragma: no cover - never called
        return {}

    monkeypatch.setattr(trl_adapter.GRPOTrainer, "_generate_and_score_completions", changed)
    with pytest.raises(TRLCompatError, match="takes"):
        check_trl_compat()


def test_a_log_that_no_longer_reports_the_metrics_dict_is_refused(monkeypatch):
    def changed(self, logs, start_time=None):  # pragma: no cover - never called
        return None

    monkeypatch.setattr(trl_adapter.GRPOTrainer, "log", changed)
    with pytest.raises(TRLCompatError, match="dynamic_sampling"):
        check_trl_compat()


def test_unknown_batch_keys_are_refused():
    check_batch_keys({"prompt_ids": object(), "advantages": object(), "old_per_token_logps": None})
    with pytest.raises(TRLCompatError, match="pixel_values"):
        check_batch_keys({"prompt_ids": object(), "pixel_values": object()})


def test_the_public_trainer_loads_trl_only_when_asked_for():
    import subprocess
    import sys

    code = ("import sys\nimport composition_rl.integrations.trl\n"
            "print(sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
    from composition_rl.integrations.trl import GRPOTrainer
    from composition_rl.jobs.train.trl_adapter import DynamicSamplingGRPOTrainer

    assert GRPOTrainer is DynamicSamplingGRPOTrainer and issubclass(GRPOTrainer, trl.GRPOTrainer)


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"reward_funcs": [], "solve_reward": 0}, "solve_reward=0: dynamic sampling needs a reward function"),
    ({"reward_funcs": [len], "solve_reward": 2}, r"\(it has 1\)"),
    ({"reward_funcs": ["some/reward-model"]}, "reward_funcs\\[0\\] is str"),
    ({"reward_funcs": [len], "prompt_source": object(), "online": object()}, "not both"),
    ({"reward_funcs": [len], "dynamic_sampling": DynamicSamplingConfig(max_rounds=0)}, "max_rounds must be >= 1, got 0"),
])
def test_bad_trainer_arguments_are_refused_before_any_model_loads(kwargs, named):
    from composition_rl.jobs.train.trl_adapter import DynamicSamplingGRPOTrainer

    with pytest.raises(ValueError, match=named):
        DynamicSamplingGRPOTrainer("no/such-model", **kwargs)


def test_the_trainer_refills_from_its_dataset_or_the_pool_it_is_given(tmp_path):
    """The wiring, on a random tiny model (no training): the default source refills from
    train_dataset, ``online=`` draws from that pool, the reward keeps its name in TRL's logs,
    and what dynamic sampling cannot run is refused with the values."""
    from datasets import Dataset, IterableDataset
    from fakes.rollout_tiny_qwen import build_tiny_qwen
    from trl import GRPOConfig

    from composition_rl.integrations.trl import (
        DatasetSource,
        GRPOTrainer,
        PoolSource,
        make_reward_fn,
    )
    from composition_rl.jobs.train.arithmetic import arithmetic_problems
    from composition_rl.jobs.train.online import OnlineConfig, OnlinePool

    model = str(build_tiny_qwen(tmp_path / "tiny"))
    problems = arithmetic_problems(4, depth=1, seed=0)
    rows = [{"prompt": [{"role": "user", "content": p.question}], "answer": p.answer} for p in problems]
    ds = Dataset.from_list(rows)

    def args(**kw):
        return GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2,
                          report_to="none", bf16=False, use_cpu=True, **kw)

    plain = GRPOTrainer(model, reward_funcs=[make_reward_fn()], args=args(), train_dataset=ds)
    assert isinstance(plain.prompt_source, DatasetSource) and plain.prompt_source.dataset is plain.train_dataset
    assert plain.reward_func_names == ["math_verify"] and plain.dynamic_sampling.max_rounds == 4
    pool = OnlinePool(problems, OnlineConfig())
    online = GRPOTrainer(model, reward_funcs=[make_reward_fn()], args=args(), train_dataset=ds, online=pool)
    assert isinstance(online.prompt_source, PoolSource) and online.prompt_source.pool is pool
    with pytest.raises(ValueError, match="num_iterations=2"):
        GRPOTrainer(model, reward_funcs=[make_reward_fn()], args=args(num_iterations=2), train_dataset=ds)
    stream = IterableDataset.from_generator(lambda: iter(rows))
    with pytest.raises(ValueError, match="map-style dataset"):
        GRPOTrainer(model, reward_funcs=[make_reward_fn()], args=args(max_steps=1), train_dataset=stream)


def _api_md_trl_script() -> list[str]:
    """The python blocks of docs/api.md's section on dynamic sampling in your own TRL script."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text(encoding="utf-8")
    section = text.split("## Dynamic sampling in your own TRL script", 1)[1].split("\n## ", 1)[0]
    return [b.split("```", 1)[0] for b in section.split("```python\n")[1:]]


@pytest.mark.slow  # builds the test's tiny policy when the pytest cache lacks it (~20 s), then ~15 s of training
def test_the_trl_script_of_docs_api_md_runs_as_written_and_refills_solved_groups(pytestconfig, tmp_path, monkeypatch,
                                                                                 capsys):
    """The script runs for two steps on the tiny policy, in a fresh folder; its batches with
    solve_all groups are refilled to informative ones, and the online pool retires a mastered
    prompt and injects its compositions."""
    from fakes.tiny_policy import tiny_policy_dir

    from composition_rl.grading import close_shared_verifiers

    blocks = _api_md_trl_script()
    assert len(blocks) == 2, "docs/api.md: expected the script and its online continuation"
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "tiny").symlink_to(tiny_policy_dir(pytestconfig))  # the script's model = "runs/tiny"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    scope: dict = {"__name__": "__main__"}
    try:
        exec(compile(blocks[0], "docs/api.md (TRL script)", "exec"), scope)
        plain = scope["trainer"]
        rows = [r for r in plain.state.log_history if "dynamic_sampling/rounds" in r]
        assert [r["step"] for r in rows] == [1, 2]
        # a step whose sampled groups held solve_all ones, dropped and refilled by later rounds
        # (without a bound hit: the trained batch is all informative groups)
        refilled = [r for r in rows if r["dynamic_sampling/solve_all"] > 0 and r["dynamic_sampling/rounds"] > 1
                    and r["dynamic_sampling/refilled"] >= 1 and r["dynamic_sampling/bound_hit"] == 0]
        assert refilled, rows
        last = plain.last_sample
        assert last.bound_hit or all(g.kind == "informative" for g in last.trained_groups)
        assert len(last.trained_groups) == 32 // 4
        assert f"step {refilled[0]['step']}: {refilled[0]['dynamic_sampling/rounds']:.0f} rounds" in capsys.readouterr().out

        exec(compile(blocks[1], "docs/api.md (TRL script, online)", "exec"), scope)
        pool = scope["pool"]
        assert pool.retired_total >= 1 and pool.injected
        online_rows = [r for r in scope["trainer"].state.log_history if "online/live" in r]
        assert len(online_rows) == 2 and online_rows[-1]["online/retired_total"] == pool.retired_total
        assert (tmp_path / "runs" / "grpo-online" / "online.jsonl").read_text().count("\n") == pool.retired_total
    finally:
        close_shared_verifiers()


@pytest.mark.slow  # the tiny policy (cached after the first build), then three steps of training
def test_a_resumed_user_run_continues_the_same_refills(pytestconfig, tmp_path, monkeypatch):
    """The refill order's position is saved in each checkpoint and restored by
    ``train(resume_from_checkpoint=...)``: step 2 redone from checkpoint 1 leaves the source
    exactly where the uninterrupted run's step 2 left it (no refill prompt skipped or repeated)."""
    import json

    from datasets import Dataset
    from fakes.tiny_policy import tiny_policy_dir
    from trl import GRPOConfig

    from composition_rl.grading import close_shared_verifiers
    from composition_rl.integrations.trl import DynamicSamplingConfig, GRPOTrainer, make_reward_fn
    from composition_rl.jobs.train.arithmetic import arithmetic_problems
    from composition_rl.jobs.train.trl_adapter import SOURCE_STATE

    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    problems = [p for p in arithmetic_problems(40, depth=1, seed=5, digits=1) if "0" not in p.question]
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": p.question}], "answer": p.answer,
                                  "answers": list(p.answers)} for p in problems])

    def trainer():
        args = GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=2, per_device_train_batch_size=16,
                          num_generations=4, temperature=0.3, max_completion_length=32, report_to="none", seed=0,
                          bf16=False, use_cpu=True, save_steps=1, disable_tqdm=True)
        return GRPOTrainer(str(tiny_policy_dir(pytestconfig)), reward_funcs=[make_reward_fn()], args=args,
                           train_dataset=dataset, dynamic_sampling=DynamicSamplingConfig(max_rounds=8))

    try:
        first = trainer()
        first.train()
        saved = {s: json.loads((tmp_path / "run" / f"checkpoint-{s}" / SOURCE_STATE).read_text()) for s in (1, 2)}
        assert saved[1] != saved[2] and first.prompt_source.state_dict() == saved[2]
        assert saved[2]["cursor"] > 0  # refills were drawn (else this test shows nothing)
        again = trainer()
        again.train(resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-1"))
        assert again.state.global_step == 2
        assert again.prompt_source.state_dict() == saved[2]
    finally:
        close_shared_verifiers()
