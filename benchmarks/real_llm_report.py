"""What a real 0.5B model does with every model-facing path, measured on this CPU.

    .venv/bin/python benchmarks/real_llm_report.py                  # qwen2.5-coder-0.5b-instruct-awq-q4_k_m, all four parts
    .venv/bin/python benchmarks/real_llm_report.py --parts compose,auto --out runs/rlr
    make real-llm-report                                            # the same, sets .venv-llm up first

Starts ``scripts/serve_real_llm.sh --model MODEL`` on a free loopback port, then runs, each
as a user would (``crl`` in a child process, wall time measured around it):

1. ``compose``: ``crl compose --engine llm`` on MATH-train depth-2 candidates
   (``--candidates``, default 24): acceptance, rejections by reason, calls per accepted,
   tokens, wall time;
2. ``auto``: the same candidates with ``--engine auto``;
   ``plain``: the first ``--plain-candidates`` (default 8) with ``--structured none`` (the
   prompt alone, no grammar: the reply shapes a server without constrained decoding gets);
3. ``profile``: ``crl profile -n 4`` on GSM8K-level problems (reasoning-gym's
   ``gsm_symbolic``, ``--problems``, default 50): the bands and the pass-rate histogram;
4. ``grow``: ``crl grow --teacher openai`` with the model as teacher on toy arithmetic seeds
   (``--seeds``, default 8; policy and student: the tiny model of ``crl tiny-model``): the
   funnel and every drop reason.

Every part writes into ``OUT/<part>`` and is resumable (rerun the command: finished work is
read back, not redone). ``OUT/report.json`` holds the figures, ``OUT/report.md`` the tables
written into docs/llm_engine.md. Not part of ``make test``: on 2 CPU cores it takes hours.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO.parent / "shared" / "data").resolve()
PARTS = ("compose", "auto", "plain", "profile", "grow")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``scripts/serve_real_llm.sh --model M PORT`` in its own process group."""

    def __init__(self, model: str, logdir: Path, ready_s: float = 900.0) -> None:
        self.model, self.logdir, self.ready_s = model, logdir, ready_s

    def __enter__(self) -> str:
        self.logdir.mkdir(parents=True, exist_ok=True)
        self.out = open(self.logdir / "server.stdout", "w")
        self.err = open(self.logdir / "server.stderr", "w")
        port = _free_port()
        self.proc = subprocess.Popen(
            ["bash", str(REPO / "scripts" / "serve_real_llm.sh"), "--model", self.model, str(port)],
            cwd=REPO, stdout=self.out, stderr=self.err, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + self.ready_s  # a first setup compiles llama.cpp
        while time.monotonic() < deadline:
            text = (self.logdir / "server.stdout").read_text()
            if "serve_real_llm: ready " in text:
                return text.split("serve_real_llm: ready ", 1)[1].split()[0]
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        self.__exit__()
        sys.exit("the server did not come up:\n" + (self.logdir / "server.stderr").read_text()[-3000:])

    def __exit__(self, *exc: Any) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.out.close()
        self.err.close()


def crl(args: list[str], log: Path, limit_s: float) -> dict[str, Any]:
    """Run ``crl`` from this checkout; its exit code and wall time (stderr kept in ``log``)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    env.pop("OPENAI_API_KEY", None)
    t0 = time.monotonic()
    with open(log, "w") as err:
        r = subprocess.run([sys.executable, "-m", "composition_rl.cli", *args], cwd=REPO, env=env,
                           stdout=subprocess.DEVNULL, stderr=err, timeout=limit_s)
    return {"exit": r.returncode, "wall_s": round(time.monotonic() - t0, 1)}


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def part_compose(engine: str, url: str, model: str, out: Path, args: argparse.Namespace,
                 candidates: int, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    run = crl([
        "compose", "--input", str(SHARED / "train" / "math_train.json"),
        "--depth", "2", "--pool-size", str(args.pool_size), "--max-candidates", str(candidates),
        "--seed", "0", "--engine", engine, "--base-url", url, "--model", model,
        "--concurrency", "1", "--max-tokens", "512", "--timeout", "300", "--max-retries", "2",
        "--no-progress", "--out", str(out), *extra,
    ], out.with_suffix(".log"), args.limit_s)  # fmt: skip
    s = json.loads((out / "stats.json").read_text())
    llm = s["llm"]
    return {
        **run, "candidates": s["candidates"], "accepted": s["accepted"], "acceptance": s["acceptance"],
        "accepted_by_engine": s.get("accepted_by_engine"), "rejected_by_reason": s["rejected_by_reason"],
        "rejected_by_stage": {k: v for k, v in s["rejected_by_stage"].items() if v},
        "funnel": s["funnel"], "requests": llm["requests"], "prompt_tokens": llm["prompt_tokens"],
        "completion_tokens": llm["completion_tokens"],
        "requests_per_accepted": llm.get("requests_per_llm_accepted"),
        "structured_used": s["backend"].get("structured_used"),
        "mean_latency_s": s["this_run"].get("mean_latency_s"),
    }  # fmt: skip


def gsm_problems(path: Path, n: int) -> None:
    """``n`` GSM8K-level word problems from reasoning-gym's gsm_symbolic (seed 0)."""
    import reasoning_gym

    ds = reasoning_gym.create_dataset("gsm_symbolic", seed=0, size=n)
    with open(path, "w") as f:
        for i in range(n):
            item = ds[i]
            f.write(json.dumps({"question": item["question"], "answer": str(item["answer"])}) + "\n")


def part_profile(url: str, model: str, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    data = out.parent / "gsm_symbolic.jsonl"
    if not data.exists():
        gsm_problems(data, args.problems)
    run = crl([
        "profile", "--base-url", url, "--model", model, "--input", str(data), "-n", "4",
        "--max-tokens", str(args.profile_max_tokens), "--concurrency", "1", "--no-progress",
        "--out", str(out),
    ], out.with_suffix(".log"), args.limit_s)  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    rows = [json.loads(x) for x in (out / "profile.jsonl").read_text().splitlines() if x.strip()]
    hist = Counter(round(r["pass_rate"] * 4) for r in rows)
    outcomes = Counter(k for r in rows for k, v in r["outcomes"].items() for _ in range(v))
    return {
        **run, "problems": summary["prompts"], "counts": summary["counts"],
        "mean_pass_rate": summary.get("mean_pass_rate"),
        "histogram": {f"{k}/4": hist.get(k, 0) for k in range(5)}, "outcomes": dict(outcomes),
        "mean_tokens": round(sum(r["mean_tokens"] for r in rows) / max(1, len(rows)), 1),
    }  # fmt: skip


def toy_seeds(path: Path, n: int) -> None:
    """Depth-3 arithmetic chains the tiny policy never trained on (docs/mbs.md's seeds)."""
    from composition_rl.jobs.train.arithmetic import make_problem

    with open(path, "w") as f:
        for i in range(n):
            f.write(json.dumps(make_problem(3, seed=500, index=i, digits=1)[0].to_dict()) + "\n")


def part_grow(url: str, model: str, out: Path, args: argparse.Namespace) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    seeds, policy = out.parent / "toy_seeds.jsonl", out.parent / "tiny_policy"
    if not seeds.exists():
        toy_seeds(seeds, args.seeds)
    if not (policy / "config.json").exists():
        crl(["tiny-model", "--out", str(policy)], out.parent / "tiny_model.log", args.limit_s)
    run = crl([
        "grow", "--input", str(seeds), "--policy", str(policy), "--teacher", "openai",
        "--teacher-base-url", url, "--teacher-model", model,
        "--template", "plain", "--max-tokens", "64", "-n", "8", "--no-progress", "--out", str(out),
    ], out.with_suffix(".log"), args.limit_s)  # fmt: skip
    s = json.loads((out / "stats.json").read_text())
    return {
        **run, "seeds_in": s["funnel"][0]["seeds"] if s["funnel"] else None,
        "hard_seeds": s["hard_seeds"], "qualified_seeds": s["qualified_seeds"],
        "funnel": s["funnel"], "dropped_by_reason": s["dropped_by_reason"],
        "rejects_by_reason": s.get("rejects_by_reason"), "counts_add_up": s.get("counts_add_up"),
        "cost": s.get("cost"),
    }  # fmt: skip


def markdown(report: dict[str, Any]) -> str:
    lines = [f"Model `{report['model']}`; {report['date']}; load average at start {report['load_start']}.", ""]
    rows = [("compose", "`--engine llm`"), ("auto", "`--engine auto`"),
            ("plain", "`--engine llm --structured none`")]
    if any(k in report for k, _ in rows):
        lines += ["| run | accepted | rejected (reason: count) | requests (per accepted) | tokens prompt / completion | wall |",
                  "|---|---|---|---|---|---|"]
        for k, name in rows:
            r = report.get(k)
            if r:
                reasons = ", ".join(f"`{a}` {b}" for a, b in sorted(r["rejected_by_reason"].items(), key=lambda x: -x[1]))
                eng = f" ({r['accepted_by_engine']})" if k == "auto" else ""
                lines.append(f"| {name} | {r['accepted']} of {r['candidates']}{eng} | {reasons} | "
                             f"{r['requests']} ({r['requests_per_accepted']}) | "
                             f"{r['prompt_tokens']:,} / {r['completion_tokens']:,} | {r['wall_s']:.0f} s |")
        lines.append("")
    if "profile" in report:
        r = report["profile"]
        lines += [f"`crl profile -n 4` on {r['problems']} gsm_symbolic problems: bands {r['counts']}, "
                  f"pass-rate histogram {r['histogram']}, outcomes {r['outcomes']}, "
                  f"mean {r['mean_tokens']} tokens per response, wall {r['wall_s']:.0f} s.", ""]
    if "grow" in report:
        r = report["grow"]
        funnel = " -> ".join(f"{f['stage']} {f['seeds']}" for f in r["funnel"])
        lines += [f"`crl grow --teacher openai`: funnel {funnel}; dropped {r['dropped_by_reason']}; "
                  f"teacher replies rejected {r['rejects_by_reason']}; cost {r['cost']}; wall {r['wall_s']:.0f} s.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen-0.5b",
                    choices=["smollm2-135m-instruct-q4_1", "qwen2.5-coder-0.5b-instruct-awq-q4_k_m",
                             "qwen2.5-coder-1.5b-instruct-q4_k_m", "smollm2", "qwen-0.5b", "qwen-1.5b"],
                    help="a bundled GGUF by name (the short names are the old aliases; the default keeps "
                    "the folder names of the recorded reports)")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "real_llm_report")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    ap.add_argument("--candidates", type=int, default=24)
    ap.add_argument("--pool-size", type=int, default=6)
    ap.add_argument("--plain-candidates", type=int, default=8)
    ap.add_argument("--problems", type=int, default=50)
    ap.add_argument("--profile-max-tokens", type=int, default=400)
    ap.add_argument("--seeds", type=int, default=8)
    ap.add_argument("--base-url", help="use this running server (serve_real_llm.sh --model MODEL) instead of starting one")
    ap.add_argument("--limit-s", type=float, default=4 * 3600, help="most seconds one crl run may take")
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if bad := [p for p in parts if p not in PARTS]:
        ap.error(f"unknown part(s) {bad}; known: {', '.join(PARTS)}")
    if not SHARED.is_dir():
        ap.error(f"the shared data folder is not at {SHARED}")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "report.json"
    report = json.loads(path.read_text()) if path.exists() else {}
    report.update(model=args.model, date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), load_start=_load())
    server = contextlib.nullcontext(args.base_url) if args.base_url else Server(args.model, args.out)
    with server as url:
        for part in parts:
            t0 = _load()
            if part in ("compose", "auto"):
                engine = "llm" if part == "compose" else "auto"
                report[part] = part_compose(engine, url, args.model, args.out / part, args, args.candidates)
            elif part == "plain":
                report[part] = part_compose("llm", url, args.model, args.out / part, args,
                                            args.plain_candidates, ("--structured", "none"))
            elif part == "profile":
                report[part] = part_profile(url, args.model, args.out / part, args)
            else:
                report[part] = part_grow(url, args.model, args.out / part, args)
            report[part]["load"] = f"{t0} -> {_load()}"
            path.write_text(json.dumps(report, indent=1) + "\n")
            print(f"[{part}] {json.dumps(report[part])}", flush=True)
    (args.out / "report.md").write_text(markdown(report) + "\n")
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
