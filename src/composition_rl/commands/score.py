"""``crl score``: score responses against gold answers with the bounded verifier.

    crl score --input rollouts.jsonl --out scored.jsonl
    crl score --input rollouts.jsonl --out scored.jsonl --timeout 2 --response-field completion

Each input line (JSONL; a JSON array, CSV, TSV or Parquet also work, .gz/.zst too) needs a
response and a gold answer (a LaTeX string, a number, or a list of accepted forms). Each
output line is the input row plus ``outcome``, ``score`` and ``extracted``, in input order.
Rows that cannot be scored (not JSON, no response text, no usable answer) go to
``<out>.rejects.jsonl`` with the line and the reason, so input rows = scored + rejected.
Output is appended chunk by chunk: rerun the same command after an interruption and it
continues where it stopped. The options that change a score (fields, fallbacks, timeout) are
kept in ``<out>.options.json``; a rerun with other options refuses (``--fresh`` rescores).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from composition_rl.cli import UsageError

HELP = "score responses against gold answers with the bounded verifier"
RESUMABLE = True  # a rerun continues from the finished work
_CHUNK = 2048


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, help="JSONL (or .json array, .parquet) with response and answer fields")
    p.add_argument("--out", required=True, help="JSONL output: each row plus outcome, score, extracted")
    p.add_argument("--response-field", default="response", help="field holding the model response (default: response)")
    p.add_argument("--answer-field", default="answer", help="field holding the gold answer(s) (default: answer)")
    p.add_argument("--timeout", type=float, default=5.0, help="hard bound per item in seconds (default: 5)")
    p.add_argument("--workers", type=int, help="worker processes (default: one per usable core)")
    from composition_rl.verify.verifier import FALLBACK_HELP

    p.add_argument("--fallback", action="append", help=FALLBACK_HELP)
    p.add_argument("--fresh", action="store_true", help="discard an existing --out (and its rejects) and score again")
    from composition_rl.progress import progress_help

    p.add_argument("--no-progress", action="store_true", help=progress_help())


def _read_rows(path: Path) -> list:
    from composition_rl.io.readers import InputError, read_rows

    try:
        return read_rows(path)
    except InputError as e:
        raise UsageError(f"--input {e}") from None


def _options(args: argparse.Namespace, fallbacks: tuple[str, ...]) -> dict[str, Any]:
    """What decides a row's score: a rerun with other values must not append to old rows.
    The input by its content too: rows are resumed by position, so an edited input must not be."""
    from composition_rl.io.identity import run_identity

    return run_identity(inputs={"input": args.input}, input=str(Path(args.input).resolve()),
                        response_field=args.response_field, answer_field=args.answer_field,
                        fallbacks=list(fallbacks), timeout_s=args.timeout)


def _prepare_outputs(inp: str, out: Path, rejects: Path, meta: Path, options: dict[str, Any], fresh: bool) -> None:
    """Check every output path before any work; refuse an output that is the input, and a
    resume under other options."""
    from composition_rl.io.files import refuse_overwrite
    from composition_rl.io.identity import RunMismatch, claim_run

    try:
        refuse_overwrite({"--input": inp}, (out, rejects, meta))
    except ValueError as e:
        raise UsageError(str(e)) from None
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if fresh:
            for p in (out, rejects, meta):
                p.unlink(missing_ok=True)
        for p in (out, rejects):
            with open(p, "a", encoding="utf-8"):
                pass
        has_rows = out.stat().st_size > 0 or rejects.stat().st_size > 0
        claim_run(meta, options, has_work=has_rows, what="scored rows",
                  fix="pass --fresh to score again from scratch, or choose another --out")
    except RunMismatch as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"--out {out}: cannot write {e.filename or out} ({e.strerror or e})") from None


def _resume_point(out: Path, rows: list[dict], rejects: Path) -> int:
    """How many input rows the existing outputs already cover (torn last lines dropped)."""
    from composition_rl.io.files import read_jsonl

    done = 0
    for path in (out, rejects):
        if not path.exists():
            continue
        good = 0
        with open(path, "rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    break
                good += len(raw)
        with open(path, "r+b") as f:
            f.truncate(good)
        done += sum(1 for _ in read_jsonl(path))
    if done > len(rows):
        raise UsageError(f"{out} holds more rows than --input has: it was made from another input")
    return done


def _check(row: Any, response_field: str, answer_field: str) -> str | None:
    from composition_rl.io.readers import BadLine
    from composition_rl.verify import gold_forms

    if isinstance(row, BadLine):
        return row.error
    if not isinstance(row, dict):
        return "row is not a JSON object"
    if not isinstance(row.get(response_field), str):
        return f"no text in field {response_field!r}"
    if answer_field not in row:
        return f"no field {answer_field!r}"
    try:
        gold_forms(row[answer_field])
    except ValueError as e:
        return str(e)
    return None


def run(args: argparse.Namespace) -> int:
    from composition_rl.verify import Verifier, VerifyConfig
    from composition_rl.verify.verifier import fallbacks_from_names

    fallbacks = fallbacks_from_names(args.fallback)
    try:
        config = VerifyConfig(timeout_s=args.timeout, workers=args.workers, fallbacks=fallbacks)
    except ValueError as e:
        from composition_rl.flags import in_flags

        raise UsageError(in_flags(e, {"timeout_s": "--timeout", "workers": "--workers", "fallbacks": "--fallback"})
                         ) from None
    out = Path(args.out)
    rejects_path = out.with_name(out.stem + ".rejects.jsonl")
    meta_path = out.with_name(out.stem + ".options.json")
    if not Path(args.input).is_file():
        raise UsageError(f"--input {args.input} is not a file")
    import contextlib

    from composition_rl.io.runs import RunBusy, hold_lock, refuse_foreign

    with contextlib.ExitStack() as stack:
        try:
            from composition_rl.io.files import refuse_overwrite

            refuse_overwrite({"--input": args.input}, (out, rejects_path, meta_path))  # the input first
            refuse_foreign("score", files={"--out": out, "its rejects file": rejects_path,
                                           "its options file": meta_path})
            # two runs appending to one file would write every row twice
            stack.enter_context(hold_lock(out, "score", folder=False))
        except (RunBusy, ValueError) as e:
            raise UsageError(str(e)) from None
        # a refused run leaves nothing: the output files it creates go again (with the lock held)
        new = [p for p in (out, rejects_path, meta_path) if not p.exists()]
        sizes = [p.stat().st_size if p.is_file() else 0 for p in (out, rejects_path)]
        try:
            _prepare_outputs(args.input, out, rejects_path, meta_path, _options(args, fallbacks), args.fresh)
            # The workers start (Math-Verify imports, ~1-2 s) while this process reads the input.
            with Verifier(config).start() as verifier:
                return _score(args, verifier, out, rejects_path)
        except UsageError:
            now = [p.stat().st_size if p.is_file() else 0 for p in (out, rejects_path)]
            if now == sizes:  # no row scored
                for p in new:
                    p.unlink(missing_ok=True)
            raise


def _score(args: argparse.Namespace, verifier, out: Path, rejects_path: Path) -> int:
    from composition_rl.io.files import dumps
    from composition_rl.io.readers import BadLine
    from composition_rl.progress import ProgressBar
    from composition_rl.verify import summarize

    rows = _read_rows(Path(args.input))
    if not rows:
        raise UsageError(f"--input {args.input} holds no rows")
    start = _resume_point(out, rows, rejects_path)
    if start and start == len(rows):
        print(f"all {len(rows)} rows of {args.input} are already in {out} (and its rejects), scored with the "
              "same options: nothing to do (--fresh scores again)")
        return 0
    if start:
        print(f"resuming: {start} of {len(rows)} rows already in {out} / {rejects_path.name}", file=sys.stderr)

    def submit(lo: int) -> tuple[list, list[str | None], list]:
        """Queue one chunk's scorable rows; the workers go on with it while the caller writes
        the chunk before (so they never wait on this process's writes and fsyncs)."""
        chunk = rows[lo : lo + _CHUNK]
        reasons = [_check(r, args.response_field, args.answer_field) for r in chunk]
        pairs = [(r[args.response_field], r[args.answer_field]) for r, why in zip(chunk, reasons) if why is None]
        return chunk, reasons, verifier.submit_batch(pairs)

    counts = dict.fromkeys(("correct", "incorrect", "no_answer", "timeout", "error"), 0)
    n_rejected = 0
    slowest = 0.0
    t0 = time.perf_counter()
    with open(out, "a", encoding="utf-8") as fo, ProgressBar(
        "scoring", len(rows), enabled=not args.no_progress, completed=start
    ) as bar:
        fr = None
        ahead = submit(start) if start < len(rows) else None
        for lo in range(start, len(rows), _CHUNK):
            chunk, reasons, futures = ahead
            ahead = submit(lo + _CHUNK) if lo + _CHUNK < len(rows) else None
            results = (f.result() for f in futures)
            scored = []
            for i, (row, why) in enumerate(zip(chunk, reasons)):
                if why is not None:
                    # Flush around each reject so that, whenever the run is killed, the two
                    # files together hold a prefix of the input (which is how a rerun resumes).
                    fo.flush()
                    if fr is None:
                        fr = open(rejects_path, "a", encoding="utf-8")
                    line = row.line if isinstance(row, BadLine) else lo + i + 1
                    fr.write(dumps({"line": line, "reason": why, "row": row if isinstance(row, dict) else None})
                             + "\n")
                    fr.flush()
                    n_rejected += 1
                    continue
                r = next(results)
                scored.append(r)
                slowest = max(slowest, r.elapsed_s)
                fo.write(dumps({**row, "outcome": r.outcome.value, "score": r.score, "extracted": r.extracted}) + "\n")
            fo.flush()
            os.fsync(fo.fileno())
            for k, v in summarize(scored).items():
                counts[k] += v
            bar.advance(len(chunk))
        if fr is not None:
            fr.close()
    wall = time.perf_counter() - t0
    n = sum(counts.values())
    acc = counts["correct"] / n if n else 0.0
    summary = ", ".join(f"{k} {v}" for k, v in counts.items())
    print(f"scored {n} rows in {wall:.1f}s (accuracy {100 * acc:.1f}%): {summary} -> {out}")
    print(f"slowest item {slowest:.2f}s (bound {verifier.config.timeout_s:g}s)")
    if n_rejected:
        print(f"rejected {n_rejected} rows (reasons in {rejects_path})")
    if n == 0 and start == 0:
        print(f"crl score: error: no row of {args.input} could be scored: {_top_reasons(rejects_path)}. "
              f"Fields are chosen with --response-field (now {args.response_field!r}) and --answer-field "
              f"(now {args.answer_field!r}){_fields_seen(rows)}", file=sys.stderr)
        return 1
    return 0


def _top_reasons(rejects: Path) -> str:
    from collections import Counter

    from composition_rl.io.files import read_jsonl

    top = Counter(r["reason"] for r in read_jsonl(rejects)).most_common(3)
    return "; ".join(f"{n} x {why}" for why, n in top)


def _fields_seen(rows: list) -> str:
    cols: list[str] = []
    for r in rows[:200]:
        if isinstance(r, dict):
            cols.extend(str(k) for k in r if str(k) not in cols)
    return f"; fields seen: {', '.join(cols[:12])}" if cols else ""
