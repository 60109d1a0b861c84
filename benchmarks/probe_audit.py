"""The solver probe against the blind audits' labels: precision, recall and cost per record.

    .venv/bin/python benchmarks/probe_audit.py --workdir /tmp/probe-audit --build-only
    .venv/bin/python benchmarks/probe_audit.py --workdir /tmp/probe-audit -- --probe-model qwen2.5-coder-0.5b-instruct-awq-q4_k_m -k 4 \\
        --max-tokens 512
    .venv/bin/python benchmarks/probe_audit.py --workdir /tmp/probe-audit --math-sample 200 -- --probe-model qwen2.5-coder-0.5b-instruct-awq-q4_k_m

Two blind audits of the MATH depth-2 default name every shortcut item they found, so every
one of their items has a label (docs/notes/composition_log.md: the third round's MATH audit,
``--sample 60 --seed 260``, and the seventh audit, ``--sample 60 --seed 281``). Their forms
were not kept, but each sample is a function of the code that drew it: this script takes that
code (``git archive COMMIT src``), composes MATH depth 2 with it (``--pool-size 20 --seed 0``),
checks the output's sha256 where the log states one, draws the audit sample with the same
seed, and labels each item by the log's list. The 120 records (20 shortcuts) go to
``WORKDIR/labelled.jsonl``, each with ``metadata.audit`` = {audit, item, shortcut}.

Then (unless ``--build-only``) ``crl probe`` of this checkout runs on them with the arguments
after ``--``, and the script prints the confusion table against the labels and the seconds
per record. A rejected record is a predicted shortcut: precision = rejected shortcuts /
rejected, recall = rejected shortcuts / shortcuts.

``--math-sample N`` probes N records drawn (``--sample-seed``) from this checkout's own MATH
depth-2 default instead, and prints the share rejected: what acceptance the probe implies.

Needs ``../shared/data/train/math_train.json`` and this repository's history.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MATH = REPO.parent / "shared" / "data" / "train" / "math_train.json"

# each audit: the commit whose code drew it, the sample's seed, the sha256 the log gives for
# the run (None where it gives none) and the items the reviewers judged shortcuts
AUDITS = [
    # the third round's log gives no sha256; 875f05f41ad0 is what a4f3a6a writes (its items read
    # as the log describes them: docs/notes/composition_log.md), so a run by other code stops here
    {"name": "third round (MATH, seed 260)", "commit": "a4f3a6a", "seed": 260, "sha256": "875f05f41ad0",
     "shortcuts": {"A002", "A012", "A014", "A023", "A024", "A032", "A038", "A045", "A053", "A056"}},
    {"name": "seventh audit (seed 281)", "commit": "8ee146d", "seed": 281, "sha256": "8ef03386f687",
     "shortcuts": {"A005", "A020", "A024", "A032", "A039", "A048", "A049", "A052", "A053", "A056"}},
]


def _crl(src: Path, *args: str, cwd: Path) -> None:
    # an absolute path: a relative one is read from cwd, misses, and the installed package
    # (this checkout's code) would compose instead of the audit's
    env = {**os.environ, "PYTHONPATH": str(src.resolve()), "OMP_WAIT_POLICY": "PASSIVE"}
    subprocess.run([sys.executable, "-m", "composition_rl.cli", *args], cwd=cwd, env=env, check=True,
                   stdout=subprocess.DEVNULL)


def build(workdir: Path) -> Path:
    """``workdir/labelled.jsonl``: every item of both audits, labelled."""
    out: list[dict] = []
    for a in AUDITS:
        d = workdir / a["commit"]
        d.mkdir(parents=True, exist_ok=True)
        if not (d / "src").is_dir():
            tar = subprocess.run(["git", "-C", str(REPO), "archive", a["commit"], "src"], check=True,
                                 capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(d)], input=tar, check=True)
        run = d / "run"
        if not (run / "composed.jsonl").is_file():
            _crl(d / "src", "compose", "--input", str(MATH), "--depth", "2", "--pool-size", "20", "--seed", "0",
                 "--out", str(run), "--no-progress", cwd=d)
        sha = hashlib.sha256((run / "composed.jsonl").read_bytes()).hexdigest()
        if a["sha256"] and not sha.startswith(a["sha256"]):
            raise SystemExit(f"{a['name']}: composed.jsonl has sha256 {sha[:12]}, the log says {a['sha256']}")
        form = d / f"audit{a['seed']}.csv"
        if not form.is_file():
            _crl(d / "src", "audit", str(run), "--sample", "60", "--seed", str(a["seed"]), "--out", str(form), cwd=d)
        items = json.loads(form.with_name(form.name + ".key.json").read_text())["items"]
        item_of = {rid: item for item, rid in items.items()}
        seen: set[str] = set()
        with open(run / "composed.jsonl", encoding="utf-8") as f:
            for line in f:
                rec = json.loads(line)
                if rec["id"] in item_of and rec["id"] not in seen:  # a repeated composition: once
                    seen.add(rec["id"])
                    item = item_of[rec["id"]]
                    rec["metadata"]["audit"] = {"audit": a["name"], "item": item, "shortcut": item in a["shortcuts"]}
                    out.append(rec)
        print(f"{a['name']}: {len(seen)} items, {len(a['shortcuts'])} shortcuts (composed.jsonl sha256 {sha[:12]})")
    path = workdir / "labelled.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    return path


def score(labelled: Path, probe_out: Path) -> dict:
    """The confusion table of ``crl probe``'s rejections against the labels."""
    label = {}
    with open(labelled, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            label[rec["id"]] = rec["metadata"]["audit"]["shortcut"]
    with open(probe_out / "rejected.jsonl", encoding="utf-8") as f:
        rejected = {json.loads(line)["id"] for line in f}
    tp = sum(1 for i, s in label.items() if s and i in rejected)
    fp = sum(1 for i, s in label.items() if not s and i in rejected)
    fn = sum(1 for i, s in label.items() if s and i not in rejected)
    tn = len(label) - tp - fp - fn
    return {"items": len(label), "shortcuts": tp + fn, "rejected": tp + fp, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
            "precision": tp / (tp + fp) if tp + fp else None, "recall": tp / (tp + fn) if tp + fn else None}


def math_sample(workdir: Path, n: int, seed: int) -> Path:
    """``workdir/math_sample.jsonl``: ``n`` records drawn (seeded) from this checkout's MATH
    depth-2 default (``crl compose --pool-size 20 --seed 0``), for the share the probe rejects."""
    run = workdir / "math_d2"
    if not (run / "composed.jsonl").is_file():
        _crl(REPO / "src", "compose", "--input", str(MATH), "--depth", "2", "--pool-size", "20", "--seed", "0",
             "--out", str(run), "--no-progress", cwd=REPO)
    with open(run / "composed.jsonl", encoding="utf-8") as f:
        lines = f.readlines()
    if n > len(lines):
        raise SystemExit(f"--math-sample {n}: the run has only {len(lines)} records")
    path = workdir / "math_sample.jsonl"
    path.write_text("".join(lines[i] for i in sorted(random.Random(seed).sample(range(len(lines)), n))),
                    encoding="utf-8")
    print(f"MATH depth 2: {len(lines)} records, {n} drawn with seed {seed}")
    return path


def _probe(records: Path, out: Path, extra: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "composition_rl.cli", "probe", "--input", str(records), "--out", str(out),
                    "--no-progress", *extra], check=True,
                   env={**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_WAIT_POLICY": "PASSIVE"})
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True, type=Path)
    ap.add_argument("--build-only", action="store_true", help="rebuild the labelled items, probe nothing")
    ap.add_argument("--math-sample", type=int, default=0, metavar="N",
                    help="instead of the labelled items: the share of N records of this checkout's MATH depth-2 "
                         "default that the probe rejects")
    ap.add_argument("--sample-seed", type=int, default=0)
    ap.add_argument("probe_args", nargs=argparse.REMAINDER, help="after --: crl probe's solver and probe options")
    args = ap.parse_args()
    args.workdir = args.workdir.resolve()  # the old code's crl runs in its own folder
    extra = [a for a in args.probe_args if a != "--"]
    if args.math_sample:
        sample = math_sample(args.workdir, args.math_sample, args.sample_seed)
        out = args.workdir / "probe-math-sample"
        wall = _probe(sample, out, extra)
        summary = json.loads((out / "probe_summary.json").read_text(encoding="utf-8"))
        with open(out / "rejected.jsonl", encoding="utf-8") as f:
            rejected = sum(1 for _ in f)
        print(json.dumps({"records": args.math_sample, "rejected": rejected, "share": rejected / args.math_sample,
                          "summary": summary, "seconds_per_record": wall / args.math_sample}))
        return
    labelled = build(args.workdir)
    if args.build_only:
        return
    wall = _probe(labelled, args.workdir / "probe", extra)
    s = score(labelled, args.workdir / "probe")
    s["seconds_per_record"] = wall / s["items"]
    print(json.dumps(s))


if __name__ == "__main__":
    main()
