"""The jobs of one seed, each a plain function of (config, out, seed, arg) that writes files.

Per seed ``s`` under ``OUT/seed_s/``:

- ``sft``: stage data (``data/*.jsonl``) and the tiny model (``model/``);
- ``d1``: depth-1 GRPO on the pool (``d1/``: metrics for Figure 2 left, ``d1/final``);
- ``tests``: the new-pairs tests (kind *i*): depth-2/3 compositions, in pairs never shown in
  SFT or RL, of train-side problems the depth-1 checkpoint solves alone (``data/new{2,3}.jsonl``);
- ``profile``: the depth-1 checkpoint's pass rates on the pool and on depth-2/3 compositions
  of it (``profile/{pool,depth2,depth3}/``: Figure 2 right);
- ``arm:NAME``: an arm trained from ``d1/final`` (``arms/NAME/``) with a snapshot every
  ``curve_every`` steps; ``continue`` runs longer, with a snapshot every ``snapshot_every``
  steps, so that it can also be compared at matched generated tokens;
- ``eval:NAME``: avg@N on every test set (:data:`TESTS`), v1 recovery, and the new-pairs
  depth-2 accuracy along the arm's snapshots (``eval/NAME/``).

A job that finished wrote ``jobs/NAME.json``; the executor skips it on a rerun.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from composition_rl.io.files import atomic_write_json, read_jsonl
from composition_rl.jobs.reproduce.config import ReproduceConfig
from composition_rl.jobs.train.toy import ToyRecipe

__all__ = ["ARM_STAGES", "continue_steps", "eval_targets", "run_job", "seed_dir"]

# Training sampling (the cpu-tiny preset: temperature 1.0) for profiles, so a profile's bands
# are the bands GRPO sees; evaluation uses the paper's evaluation preset (0.6 / 0.95 / 20).
PROFILE_TEMPERATURE = 1.0
EVAL_SAMPLING = {"temperature": 0.6, "top_p": 0.95, "top_k": 20}


def seed_dir(out: Path, seed: int) -> Path:
    """``OUT/seed_<seed>``: the folder of one seed's jobs."""
    return Path(out) / f"seed_{seed}"


#: The test sets: name -> (kind, file under ``data/``). Held-out problems appear nowhere in SFT
#: or RL; the new-pairs sets are made of train-side problems the start checkpoint solves
#: alone, composed in pairs that neither SFT nor RL shows (kind i: the composition skill);
#: the held-out compositions compose held-out problems (kind ii: facts and composition).
TESTS: dict[str, tuple[str, str]] = {
    "depth1": ("held-out depth 1", "test1"),
    "train_depth1": ("train side depth 1 (SFT problems outside the pool)", "train1"),
    "new_depth2": ("(i) new pairs of solved problems, depth 2", "new2"),
    "new_depth3": ("(i) new pairs of solved problems, depth 3", "new3"),
    "depth2": ("(ii) compositions of held-out problems, depth 2", "test2"),
    "depth3": ("(ii) compositions of held-out problems, depth 3", "test3"),
}


def recipe_for(cfg: ReproduceConfig) -> ToyRecipe:
    """The shared toy recipe with this run's SFT steps and pool size.

    The curriculum arm starts from a checkpoint that has already trained depth 1 for
    ``d1_steps``, so its depth-1 stage needs no minimum beyond the rolling window.
    """
    return ToyRecipe(sft_steps=cfg.sft_steps, pool_size=cfg.pool_size, min_depth1_steps=0)


def _threads() -> None:
    import torch

    torch.set_num_threads(1)


# ----------------------------------------------------------------------------- sft / d1


def job_sft(cfg: ReproduceConfig, out: Path, seed: int, arg: str | None) -> dict[str, Any]:
    """Write the seed's stage data under ``data/`` and build its tiny model in ``model/``;
    returns the model's greedy accuracy, SFT seconds and the size of each data file."""
    from composition_rl.jobs.tiny_model import build_tiny_model

    _threads()
    r = recipe_for(cfg)
    d = seed_dir(out, seed)
    paths = r.write_stage_data(seed, d / "data", test_composed=cfg.test_composed, train_probe=cfg.train_probe)
    model = build_tiny_model(d / "model", r.tiny_model_config(seed), progress=False, task=r.task(seed))
    info = json.loads((model / "build_info.json").read_text())
    sizes = {name: sum(1 for _ in read_jsonl(p)) for name, p in paths.items()}
    return {"greedy_accuracy": info["greedy_accuracy"], "sft_seconds": info["seconds"], "data": sizes}


def _train(cfg: ReproduceConfig, seed: int, model: Path, output: Path, stages: list[dict[str, Any]],
           mode: str = "manual", total_steps: int | None = None, **extra: Any) -> list[dict[str, Any]]:
    from composition_rl.jobs.train.grpo import run_training

    conf = recipe_for(cfg).train_config(model, output, stages, seed, mode=mode, total_steps=total_steps,
                                        progress=False, **extra)
    metrics = run_training(conf, resume=False, log=None)
    return list(read_jsonl(metrics))


def job_d1(cfg: ReproduceConfig, out: Path, seed: int, arg: str | None) -> dict[str, Any]:
    """Train depth-1 GRPO on the seed's pool for ``d1_steps`` into ``d1/``; returns the step
    count and mean solve_all of the first and last 5 steps (Figure 2 left)."""
    _threads()
    d = seed_dir(out, seed)
    stages = [{"name": "depth1", "data": str(d / "data" / "pool.jsonl"), "max_steps": cfg.d1_steps, "depth": 1}]
    rows = _train(cfg, seed, d / "model", d / "d1", stages)
    return {"steps": len(rows), **_climb(rows)}


def _climb(rows: list[dict[str, Any]], k: int = 5) -> dict[str, float]:
    """Mean solve_all of the first and last ``k`` steps (the demo's criterion, Figure 2 left)."""
    first = [r["solve_all"] for r in rows[:k]]
    last = [r["solve_all"] for r in rows[-k:]]
    return {"solve_all_first": sum(first) / len(first), "solve_all_last": sum(last) / len(last)}


#: fewest solved problems the new-pairs tests are built from (else: every probed problem, flagged)
MIN_SOLVED = 8


def job_tests(cfg: ReproduceConfig, out: Path, seed: int, arg: str | None) -> dict[str, Any]:
    """Kind (i) tests: compose, in new pairs, the probed train-side problems the start solves greedily."""
    from composition_rl.grading import Verifier, VerifyConfig
    from composition_rl.io.files import atomic_write_jsonl
    from composition_rl.io.readers import load_problems
    from composition_rl.rollout.base import SamplingConfig
    from composition_rl.rollout.hf import HFRollout

    _threads()
    d = seed_dir(out, seed)
    probe = list(load_problems(d / "data" / "train1.jsonl").problems)
    backend = HFRollout(d / "d1" / "final", device="cpu")
    greedy = SamplingConfig(temperature=0.0, top_p=1.0, top_k=0, max_tokens=cfg.eval_max_tokens, seed=seed)
    texts = [c[0].text for c in backend.generate([p.question for p in probe], n=1, sampling=greedy)]
    with Verifier(VerifyConfig(workers=1)) as verifier:
        scores = verifier.score_batch([(t, list(p.answers)) for t, p in zip(texts, probe)])
    solved = [p for p, s in zip(probe, scores) if s.correct]
    # a start that solves almost nothing (a smoke run's barely trained model) cannot define the
    # test; it is then made of every probed problem, and the result says so
    fallback = len(solved) < MIN_SOLVED
    tests = recipe_for(cfg).new_pair_tests(seed, probe if fallback else solved, cfg.test_composed)
    for depth, probs in tests.items():
        if not probs:
            raise RuntimeError(f"seed {seed}: no depth-{depth} new-pair composition of {len(solved)} solved problems")
        atomic_write_jsonl(d / "data" / f"new{depth}.jsonl", (p.to_dict() for p in probs))
    return {"probed": len(probe), "solved_greedy": len(solved), "fallback_to_probed": fallback,
            **{f"new{k}": len(v) for k, v in tests.items()}}


# ----------------------------------------------------------------------------- profile


def job_profile(cfg: ReproduceConfig, out: Path, seed: int, arg: str | None) -> dict[str, Any]:
    """Profile the depth-1 checkpoint on the pool and on its depth-2/3 compositions
    (``profile/{pool,depth2,depth3}/``, restarted clean); returns each profile's summary."""
    from composition_rl.grading import Verifier, VerifyConfig
    from composition_rl.io.readers import load_problems
    from composition_rl.jobs.profile import ProfileConfig, profile_problems
    from composition_rl.rollout.base import SamplingConfig
    from composition_rl.rollout.hf import HFRollout

    _threads()
    d = seed_dir(out, seed)
    backend = HFRollout(d / "d1" / "final", device="cpu")
    sampling = SamplingConfig(temperature=PROFILE_TEMPERATURE, top_p=1.0, top_k=0, max_tokens=cfg.eval_max_tokens,
                              seed=seed)
    pconf = ProfileConfig(n=cfg.profile_n, sampling=sampling, template="plain")
    result = {}
    with Verifier(VerifyConfig(workers=1)) as verifier:
        for name in ("pool", "depth2", "depth3"):
            probs = list(load_problems(d / "data" / f"{name}.jsonl").problems)
            if name != "pool":
                probs = probs[: cfg.profile_composed]
            target = d / "profile" / name
            shutil.rmtree(target, ignore_errors=True)  # a killed job restarts clean
            summary = profile_problems(probs, backend, verifier, target, pconf, progress=False)
            result[name] = summary
    return result


# ----------------------------------------------------------------------------- arms

#: stages of each arm; ``{d}`` is the seed's data folder, ``{n}`` the arm's step budget.
ARM_STAGES: dict[str, list[dict[str, Any]]] = {
    "continue": [{"name": "depth1", "data": "{d}/pool.jsonl", "depth": 1}],
    "depth2": [{"name": "depth2", "data": "{d}/depth2.jsonl", "depth": 2}],
    "mix": [{"name": "mix", "data": "{d}/mix.jsonl", "depth": 1}],
    # the automatic curriculum from where depth 1 left off: it moves on when solve_all
    # saturates; curriculum.total_steps holds it to the same number of steps as the others
    "curriculum": [],  # ToyRecipe.curriculum_stages: depth 2 composed from what depth 1 mastered
    # per prompt during the run (curriculum.mode online): the pool is the starting set, partners
    # come from the train side, as the curriculum's composed stages take their later problems
    "online": [{"name": "online", "data": "{d}/pool.jsonl", "depth": 1}],
    # (f) GRESO-style pre-rollout skipping of stale pool prompts, no composition (jobs/train/skip.py)
    "skip": [{"name": "depth1", "data": "{d}/pool.jsonl", "depth": 1}],
}

#: The online arm's rule (composition_rl.jobs.train.online.OnlineConfig defaults: retire after 3 solve_all
#: visits with a Wilson lower bound >= 0.5, 2 compositions per retirement, depth up to 3).
ONLINE_RULE: dict[str, Any] = {}


def _arm_tokens(out: Path, seed: int, name: str) -> int:
    rows = read_jsonl(seed_dir(out, seed) / "arms" / name / "metrics.jsonl")
    return sum(int(r["generated_tokens"]) for r in rows)


def informative_share(rows: list[dict[str, Any]]) -> float:
    """Informative groups / all sampled groups over ``rows`` (metrics.jsonl rows), group-weighted.

    >>> informative_share([{"informative": 0.5, "groups": 12}, {"informative": 1.0, "groups": 8}])
    0.7
    """
    return sum(r["informative"] * r["groups"] for r in rows) / max(1, sum(r["groups"] for r in rows))


def continue_steps(cfg: ReproduceConfig, d1_rows: list[dict[str, Any]], budgets: list[int]) -> int:
    """Steps for the continue arm: enough to reach the largest composed arm's generated tokens.

    The depth-1 cost per step is estimated from the last 10 steps of the depth-1 phase, with a
    10% margin; the result is rounded up to a snapshot and capped at ``max_continue_factor``.

    >>> cfg = ReproduceConfig(arm_steps=30, snapshot_every=5, curve_every=15)
    >>> continue_steps(cfg, [{"generated_tokens": 1000}] * 10, [60000])
    70
    >>> continue_steps(cfg, [{"generated_tokens": 1000}] * 10, [])
    30
    """
    per_step = sum(r["generated_tokens"] for r in d1_rows[-10:]) / max(1, len(d1_rows[-10:]))
    need = math.ceil(1.1 * max(budgets, default=0) / max(per_step, 1.0))
    steps = max(cfg.arm_steps, math.ceil(need / cfg.snapshot_every) * cfg.snapshot_every)
    cap = int(cfg.max_continue_factor * cfg.arm_steps) // cfg.snapshot_every * cfg.snapshot_every
    return min(steps, max(cap, cfg.arm_steps))


def job_arm(cfg: ReproduceConfig, out: Path, seed: int, arm: str) -> dict[str, Any]:
    """Train arm ``arm`` (a key of :data:`ARM_STAGES`) from ``d1/final`` into ``arms/<arm>/``,
    with snapshots along the way; returns its steps, generated tokens, informative and solve_all
    means over ``arm_steps`` and its curriculum transitions (plus online or skip totals)."""
    _threads()
    d = seed_dir(out, seed)
    data = str(d / "data")
    stages = [{**s, "data": s["data"].format(d=data)} for s in ARM_STAGES[arm]]
    # every arm leaves snapshots along the way: the Fig. 3 curve (and, for continue, matched tokens)
    extra: dict[str, Any] = {"save_steps": cfg.curve_every, "save_total_limit": None}
    online: dict[str, Any] = {}
    recipe = recipe_for(cfg)
    if arm == "curriculum":
        # any stage may use the whole budget; saturation decides the moves
        paths = {name: d / "data" / f"{name}.jsonl" for name in ("pool", "train", "depth3")}
        stages = recipe.curriculum_stages(paths, seed, dict.fromkeys((1, 2, 3), cfg.arm_steps))
        rows = _train(cfg, seed, d / "d1" / "final", d / "arms" / arm, stages, mode="auto",
                      total_steps=cfg.arm_steps, **extra)
    elif arm == "online":
        stages[0]["max_steps"] = cfg.arm_steps
        curriculum = {"mode": "online", "online": dict(ONLINE_RULE),
                      "partners": str(d / "data" / f"{recipe.partners}.jsonl")}
        rows = _train(cfg, seed, d / "d1" / "final", d / "arms" / arm, stages, curriculum=curriculum, **extra)
        pool = rows[-1]["online"]
        online = {"retired": pool["retired_total"], "injected": pool["injected_total"],
                  "live_by_depth": pool["live_by_depth"]}
    else:
        steps = cfg.arm_steps
        if arm == "continue":
            d1_rows = list(read_jsonl(d / "d1" / "metrics.jsonl"))
            budgets = [_arm_tokens(out, seed, a) for a in cfg.arms if a != "continue"]
            steps = continue_steps(cfg, d1_rows, budgets)
            extra["save_steps"] = cfg.snapshot_every
        if arm == "skip":
            extra["skip"] = {"enabled": True}
        stages[0]["max_steps"] = steps
        rows = _train(cfg, seed, d / "d1" / "final", d / "arms" / arm, stages, **extra)
    transitions_path = d / "arms" / arm / "transitions.jsonl"
    transitions = list(read_jsonl(transitions_path)) if transitions_path.exists() else []
    return {
        "steps": len(rows),
        "generated_tokens": sum(int(r["generated_tokens"]) for r in rows),
        "tokens_at_arm_steps": sum(int(r["generated_tokens"]) for r in rows[: cfg.arm_steps]),
        "informative_mean": sum(r["informative"] for r in rows[: cfg.arm_steps]) / max(1, min(len(rows),
                                                                                             cfg.arm_steps)),
        "solve_all_mean": sum(r["solve_all"] for r in rows[: cfg.arm_steps]) / max(1, min(len(rows),
                                                                                           cfg.arm_steps)),
        "informative_groups_share": informative_share(rows[: cfg.arm_steps]),
        "transitions": transitions,
        **({"online": online} if arm == "online" else {}),
        **({"skip": _skip_totals(rows[: cfg.arm_steps])} if arm == "skip" else {}),
    }


def _skip_totals(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Prompt draws the skip arm looked at, skipped and had to refill, over its steps."""
    return {k: sum(int(r["skip"][k]) for r in rows) for k in ("drawn", "skipped", "refilled")}


# ----------------------------------------------------------------------------- eval


def _cumulative_tokens(metrics: Path) -> dict[int, int]:
    """Step -> generated tokens up to and including that step (every completion sampled)."""
    cum, total = {}, 0
    for r in read_jsonl(metrics):
        total += int(r["generated_tokens"])
        cum[int(r["step"])] = total
    return cum


def _snapshots(folder: Path) -> list[int]:
    return sorted(int(p.name.split("-")[1]) for p in (folder / "checkpoints").glob("checkpoint-*"))


def eval_targets(cfg: ReproduceConfig, out: Path, seed: int, name: str) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Label -> (model folder, info) to evaluate on every test set for one eval job.

    ``start`` is the depth-1 checkpoint; an arm is its model at ``arm_steps``; ``continue`` also
    gives ``continue@tokens:ARM`` for every other arm: the snapshot whose cumulative generated
    tokens come closest to that arm's (matched compute).
    """
    d = seed_dir(out, seed)
    if name == "start":
        return {"start": (d / "d1" / "final", {"steps": 0, "tokens": 0})}
    folder = d / "arms" / name
    cum = _cumulative_tokens(folder / "metrics.jsonl")
    if name != "continue":
        return {name: (folder / "final", {"steps": cfg.arm_steps, "tokens": cum.get(cfg.arm_steps)})}
    snaps = _snapshots(folder)
    ck = folder / "checkpoints"
    targets = {"continue": (ck / f"checkpoint-{cfg.arm_steps}", {"steps": cfg.arm_steps,
                                                                   "tokens": cum.get(cfg.arm_steps)})}
    for arm in cfg.arms:
        if arm == "continue":
            continue
        budget = _arm_tokens(out, seed, arm)
        best = min(snaps, key=lambda s: (abs(cum.get(s, 0) - budget), s))
        targets[f"continue@tokens:{arm}"] = (ck / f"checkpoint-{best}", {"steps": best, "tokens": cum.get(best),
                                                                         "target_tokens": budget})
    return targets


def curve_targets(cfg: ReproduceConfig, out: Path, seed: int, name: str) -> list[tuple[int, int, Path]]:
    """(step, cumulative tokens, snapshot) every ``curve_every`` steps of an arm, after step 0 and
    before ``arm_steps`` (whose model the full evaluation covers); the continue arm's curve runs
    on to its last snapshot, to show what more depth-1 tokens buy."""
    if name == "start":
        return []
    folder = seed_dir(out, seed) / "arms" / name
    cum = _cumulative_tokens(folder / "metrics.jsonl")
    return [(s, cum[s], folder / "checkpoints" / f"checkpoint-{s}") for s in _snapshots(folder)
            if s % cfg.curve_every == 0 and s != cfg.arm_steps and s in cum]


def _test_sets(cfg: ReproduceConfig, d: Path) -> dict[str, list]:
    from composition_rl.io.readers import load_problems

    return {key: list(load_problems(d / "data" / f"{file}.jsonl").problems)[: cfg.test_composed]
            for key, (_, file) in TESTS.items()}


def job_eval(cfg: ReproduceConfig, out: Path, seed: int, name: str) -> dict[str, Any]:
    """Evaluate the models :func:`eval_targets` names for ``name`` on every test set, and
    the arm's snapshots (:func:`curve_targets`) on the new-pairs depth-2 set; returns the scores
    per label, with ``curve`` for an arm."""
    from composition_rl.grading import Verifier, VerifyConfig
    from composition_rl.jobs.evaluate import EvalConfig, evaluate_benchmarks
    from composition_rl.rollout.base import SamplingConfig
    from composition_rl.rollout.hf import HFRollout

    _threads()
    d = seed_dir(out, seed)
    t = _test_sets(cfg, d)
    # depth 1 of each kind is a benchmark; its compositions are the compositional sets of the
    # same name, so crl eval's v1 recovery reads q1 from the right side
    benchmarks = {"heldout": t["depth1"], "train": t["train_depth1"]}
    compositional = {"heldout": {2: t["depth2"], 3: t["depth3"]}, "train": {2: t["new_depth2"], 3: t["new_depth3"]}}
    sampling = SamplingConfig(**EVAL_SAMPLING, max_tokens=cfg.eval_max_tokens, seed=1000 + seed)
    econf = EvalConfig(n=cfg.eval_n, sampling=sampling, template="plain", chunk=64)
    results: dict[str, Any] = {}
    done: dict[Path, dict[str, Any]] = {}
    with Verifier(VerifyConfig(workers=1)) as verifier:
        for label, (model, info) in eval_targets(cfg, out, seed, name).items():
            if model not in done:
                target = d / "eval" / label.replace(":", "_").replace("@", "_at_")
                shutil.rmtree(target, ignore_errors=True)
                res = evaluate_benchmarks(benchmarks, HFRollout(model, device="cpu"), verifier, target, econf,
                                          compositional=compositional, progress=False)
                done[model] = _scores(res, cfg.eval_n)
            results[label] = {**done[model], **info, "model": str(model.relative_to(d))}
        curve = []
        for step, tokens, model in curve_targets(cfg, out, seed, name):
            target = d / "eval" / f"{name}_curve" / f"step-{step}"
            shutil.rmtree(target, ignore_errors=True)
            res = evaluate_benchmarks({"new2": t["new_depth2"]}, HFRollout(model, device="cpu"), verifier, target,
                                      econf, progress=False)
            curve.append({"step": step, "tokens": tokens, "new_depth2": res["benchmarks"]["new2"][f"avg@{cfg.eval_n}"]})
    if name != "start":
        results["curve"] = curve
    return results


def _scores(res: dict[str, Any], n: int) -> dict[str, Any]:
    key = f"avg@{n}"
    held, train = res["compositional"]["heldout"], res["compositional"]["train"]
    return {
        "depth1": res["benchmarks"]["heldout"][key],
        "depth2": held["2"][key],
        "depth3": held["3"][key],
        "v1_recovery_depth2": held["2"]["v1_recovery"],
        "v1_recovery_depth3": held["3"]["v1_recovery"],
        "train_depth1": res["benchmarks"]["train"][key],
        "new_depth2": train["2"][key],
        "new_depth3": train["3"][key],
        "new_v1_recovery_depth2": train["2"]["v1_recovery"],
    }


# ----------------------------------------------------------------------------- dispatch

JOBS = {"sft": job_sft, "d1": job_d1, "tests": job_tests, "profile": job_profile, "arm": job_arm, "eval": job_eval}


def run_job(cfg_dict: dict[str, Any], out: str, seed: int, kind: str, arg: str | None) -> dict[str, Any]:
    """Run one job in this process and record its result (the executor's unit of work)."""
    import os
    import time
    import warnings

    # a worker's output is the parent's progress display: keep library chatter out of it
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore", category=FutureWarning)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    cfg = ReproduceConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in cfg_dict.items()})
    t0, c0 = time.perf_counter(), time.process_time()
    result = JOBS[kind](cfg, Path(out), seed, arg)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    # CPU time of this process: what the job costs on an idle core, whatever else shares the machine
    result["cpu_seconds"] = round(time.process_time() - c0, 1)
    name = kind if arg is None else f"{kind}-{arg}"
    atomic_write_json(seed_dir(Path(out), seed) / "jobs" / f"{name}.json", result)
    return result
