"""Do compositions of the default data read as one problem? (issue 54)

Composes a depth-2 set with ``crl compose`` once per source tree given (``--src``, e.g. a
checkout of the code before and after a change), side by side in one run, and counts over
each output, read from the records and their parents' texts by rules of this script's own:

1. ``instruction_before_link``: the text before the last link asks for an answer ("final
   answer", "give only the result", "do not include units", ``\\boxed``);
2. ``latex_y_in_plain_text``: a variable written ``$Y$`` in a part whose problem writes no
   LaTeX (no backslash, every dollar a price before a digit); ``..._arithmetic`` counts
   those where ``$Y$`` touches an operator or a currency sign ("6 * $Y$", "€$Y$");
3. ``zero_offset_link``: a link that states ``d = 0`` ("$Y$ is equal to $X$");
4. ``degenerate_part``: a part whose answer is read off its text (a literal times 1 or 0, plus
   or minus 0, divided by 1, the LCM of a number and itself, and the answer written in the text).

    python benchmarks/default_compositions.py --src /tmp/base/src --src src         # the default data
    python benchmarks/default_compositions.py --src /tmp/base/src --src src \\
        --input ../shared/data/train/math_train.json --pool-size 20 --diff          # MATH, and what changed

``--diff`` compares the first and the last output record by record (by candidate id) and
sorts every changed record by what changed.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_INSTRUCTION = re.compile(r"final answer|give only the result|do not include units|\\boxed", re.I)
_GLUE = re.compile(r"\n\n[^\n]*\$(?P<y>[A-Z])\$ is (?:\$[^$\n]+\$ (?:less|more) than|equal to) \$[A-Z]\$\.\n\n")
_IDENTITY = re.compile(r"(?<![\d.])[01] \* -?\d|\d \* [01](?![\d.])|\d / 1(?![\d.])|\d [+-] 0(?![\d.])|numbers: (\d+), \1$")


def plain(text: str) -> bool:
    return "\\" not in text and all(text[i + 1 : i + 2].isdigit() for i, ch in enumerate(text) if ch == "$")


def compose(src: Path, out: Path, args) -> float:
    cmd = [sys.executable, "-m", "composition_rl.cli", "compose", "--depth", str(args.depth), "--seed", "0",
           "--out", str(out), "--workers", "1"]
    if args.input:
        cmd += ["--input", args.input, "--pool-size", str(args.pool_size)]
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_WAIT_POLICY": "PASSIVE"}
    t0 = time.monotonic()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, cwd=REPO)
    return time.monotonic() - t0


def parents_by_id(args) -> dict[str, dict]:
    """The input problems by id, read with this checkout's reader (the id hashes question and
    answers, so both outputs name the same parents)."""
    sys.path.insert(0, str(REPO / "src"))
    from composition_rl.io.readers import load_problems, load_reasoning_gym

    res = load_problems(args.input) if args.input else load_reasoning_gym(seed=0)
    return {p.id: {"question": p.question, "answer": p.answer} for p in res.problems}


def count(path: Path, parents: dict[str, dict]) -> dict[str, int]:
    c = collections.Counter()
    for line in open(path):
        r = json.loads(line)
        c["records"] += 1
        q = r["question"]
        glues = list(_GLUE.finditer(q))
        c["instruction_before_link"] += bool(glues and _INSTRUCTION.search(q[: glues[-1].start()]))
        latex = arith = False
        for k, lk in enumerate(r["links"]):
            part = parents[r["parents"][k + 1]]["question"]
            seg = q[glues[k].end() : glues[k + 1].start() if k + 1 < len(glues) else len(q)] if k < len(glues) else ""
            tok = f"${lk['y']}$"
            if plain(part) and tok in seg:
                latex = True
                arith |= bool(re.search(r"[-+*/=€$]\s*" + re.escape(tok) + r"|" + re.escape(tok) + r"\s*[-+*/=]", seg))
        c["latex_y_in_plain_text"] += latex
        c["latex_y_in_plain_text_arithmetic"] += arith
        c["zero_offset_link"] += any(lk["d_expr"] == "0" for lk in r["links"])
        c["degenerate_part"] += any(
            _IDENTITY.search(parents[i]["question"]) and parents[i]["answer"] in re.findall(r"-?\d+", parents[i]["question"])
            for i in r["parents"])
        c["instructions_recorded"] += bool(r["metadata"].get("instructions_removed"))
    return dict(c)


def diff(a: Path, b: Path) -> collections.Counter:
    """Records of ``a`` and ``b`` by candidate, sorted by what changed."""
    def load(p):
        return {json.loads(x)["metadata"]["candidate"]: json.loads(x) for x in open(p)}

    old, new = load(a), load(b)
    out: collections.Counter = collections.Counter()
    for cand in old.keys() | new.keys():
        ra, rb = old.get(cand), new.get(cand)
        if ra and rb and ra["question"] == rb["question"] and ra["links"] == rb["links"]:
            out["unchanged" if ra == rb else "metadata only"] += 1
            continue
        if ra is None or rb is None:
            zero = ra is not None and any(lk["d_expr"] == "0" for lk in ra["links"])
            out[("dropped" + (" (had a zero offset)" if zero else "")) if rb is None else "added"] += 1
            continue
        why = []
        if any(lk["d_expr"] == "0" for lk in ra["links"]):
            why.append("zero offset replaced")
        if rb["metadata"].get("instructions_removed"):
            why.append("answer instructions removed")
        if "Call the answer to this problem" in ra["question"]:
            why.append("definition wording")
        if ra["parents"] != rb["parents"]:
            why.append("another partner")
        elif [lk["v2_offset"] for lk in ra["links"]] != [lk["v2_offset"] for lk in rb["links"]]:
            why.append("another constant")
        qa = re.sub(r"Call the answer to this problem", "Call the answer to the problem above", ra["question"])
        if ra["parents"] == rb["parents"] and ra["links"] == rb["links"] and qa != rb["question"]:
            if any(qa.count(f"${lk['y']}$") > rb["question"].count(f"${lk['y']}$") for lk in rb["links"]):
                why.append("bare variable in a plain-text problem")
        out[" + ".join(why) or "other"] += 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", action="append", required=True, help="a source tree (its src/ folder); repeat")
    ap.add_argument("--input", help="compose this file instead of the default reasoning-gym set")
    ap.add_argument("--pool-size", type=int, default=20)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--diff", action="store_true", help="sort the records that changed between the first and last --src")
    ap.add_argument("--keep", help="keep the outputs under this folder")
    args = ap.parse_args(argv)
    parents = parents_by_id(args)
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="default_compositions_"))
    outs = []
    print(f"load average {os.getloadavg()[0]:.2f}; input {args.input or 'reasoning-gym default'}, depth {args.depth}")
    keys = ("instruction_before_link", "latex_y_in_plain_text", "latex_y_in_plain_text_arithmetic",
            "zero_offset_link", "degenerate_part", "instructions_recorded")
    print("| src | records | " + " | ".join(keys) + " | sha256 | wall |")
    print("|---" * (len(keys) + 4) + "|")
    for i, src in enumerate(args.src):
        out = base / f"out{i}"
        wall = compose(Path(src).resolve(), out, args)
        c = count(out / "composed.jsonl", parents)
        n = c["records"] or 1
        sha = hashlib.sha256((out / "composed.jsonl").read_bytes()).hexdigest()[:12]
        cells = [f"{c.get(k, 0)} ({100 * c.get(k, 0) / n:.1f}%)" for k in keys]
        print(f"| {src} | {c['records']} | " + " | ".join(cells) + f" | {sha} | {wall:.1f} s |")
        outs.append(out)
    if args.diff and len(outs) > 1:
        print(f"\nrecords by what changed ({args.src[0]} -> {args.src[-1]}):")
        for why, n in diff(outs[0] / "composed.jsonl", outs[-1] / "composed.jsonl").most_common():
            print(f"  {n:7d}  {why}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
