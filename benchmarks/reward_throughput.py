"""Reward throughput: the bounded verifier vs the naive Math-Verify loop, side by side.

A realistic GRPO batch: 256 prompts x 8 responses, gold answers sampled from MATH train,
responses a seeded mix of correct-identical, correct-equivalent, wrong and unparseable
(truncated, no final answer). In one run it times

- naive: for every pair ``verify(parse(gold), parse(response))`` in this process, with
  Math-Verify's defaults (its signal timeouts, main thread). The gold is wrapped in
  ``$...$`` so that both sides score the same answers (bare, ``7\\sqrt{2}`` parses as 7).
  It is warmed up first on the same answer shapes as the verifier's fork server;
- ours: ``Verifier.score_batch`` (worker pool, gold-parse cache, string/integer fast
  paths), after start-up, once with one worker and once with the default (one per core);

and prints both throughputs, their ratio, how far the verdicts agree, and the slowest item
against the bound. The three alternate in rounds so that they share the machine's load.

With ``--baseline-src DIR`` (the ``src/`` of another checkout, e.g. the commit before a
change) the verifier of that code is timed in the same rounds too, in a process of its own
that imports the package from ``DIR`` (its workers do the same), so old and new code are
measured side by side under one load.

With ``--cli`` it times the command line instead, start-up included on both sides: the
batch (by default 1024 prompts x 8 = 8,192 pairs) is written to a JSONL file, and each round
runs, as fresh processes one after the other (which goes first alternates), the naive loop
(``python -c`` importing only Math-Verify: read the file, score every pair as above, write
the verdicts) and ``crl score --input FILE --out ...``. It prints each round's two wall times
and their ratio, and the median ratio over the rounds (3 by default):

    .venv/bin/python benchmarks/reward_throughput.py
    .venv/bin/python benchmarks/reward_throughput.py --cli
    .venv/bin/python benchmarks/reward_throughput.py --cli --baseline-src /tmp/base/src
    .venv/bin/python benchmarks/reward_throughput.py --prompts 64 --json runs/bench/reward.json
    git archive BASE src | tar -x -C /tmp/base && \\
        .venv/bin/python benchmarks/reward_throughput.py --baseline-src /tmp/base/src
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from composition_rl.grading import Outcome, Verifier, VerifyConfig, summarize
from composition_rl.grading.extract import normalize

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "train" / "math_train.json"
KINDS = ("correct_identical", "correct_equivalent", "wrong", "unparseable")
WEIGHTS = (0.35, 0.25, 0.25, 0.15)


def equivalent(gold: str, rng: random.Random) -> str:
    """Another way a model writes the same answer (some need sympy, some do not)."""
    if m := re.fullmatch(r"(-?)\\[dt]?frac\{?(\d+)\}?\{?(\d+)\}?", gold):
        sign, a, b = m.groups()
        return rng.choice([f"{sign}{a}/{b}", rf"{sign}\dfrac{{{a}}}{{{b}}}"])
    if re.fullmatch(r"-?\d+", gold):
        return rng.choice([f"x = {gold}", f"{gold}.0", rf"{gold}\text{{ units}}"])
    if m := re.fullmatch(r"(\d+)\^\\circ", gold):
        return m.group(1)
    if "\\dfrac" in gold:
        return gold.replace("\\dfrac", "\\frac")
    return " ".join(re.sub(r",(?!\\!)", ", ", gold).split())  # spacing (not inside 64,\!328)


def wrong(gold: str, others: list[str], rng: random.Random) -> str:
    if re.fullmatch(r"-?\d+", gold):
        return str(int(gold) + rng.choice([-2, -1, 1, 2, 10]))
    while True:
        o = rng.choice(others)
        if normalize(o) != normalize(gold):
            return o


def make_batch(n_prompts: int, group: int, seed: int, reasoning_kind: str = "problem") -> tuple[list[tuple[str, str]], list[str]]:
    rows = [r for r in json.loads(DATA.read_text()) if isinstance(r.get("answer"), str)]
    rng = random.Random(seed)
    prompts = rng.sample(rows, n_prompts)
    others = [r["answer"] for r in rows]
    pairs, kinds = [], []
    for p in prompts:
        gold = p["answer"]
        if reasoning_kind == "problem":  # the problem's LaTeX reappears in the reasoning, as it does
            reasoning = "Let's think step by step. " + p["problem"] + " We compute carefully. " * 8
        else:  # just a sentence before the answer
            reasoning = "We compute carefully. "
        for _ in range(group):
            kind = rng.choices(KINDS, WEIGHTS)[0]
            if kind == "correct_identical":
                resp = reasoning + rf"Therefore, the final answer is $\boxed{{{gold}}}$."
            elif kind == "correct_equivalent":
                resp = reasoning + rf"Therefore, the final answer is $\boxed{{{equivalent(gold, rng)}}}$."
            elif kind == "wrong":
                resp = reasoning + rf"Therefore, the final answer is $\boxed{{{wrong(gold, others, rng)}}}$."
            else:
                resp = reasoning[: rng.randrange(min(40, len(reasoning) - 1), len(reasoning))]  # cut off
            pairs.append((resp, gold))
            kinds.append(kind)
    return pairs, kinds


def naive(pairs: list[tuple[str, str]]) -> list[bool]:
    from math_verify import parse, verify

    return [bool(verify(parse(f"${g}$"), parse(r))) for r, g in pairs]


def _cpu_s(pids: list[int]) -> float:
    """User + system CPU seconds of processes (Linux /proc), 0 for any that are gone."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (FileNotFoundError, IndexError, ValueError):
            pass
    return total / os.sysconf("SC_CLK_TCK")


# The naive loop as a process of its own for --cli: imports nothing but Math-Verify, reads the
# JSONL the CLI reads, scores each pair as naive() does, writes one verdict per line.
NAIVE_PROCESS = """
import json, logging, sys
from math_verify import parse, verify
logging.getLogger("math_verify").setLevel(logging.ERROR)
with open(sys.argv[1], encoding="utf-8") as f:
    rows = [json.loads(line) for line in f]
ok = [bool(verify(parse(f"${r['answer']}$"), parse(r["response"]))) for r in rows]
with open(sys.argv[2], "w", encoding="utf-8") as f:
    f.writelines("1\\n" if v else "0\\n" for v in ok)
"""


def crl_command() -> list[str]:
    """``crl`` as installed beside this interpreter (the console script users run)."""
    script = Path(sys.executable).with_name("crl")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "composition_rl.cli"]


def run_cli(pairs: list[tuple[str, str]], rounds: int, timeout: float, workdir: Path, baseline_src: str | None) -> dict:
    """``--cli``: the naive loop and ``crl score`` as fresh processes, side by side in rounds
    (with ``baseline_src``, also ``crl score`` importing the package from there)."""
    import statistics
    import tempfile

    workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        tmp = Path(tmp)
        inp = tmp / "pairs.jsonl"
        with open(inp, "w", encoding="utf-8") as f:
            for resp, gold in pairs:
                f.write(json.dumps({"response": resp, "answer": gold}) + "\n")
        naive_out, cli_out, base_out = tmp / "naive.txt", tmp / "scored.jsonl", tmp / "baseline" / "scored.jsonl"
        score_args = ["score", "--input", str(inp), "--timeout", str(timeout), "--no-progress", "--fresh", "--out"]
        jobs = {
            "naive": ([sys.executable, "-c", NAIVE_PROCESS, str(inp), str(naive_out)], None),
            "crl score": ([*crl_command(), *score_args, str(cli_out)], None),
        }
        if baseline_src:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (baseline_src, os.environ.get("PYTHONPATH")) if p))
            jobs["baseline crl score"] = ([*crl_command(), *score_args, str(base_out)], env)
        per_round = []
        first_scored = None
        for k in range(rounds):
            secs = {}
            order = list(jobs)[k % len(jobs):] + list(jobs)[: k % len(jobs)]  # each goes first in turn
            for name in order:
                cmd, env = jobs[name]
                t = time.perf_counter()
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
                secs[name] = time.perf_counter() - t
                if proc.returncode != 0:
                    raise RuntimeError(f"{name} exited {proc.returncode}: {proc.stderr[-2000:]}")
            scored = cli_out.read_bytes()
            if first_scored is None:
                first_scored = scored
            elif scored != first_scored:
                raise RuntimeError(f"round {k + 1}: crl score wrote other bytes than in round 1")
            load = os.getloadavg()[0]
            ratio = secs["naive"] / secs["crl score"]
            row = {"naive_s": secs["naive"], "cli_s": secs["crl score"], "ratio": ratio, "load_1min": load}
            line = (f"round {k + 1}: naive {secs['naive']:6.2f}s   crl score {secs['crl score']:6.2f}s   "
                    f"ratio {ratio:.2f}x")
            if baseline_src:
                row.update(baseline_cli_s=secs["baseline crl score"], baseline_ratio=secs["naive"] / secs["baseline crl score"],
                           baseline_same_bytes=base_out.read_bytes() == scored)
                line += (f"   baseline crl score {secs['baseline crl score']:6.2f}s ({row['baseline_ratio']:.2f}x,"
                         f" {'same' if row['baseline_same_bytes'] else 'OTHER'} bytes)")
            per_round.append(row)
            print(f"{line}   (load {load:.1f}, {order[0]} first)", flush=True)
        naive_ok = [line == "1" for line in naive_out.read_text().split()]
        rows = [json.loads(line) for line in first_scored.decode("utf-8").splitlines()]
        rejected = (tmp / "scored.rejects.jsonl").read_text().count("\n")
    median = statistics.median(r["ratio"] for r in per_round)
    print(f"median ratio naive / crl score over {rounds} rounds: {median:.2f}x")
    if baseline_src:
        print(f"median ratio naive / baseline crl score: {statistics.median(r['baseline_ratio'] for r in per_round):.2f}x")
    print(f"crl score: {len(rows)} scored, {rejected} rejected (of {len(pairs)}); outcomes "
          f"{dict(Counter(r['outcome'] for r in rows))}; identical bytes in every round")
    # rejected rows (an empty gold) are not correct, as for the naive loop
    by_pair = {}
    for r in rows:
        by_pair.setdefault((r["response"], r["answer"]), r["outcome"] == "correct")
    agree = sum(by_pair.get(p, False) == ok for p, ok in zip(pairs, naive_ok))
    print(f"agreement with the naive loop on correct/not: {agree}/{len(pairs)} ({100 * agree / len(pairs):.1f}%)")
    return {"pairs": len(pairs), "rounds": per_round, "median_ratio": median, "agreement": agree / len(pairs)}


LABELS = (("ours, 1 worker", 1), ("ours, default workers", None))


def serve(timeout: float) -> int:
    """``--serve``: score the batches sent on stdin (one JSON list of pairs per line) with the
    verifiers of the package this process imports; reply per batch with each verifier's
    seconds, CPU seconds (dispatcher + workers) and outcomes. Used for ``--baseline-src``."""
    verifiers = {}
    for label, workers in LABELS:
        t = time.perf_counter()
        verifiers[label] = Verifier(VerifyConfig(timeout_s=timeout, workers=workers))
        verifiers[label].score(r"\boxed{1}", "1")
        print(json.dumps({"startup": {label: time.perf_counter() - t}}), flush=True)
    try:
        for line in sys.stdin:
            part = [tuple(p) for p in json.loads(line)]
            out = {}
            for label, v in verifiers.items():
                pids = v.worker_pids()[:-1]
                t, c, w = time.perf_counter(), time.process_time(), _cpu_s(pids)
                res = v.score_batch(part)
                out[label] = {"s": time.perf_counter() - t, "cpu": time.process_time() - c + _cpu_s(pids) - w,
                              "outcomes": [r.outcome.value for r in res], "elapsed": [r.elapsed_s for r in res]}
            print(json.dumps(out), flush=True)
    finally:
        for v in verifiers.values():
            v.close()
    return 0


class Baseline:
    """The verifiers of another checkout, in a child process (see :func:`serve`)."""

    def __init__(self, src: str, timeout: float) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p))
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", "--timeout", str(timeout)], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.startup = {}
        for _ in LABELS:
            self.startup.update(json.loads(self.proc.stdout.readline())["startup"])

    def score(self, part) -> dict:
        self.proc.stdin.write(json.dumps(part) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the baseline process exited (code {self.proc.wait(timeout=10)})")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def run_interleaved(pairs, group: int, rounds: int, verifiers: dict[str, Verifier], baseline: Baseline | None = None):
    """Alternate naive and ours round by round, so both see the same machine load.

    Each round is a slice of whole prompt groups; every round has new golds, so the gold
    caches start cold each round, as in training where each step brings new prompts.
    Returns wall seconds and CPU seconds (ours: this process's dispatcher + the workers).
    """
    per = -(-len(pairs) // group // rounds) * group
    secs = {"naive": 0.0, **dict.fromkeys(verifiers, 0.0)}
    cpu = dict(secs)
    if baseline is not None:
        for label, _ in LABELS:
            secs["baseline: " + label] = cpu["baseline: " + label] = 0.0
    naive_ok: list[bool] = []
    results: dict[str, list] = {k: [] for k in verifiers}
    base_outcomes: dict[str, list] = {"baseline: " + label: [] for label, _ in LABELS}
    for lo in range(0, len(pairs), per):
        part = pairs[lo : lo + per]
        t, c = time.perf_counter(), time.process_time()
        naive_ok += naive(part)
        secs["naive"] += time.perf_counter() - t
        cpu["naive"] += time.process_time() - c
        for label, v in verifiers.items():
            pids = v.worker_pids()[:-1]
            t, c, w = time.perf_counter(), time.process_time(), _cpu_s(pids)
            results[label] += v.score_batch(part)
            secs[label] += time.perf_counter() - t
            # (a worker replaced after a timeout would drop out of this sum; none time out here)
            cpu[label] += time.process_time() - c + _cpu_s(pids) - w
        if baseline is not None:
            for label, got in baseline.score(part).items():
                secs["baseline: " + label] += got["s"]
                cpu["baseline: " + label] += got["cpu"]
                base_outcomes["baseline: " + label] += got["outcomes"]
    return naive_ok, results, secs, cpu, base_outcomes


def _parser() -> argparse.ArgumentParser:
    """The options: the batch, the rounds, ``--cli`` and a baseline checkout to compare with."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, help="prompts in the batch (default: 256; 1024 with --cli)")
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=5.0, help="the verifier's per-item bound")
    ap.add_argument("--rounds", type=int, help="naive and ours alternate this many times (default: 8; 3 with --cli)")
    ap.add_argument("--cli", action="store_true",
                    help="time `crl score` against the naive loop, each a fresh process, start-up included")
    ap.add_argument("--workdir", default="runs/bench", help="--cli: where the batch file and outputs go (removed after)")
    ap.add_argument(
        "--reasoning",
        choices=["problem", "short"],
        default="problem",
        help="problem: each response restates the problem (LaTeX and all) before its answer; "
        "short: one sentence, then the answer",
    )
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--baseline-src", help="the src/ directory of another checkout: time its verifier (with --cli: "
                    "its crl score) in the same rounds")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    return ap


def _baseline_rows(baseline, secs: dict, cpu: dict, n: int, naive_s: float, all_results: dict,
                   base_outcomes: dict) -> dict:
    """Print the baseline checkout's rows beside ours and the outcomes that changed; returns
    their figures."""
    figures: dict = {}
    for label, _ in LABELS:
        key = "baseline: " + label
        ours_s = secs[label]
        print(f"{key:28}{n / secs[key]:10.0f}{secs[key]:10.2f}{naive_s / secs[key]:9.2f}{cpu[key]:9.2f}"
              f"   (start-up {baseline.startup[label]:.2f}s, not counted)")
        print(f"{'  new / baseline':28}{'':10}{'':10}{secs[key] / ours_s:9.2f}x wall, {cpu[key] / cpu[label]:.2f}x CPU "
              "(above 1: the new code is faster)")
        figures[key] = {"pairs_per_s": n / secs[key], "seconds": secs[key], "cpu_s": cpu[key],
                        "new_speedup_wall": secs[key] / ours_s, "new_speedup_cpu": cpu[key] / cpu[label]}
    new = all_results["ours, default workers"]
    old = base_outcomes["baseline: ours, default workers"]
    changed = Counter((o, r.outcome.value) for o, r in zip(old, new) if o != r.outcome.value)
    print(f"outcomes that differ between baseline and new code: {dict(changed) or 'none'}")
    figures["baseline_outcome_changes"] = {f"{a}->{b}": c for (a, b), c in changed.items()}
    return figures


def _agreement(pairs: list, kinds: list, results: list, naive_ok: list, timeout: float) -> dict:
    """Print the outcomes, the agreement with the naive loop and the slowest item against the
    bound; returns their figures."""
    n = len(pairs)
    agree = sum((r.outcome is Outcome.CORRECT) == ok for r, ok in zip(results, naive_ok))
    slowest = max(r.elapsed_s for r in results)
    print(f"\noutcomes: {summarize(results)}")
    print(f"decided by: {dict(Counter(r.via or '-' for r in results))}")
    print(f"agreement with the naive loop on correct/not: {agree}/{n} ({100 * agree / n:.1f}%)")
    by_kind = Counter((k, r.outcome.value) for k, r in zip(kinds, results))
    print("by kind: " + "; ".join(f"{k}: {dict((o, c) for (kk, o), c in by_kind.items() if kk == k)}" for k in KINDS))
    bound = timeout + 0.5
    print(f"load average during the run (1 min): {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"slowest item: {slowest:.3f}s (must be under timeout + 0.5 = {bound:g}s: {'ok' if slowest < bound else 'OVER'})")
    diffs = [(p, k, r.outcome.value, ok) for p, k, r, ok in zip(pairs, kinds, results, naive_ok) if (r.outcome is Outcome.CORRECT) != ok]
    for (resp, gold), k, o, ok in diffs[:5]:
        print(f"  differs: kind={k} gold={gold!r} ours={o} naive={'correct' if ok else 'not'} answer_tail={resp[-60:]!r}")
    return {"agreement": agree / n, "slowest_item_s": slowest, "timeout_s": timeout, "outcomes": summarize(results)}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.serve:
        return serve(args.timeout)
    if not DATA.is_file():
        print(f"needs {DATA}", file=sys.stderr)
        return 2
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    args.prompts = args.prompts or (1024 if args.cli else 256)
    args.rounds = args.rounds or (3 if args.cli else 8)
    pairs, kinds = make_batch(args.prompts, args.group, args.seed, args.reasoning)
    n = len(pairs)
    print(f"batch: {args.prompts} prompts x {args.group} = {n} pairs ({args.reasoning} reasoning); mix {dict(Counter(kinds))}")
    if args.cli:
        figures = run_cli(pairs, args.rounds, args.timeout, Path(args.workdir), args.baseline_src)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
        return 0

    # The naive loop gets the same warm-up as our fork server, so neither pays first-call costs.
    from composition_rl.grading.compare import _WARM_UP

    naive([(rf"\boxed{{{a}}}", "7") for a in _WARM_UP] + [(r"\boxed{7}", a) for a in _WARM_UP])
    verifiers, startup = {}, {}
    baseline = Baseline(args.baseline_src, args.timeout) if args.baseline_src else None
    for label, workers in LABELS:
        t = time.perf_counter()
        verifiers[label] = Verifier(VerifyConfig(timeout_s=args.timeout, workers=workers))
        verifiers[label].score(r"\boxed{1}", "1")  # start-up (fork server + workers), timed apart
        startup[label] = time.perf_counter() - t
    try:
        naive_ok, all_results, secs, cpu, base_outcomes = run_interleaved(pairs, args.group, args.rounds, verifiers, baseline)
    finally:
        for v in verifiers.values():
            v.close()
        if baseline is not None:
            baseline.close()
    naive_s = secs["naive"]

    print(f"\n{'':28}{'pairs/s':>10}{'seconds':>10}{'x naive':>9}{'CPU s':>9}")
    print(f"{'naive loop (1 process)':28}{n / naive_s:10.0f}{naive_s:10.2f}{1.0:9.2f}{cpu['naive']:9.2f}")
    figures = {"pairs": n, "naive_pairs_per_s": n / naive_s, "naive_s": naive_s, "naive_cpu_s": cpu["naive"]}
    for label, v in verifiers.items():
        s_ = secs[label]
        workers = v.config.n_workers
        print(
            f"{label + f' ({workers})':28}{n / s_:10.0f}{s_:10.2f}{naive_s / s_:9.2f}{cpu[label]:9.2f}"
            f"   (start-up {startup[label]:.2f}s, not counted)"
        )
        figures[label] = {
            "workers": workers,
            "pairs_per_s": n / s_,
            "seconds": s_,
            "ratio_vs_naive": naive_s / s_,
            "startup_s": startup[label],
            "cpu_s": cpu[label],
        }

    if baseline is not None:
        figures.update(_baseline_rows(baseline, secs, cpu, n, naive_s, all_results, base_outcomes))
    figures.update(_agreement(pairs, kinds, all_results["ours, default workers"], naive_ok, args.timeout))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
