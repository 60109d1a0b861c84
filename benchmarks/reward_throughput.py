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

    .venv/bin/python benchmarks/reward_throughput.py
    .venv/bin/python benchmarks/reward_throughput.py --prompts 64 --json runs/bench/reward.json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

from composition_rl.verify import Outcome, Verifier, VerifyConfig, summarize
from composition_rl.verify.extract import normalize

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


def run_interleaved(pairs, group: int, rounds: int, verifiers: dict[str, Verifier]):
    """Alternate naive and ours round by round, so both see the same machine load.

    Each round is a slice of whole prompt groups; every round has new golds, so the gold
    caches start cold each round, as in training where each step brings new prompts.
    Returns wall seconds and CPU seconds (ours: this process's dispatcher + the workers).
    """
    per = -(-len(pairs) // group // rounds) * group
    secs = {"naive": 0.0, **dict.fromkeys(verifiers, 0.0)}
    cpu = dict(secs)
    naive_ok: list[bool] = []
    results: dict[str, list] = {k: [] for k in verifiers}
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
    return naive_ok, results, secs, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=256)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=5.0, help="the verifier's per-item bound")
    ap.add_argument("--rounds", type=int, default=8, help="naive and ours alternate this many times")
    ap.add_argument(
        "--reasoning",
        choices=["problem", "short"],
        default="problem",
        help="problem: each response restates the problem (LaTeX and all) before its answer; "
        "short: one sentence, then the answer",
    )
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    if not DATA.is_file():
        print(f"needs {DATA}", file=sys.stderr)
        return 2
    logging.getLogger("math_verify").setLevel(logging.ERROR)

    pairs, kinds = make_batch(args.prompts, args.group, args.seed, args.reasoning)
    n = len(pairs)
    print(f"batch: {args.prompts} prompts x {args.group} = {n} pairs ({args.reasoning} reasoning); mix {dict(Counter(kinds))}")

    # The naive loop gets the same warm-up as our fork server, so neither pays first-call costs.
    from composition_rl.verify.compare import _WARM_UP

    naive([(rf"\boxed{{{a}}}", "7") for a in _WARM_UP] + [(r"\boxed{7}", a) for a in _WARM_UP])
    verifiers, startup = {}, {}
    for label, workers in (("ours, 1 worker", 1), ("ours, default workers", None)):
        t = time.perf_counter()
        verifiers[label] = Verifier(VerifyConfig(timeout_s=args.timeout, workers=workers))
        verifiers[label].score(r"\boxed{1}", "1")  # start-up (fork server + workers), timed apart
        startup[label] = time.perf_counter() - t
    try:
        naive_ok, all_results, secs, cpu = run_interleaved(pairs, args.group, args.rounds, verifiers)
    finally:
        for v in verifiers.values():
            v.close()
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

    results = all_results["ours, default workers"]
    agree = sum((r.outcome is Outcome.CORRECT) == ok for r, ok in zip(results, naive_ok))
    slowest = max(r.elapsed_s for r in results)
    print(f"\noutcomes: {summarize(results)}")
    print(f"decided by: {dict(Counter(r.via or '-' for r in results))}")
    print(f"agreement with the naive loop on correct/not: {agree}/{n} ({100 * agree / n:.1f}%)")
    by_kind = Counter((k, r.outcome.value) for k, r in zip(kinds, results))
    print("by kind: " + "; ".join(f"{k}: {dict((o, c) for (kk, o), c in by_kind.items() if kk == k)}" for k in KINDS))
    bound = args.timeout + 0.5
    print(f"load average during the run (1 min): {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"slowest item: {slowest:.3f}s (must be under timeout + 0.5 = {bound:g}s: {'ok' if slowest < bound else 'OVER'})")
    diffs = [(p, k, r.outcome.value, ok) for p, k, r, ok in zip(pairs, kinds, results, naive_ok) if (r.outcome is Outcome.CORRECT) != ok]
    for (resp, gold), k, o, ok in diffs[:5]:
        print(f"  differs: kind={k} gold={gold!r} ours={o} naive={'correct' if ok else 'not'} answer_tail={resp[-60:]!r}")
    figures.update({"agreement": agree / n, "slowest_item_s": slowest, "timeout_s": args.timeout, "outcomes": summarize(results)})
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
