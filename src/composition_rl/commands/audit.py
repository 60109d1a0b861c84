"""``crl audit``: a blind sample of a composed set for human review, its score, and the
defect scanners.

    crl audit runs/math_d2 --sample 40 --seed 0 --out audit.html   # or audit.csv
    crl audit --score audit_filled.csv
    crl audit runs/math_d2 --scan [--json scan.json]               # records in each defect class
    crl audit runs/math_d2 --where pattern --sample 20 --out p.html  # a sample of one class

The first form writes the form (HTML with buttons, or CSV to fill in a spreadsheet) and,
beside it, ``<out>.key.json`` mapping items to record ids (not shown to the reviewer). The
second reads a filled CSV and prints the invalid, shortcut and natural rates with 95%
Wilson intervals (``--json`` also writes them). See docs/composition.md, "Auditing a set".
"""

from __future__ import annotations

import argparse
from pathlib import Path

from composition_rl.cli import UsageError

HELP = "blind-audit a composed set: sample records for review, score the filled form, scan for defects"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``crl audit``: the run folder, the form's ``--sample``/``--seed``/``--out``
    (and ``--classes``), ``--score``, ``--scan``, ``--where`` and ``--json``."""
    p.add_argument("run", nargs="?", help="output folder of crl compose (holds composed.jsonl)")
    p.add_argument("--sample", type=int, default=40, help="records to sample (default: 40)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample (default: 0)")
    p.add_argument("--out", help="the form to write: a .html page or a .csv file")
    p.add_argument("--score", metavar="FILLED", help="score a filled audit CSV instead")
    p.add_argument("--scan", action="store_true",
                   help="count the records of the run in each defect class of the scanners instead")
    p.add_argument("--where", metavar="CLASS",
                   help="sample only records the scanners put in CLASS (see --scan for the classes)")
    p.add_argument("--json", help="with --score or --scan: also write the figures to this JSON file")
    p.add_argument("--classes", action="store_true",
                   help="with a .csv form: add the columns class (why each shortcut is one) and hint (the words "
                        "that give the value away); --score then counts the shortcuts by class")


def run(args: argparse.Namespace) -> int:
    """Write a blind review form and its key file, score a filled form, or count the
    scanners' defect classes, as the flags say, and print the figures; 0 on success."""
    import contextlib

    from composition_rl.io.runs import RunBusy, hold_lock, refuse_foreign

    out = Path(args.out) if args.out else None
    key = out.with_name(out.name + ".key.json") if out is not None else None
    with contextlib.ExitStack() as stack:
        try:
            # the forms and figures never land on what the audit reads (the run's records, a
            # filled form) or on another run's files
            refuse_foreign("audit", files={"--out": out, "the key file": key, "--json": args.json},
                           inputs={"the run folder": args.run, "--score": args.score,
                                   "its composed.jsonl": Path(args.run) / "composed.jsonl" if args.run else None})
            for flag, path in (("--out", out), ("--json", args.json)):
                if path is not None:
                    stack.enter_context(hold_lock(Path(path), "audit", folder=False, flag=flag))
        except (RunBusy, ValueError) as e:
            raise UsageError(str(e)) from None
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from composition_rl.io.files import atomic_write_json
    from composition_rl.jobs import audit

    if args.score:
        if args.run or args.out:
            raise UsageError("--score FILLED takes no run folder and no --out")
        try:
            s = audit.score(args.score)
        except ValueError as e:
            raise UsageError(str(e)) from e
        d = s.to_dict()
        print(f"{s.items} items")
        inv = d["invalid"]
        print(f"  invalid   {inv['count']:>3} of {inv['answered']:<3} {inv['rate']:.1%}  "
              f"(95% Wilson {inv['wilson95'][0]:.1%} - {inv['wilson95'][1]:.1%})")
        for q in ("shortcut", "natural"):
            r = d[q]
            print(f"  {q:9s} {r['yes']:>3} of {r['answered']:<3} {r['rate']:.1%}  "
                  f"(95% Wilson {r['wilson95'][0]:.1%} - {r['wilson95'][1]:.1%})")
        for cls, count in (d.get("shortcut_classes") or {}).items():
            print(f"    shortcut class {cls:20s} {count:>3}")
        if args.json:
            atomic_write_json(args.json, d, indent=1)
        return 0
    if args.scan:
        if not args.run or args.out or args.where:
            raise UsageError("--scan takes a run folder and no --out or --where")
        try:
            res = audit.scan(args.run, progress=True)
        except ValueError as e:
            raise UsageError(str(e)) from e
        print(f"{res['records']:,} records in {args.run}")
        for cls, count in res["classes"].items():
            print(f"  {cls:24s} {count:>8,}")
        for cls, ex in res["examples"].items():
            for rid, detail in ex[:2]:
                print(f"    e.g. {cls}: {rid} {detail}")
        if args.json:
            atomic_write_json(args.json, res, indent=1)
        return 0
    if not args.run or not args.out:
        raise UsageError("give a run folder and --out audit.html|audit.csv (or --score FILLED, or --scan)")
    out = Path(args.out)
    if out.suffix not in (".html", ".csv"):
        raise UsageError(f"--out {out}: the name must end in .html or .csv")
    from composition_rl.io.files import writable_file

    try:
        writable_file(out)
        items = audit.sample(args.run, args.sample, args.seed, where=args.where)
    except ValueError as e:
        raise UsageError(str(e)) from e
    if out.suffix == ".html" and args.classes:
        raise UsageError("--classes needs a .csv form (--out NAME.csv)")
    key = audit.write_form(items, out, args.run, args.seed, where=args.where, classes=args.classes)
    size = out.stat().st_size
    print(f"{len(items)} items in {out} ({size / 1e6:.1f} MB; record ids in {key}: keep it from the reviewer)")
    return 0
