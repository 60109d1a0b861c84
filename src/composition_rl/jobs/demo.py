"""The training half of ``crl demo``: the mechanism of the Composition-RL paper on CPU, in a few minutes.

1. a tiny model is built offline and warmed up (SFT) on reasoning-gym arithmetic and its
   compositions by the symbolic engine (:class:`composition_rl.jobs.train.toy.ToyRecipe`);
2. GRPO with dynamic sampling trains on a small depth-1 pool until the curriculum sees
   solve_all saturate (rolling mean >= threshold): the policy has mastered the pool and most
   of its groups carry no gradient;
3. the curriculum moves to depth 2, composed at that moment with q1 from the pool prompts the
   policy has just mastered (their latest group was solve_all) and q2 from the training side,
   then to depth 3: solve_all drops and informative groups (0 < pass rate < 1) come back.

Everything lands under ``out``: ``model/``, ``train_data/*.jsonl``, ``train/`` (``metrics.jsonl``,
``transitions.jsonl``, ``solve_rates.png``, ``config.yaml``: the same run for ``crl train``).
"""

from __future__ import annotations

import json
import logging
import statistics
from pathlib import Path
from typing import Any

__all__ = ["DEMO_STEPS", "demo_compose", "demo_data", "mechanism", "train_demo"]

# Step budgets per stage. Depth 1 is generous (a step takes about 1 s): the stage is meant to
# end because solve_all saturates, not because the budget runs out. Depth 2 runs 35 steps, so
# that its reward is seen to move (first vs last 5 steps) and the median of its informative
# share, which moves between 0.3 and 0.9 from step to step, is taken over enough steps
# (docs/science.md, per-seed figures).
DEMO_STEPS = {1: 70, 2: 35, 3: 3}

_log = logging.getLogger(__name__)


def train_demo(out: str | Path, seed: int = 0, progress: bool = True, log=_log.info) -> dict[str, Any]:
    """Build the tiny model, write the stage sets, train the curriculum; return a summary.
    ``log`` takes the progress lines (by default this module's logger; ``crl demo`` prints them)."""
    import yaml

    from composition_rl.jobs.tiny_model import build_tiny_model
    from composition_rl.jobs.train import run_training
    from composition_rl.jobs.train.toy import ToyRecipe

    out = Path(out)
    recipe = ToyRecipe.demo()
    model_dir = build_tiny_model(out / "model", recipe.tiny_model_config(seed), progress=progress, log=log,
                                 task=recipe.task(seed))
    info = json.loads((model_dir / "build_info.json").read_text())

    paths = recipe.write_stage_data(seed, out / "train_data")
    stages = recipe.curriculum_stages(paths, seed, DEMO_STEPS)
    cfg = recipe.train_config(model_dir, out / "train", stages, seed, mode="auto", progress=progress)
    (out / "train").mkdir(parents=True, exist_ok=True)
    # the resolved settings as a crl train config: `crl train --config out/train/config.yaml`
    plain = cfg.to_dict()
    plain["dynamic_sampling"]["band"] = list(plain["dynamic_sampling"]["band"] or []) or None
    (out / "train" / "config.yaml").write_text(yaml.safe_dump(plain, sort_keys=False))
    metrics_path = run_training(cfg, resume="auto", log=log)
    rows = [json.loads(line) for line in open(metrics_path, encoding="utf-8")]
    tr_path = out / "train" / "transitions.jsonl"
    transitions = [json.loads(line) for line in open(tr_path, encoding="utf-8")] if tr_path.exists() else []
    mech = mechanism(rows, transitions)
    from composition_rl.jobs.train.metrics import plot_solve_rates

    plot_solve_rates(metrics_path, out / "train" / "solve_rates.png", transitions,
                     title="The demo: depth 1 saturates, composition restores the signal"
                     if all(mech["checks"].values()) else
                     "The demo: " + ", ".join(f"{k.replace('_', ' ')}: {'yes' if v else 'NO'}"
                                              for k, v in mech["checks"].items()),
                     captions=(mech["captions"]["ratios"], mech["captions"]["reward"]))
    by_depth: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_depth.setdefault(int(r["depth"]), []).append(r)
    return {
        "model": str(model_dir),
        "tiny_model_greedy_accuracy": info.get("greedy_accuracy"),
        "steps": len(rows),
        "transitions": transitions,
        "mechanism": mech,
        "per_depth": {
            d: {
                "steps": len(rs),
                "reward_mean_first": rs[0]["reward_mean"],
                "reward_mean_last": rs[-1]["reward_mean"],
                "solve_all_first": rs[0]["solve_all"],
                "solve_all_last": rs[-1]["solve_all"],
                "informative_median": statistics.median(r["informative"] for r in rs),
            }
            for d, rs in sorted(by_depth.items())
        },
        "metrics": str(metrics_path),
        "plot": str(out / "train" / "solve_rates.png"),
    }


def mechanism(rows: list[dict[str, Any]], transitions: list[dict[str, Any]], k: int = 5) -> dict[str, Any]:
    """What a newcomer should see, measured: the climb, why the stage changed, the signal after.

    The first three checks are the ones ``../shared/tools/demo_science_check.py`` applies:
    depth-1 solve_all (mean of the last ``k`` steps minus the first ``k``) rises by at least
    0.15; the first transition is ``threshold`` (saturation); on depth 2 the median
    informative share is at least 0.5. The fourth asks for learning, not only
    signal: over the depth-2 stage, the mean reward of its last ``k`` steps is at least 0.10
    above that of its first ``k``.

    >>> rows = [{"depth": 1, "solve_all": x, "informative": 0.4, "reward_mean": 0.8} for x in
    ...         (0.1, 0.1, 0.2, 0.1, 0.2, 0.5, 0.6, 0.6, 0.7, 0.6)]
    >>> rows += [{"depth": 2, "solve_all": 0.0, "informative": 0.7, "reward_mean": r} for r in
    ...          (0.2, 0.2, 0.3, 0.2, 0.2, 0.3, 0.3, 0.4, 0.3, 0.4)]
    >>> m = mechanism(rows, [{"kind": "threshold", "reason": "solve_all 0.63 >= 0.50", "step": 10}])
    >>> m["checks"], round(m["depth1_rise"], 2), round(m["depth2_reward_rise"], 2)
    ({'solve_all_rises': True, 'moved_on_saturation': True, 'signal_restored': True, 'depth2_learns': True}, 0.46, 0.12)
    """
    d1 = [r for r in rows if int(r["depth"]) == 1]
    d2 = [r for r in rows if int(r["depth"]) == 2]
    first = statistics.mean(r["solve_all"] for r in d1[:k]) if d1 else float("nan")
    last = statistics.mean(r["solve_all"] for r in d1[-k:]) if d1 else float("nan")
    kind = transitions[0]["kind"] if transitions else None
    inf1 = statistics.median(r["informative"] for r in d1[-k:]) if d1 else float("nan")
    inf2 = statistics.median(r["informative"] for r in d2) if d2 else float("nan")
    sa2 = statistics.mean(r["solve_all"] for r in d2) if d2 else float("nan")
    rew1 = statistics.mean(r["reward_mean"] for r in d1[-k:]) if d1 else float("nan")
    rew2 = statistics.mean(r["reward_mean"] for r in d2) if d2 else float("nan")
    rise2 = (statistics.mean(r["reward_mean"] for r in d2[-k:]) - statistics.mean(r["reward_mean"] for r in d2[:k])
             if len(d2) >= 2 * k else float("nan"))
    checks = {
        "solve_all_rises": bool(len(d1) >= 2 * k and last - first >= 0.15),
        "moved_on_saturation": kind == "threshold",
        "signal_restored": bool(d2) and inf2 >= 0.5,
        "depth2_learns": bool(len(d2) >= 2 * k and rise2 >= 0.10),
    }
    why = transitions[0]["reason"] if transitions else "no transition"
    ratios = (
        f"Depth 1: solve_all rose from {first:.2f} to {last:.2f} (first vs last {k} steps) as the policy mastered "
        f"its pool; the curriculum moved on ({kind}: {why}). Depth 2 (composed on the pool prompts it had "
        f"mastered): "
        f"solve_all {sa2:.2f}, and {inf2:.0%} of groups are informative again (median), vs {inf1:.0%} at the "
        "end of depth 1: only informative groups carry a GRPO gradient."
    )
    reward = (
        f"Mean reward {rew1:.2f} at the end of depth 1 and {rew2:.2f} on depth 2: the composed prompts are "
        f"harder but solvable, so they teach again instead of being all-correct; over the depth-2 stage the "
        f"reward moved by {rise2:+.2f} (first vs last {k} steps)."
    )
    return {
        "depth1_solve_all_first": first,
        "depth1_solve_all_last": last,
        "depth1_rise": last - first,
        "first_transition": kind,
        "depth1_informative_end": inf1,
        "depth2_informative_median": inf2,
        "depth2_solve_all_mean": sa2,
        "depth2_reward_rise": rise2,
        "checks": checks,
        "captions": {"ratios": ratios, "reward": reward},
    }


# --- the data and compose halves of crl demo ----------------------------------------------------


def demo_data(out: str | Path, seed: int = 0):
    """The built-in default problems (reasoning-gym numeric generators, ``seed``), written to
    ``out/data/depth1.jsonl`` with the rows set aside beside them; returns the load result
    (ImportError, naming the extra, without reasoning-gym)."""
    from composition_rl.io.files import atomic_write_jsonl
    from composition_rl.io.readers import load_reasoning_gym

    out = Path(out)
    data = load_reasoning_gym(seed=seed)
    atomic_write_jsonl(out / "data" / "depth1.jsonl", (p.to_dict() for p in data.problems))
    atomic_write_jsonl(out / "data" / "input_rejects.jsonl", data.rejects)
    return data


def demo_compose(data, out: str | Path, depth: int, seed: int = 0, max_candidates: int = 4000,
                 progress: bool = True) -> tuple[dict[str, Any], Path]:
    """Compose the demo problems at ``depth`` (symbolic engine, pools of 20) into
    ``out/compose/depth<depth>/`` with its verl and TRL exports; returns the run's stats and
    folder."""
    from composition_rl.jobs.compose import ComposeConfig, run_compose

    cfg = ComposeConfig(depth=depth, pool_size=20, seed=seed, max_candidates=max_candidates)
    d = Path(out) / "compose" / f"depth{depth}"
    stats = run_compose(data.problems, cfg, d, input_rejects=data.rejects, progress=progress,
                        inputs={"main": {"path": "reasoning-gym (built-in default)", "problems": len(data.problems)}},
                        exports=["verl", "trl"])
    return stats, d
