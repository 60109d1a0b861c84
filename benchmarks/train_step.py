"""Plain TRL GRPOTrainer vs ours (dynamic sampling), side by side on the same model and data;
or, with ``--preset real-cpu``, where the time of a real model's GRPO step goes.

    .venv/bin/python benchmarks/train_step.py [--model DIR] [--steps 8] [--prompts 8] [--gens 8]
    .venv/bin/python benchmarks/train_step.py --preset real-cpu [--steps 4] [--model smollm2-135m-instruct-q4_1]
    .venv/bin/python benchmarks/train_step.py --preset real-cpu --metrics RUN/metrics.jsonl   # a finished run

``--preset real-cpu`` runs ``crl train --config real-cpu`` (SmolLM2-135M-Instruct from its
GGUF, 4 prompts x 4 completions of at most 96 tokens, dynamic sampling) for ``--steps``
steps and prints, per step, the wall seconds, the seconds spent generating and those spent
scoring (every dynamic-sampling round), the rest (the policy's log-probabilities, the loss, the
backward pass and the optimizer step: "update"), the completions generated and their mean
length; then the means over the steps after the first, and the model's load time.

Both runs start from the same tiny model, seed and prompts (the one-digit arithmetic family
at depth 1, or --depth), with the same GRPO settings (cpu-tiny preset). Reported per run:

- seconds per optimizer step (wall, generation + scoring + update);
- informative groups trained per step (groups with 0 < pass rate < 1: the only ones with a
  gradient), and informative groups per second of training;
- completions generated per step.

Plain TRL trains on whatever the batch holds; its informative count comes from TRL's own
``frac_reward_zero_std``. Ours over-samples and refills, so it generates more per step but
trains only on informative groups. The ratio of informative groups per second is the figure
that says whether dynamic sampling pays for its extra generation.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def plain_trl(model: str, problems, args, out: Path) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from composition_rl.grading import VerifyConfig
    from composition_rl.integrations.trl import make_reward_fn

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rows = [{"prompt": [{"role": "user", "content": p.question}], "answer": p.answer} for p in problems]
    step_times, informative = [], []

    class Timer(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            self.t = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            step_times.append(time.perf_counter() - self.t)

        def on_log(self, a, state, control, logs=None, **kw):
            if logs and "frac_reward_zero_std" in logs:
                informative.append(args.prompts * (1.0 - float(logs["frac_reward_zero_std"])))

    cfg = GRPOConfig(
        output_dir=str(out), per_device_train_batch_size=args.prompts * args.gens, num_generations=args.gens,
        max_completion_length=args.max_len, temperature=1.0, learning_rate=1e-4, lr_scheduler_type="constant",
        beta=0.0, epsilon=0.2, epsilon_high=0.28, loss_type="dapo", max_steps=args.steps, logging_steps=1,
        save_strategy="no", report_to="none", disable_tqdm=True, use_cpu=True, seed=args.seed,
        bf16=False,  # as ours on CPU: TRL defaults to bf16 autocast, ~4x slower per step on this CPU
    )
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model), args=cfg, train_dataset=Dataset.from_list(rows),
        processing_class=AutoTokenizer.from_pretrained(model),
        reward_funcs=[make_reward_fn(VerifyConfig(timeout_s=5.0, workers=1))], callbacks=[Timer()],
    )
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    trainer.train()
    return {"step_seconds": step_times, "informative": informative,
            "generated": [args.prompts * args.gens] * len(step_times)}


def ours(model: str, args, out: Path) -> dict:
    from composition_rl.io.files import read_jsonl
    from composition_rl.jobs.train.config import TrainConfig
    from composition_rl.jobs.train.grpo import run_training

    cfg = TrainConfig.from_dict({
        "preset": "cpu-tiny", "model": model, "output_dir": str(out), "seed": args.seed, "progress": False,
        "plot": False,
        "stages": [{"name": "bench", "arithmetic": {"depth": args.depth, "n": args.n, "seed": 7, "digits": 1},
                    "max_steps": args.steps}],
        "grpo": {"prompts_per_step": args.prompts, "num_generations": args.gens, "max_completion_length": args.max_len,
                 "learning_rate": 1e-4},
        "dynamic_sampling": {"oversample": args.oversample, "max_rounds": args.max_rounds},
    })
    rows = list(read_jsonl(run_training(cfg, resume=False, log=None)))
    return {"step_seconds": [r["step_seconds"] for r in rows], "informative": [r["trained_informative"] for r in rows],
            "generated": [r["generated"] for r in rows], "bound_hits": sum(r["bound_hit"] for r in rows),
            "solve_all": [round(r["solve_all"], 3) for r in rows], "solve_none": [round(r["solve_none"], 3) for r in rows]}


def real_preset(args) -> int:
    """Where the seconds of a real-cpu step go (see the module docstring)."""
    from composition_rl.io.files import read_jsonl
    from composition_rl.jobs.train.config import load_config
    from composition_rl.jobs.train.grpo import run_training

    over = {"progress": False, "plot": False, "curriculum": {"total_steps": args.steps}, "seed": args.seed}
    if args.model:
        over["model"] = args.model
    with tempfile.TemporaryDirectory() as tmp:
        over["output_dir"] = str(Path(tmp) / "run")
        cfg = load_config(args.preset, over)
        t0 = time.perf_counter()
        rows = list(read_jsonl(args.metrics or run_training(cfg, resume=False, log=None)))
        total = time.perf_counter() - t0
    g = cfg.grpo
    print(f"preset {args.preset}: model {cfg.model}, {g.prompts_per_step} prompts x {g.num_generations} "
          f"completions, at most {g.max_completion_length} tokens, torch threads {cfg.torch_threads}")
    print(f"{'step':>4s} {'s/step':>7s} {'generate':>9s} {'reward':>7s} {'update':>7s} {'rounds':>6s} "
          f"{'completions':>11s} {'mean len':>8s} {'mean reward':>11s}")
    for r in rows:
        score_s = r.get("reward_seconds", 0.0)  # older runs' metrics fold scoring into gen_seconds
        print(f"{r['step']:4d} {r['step_seconds']:7.1f} {r['gen_seconds'] - score_s:9.1f} {score_s:7.1f} "
              f"{r['step_seconds'] - r['gen_seconds']:7.1f} {r['rounds']:6d} {r['generated']:11d} "
              f"{r['response_length']:8.1f} {r['reward_mean']:11.2f}")
    later = rows[1:] or rows
    mean = {k: sum(r[k] for r in later) / len(later) for k in ("step_seconds", "gen_seconds")}
    steps_s = sum(r["step_seconds"] for r in rows)
    print(f"mean over steps {later[0]['step']}..{later[-1]['step']}: {mean['step_seconds']:.1f} s/step, generation "
          f"{mean['gen_seconds']:.1f} s ({mean['gen_seconds'] / mean['step_seconds']:.0%}), update "
          f"{mean['step_seconds'] - mean['gen_seconds']:.1f} s"
          + ("" if args.metrics else f"; run {total:.0f} s of which steps {steps_s:.0f} s (the rest: loading the "
             "model and data, saving the final model)"))
    print(json.dumps({"args": vars(args), "steps": rows, "total_seconds": total}, sort_keys=True, default=str))
    return 0


def summary(name: str, r: dict, skip: int = 1) -> dict:
    """Per-step figures, leaving out the first ``skip`` (warm-up) steps."""
    secs = sum(r["step_seconds"][skip:])
    n = len(r["step_seconds"]) - skip
    inf = sum(r["informative"][skip:])
    return {
        "run": name, "steps": n, "s_per_step": secs / n, "informative_per_step": inf / n,
        "informative_per_s": inf / secs, "generated_per_step": sum(r["generated"][skip:]) / n,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="tiny model folder (default: build the test-sized one into runs/bench-tiny)")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--gens", type=int, default=8)
    p.add_argument("--depth", type=int, default=1)
    p.add_argument("--n", type=int, default=256, help="problems in the set")
    p.add_argument("--max-len", type=int, default=32)
    p.add_argument("--oversample", type=float, default=1.5)
    p.add_argument("--max-rounds", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ours-first", action="store_true", help="run ours before plain TRL (order check)")
    p.add_argument("--preset", help="instead: time the steps of this whole-run preset (real-cpu) and split them")
    p.add_argument("--metrics", help="with --preset: split the steps of this finished run's metrics.jsonl instead")
    args = p.parse_args()
    if args.preset:
        return real_preset(args)

    from composition_rl.jobs.tiny_model import TinyModelConfig, build_tiny_model
    from composition_rl.jobs.train.arithmetic import arithmetic_problems

    model = args.model
    if model is None:
        cfg = TinyModelConfig(digits=1, sft_steps=150, sft_batch=32, sft_lr=2e-3, depth_mix={2: 0.15}, eval_n=16)
        model = str(build_tiny_model(ROOT / "runs" / "bench-tiny", cfg, progress=True))
    problems = arithmetic_problems(args.n, args.depth, seed=7, digits=1)
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        if args.ours_first:
            mine = ours(model, args, t / "ours")
            plain = plain_trl(model, problems, args, t / "plain")
        else:
            plain = plain_trl(model, problems, args, t / "plain")
            mine = ours(model, args, t / "ours")
        results = [summary("plain GRPOTrainer", plain), summary("ours (dynamic sampling)", mine)]
    print(f"{'run':26s} {'s/step':>8s} {'informative/step':>17s} {'informative/s':>14s} {'generated/step':>15s}")
    for r in results:
        print(f"{r['run']:26s} {r['s_per_step']:8.2f} {r['informative_per_step']:17.2f} "
              f"{r['informative_per_s']:14.3f} {r['generated_per_step']:15.1f}")
    a, b = results
    print(f"ratio ours/plain: s/step {b['s_per_step'] / a['s_per_step']:.2f}x, "
          f"informative groups per second {b['informative_per_s'] / max(a['informative_per_s'], 1e-9):.2f}x "
          f"(bound hit on {mine['bound_hits']} of {len(mine['step_seconds'])} steps; first step of each run "
          "left out as warm-up)")
    print(json.dumps({"args": vars(args), "results": results}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
