"""A verl launch recipe with the paper's settings and a staged depth curriculum driver.

``crl verl-recipe --stages d1/verl.parquet d2/verl.parquet --model PATH --python PY --out DIR``
writes (``PY``: the interpreter of an environment with verl and composition_rl, such as the
``.venv-verl`` that ``make verl-env`` builds):

- ``DIR/recipe.json``: the stages, thresholds and the Hydra overrides of every stage;
- ``DIR/stage_<k>.sh``: one ``python -m verl.trainer.main_ppo`` call per stage, for users
  who drive the schedule by hand;
- ``DIR/launch.sh``: the curriculum driver, ``PY -m composition_rl.integrations.verl_recipe
  drive DIR/recipe.json``. It trains stage K in chunks of ``chunk_steps``; after each chunk it
  merges the checkpoint to a Hugging Face folder (``verl.model_merger``), profiles it with
  ``crl profile`` on a probe sample of depth K, and advances when solve_all reaches the
  threshold or the stage budget is spent (Composition-RL, Section 4.3, made automatic).

The overrides (Composition-RL, Section 4.1 / Appendix B.1): GRPO, no KL (neither in the reward nor
as a loss), token-mean loss aggregation (Equation 3), clip 0.2 / 0.28, group size 8,
batch 256, lr 1e-6, temperature 1.0, 16K responses, dynamic sampling as verl's
``algorithm.filter_groups`` on ``acc`` (Equation 5; bounded for verl's V1 trainer by
``max_inflight_gen_batches``), and our verifier as the reward
(``reward.custom_reward_function`` -> ``composition_rl.integrations.verl.compute_score``).

With ``online`` settings (``crl verl-recipe --online``) the one stage runs the online
curriculum instead of fixed files: verl's dataset and replay buffer are replaced by
:mod:`composition_rl.integrations.verl_online` (see :func:`online_overrides`).

With ``device="cpu"`` (``crl verl-recipe --device cpu``) the scripts are a smoke test for this
machine's CPU: they export :func:`launch_env` (:mod:`composition_rl.integrations.verl_cpu`'s
platform and patches), add :func:`cpu_overrides` (its workarounds, toy sizes, the reward's
prose fallback) and run each launch under a wall-clock limit of ``timeout_s``. Every stage
script passes its own arguments on to verl as further overrides.

Only the launch needs verl; writing the recipe does not import it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["BACKFILL_AFTER", "PAPER", "VERL_COLUMNS", "RecipeConfig", "RecipeStage", "online_overrides", "read_stage", "stage_overrides",
           "step_metrics", "write_recipe"]

log = logging.getLogger(__name__)

# the columns of verl's RL parquet (composition_rl.jobs.export.to_verl) that a stage must have
VERL_COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info")

REWARD_PATH = "pkg://composition_rl.integrations.verl"
REWARD_NAME = "compute_score"
MAX_INFLIGHT_GEN_BATCHES = 2

#: where a recipe runs: "gpu" (the paper's settings as they are) or "cpu" (a smoke test)
DEVICES = ("gpu", "cpu")
#: the reward's answer fallbacks on CPU: the smoke test's SmolLM2 rarely writes \boxed{}
CPU_FALLBACKS = ("prose",)

# The online curriculum's two verl classes (composition_rl.integrations.verl_online).
ONLINE_PATH = "pkg://composition_rl.integrations.verl_online"
ONLINE_DATASET = "OnlineDataset"
ONLINE_SAMPLER = "OnlineReplayBuffer"

# Online mode: refill prompts a step may generate, in train batches, before the rest of its
# refills become compositions of its own solve_all prompts (0 = off: verl's unbounded loop).
# verl 0.9.1's V1 sync buffer has no cap on a step's generation; a step that has not filled
# after its first batch and 4 batches of refills has under about one informative group in
# five, where the paper finds MATH12K training after 50 steps (Figure 2: ~75% solve_all,
# ~5% solve_none): composition, not more sampling, is what it lacks. docs/training.md.
BACKFILL_AFTER = 4

# Seed 000, Section 4.1 / Appendix B.1.
PAPER: dict[str, Any] = {
    "algorithm.adv_estimator": "grpo",
    "algorithm.norm_adv_by_std_in_grpo": True,
    "algorithm.use_kl_in_reward": False,
    "algorithm.filter_groups.enable": True,
    "algorithm.filter_groups.metric": "acc",
    # verl 0.9's V1 trainer (the default, trainer.use_v1=True) ignores max_num_gen_batches (it
    # logs a warning) and bounds dynamic sampling by the prompt batches in flight at once, in
    # train-batch units. 2 lets refills start while the first batch is still generating (the
    # paper's over-sampled candidate batch, Eq. 5) and bounds the discarded surplus to one batch.
    "algorithm.filter_groups.max_inflight_gen_batches": MAX_INFLIGHT_GEN_BATCHES,
    "data.train_batch_size": 256,
    "data.max_prompt_length": 2048,
    "data.max_response_length": 16384,
    "data.filter_overlong_prompts": True,
    "data.truncation": "error",
    "actor_rollout_ref.actor.optim.lr": 1e-6,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 256,
    "actor_rollout_ref.actor.use_kl_loss": False,
    "actor_rollout_ref.actor.kl_loss_coef": 0.0,
    "actor_rollout_ref.actor.entropy_coeff": 0.0,
    "actor_rollout_ref.actor.clip_ratio_low": 0.2,
    "actor_rollout_ref.actor.clip_ratio_high": 0.28,
    "actor_rollout_ref.actor.loss_agg_mode": "token-mean",
    # Token-budgeted micro-batches (as verl's DAPO recipe): 16K responses vary wildly in length.
    "actor_rollout_ref.actor.use_dynamic_bsz": True,
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 36864,
    "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": True,
    "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": 36864,
    "actor_rollout_ref.rollout.name": "vllm",
    "actor_rollout_ref.rollout.n": 8,
    "actor_rollout_ref.rollout.temperature": 1.0,
    "actor_rollout_ref.rollout.top_p": 1.0,
    "reward.custom_reward_function.path": REWARD_PATH,
    "reward.custom_reward_function.name": REWARD_NAME,
    "trainer.logger": "['console']",
    "trainer.val_before_train": False,
    "trainer.test_freq": -1,
}


@dataclass
class RecipeStage:
    """One stage: a verl parquet (from ``crl compose --export verl``) and its budget."""

    name: str
    train_file: str
    depth: int
    max_steps: int = 200


@dataclass
class RecipeConfig:
    """What the recipe launches and how the driver decides to advance."""

    model: str
    out_dir: str
    stages: list[RecipeStage]
    threshold: float = 0.75
    chunk_steps: int = 50
    probe_size: int = 256
    probe_samples: int = 8
    n_gpus_per_node: int = 8
    nnodes: int = 1
    save_freq: int = 50
    project: str = "composition-rl"
    python: str = "python3"
    extra: dict[str, Any] = field(default_factory=dict)
    online: dict[str, Any] | None = None  # OnlineConfig fields; None = fixed stage files
    backfill_after: int = BACKFILL_AFTER  # online only: see BACKFILL_AFTER
    # "cpu": a smoke test on this machine's CPU (composition_rl.integrations.verl_cpu: its
    # environment, overrides and a wall-clock limit of timeout_s on every verl launch)
    device: str = "gpu"
    timeout_s: int = 0  # 0: no limit (the GPU default); the CPU mode needs one

    def validate(self) -> RecipeConfig:
        """Return ``self`` after checking the settings (device, cluster shape, budgets,
        threshold, the online mode's fields and single stage, ``backfill_after``); raises
        ``ValueError`` naming the first bad one."""
        if self.device not in DEVICES:
            raise ValueError(f"device={self.device!r}: expected one of {', '.join(DEVICES)}")
        if self.device == "cpu" and (self.n_gpus_per_node, self.nnodes) != (1, 1):
            raise ValueError(f"device=cpu runs on one machine as one worker: n_gpus_per_node="
                             f"{self.n_gpus_per_node} and nnodes={self.nnodes} must both be 1")
        if self.timeout_s < 0:
            raise ValueError(f"timeout_s={self.timeout_s} must be >= 0 (0: no limit)")
        if not self.stages:
            raise ValueError("a recipe needs at least one stage")
        if self.n_gpus_per_node < 1 or self.nnodes < 1:
            raise ValueError(f"n_gpus_per_node={self.n_gpus_per_node} and nnodes={self.nnodes} must be >= 1")
        if self.probe_size < 1:
            raise ValueError(f"probe_size={self.probe_size} must be >= 1")
        if not 0 < self.threshold <= 1:
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold}")
        if self.chunk_steps < 1 or any(s.max_steps < 1 for s in self.stages):
            raise ValueError("chunk_steps and every stage's max_steps must be >= 1")
        if self.online is not None:
            from composition_rl.jobs.train.online import OnlineConfig

            OnlineConfig.from_dict(self.online)
            if len(self.stages) != 1:
                raise ValueError(f"the online mode grows depth itself: give one stage (depth-1 data), "
                                 f"not {len(self.stages)}")
        if isinstance(self.backfill_after, bool) or not isinstance(self.backfill_after, int) \
                or self.backfill_after < 0:
            raise ValueError(f"backfill_after={self.backfill_after!r} must be an integer >= 0 (0 = off)")
        return self


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "True" if v else "False"
    return str(v)


def read_stage(path: str | os.PathLike) -> tuple[int, int]:
    """``(depth, rows)`` of a stage file, after checking it is a verl RL parquet.

    The depth is read from the data (``extra_info.depth``, written by ``crl compose
    --export verl`` and ``crl export``); a file mixing depths gets its largest.

    Raises:
        ValueError: not a parquet file, a parquet without verl's columns, or no rows.
    """
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.is_file():
        raise ValueError(f"stage file not found: {p}")
    try:
        schema = pq.read_schema(p)
    except Exception as e:  # not parquet at all (a JSON file, a truncated download)
        raise ValueError(f"{p}: not a parquet file ({type(e).__name__}); a stage is the verl.parquet "
                         "that `crl compose --export verl` or `crl export --format verl` writes") from None
    missing = [c for c in VERL_COLUMNS if c not in schema.names]
    if missing:
        hint = " (this looks like a TRL export: use verl.parquet)" if "answer" in schema.names else ""
        raise ValueError(f"{p}: not a verl RL parquet: no column {', '.join(missing)}; it has "
                         f"{', '.join(schema.names)}{hint}")
    table = pq.read_table(p, columns=["extra_info"])
    if table.num_rows == 0:
        raise ValueError(f"{p}: no rows")
    depths = {int((x or {}).get("depth") or 1) for x in table.column("extra_info").to_pylist()}
    return max(depths), table.num_rows


def online_overrides(cfg: RecipeConfig, stage: RecipeStage) -> dict[str, Any]:
    """The overrides that put :mod:`composition_rl.integrations.verl_online` into verl's V1 trainer.

    The replay buffer gets the DAPO settings by interpolation (verl passes a custom buffer none
    of them), so ``algorithm.filter_groups`` and ``data.train_batch_size`` stay the one source.
    """
    from composition_rl.jobs.train.online import OnlineConfig

    oc = OnlineConfig.from_dict(cfg.online)
    values: dict[str, Any] = {
        "data.custom_cls.path": ONLINE_PATH,
        "data.custom_cls.name": ONLINE_DATASET,
        "data.dataloader_num_workers": 0,  # the pool must live in the trainer's process
        "+data.online.log_dir": str(Path(cfg.out_dir) / "online" / stage.name),
    }
    values.update({f"+data.online.{k}": v for k, v in oc.to_dict().items()})
    values.update({
        "trainer.v1.sampler.custom_sampler.path": ONLINE_PATH,
        "trainer.v1.sampler.custom_sampler.name": ONLINE_SAMPLER,
        "+trainer.v1.sampler.sampler_kwargs.online_log_dir": "${data.online.log_dir}",
        "+trainer.v1.sampler.sampler_kwargs.filter_groups": "${algorithm.filter_groups}",
        "+trainer.v1.sampler.sampler_kwargs.train_batch_size": "${data.train_batch_size}",
        "+trainer.v1.sampler.sampler_kwargs.backfill_after": cfg.backfill_after,
    })
    return values


def stage_overrides(cfg: RecipeConfig, index: int, model_path: str, total_steps: int) -> list[str]:
    """The Hydra overrides for training stage ``index`` from ``model_path`` up to ``total_steps``."""
    st = cfg.stages[index]
    ckpt_dir = Path(cfg.out_dir) / "checkpoints" / st.name
    values = dict(PAPER)
    values.update(
        {
            "data.train_files": st.train_file,
            "data.val_files": st.train_file,
            "actor_rollout_ref.model.path": model_path,
            "trainer.total_training_steps": total_steps,
            "trainer.save_freq": cfg.save_freq,
            "trainer.default_local_dir": str(ckpt_dir),
            "trainer.resume_mode": "auto",
            "trainer.project_name": cfg.project,
            "trainer.experiment_name": f"{cfg.project}-{st.name}",
            "trainer.n_gpus_per_node": cfg.n_gpus_per_node,
            "trainer.nnodes": cfg.nnodes,
        }
    )
    if cfg.device == "cpu":
        values.update(cpu_overrides())
    if cfg.online is not None:
        values.update(online_overrides(cfg, st))
    values.update(cfg.extra)
    return [f"{k}={_fmt(v)}" for k, v in values.items()]


def cpu_overrides() -> dict[str, Any]:
    """The overrides of a CPU smoke test: :func:`composition_rl.integrations.verl_cpu.cpu_overrides`
    (the workarounds and a tiny batch) and the reward's fallbacks for a model that does not box."""
    from composition_rl.integrations.verl_cpu import cpu_overrides as workarounds

    values = workarounds()
    values["+reward.custom_reward_function.reward_kwargs.fallbacks"] = "[" + ",".join(CPU_FALLBACKS) + "]"
    return values


def launch_env(cfg: RecipeConfig) -> dict[str, str]:
    """Environment variables every verl launch of ``cfg`` needs (none on GPUs)."""
    if cfg.device != "cpu":
        return {}
    from composition_rl.integrations.verl_cpu import cpu_env

    return cpu_env()


def _prelude(cfg: RecipeConfig) -> list[str]:
    """Shell lines before a launch: its environment (CPU mode)."""
    env = launch_env(cfg)
    if not env:
        return []
    lines = ["# CPU smoke test: verl's CPU platform and patches (composition_rl.integrations.verl_cpu)"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    return lines


def _timeout_prefix(cfg: RecipeConfig) -> str:
    # coreutils timeout: TERM at the limit, KILL 60 s later (a hung weight sync ignores neither)
    return f"timeout -k 60 {cfg.timeout_s} " if cfg.timeout_s else ""


def write_recipe(cfg: RecipeConfig) -> Path:
    """Write recipe.json, stage_<k>.sh and launch.sh under ``cfg.out_dir``; return launch.sh."""
    cfg.validate()
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plan = []
    for i, st in enumerate(cfg.stages):
        model = cfg.model if i == 0 else str(out / "merged" / cfg.stages[i - 1].name)
        ov = stage_overrides(cfg, i, model, st.max_steps)
        plan.append({"stage": st.name, "overrides": ov})
        script = out / f"stage_{i + 1}.sh"
        lines = ["#!/usr/bin/env bash",
                 f"# Stage {i + 1} of {len(cfg.stages)}: depth {st.depth} ({st.train_file}), the paper's settings"
                 + (" (CPU smoke test)." if cfg.device == "cpu" else "."),
                 "set -euo pipefail", *_prelude(cfg),
                 f"{_timeout_prefix(cfg)}{shlex.quote(cfg.python)} -m verl.trainer.main_ppo \\"]
        lines += [f"    {shlex.quote(o)} \\" for o in ov] + ['    "$@"', ""]
        script.write_text("\n".join(lines), encoding="utf-8")
        script.chmod(0o755)
    (out / "recipe.json").write_text(
        json.dumps({"config": asdict(cfg), "plan": plan}, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    launch = out / "launch.sh"
    launch.write_text(
        "#!/usr/bin/env bash\n"
        "# Staged depth curriculum on verl: train a chunk, merge, profile on a depth-K probe,\n"
        "# advance when solve_all >= threshold or the stage budget is spent.\n"
        "set -euo pipefail\n"
        + "".join(line + "\n" for line in _prelude(cfg))
        + f"{shlex.quote(cfg.python)} -m composition_rl.integrations.verl_recipe drive "
        f"{shlex.quote(str(out / 'recipe.json'))} \"$@\"\n",
        encoding="utf-8",
    )
    launch.chmod(0o755)
    return launch


def _load(path: str | os.PathLike) -> RecipeConfig:
    raw = json.loads(Path(path).read_text(encoding="utf-8"))["config"]
    raw["stages"] = [RecipeStage(**s) for s in raw["stages"]]
    return RecipeConfig(**raw).validate()


def has_verl() -> bool:
    """Whether this interpreter can import verl's trainer (``verl.trainer``, not ``verl``: a
    folder named verl on sys.path, such as tests/verl, is a namespace package)."""
    import importlib.util

    try:
        return importlib.util.find_spec("verl.trainer") is not None
    except ImportError:
        return False


def _probe_file(stage: RecipeStage, out: Path, size: int) -> Path:
    """Problems of the stage's parquet (first ``size`` rows) as JSONL for ``crl profile``."""
    import pyarrow.parquet as pq

    from composition_rl.io.files import atomic_write_jsonl
    from composition_rl.records import Problem

    rows = pq.read_table(stage.train_file).slice(0, size).to_pylist()
    probs = []
    for r in rows:
        info = r.get("extra_info") or {}
        answers = info.get("answers") or [r["reward_model"]["ground_truth"]]
        probs.append(Problem(id=info.get("id") or str(info.get("index")), question=info["question"],
                             answers=tuple(answers), depth=int(info.get("depth", stage.depth))).to_dict())
    path = out / "probes" / f"{stage.name}.jsonl"
    atomic_write_jsonl(path, probs)
    return path


_STEP_LINE = re.compile(r"step:(\d+) - (.*)")


def step_metrics(text: str) -> dict[int, dict[str, float]]:
    """verl's console metrics by training step, from its ``step:N - key:value - ...`` lines
    (a launch's log); values that are no number are left out. The one reader of those lines
    (the GPU check's figures, the CPU launch tests).

    >>> step_metrics("(TaskRunner pid=7) step:2 - critic/score/mean:np.float64(0.25) - timing_s/step:3.5\\n")
    {2: {'critic/score/mean': 0.25, 'timing_s/step': 3.5}}
    """
    steps: dict[int, dict[str, float]] = {}
    for line in text.splitlines():
        m = _STEP_LINE.search(line)
        if not m:
            continue
        row = {}
        for item in m.group(2).split(" - "):
            key, _, value = item.rpartition(":")
            value = value.strip()
            if value.endswith(")") and "(" in value:  # numpy 2 writes np.float64(0.25)
                value = value[value.rindex("(") + 1 : -1]
            try:
                row[key.strip()] = float(value)
            except ValueError:
                continue
        steps[int(m.group(1))] = row
    return steps


def _latest_step(ckpt_dir: Path) -> int:
    marker = ckpt_dir / "latest_checkpointed_iteration.txt"
    return int(marker.read_text().strip()) if marker.exists() else 0


def drive(recipe_json: str | os.PathLike, dry_run: bool = False) -> int:
    """Run the curriculum: for each stage, train chunks until solve_all >= threshold or budget."""
    cfg = _load(recipe_json)
    out = Path(cfg.out_dir)
    journal = out / "curriculum.jsonl"
    if not has_verl():
        msg = (f"verl is not importable by {sys.executable}: build the environment with `make verl-env` "
               "and write the recipe with --python .venv-verl/bin/python")
        if not dry_run:
            log.error("error: %s", msg)
            return 2
        log.warning("warning (dry run): %s", msg)

    def run(cmd: list[str], timeout: int | None = None) -> None:
        print("+ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
        if not dry_run:
            subprocess.run(cmd, check=True, env={**os.environ, **launch_env(cfg)}, timeout=timeout)

    model = cfg.model
    for i, st in enumerate(cfg.stages):
        ckpt_dir = out / "checkpoints" / st.name
        merged = out / "merged" / st.name
        probe = _probe_file(st, out, cfg.probe_size) if not dry_run else out / "probes" / f"{st.name}.jsonl"
        steps = _latest_step(ckpt_dir)
        while True:
            steps = min(st.max_steps, steps + cfg.chunk_steps)
            run([sys.executable, "-m", "verl.trainer.main_ppo", *stage_overrides(cfg, i, model, steps)],
                timeout=cfg.timeout_s or None)
            run([sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir",
                 str(ckpt_dir / f"global_step_{steps}" / "actor"), "--target_dir", str(merged)])
            prof = out / "profiles" / f"{st.name}-{steps}"
            # the same interpreter, not whatever `crl` is first on PATH
            run([sys.executable, "-m", "composition_rl.cli", "profile", "--model", str(merged), "--input", str(probe),
                 "-n", str(cfg.probe_samples), "--temperature", "1.0", "--out", str(prof)])
            solve_all = None if dry_run else _solve_all(prof)
            reason = None
            if solve_all is not None and solve_all >= cfg.threshold and i + 1 < len(cfg.stages):
                reason = f"solve_all {solve_all:.2f} >= {cfg.threshold:.2f} on the depth-{st.depth} probe"
            elif steps >= st.max_steps:
                reason = f"step budget of {st.max_steps} exhausted"
            elif dry_run:
                reason = f"dry run: one chunk of {cfg.chunk_steps} steps shown (the real run trains up to {st.max_steps})"
            row = {"stage": st.name, "step": steps, "solve_all": solve_all, "advance": reason}
            if not dry_run:
                with open(journal, "a", encoding="utf-8") as f:
                    f.write(json.dumps(row, sort_keys=True) + "\n")
            print(json.dumps(row), flush=True)
            if reason:
                break
        model = str(merged)
    return 0


def _solve_all(profile_dir: Path) -> float:
    """The solve_all ratio from a ``crl profile`` output folder (summary.json)."""
    summary = json.loads((profile_dir / "summary.json").read_text(encoding="utf-8"))
    for key in ("solve_all", "solve_all_ratio"):
        if key in summary:
            return float(summary[key])
    counts = summary.get("counts") or summary.get("groups") or {}
    total = sum(counts.values()) if isinstance(counts, dict) else 0
    if total:
        return counts.get("solve_all", 0) / total
    raise ValueError(f"{profile_dir}/summary.json has no solve_all figure: keys {sorted(summary)}")


def main(argv: list[str] | None = None) -> int:
    """``python -m composition_rl.integrations.verl_recipe drive RECIPE [--dry-run]``: run the
    curriculum driver of ``recipe.json`` (see :func:`drive`); returns its exit status."""
    p = argparse.ArgumentParser(prog="python -m composition_rl.integrations.verl_recipe")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("drive", help="run the staged curriculum described by recipe.json")
    d.add_argument("recipe")
    d.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = p.parse_args(argv)
    from composition_rl.logs import show_logs  # a command line, like crl: its notes on stderr

    show_logs()
    return drive(args.recipe, dry_run=args.dry_run)



# --- the crl verl-recipe job: the interpreter, the online settings, the stages ---------------

CPU_TIMEOUT_S = 1800  # two steps of SmolLM2 take minutes; a hang is cut off well before CI's limit

# verl.trainer, not verl: a folder named verl on sys.path (tests/verl) is a namespace package
_IMPORT_PROBE = ("import importlib.util as u, sys\n"
                 "def has(m):\n"
                 "    try:\n"
                 "        return u.find_spec(m) is not None\n"
                 "    except ImportError:\n"
                 "        return False\n"
                 "missing = [m for m in ('verl.trainer', 'composition_rl') if not has(m)]\n"
                 "print(' '.join(missing)); sys.exit(3 if missing else 0)")

_BUILD_VENV = ("build it with `make verl-env` (scripts/setup_verl_venv.sh: .venv-verl with verl 0.9.1 and "
               "this package) and pass --python .venv-verl/bin/python")


def missing_modules(python: str) -> list[str] | None:
    """Modules of verl/composition_rl that ``python`` cannot import, or None if it cannot run."""
    try:
        r = subprocess.run([python, "-c", _IMPORT_PROBE], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.split() if r.returncode in (0, 3) else None


def online_settings(items: list[str] | None) -> dict | None:
    """``--online KEY=VALUE ...`` as OnlineConfig fields (typed as the dataclass declares them);
    a ValueError names a bad pair.

    >>> online_settings(["k=3"]), online_settings(None)
    ({'k': 3}, None)
    """
    if items is None:
        return None
    from dataclasses import fields

    from composition_rl.jobs.train.online import OnlineConfig

    types = {f.name: {"int": int, "float": float}[str(f.type)] for f in fields(OnlineConfig)}
    out: dict = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or key not in types:
            raise ValueError(f"--online {item}: expected KEY=VALUE with KEY one of {', '.join(types)}")
        try:
            out[key] = types[key](text)
        except ValueError:
            raise ValueError(f"--online {item}: {text!r} is not a {types[key].__name__}") from None
    try:
        OnlineConfig.from_dict(out)
    except ValueError as e:
        raise ValueError(f"--online: {e}") from None
    return out


def choose_python(python: str | None, check: bool = True) -> str:
    """The interpreter the scripts will use: ``python`` (checked to import verl and this
    package unless not ``check``), else this one if it has verl, else ``./.venv-verl``'s;
    a ValueError says how to build one."""
    if python:
        py = python
        if not check:
            return py
        if "/" in py:
            py = str(Path(py).absolute())
        missing = missing_modules(py)
        if missing is None:
            raise ValueError(f"--python {python}: cannot run it; {_BUILD_VENV}")
        if missing:
            raise ValueError(f"--python {python} cannot import {' and '.join(missing)}; {_BUILD_VENV}")
        return py
    if has_verl():
        return sys.executable
    local = Path(".venv-verl/bin/python")
    if local.exists() and missing_modules(str(local.absolute())) == []:
        return str(local.absolute())
    if not check:
        return "python3"
    raise ValueError(f"no interpreter with verl given, and {sys.executable} has no verl: {_BUILD_VENV}")


def recipe_stages(files: list[str], depths: list[int] | None, max_steps: int) -> list[RecipeStage]:
    """One :class:`RecipeStage` per verl parquet, its depth read from the data (and checked
    against ``depths`` when given); a ValueError names the stage."""
    stages: list[RecipeStage] = []
    for k, f in enumerate(files):
        p = Path(f)
        try:
            depth, rows = read_stage(p)
        except ValueError as e:
            raise ValueError(f"stage {k + 1}: {e}") from None
        if depths and depths[k] != depth:
            raise ValueError(f"stage {k + 1}: --depths says {depths[k]}, but {p} holds depth-{depth} data")
        names = [s.name for s in stages]
        name = f"depth{depth}" if f"depth{depth}" not in names else f"depth{depth}-{k + 1}"
        stages.append(RecipeStage(name=name, train_file=str(p.resolve()), depth=depth, max_steps=max_steps))
    return stages


if __name__ == "__main__":
    sys.exit(main())
