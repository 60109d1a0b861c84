"""The paper's premise measured on a real pretrained policy, run as a user would.

    .venv/bin/python benchmarks/real_policy_report.py                 # qwen2.5-coder-0.5b-instruct-awq-q4_k_m, docs/real_policy.md's design
    .venv/bin/python benchmarks/real_policy_report.py --report-only   # rewrite the report from finished steps
    make real-policy-report                                           # the same, sets the llama backend up first

Composition-RL's Figure 2 (right) says a checkpoint that has mastered prompts is far from
mastering their compositions. This script measures it on a pretrained model through the
in-process ``llama`` backend, each step the ``crl`` command a user would type, run in a child
process into its own folder under ``--out``:

1. ``data``: ``--problems`` problems of crl's default reasoning-gym numeric set (``--data
   math``: one MATH level of ``math_train.json`` with integer answers), a seeded shuffle,
   written to ``OUT/originals.jsonl``;
2. ``profile-originals``: ``crl profile -n 8`` on them (the pass-rate histogram, the bands);
3. ``compose-d2`` / ``compose-d3``: ``crl compose --from-profile ... --select solve_all``
   at depth 2 and 3 with the symbolic engine (when fewer than ``--min-mastered`` prompts are
   solve_all, the prompts with pass rate >= 0.75 are written to ``OUT/mastered.jsonl`` and
   composed instead, and the report says so);
4. ``profile-d2`` / ``profile-d3``: ``crl profile`` on the first ``--d2`` / ``--d3`` composed
   prompts, responses kept;
5. ``eval-comp``: ``crl eval --compositional 2`` on the mastered prompts (depth 1 resampled,
   depth 2 built by crl eval itself): v1 recovery and the error split;
6. ``report``: ``OUT/report.json``, ``OUT/report.md`` and two figures (``pass_rates.png``,
   ``bands_by_depth.png``), copied into ``docs/img`` with ``--docs-img``.

Resumable: a step that finished is recorded in ``OUT/steps.json`` with its command line and
skipped on a rerun with the same command; an interrupted step is rerun with the same command,
and crl itself resumes it (its logs are append-only and keyed by problem id). A step whose
command changed (other options) is refused by crl as a mismatched run, never mixed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO.parent / "shared" / "data").resolve()
BANDS = ("solve_none", "goldilocks", "solve_all")
_INT = re.compile(r"-?\d+")


# ---------------------------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------------------------


def pick_originals(source: Path, count: int, level: float, seed: int) -> list[dict[str, Any]]:
    """``count`` problems of one MATH level with an integer answer, in a seeded shuffle.

    Integer answers keep the grading unambiguous for a small model and give the symbolic
    engine a number to link on; the shuffle spreads the pick over the subjects.
    """
    rows = json.loads(source.read_text())
    keep = [r for r in rows if r.get("difficulty") == level and _INT.fullmatch(str(r.get("answer") or "").strip())]
    random.Random(seed).shuffle(keep)
    return [{"problem": r["problem"], "answer": r["answer"].strip(), "type": r.get("type")} for r in keep[:count]]


def pick_reasoning_gym(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` problems of crl's default reasoning-gym set (the numeric generators ``crl
    compose`` reads without ``--input``), in a seeded shuffle, as Problem records."""
    from composition_rl.io.readers import load_reasoning_gym

    problems = load_reasoning_gym().problems
    random.Random(seed).shuffle(problems)
    return [p.to_dict() for p in problems[:count]]


def write_jsonl(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    tmp.replace(path)


def read_rows(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


class Steps:
    """``OUT/steps.json``: the command line, exit code and wall time of each finished step."""

    def __init__(self, out: Path) -> None:
        self.path = out / "steps.json"
        self.done: dict[str, Any] = json.loads(self.path.read_text()) if self.path.is_file() else {}

    def finished(self, name: str, argv: Sequence[str]) -> bool:
        rec = self.done.get(name)
        return bool(rec) and rec.get("argv") == list(argv) and rec.get("exit") == 0

    def record(self, name: str, rec: dict[str, Any]) -> None:
        self.done[name] = rec
        tmp = self.path.with_name(".steps.json.tmp")
        tmp.write_text(json.dumps(self.done, indent=1) + "\n")
        tmp.replace(self.path)


def run_crl(steps: Steps, name: str, argv: list[str], out: Path, fatal: bool = True) -> dict[str, Any]:
    """Run ``crl ARGV`` from this checkout unless ``steps`` has it finished; its record.

    A failed step stops the run (a rerun resumes it), unless ``fatal`` is False: then it is
    reported and the run goes on (a composition of too few mastered prompts finds no chain,
    which is a result, not an error of the run); it is not recorded as finished either way.
    """
    if steps.finished(name, argv):
        print(f"[{name}] done earlier ({steps.done[name]['wall_s']} s), skipped", flush=True)
        return steps.done[name]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_WAIT_POLICY": "PASSIVE"}
    print(f"[{name}] {time.strftime('%H:%M:%S')} crl {' '.join(argv)}", flush=True)
    load0, t0 = os.getloadavg()[0], time.monotonic()
    with open(out / f"{name}.log", "a") as log:
        r = subprocess.run([sys.executable, "-m", "composition_rl.cli", *argv], cwd=REPO, env=env,
                           stdout=log, stderr=subprocess.STDOUT)
    rec = {"argv": argv, "exit": r.returncode, "wall_s": round(time.monotonic() - t0, 1),
           "load_start": round(load0, 2), "load_end": round(os.getloadavg()[0], 2),
           "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print(f"[{name}] exit {r.returncode} after {rec['wall_s']} s (load {rec['load_start']} -> {rec['load_end']})",
          flush=True)
    if r.returncode != 0:
        if fatal:
            sys.exit(f"[{name}] failed: see {out / (name + '.log')}; rerun the same command to resume")
        print(f"[{name}] failed: see {out / (name + '.log')}; going on without it", flush=True)
        return rec
    steps.record(name, rec)
    return rec


def mastered_rule(profile_rows: Sequence[Mapping[str, Any]], min_mastered: int) -> tuple[str, list[str]]:
    """``("solve_all", ids)`` when at least ``min_mastered`` prompts are n/n, else the
    prompts with pass rate >= 0.75 (``("pass_rate>=0.75", ids)``), in profile order."""
    solved = [r["id"] for r in profile_rows if r["class"] == "solve_all"]
    if len(solved) >= min_mastered:
        return "solve_all", solved
    return "pass_rate>=0.75", [r["id"] for r in profile_rows if r["pass_rate"] >= 0.75]


# ---------------------------------------------------------------------------------------------
# Report (pure functions of the run folders, tested on synthetic rows)
# ---------------------------------------------------------------------------------------------


def histogram(rows: Sequence[Mapping[str, Any]], n: int) -> dict[str, int]:
    """How many prompts reached each pass rate k/n, every k present."""
    per_k = Counter(int(r["correct"]) for r in rows)
    return {f"{k}/{n}": per_k.get(k, 0) for k in range(n + 1)}


def band_shares(rows: Sequence[Mapping[str, Any]], confidence: float = 0.95) -> dict[str, Any]:
    """Per band: the count, the share of prompts and its Wilson interval."""
    from composition_rl.stats import wilson_interval

    total = len(rows)
    counts = Counter(r["class"] for r in rows)
    out: dict[str, Any] = {"prompts": total}
    for b in BANDS:
        k = counts.get(b, 0)
        lo, hi = wilson_interval(k, total, confidence) if total else (float("nan"), float("nan"))
        out[b] = {"count": k, "share": k / total if total else None, "lo": lo, "hi": hi}
    return out


def response_rows(profile_rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Profile rows (``--keep-responses``) in the shape the Section 5.2 analysis reads."""
    return [
        {"id": r["id"], "responses": [{"text": x["text"], "score": 1.0 if x["outcome"] == "correct" else 0.0}
                                      for x in r.get("responses", [])]}
        for r in profile_rows
    ]


def composed_analysis(profile_rows: Sequence[Mapping[str, Any]], composed_path: Path) -> dict[str, Any] | None:
    """v1 recovery and the error split over a composed profile's kept responses."""
    from composition_rl.io.readers import load_problems
    from composition_rl.jobs.evaluate import composition_analysis

    if not profile_rows or not composed_path.is_file():
        return None
    problems = {p.id: p for p in load_problems(composed_path).problems}
    rows = [r for r in response_rows(profile_rows) if r["id"] in problems]
    return composition_analysis(rows, problems)


def outcome_counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    c: Counter[str] = Counter()
    for r in rows:
        c.update(r.get("outcomes", {}))
    return dict(sorted(c.items()))


def set_summary(rows: Sequence[Mapping[str, Any]], n: int) -> dict[str, Any]:
    if not rows:
        return {"prompts": 0}
    samples = len(rows) * n
    return {
        **band_shares(rows),
        "histogram": histogram(rows, n),
        "mean_pass_rate": sum(r["pass_rate"] for r in rows) / len(rows),
        "mean_tokens": sum(r["mean_tokens"] for r in rows) / len(rows),
        "truncated_share": sum(r["truncated"] for r in rows) / samples,
        "outcomes": outcome_counts(rows),
    }


def parents_product(composed_rows: Sequence[Mapping[str, Any]], composed_path: Path,
                    original_rows: Sequence[Mapping[str, Any]]) -> float | None:
    """Mean over composed prompts of the product of their parents' pass rates.

    What the composed pass rate would be if the policy solved each part as often as it solves
    the part alone, independently: the reference a measured composed pass rate is read against.
    """
    from composition_rl.io.readers import load_problems

    if not composed_rows or not composed_path.is_file():
        return None
    rate = {r["id"]: r["pass_rate"] for r in original_rows}
    parents = {p.id: p.parents for p in load_problems(composed_path).problems}
    products = []
    for r in composed_rows:
        ps = parents.get(r["id"], ())
        if ps and all(q in rate for q in ps):
            prod = 1.0
            for q in ps:
                prod *= rate[q]
            products.append(prod)
    return sum(products) / len(products) if products else None


def plot(sets: Mapping[str, Mapping[str, Any]], n: int, out: Path) -> list[str]:
    """``pass_rates.png`` (one panel per set) and ``bands_by_depth.png`` (Figure 2, right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [k for k, v in sets.items() if v.get("prompts")]
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.4), squeeze=False)
    colours = ["#c0392b"] + ["#27ae60"] * (n - 1) + ["#2c7fb8"]
    for ax, name in zip(axes[0], names):
        hist = sets[name]["histogram"]
        ax.bar([k / n for k in range(n + 1)], list(hist.values()), width=0.8 / n, color=colours)
        ax.set_title(f"{name} ({sets[name]['prompts']} prompts)")
        ax.set_xlabel(f"pass rate (correct / {n})")
    axes[0][0].set_ylabel("prompts")
    fig.tight_layout()
    fig.savefig(out / "pass_rates.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    width = 0.38
    for j, (b, colour, label) in enumerate((("solve_all", "#2c7fb8", "solve_all (n/n)"),
                                            ("goldilocks", "#27ae60", "informative (0 < k < n)"))):
        xs = [i + (j - 0.5) * width for i in range(len(names))]
        share = [sets[s][b]["share"] for s in names]
        err = [[sh - sets[s][b]["lo"] for s, sh in zip(names, share)],
               [sets[s][b]["hi"] - sh for s, sh in zip(names, share)]]
        ax.bar(xs, share, width=width, color=colour, label=label, yerr=err, capsize=3)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"share of prompts (n = {n}, 95% Wilson)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "bands_by_depth.png", dpi=100)
    plt.close(fig)
    return ["pass_rates.png", "bands_by_depth.png"]


def _pct(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _band_cell(s: Mapping[str, Any], b: str) -> str:
    if not s.get("prompts"):
        return "-"
    d = s[b]
    return f"{d['count']}/{s['prompts']} = {_pct(d['share'])} [{_pct(d['lo'])}, {_pct(d['hi'])}]"


def markdown(report: Mapping[str, Any]) -> str:
    n = report["n"]
    lines = [f"Model `{report['model']}`, n = {n}, max {report['max_tokens']} new tokens, template "
             f"`{report['template']}`; mastered = {report['mastered_rule']} "
             f"({report['mastered']} of {report['sets']['originals'].get('prompts', 0)} originals).", "",
             "| set | prompts | solve_all [95% Wilson] | informative [95% Wilson] | solve_none [95% Wilson] "
             "| mean pass rate (parts' product) | mean tokens | truncated |",
             "|---|---|---|---|---|---|---|---|"]
    for name, s in report["sets"].items():
        if not s.get("prompts"):
            lines.append(f"| {name} | 0 | - | - | - | - | - | - |")
            continue
        lines.append(f"| {name} | {s['prompts']} | {_band_cell(s, 'solve_all')} | {_band_cell(s, 'goldilocks')} "
                     f"| {_band_cell(s, 'solve_none')} | {_pct(s['mean_pass_rate'])}"
                     f"{' (' + _pct(s['parents_product']) + ')' if s.get('parents_product') is not None else ''} "
                     f"| {s['mean_tokens']:.0f} "
                     f"| {_pct(s['truncated_share'])} |")
    lines += ["", "Pass-rate histogram (prompts with k of n correct):", "",
              "| set | " + " | ".join(f"{k}/{n}" for k in range(n + 1)) + " |",
              "|---|" + "---|" * (n + 1)]
    for name, s in report["sets"].items():
        if s.get("prompts"):
            lines.append(f"| {name} | " + " | ".join(str(v) for v in s["histogram"].values()) + " |")
    lines += ["", "Section 5.2 on the composed prompts (wrong responses split by the first step that broke):", "",
              "| source | v1 recovery | v1 stated | links scored | wrong | q1 | linkage | middle | last | undecidable |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for name, a in report["analysis"].items():
        if not a:
            continue
        c, sp = a["error_counts"], a["error_split"]
        cells = " | ".join(f"{c[k]} ({_pct(sp[k])})" for k in ("q1", "linkage", "middle", "last"))
        lines.append(f"| {name} | {_pct(a['v1_recovery'])} | {_pct(a['v1_stated'])} | {a['links_scored']} "
                     f"| {a['wrong_responses']} | {cells} | {c['undecidable']} |")
    lines += ["", "| step | wall | load avg (start -> end) |", "|---|---|---|"]
    for name, rec in report["steps"].items():
        lines.append(f"| {name} | {rec['wall_s']:.0f} s | {rec['load_start']} -> {rec['load_end']} |")
    lines.append(f"| total | {report['wall_s']:.0f} s ({report['wall_s'] / 60:.1f} min) | |")
    return "\n".join(lines) + "\n"


def build_report(out: Path, args: argparse.Namespace, rule: str, mastered_ids: Sequence[str]) -> dict[str, Any]:
    n = args.n
    profiles = {"originals": out / "profile-originals", "depth 2": out / "profile-d2", "depth 3": out / "profile-d3"}
    rows = {k: read_rows(p / "profile.jsonl") for k, p in profiles.items()}
    chosen = set(mastered_ids)
    rows = {"originals": rows["originals"], "mastered": [r for r in rows["originals"] if r["id"] in chosen],
            "depth 2": rows["depth 2"], "depth 3": rows["depth 3"]}
    sets = {k: set_summary(v, n) for k, v in rows.items()}
    for depth in (2, 3):
        if sets[f"depth {depth}"].get("prompts"):
            sets[f"depth {depth}"]["parents_product"] = parents_product(
                rows[f"depth {depth}"], out / f"compose-d{depth}" / "composed.jsonl", rows["originals"])
    analysis: dict[str, Any] = {
        "crl profile, depth 2": composed_analysis(rows["depth 2"], out / "compose-d2" / "composed.jsonl"),
        "crl profile, depth 3": composed_analysis(rows["depth 3"], out / "compose-d3" / "composed.jsonl"),
    }
    results = out / "eval-comp" / "results.json"
    if results.is_file():
        comp = json.loads(results.read_text()).get("compositional", {})
        for bench, by_depth in comp.items():
            for depth, entry in by_depth.items():
                if depth != "1" and "v1_recovery" in entry:
                    analysis[f"crl eval --compositional, {bench} depth {depth}"] = {
                        k: entry[k] for k in ("v1_recovery", "v1_stated", "links_scored", "wrong_responses",
                                              "error_counts", "error_split")}
    steps = Steps(out).done
    report = {
        "model": Path(args.model).name, "n": n, "max_tokens": args.max_tokens, "template": args.template,
        "mastered_rule": rule, "mastered": len(chosen), "sets": sets, "analysis": analysis,
        "eval": json.loads(results.read_text()) if results.is_file() else None,
        "steps": steps, "wall_s": sum(r["wall_s"] for r in steps.values()),
    }
    report["figures"] = plot(sets, n, out)
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "report.md").write_text(markdown(report))
    return report


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    """The options: the model and data, how many prompts each step profiles or evaluates, and
    which steps to skip."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=".venv-llm/models/qwen-0.5b.gguf", help="a GGUF (relative to the repository)")
    ap.add_argument("--out", default="runs/real-policy")
    ap.add_argument("--data", choices=("rg", "math"), default="rg",
                    help="rg: crl's default reasoning-gym numeric set; math: one level of --source")
    ap.add_argument("--source", default=str(SHARED / "train" / "math_train.json"))
    ap.add_argument("--level", type=float, default=1.0, help="MATH level of the originals (--data math)")
    ap.add_argument("--problems", type=int, default=64)
    ap.add_argument("-n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=24)
    ap.add_argument("--template", default="answer", help="the profiles' prompt template")
    ap.add_argument("--min-mastered", type=int, default=6)
    ap.add_argument("--candidates", type=int, default=400, help="--max-candidates of each crl compose")
    ap.add_argument("--d2", type=int, default=42, help="depth-2 composed prompts profiled")
    ap.add_argument("--d3", type=int, default=40, help="depth-3 composed prompts profiled")
    ap.add_argument("--eval-mastered", type=int, default=6, help="mastered prompts crl eval resamples (--limit)")
    ap.add_argument("--eval-comp", type=int, default=8, help="crl eval --comp-max")
    ap.add_argument("--eval-n", type=int, default=4, help="crl eval -n")
    ap.add_argument("--eval-template", default="brief",
                    help="crl eval's template: v1 recovery needs responses that state intermediate values")
    ap.add_argument("--eval-max-tokens", type=int, default=160)
    ap.add_argument("--skip", default="", help="comma-separated steps not to run (e.g. eval-comp)")
    ap.add_argument("--docs-img", help="copy the figures here as real_policy_<name>.png")
    ap.add_argument("--report-only", action="store_true")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    steps = Steps(out)
    skip = {s for s in args.skip.split(",") if s}
    common = ["--model", args.model, "-n", str(args.n), "--max-tokens", str(args.max_tokens),
              "--template", args.template, "--fallback", "prose", "--chunk", "16", "--no-progress"]
    eval_opts = ["--model", args.model, "-n", str(args.eval_n), "--max-tokens", str(args.eval_max_tokens),
                 "--template", args.eval_template, "--fallback", "prose", "--chunk", "16", "--no-progress"]

    originals = out / "originals.jsonl"
    if not originals.is_file():
        write_jsonl(originals, pick_reasoning_gym(args.problems, seed=0) if args.data == "rg"
                    else pick_originals(Path(args.source), args.problems, args.level, seed=0))
    if not args.report_only:
        run_crl(steps, "profile-originals", ["profile", *common, "--keep-responses", "--input", str(originals),
                                             "--out", str(out / "profile-originals")], out)
    prof = read_rows(out / "profile-originals" / "profile.jsonl")
    rule, ids = mastered_rule(prof, args.min_mastered)
    by_id = {r["id"]: r for r in prof}
    print(f"mastered ({rule}): {len(ids)} of {len(prof)}", flush=True)
    # the mastered originals as a file of their own: crl eval's benchmark, and the compose input
    # when too few are n/n for --select solve_all
    mastered = out / "mastered.jsonl"
    if prof and not mastered.is_file():
        from composition_rl.io.readers import load_problems

        problems = {p.id: p for p in load_problems(originals).problems}
        write_jsonl(mastered, [{"problem": problems[i].question, "answer": problems[i].answers[0],
                                "pass_rate": by_id[i]["pass_rate"]} for i in ids])
    source = (["--input", str(originals), "--from-profile", str(out / "profile-originals"), "--select", "solve_all"]
              if rule == "solve_all" else ["--input", str(mastered)])
    if not args.report_only and ids:
        for depth, count in ((2, args.d2), (3, args.d3)):
            name = f"d{depth}"
            if f"compose-{name}" not in skip:
                run_crl(steps, f"compose-{name}", ["compose", *source, "--depth", str(depth), "--engine", "symbolic",
                                                   "--max-candidates", str(args.candidates), "--seed", "0",
                                                   "--no-progress", "--out", str(out / f"compose-{name}")], out,
                        fatal=False)
            composed = out / f"compose-{name}" / "composed.jsonl"
            if f"profile-{name}" not in skip and composed.is_file() and composed.stat().st_size:
                run_crl(steps, f"profile-{name}", ["profile", *common, "--keep-responses", "--input", str(composed),
                                                   "--limit", str(count), "--out", str(out / f"profile-{name}")], out)
        if "eval-comp" not in skip:
            run_crl(steps, "eval-comp", ["eval", *eval_opts, "--benchmark", str(mastered), "--limit",
                                         str(args.eval_mastered), "--compositional", "2", "--comp-max",
                                         str(args.eval_comp), "--out", str(out / "eval-comp")], out)
    report = build_report(out, args, rule, ids)
    if args.docs_img:
        dest = Path(args.docs_img)
        dest.mkdir(parents=True, exist_ok=True)
        for f in report["figures"]:
            shutil.copyfile(out / f, dest / f"real_policy_{f}")
    print((out / "report.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
