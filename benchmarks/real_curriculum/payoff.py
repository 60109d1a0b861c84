"""Issue 53's figures: the curriculum run across its switch, and the pre-registered payoff.

    # evaluate one checkpoint (vLLM's CPU build, in .venv-verl; the decoding the design names)
    .venv/bin/python benchmarks/real_curriculum/payoff.py eval switch runs/real-curriculum/checkpoints/checkpoint-S
    .venv/bin/python benchmarks/real_curriculum/payoff.py eval depth2 runs/real-curriculum/final
    .venv/bin/python benchmarks/real_curriculum/payoff.py eval depth1 runs/real-curriculum-arm-depth1/final
    # the tables, the deciding interval and the plot; copies the small logs into results/
    .venv/bin/python benchmarks/real_curriculum/payoff.py report

The design (arms, sets, the one number and its rule) is in docs/training.md, "The curriculum
on a real model, and its payoff", committed before any of these ran.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

from composition_rl.io.files import read_jsonl
from composition_rl.jobs.evaluate import read_eval_samples

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
RUN = REPO / "runs" / "real-curriculum"
ARM1 = REPO / "runs" / "real-curriculum-arm-depth1"
EVAL = REPO / "runs" / "real-curriculum-eval"
RESULTS = HERE / "results"
SETS = [HERE / "heldout_basic_arithmetic.jsonl", HERE / "heldout_chain_sum3.jsonl"]
DECIDING = "heldout_basic_arithmetic"
ARMS = ("switch", "depth1", "depth2")
#: the training's decoding (the real-cpu preset): 8 samples, temperature 0.7, no top-p/top-k cut, 96 tokens
DECODING = ["-n", "8", "--temperature", "0.7", "--top-p", "1", "--top-k", "0", "--max-tokens", "96",
            "--seed", "0", "--template", "boxed", "--fallback", "prose"]
#: the design's depth-2 held-out set: composed from the training family's held-out problems only
COMPOSED = ["--compositional", "2", "--comp-max", "100", "--comp-seed", "0"]


def evaluate(name: str, model: str, python: str) -> None:
    """Two crl eval runs of one checkpoint: the training family with its depth-2 compositions,
    and the other family alone (so nothing the design did not name is generated)."""
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    for part, bench, extra in (("family", SETS[0], COMPOSED), ("other", SETS[1], [])):
        cmd = [python, "-m", "composition_rl.cli", "eval", "--model", model, "--backend", "vllm",
               "--dtype", "float32", *DECODING, *extra, "--benchmark", str(bench), "--out", str(EVAL / name / part),
               "--no-progress"]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, env=env, cwd=REPO)


def _per_problem(name: str) -> dict[str, dict[str, float]]:
    """{benchmark: {problem id: share of its samples correct}} of one evaluated checkpoint."""
    out: dict[str, dict[str, float]] = {}
    for part in sorted(p for p in (EVAL / name).iterdir() if p.is_dir()) if (EVAL / name).is_dir() else []:
        for bench, rows in read_eval_samples(part).items():
            out[bench] = {r["id"]: r["correct"] / r["n"] for r in rows}
    return out


def paired(a: dict[str, float], b: dict[str, float], resamples: int = 10_000, seed: int = 0) -> dict[str, float]:
    """mean(a) - mean(b) over the same problems, with a paired bootstrap 95% interval."""
    if set(a) != set(b) or not a:
        raise ValueError(f"the arms were evaluated on different problems ({len(a)} vs {len(b)}; "
                         f"{len(set(a) ^ set(b))} not in both): rerun the unfinished evaluation")
    ids = sorted(a)
    diffs = [a[i] - b[i] for i in ids]
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(diffs) for _ in diffs) / len(diffs) for _ in range(resamples))
    return {"diff": sum(diffs) / len(diffs), "lo": means[int(0.025 * resamples)],
            "hi": means[int(0.975 * resamples) - 1], "problems": len(ids)}


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def two_proportion_p(c1: int, n1: int, c2: int, n2: int) -> float:
    """Two-sided p of a pooled two-proportion z-test (c1 of n1 against c2 of n2)."""
    from statistics import NormalDist

    pooled = (c1 + c2) / (n1 + n2)
    se = (pooled * (1 - pooled) * (1 / n1 + 1 / n2)) ** 0.5
    return 2 * (1 - NormalDist().cdf(abs(c2 / n2 - c1 / n1) / se)) if se else 1.0


def outcomes(name: str, bench: str = DECIDING) -> dict[str, int]:
    """How one checkpoint's samples on a held-out set ended: outcome and finish reason."""
    from collections import Counter

    rows = read_eval_samples(EVAL / name / "family", bench)[bench]
    return dict(sorted(Counter(f"{x['outcome']}/{x['finish_reason']}" for r in rows for x in r["responses"]).items()))


def curriculum_summary(rows: list[dict], transitions: list[dict], arm_rows: list[dict]) -> dict:
    """The switch, the shares around it, the depth-2 reward's first and last 5 steps, s/step."""
    out: dict = {"steps": len(rows), "transitions": transitions}
    d1 = [r for r in rows if r["depth"] == 1]
    d2 = [r for r in rows if r["depth"] == 2]
    switch = d1[-1]["step"] if d2 and d1 else None
    out["switch_step"] = switch
    if switch is not None:
        out["around_switch"] = [{k: r[k] for k in ("step", "depth", "solve_all", "informative", "solve_none",
                                                   "reward_mean")} for r in rows if switch - 4 <= r["step"] <= switch + 5]
    for tag, part in (("depth1", d1), ("depth2", d2)):
        out[tag] = {"steps": len(part), "s_per_step": _mean([r["step_seconds"] for r in part]),
                    "solve_all": _mean([r["solve_all"] for r in part]),
                    "informative": _mean([r["informative"] for r in part]),
                    "generated_tokens": sum(r.get("generated_tokens", 0) for r in part)}
    for tag, part in (("depth1_last5", d1[-5:]), ("depth2_first5", d2[:5]), ("depth2_last5", d2[-5:])):
        out[tag] = {k: _mean([r[k] for r in part]) for k in ("reward_mean", "solve_all", "informative", "solve_none")}
        # completions sampled and correct (the reward is 0/1 per completion)
        out[tag]["sampled"] = sum(r["generated"] for r in part)
        out[tag]["correct"] = round(sum(r["reward_mean"] * r["generated"] for r in part))
    a, b = out["depth2_first5"], out["depth2_last5"]
    if a["sampled"] and b["sampled"]:
        out["depth2_rise_p"] = two_proportion_p(a["correct"], a["sampled"], b["correct"], b["sampled"])
    tail = [r for r in arm_rows if switch is not None and r["step"] > switch]
    if tail:
        out["arm_depth1"] = {"steps": len(tail), "s_per_step": _mean([r["step_seconds"] for r in tail]),
                             "generated_tokens": sum(r.get("generated_tokens", 0) for r in tail),
                             "first5": {k: _mean([r[k] for r in tail[:5]]) for k in ("reward_mean", "solve_all")},
                             "last5": {k: _mean([r[k] for r in tail[-5:]]) for k in ("reward_mean", "solve_all")}}
    return out


def prompt_tokens(switch: int) -> dict[str, int]:
    """Prompt tokens each arm sampled after the switch: every sampled group's prompt (SmolLM2's
    chat template around the training's user message) times its completions, from pass_rates.jsonl."""
    from transformers import AutoTokenizer

    from composition_rl.jobs.export import user_prompt
    from composition_rl.jobs.train.config import load_config
    from composition_rl.jobs.train.data import load_stage_problems

    questions = {p.id: p.question for p in load_stage_problems(load_config(HERE / "curriculum.yaml").stages[0])}
    questions.update({r["id"]: r["question"] for r in _rows(RUN / "stages" / "depth2.jsonl")})
    tok = AutoTokenizer.from_pretrained(str(RUN / "final"))
    length: dict[str, int] = {}
    out = {}
    for arm, folder in (("depth2", RUN), ("depth1", ARM1)):
        total = 0
        for g in _rows(folder / "pass_rates.jsonl"):
            if g["step"] <= switch:
                continue
            if g["id"] not in length:
                msgs = [{"role": "user", "content": user_prompt(questions[g["id"]])}]
                text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
                length[g["id"]] = len(tok(text, add_special_tokens=False)["input_ids"])
            total += length[g["id"]] * g["n"]
        out[arm] = total
    return out


def report() -> dict:
    cur = curriculum_summary(_rows(RUN / "metrics.jsonl"), _rows(RUN / "transitions.jsonl"),
                             _rows(ARM1 / "metrics.jsonl"))
    if cur["switch_step"] is not None and (ARM1 / "pass_rates.jsonl").is_file():
        cur["prompt_tokens_after_switch"] = prompt_tokens(cur["switch_step"])
    print(json.dumps(cur, indent=1))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "curriculum.json").write_text(json.dumps(cur, indent=1, sort_keys=True) + "\n")
    per = {arm: _per_problem(arm) for arm in ARMS if (EVAL / arm).is_dir()}
    table = {arm: {b: sum(v.values()) / len(v) for b, v in sets.items()} for arm, sets in per.items()}
    out: dict = {"avg@8": table, "contrasts": {}}
    pairs = [("depth2", "depth1"), ("depth2", "switch"), ("depth1", "switch")]
    for x, y in pairs:
        if x in per and y in per:
            out["contrasts"][f"{x} - {y}"] = {b: paired(per[x][b], per[y][b]) for b in per[x] if b in per[y]}
    out["outcomes"] = {arm: outcomes(arm) for arm in per}
    d = out["contrasts"].get("depth2 - depth1", {}).get(DECIDING)
    if d is not None:
        out["decision"] = ("positive: composition training helped the original task" if d["lo"] > 0 else
                           "negative: composition training hurt the original task" if d["hi"] < 0 else
                           "inconclusive: the interval holds 0")
    for arm, sets in table.items():
        print(arm, "  ".join(f"{b} {v:.3f}" for b, v in sets.items()))
    for k, v in out["contrasts"].items():
        for b, c in v.items():
            print(f"{k:18s} {b:40s} {c['diff']:+.3f} [{c['lo']:+.3f}, {c['hi']:+.3f}] n={c['problems']}")
    print("decision:", out.get("decision", "(not all arms evaluated)"))
    (RESULTS / "payoff.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    for arm in per:
        for part in ("family", "other"):
            if (EVAL / arm / part / "results.json").is_file():
                shutil.copy(EVAL / arm / part / "results.json", RESULTS / f"eval_{arm}_{part}.json")
    for src, tag in ((RUN, "curriculum"), (ARM1, "arm_depth1")):
        for f in ("metrics.jsonl", "transitions.jsonl", "pass_rates.jsonl", "branch.json"):
            if (src / f).is_file():
                shutil.copy(src / f, RESULTS / f"{tag}_{f}")
    plot(RESULTS / "curriculum_metrics.jsonl", RESULTS / "arm_depth1_metrics.jsonl", REPO / "docs" / "img" / "real_curriculum.png")
    return out


def _rows(path: Path) -> list[dict]:
    return list(read_jsonl(path)) if path.is_file() else []


def plot(curriculum: Path, arm: Path, png: Path) -> None:
    """solve_all, informative share and reward per step across the switch; the depth-1 arm beside it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows, arm_rows = _rows(curriculum), _rows(arm)
    if not rows:
        return
    steps = [r["step"] for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    ax = axes[0]
    ax.plot(steps, [r["solve_all"] for r in rows], "o-", ms=3, label="solve_all")
    ax.plot(steps, [r["informative"] for r in rows], "s-", ms=3, label="informative")
    ax.plot(steps, [r["solve_none"] for r in rows], "^-", ms=3, alpha=0.6, label="solve_none")
    switch = next((r["step"] for r in rows if r["depth"] == 2), None)
    if arm_rows:
        tail = [r for r in arm_rows if switch is None or r["step"] >= switch]
        ax.plot([r["step"] for r in tail], [r["informative"] for r in tail], "s--", ms=3, color="grey",
                label="informative, depth-1 arm")
    if switch is not None:
        ax.axvline(switch - 0.5, color="k", ls="--", lw=1)
        ax.text(switch - 0.3, 0.95, "depth 2", va="top")
    ax.set(xlabel="step", ylabel="share of sampled groups", ylim=(0, 1),
           title="SmolLM2-135M, real-cpu curriculum: groups per step")
    ax.legend(loc="center left")
    ax = axes[1]
    ax.plot(steps, [r["reward_mean"] for r in rows], "o-", ms=3, label="curriculum run (depth 2 after the line)")
    if arm_rows:
        tail = [r for r in arm_rows if switch is None or r["step"] >= switch]
        ax.plot([r["step"] for r in tail], [r["reward_mean"] for r in tail], "s-", ms=3, label="depth-1 arm (branch)")
    if switch is not None:
        ax.axvline(switch - 0.5, color="k", ls="--", lw=1)
    ax.set(xlabel="step", ylabel="mean training reward", ylim=(0, 1), title="training reward per step")
    ax.legend(loc="center left")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    print(f"plot: {png}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("eval", help="evaluate one checkpoint on the held-out sets")
    e.add_argument("name", choices=ARMS)
    e.add_argument("model", help="a model folder (a checkpoint or a run's final/)")
    e.add_argument("--python", default=str(REPO / ".venv-vllm" / "bin" / "python"),
                   help="the Python of an environment with vLLM's CPU build (default .venv-vllm: make vllm-env)")
    sub.add_parser("report", help="tables, the deciding interval, results/ and the plot")
    a = ap.parse_args(argv)
    if a.cmd == "eval":
        evaluate(a.name, a.model, a.python)
    else:
        report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
