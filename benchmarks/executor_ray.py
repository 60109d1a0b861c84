"""``crl profile --executor local`` vs ``--executor ray`` on one machine, side by side.

The same tiny trained policy (tests' build: one-digit arithmetic, 150 SFT steps), the same
prompts, the same decoding; each command a fresh process, the two interleaved per round.
Every round also checks that both wrote the same profile.jsonl (byte for byte, responses
included). Prints each command's wall time, the ratio ray / local per round, and Ray's
start-up cost on its own: ``ray.init`` of a local Ray in a fresh process, and the wall time
of both executors on a job of 8 prompts (almost all of it fixed cost).

Both run torch with one thread (``OMP_NUM_THREADS=1``): each Ray replica at 0.5 CPU gets
one, and on a shared 2-core box two threads are slower than one (idle OpenMP threads spin).

    .venv/bin/python benchmarks/executor_ray.py                     # 200 prompts, 2 rounds
    .venv/bin/python benchmarks/executor_ray.py --prompts 200 -n 4 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CRL = [sys.executable, "-m", "composition_rl.cli"]


def timed(cmd: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise SystemExit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    return time.perf_counter() - t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="model folder (default: build the tests' tiny policy, cached)")
    ap.add_argument("--prompts", type=int, default=200)
    ap.add_argument("-n", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--replica-cpus", type=float, default=0.5)
    args = ap.parse_args(argv)

    sys.path.insert(0, str(REPO / "tests"))
    from fakes.tiny_policy import TEST_MODEL_CONFIG, arithmetic_set

    from composition_rl.io.files import atomic_write_jsonl
    from composition_rl.jobs.tiny_model import TinyModelConfig, build_tiny_model

    work = Path(tempfile.mkdtemp(prefix="executor-bench-"))
    model = Path(args.model) if args.model else build_tiny_model(
        Path(tempfile.gettempdir()) / "crl-bench-tiny-policy", TinyModelConfig(**TEST_MODEL_CONFIG), progress=False)
    problems = arithmetic_set(args.prompts)
    inputs = {}
    for size in (args.prompts, 8):
        inputs[size] = work / f"in{size}.jsonl"
        atomic_write_jsonl(inputs[size], [{"problem": p.question, "answer": p.answer} for p in problems[:size]])
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO / "src")}

    def profile(size: int, executor: str, out: Path) -> list[str]:
        cmd = [*CRL, "profile", "--model", str(model), "--input", str(inputs[size]), "-n", str(args.n),
               "--max-tokens", str(args.max_tokens), "--template", "plain", "--temperature", "1.0",
               "--device", "cpu", "--keep-responses", "--no-progress", "--out", str(out), "--executor", executor]
        if executor == "ray":
            cmd += ["--replicas", str(args.replicas), "--replica-cpus", str(args.replica_cpus)]
        return cmd

    load = os.getloadavg()
    print(f"{args.prompts} prompts x n={args.n}, max {args.max_tokens} new tokens, model {model.name}; "
          f"ray: {args.replicas} replicas x {args.replica_cpus} CPU + 1 grader x 1 CPU; "
          f"{os.cpu_count()} CPUs, load average {load[0]:.1f} at start")
    init_code = ("import time; t = time.perf_counter(); import ray; "
                 "ray.init(address='local', include_dashboard=False, logging_level='ERROR'); "
                 "print(time.perf_counter() - t); ray.shutdown()")
    walls: dict[str, list[float]] = {"local": [], "ray": [], "local8": [], "ray8": [], "init": []}
    identical = []
    for r in range(args.rounds):
        for name in ("local", "ray"):
            out = work / f"{name}{r}"
            walls[name].append(timed(profile(args.prompts, name, out), env))
            small = work / f"{name}8-{r}"
            walls[name + "8"].append(timed(profile(8, name, small), env))
        init = subprocess.run([sys.executable, "-c", init_code], env=env, capture_output=True, text=True, timeout=600)
        walls["init"].append(float(init.stdout.strip().splitlines()[-1]))
        same = (work / f"local{r}" / "profile.jsonl").read_bytes() == (work / f"ray{r}" / "profile.jsonl").read_bytes()
        identical.append(same)
        print(f"round {r + 1}: local {walls['local'][-1]:.1f} s, ray {walls['ray'][-1]:.1f} s "
              f"(ray / local {walls['ray'][-1] / walls['local'][-1]:.2f}); 8 prompts: local "
              f"{walls['local8'][-1]:.1f} s, ray {walls['ray8'][-1]:.1f} s; ray.init {walls['init'][-1]:.1f} s; "
              f"profile.jsonl identical: {same}")
    med = {k: statistics.median(v) for k, v in walls.items()}
    summary = json.loads((work / "local0" / "summary.json").read_text())
    print(f"median over {args.rounds} rounds: {args.prompts} prompts local {med['local']:.1f} s, ray {med['ray']:.1f} s "
          f"(ratio {med['ray'] / med['local']:.2f}); 8 prompts local {med['local8']:.1f} s, ray {med['ray8']:.1f} s "
          f"(Ray's fixed cost here ~{med['ray8'] - med['local8']:.0f} s); ray.init alone {med['init']:.1f} s")
    print(f"bands: {summary['counts']}; identical in every round: {all(identical)}; "
          f"load average {os.getloadavg()[0]:.1f} at end")
    return 0 if all(identical) else 1


if __name__ == "__main__":
    raise SystemExit(main())
