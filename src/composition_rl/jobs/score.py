"""The ``crl score`` job: score a file of responses against gold answers, resumably.

Each input row (JSONL; a JSON array, CSV, TSV or Parquet also work, .gz/.zst too) needs a
response and a gold answer. Each output line is the row plus ``outcome``, ``score`` and
``extracted``, in input order; a row that cannot be scored goes to ``<out>.rejects.jsonl``
with its line and reason, so input rows = scored + rejected. Output is appended chunk by
chunk, so a rerun continues where a killed run stopped; the options that change a score are
kept in ``<out>.options.json`` and a rerun with other ones is refused.

``commands/score.py`` parses the flags and prints; the in-memory verb is
:func:`composition_rl.score` (``composition_rl.api.score``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHUNK = 2048  # rows per batch handed to the verifier (and per fsync of the output)


class ScoreRefused(ValueError):
    """A score run refused before any row was scored (the message says why, in one line)."""


def score_paths(out: str | os.PathLike) -> tuple[Path, Path, Path]:
    """The output, rejects and options files of ``--out``.

    >>> [p.name for p in score_paths("runs/scored.jsonl")]
    ['scored.jsonl', 'scored.rejects.jsonl', 'scored.options.json']
    """
    out = Path(out)
    return out, out.with_name(out.stem + ".rejects.jsonl"), out.with_name(out.stem + ".options.json")


def read_input_rows(path: str | os.PathLike) -> list:
    """The rows of ``path`` (a bad line is a :class:`~composition_rl.io.readers.BadLine`);
    an unreadable file or one without rows is refused."""
    from composition_rl.io.readers import InputError, read_rows

    try:
        rows = read_rows(Path(path))
    except InputError as e:
        raise ScoreRefused(f"--input {e}") from None
    if not rows:
        raise ScoreRefused(f"--input {path} holds no rows")
    return rows


def score_options(inp: str, response_field: str, answer_field: str, fallbacks: Sequence[str],
                  timeout_s: float) -> dict[str, Any]:
    """What decides a row's score: a rerun with other values must not append to old rows.
    The input by its content too: rows are resumed by position, so an edited input must not be."""
    from composition_rl.io.identity import run_identity

    return run_identity(inputs={"input": inp}, input=str(Path(inp).resolve()),
                        response_field=response_field, answer_field=answer_field,
                        fallbacks=list(fallbacks), timeout_s=timeout_s)


def prepare_outputs(inp: str, out: Path, rejects: Path, meta: Path, options: dict[str, Any], fresh: bool) -> None:
    """Check every output path before any work; refuse an output that is the input, and a
    resume under other options."""
    from composition_rl.io.files import refuse_overwrite
    from composition_rl.io.identity import RunMismatch, claim_run

    try:
        refuse_overwrite({"--input": inp}, (out, rejects, meta))
    except ValueError as e:
        raise ScoreRefused(str(e)) from None
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
        raise ScoreRefused(str(e)) from None
    except OSError as e:
        raise ScoreRefused(f"--out {out}: cannot write {e.filename or out} ({e.strerror or e})") from None


def resume_point(out: Path, rows: list, rejects: Path) -> int:
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
        raise ScoreRefused(f"{out} holds more rows than --input has: it was made from another input")
    return done


def check_row(row: Any, response_field: str, answer_field: str) -> str | None:
    """Why ``row`` cannot be scored, or None.

    >>> check_row({"response": "4", "answer": "4"}, "response", "answer") is None
    True
    >>> check_row({"completion": "4", "answer": "4"}, "response", "answer")
    "no text in field 'response'"
    """
    from composition_rl.grading import gold_forms
    from composition_rl.io.readers import BadLine

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


@dataclass
class ScoreTally:
    """What :func:`score_rows` did: outcome counts, rows rejected, the slowest item, wall time."""

    counts: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("correct", "incorrect", "no_answer", "timeout", "error"), 0))
    rejected: int = 0
    slowest: float = 0.0
    wall: float = 0.0


def score_rows(rows: list, start: int, verifier, out: Path, rejects_path: Path, response_field: str,
               answer_field: str, progress: bool = True) -> ScoreTally:
    """Score ``rows[start:]``, appending each scored row to ``out`` and each unscorable one to
    ``rejects_path``, a chunk at a time (fsynced), so that the two files together always hold
    a prefix of the input (which is how a rerun resumes)."""
    from composition_rl.grading import summarize
    from composition_rl.io.files import dumps
    from composition_rl.io.readers import BadLine
    from composition_rl.progress import ProgressBar

    def submit(lo: int) -> tuple[list, list[str | None], list]:
        """Queue one chunk's scorable rows; the workers go on with it while the caller writes
        the chunk before (so they never wait on this process's writes and fsyncs)."""
        chunk = rows[lo : lo + CHUNK]
        reasons = [check_row(r, response_field, answer_field) for r in chunk]
        pairs = [(r[response_field], r[answer_field]) for r, why in zip(chunk, reasons) if why is None]
        return chunk, reasons, verifier.submit_batch(pairs)

    tally = ScoreTally()
    t0 = time.perf_counter()
    with open(out, "a", encoding="utf-8") as fo, ProgressBar(
        "scoring", len(rows), enabled=progress, completed=start
    ) as bar:
        fr = None
        ahead = submit(start) if start < len(rows) else None
        for lo in range(start, len(rows), CHUNK):
            chunk, reasons, futures = ahead
            ahead = submit(lo + CHUNK) if lo + CHUNK < len(rows) else None
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
                    tally.rejected += 1
                    continue
                r = next(results)
                scored.append(r)
                tally.slowest = max(tally.slowest, r.elapsed_s)
                fo.write(dumps({**row, "outcome": r.outcome.value, "score": r.score, "extracted": r.extracted}) + "\n")
            fo.flush()
            os.fsync(fo.fileno())
            for k, v in summarize(scored).items():
                tally.counts[k] += v
            bar.advance(len(chunk))
        if fr is not None:
            fr.close()
    tally.wall = time.perf_counter() - t0
    return tally


def top_reasons(rejects: Path) -> str:
    """The three commonest reasons of a rejects file, with their counts."""
    from collections import Counter

    from composition_rl.io.files import read_jsonl

    top = Counter(r["reason"] for r in read_jsonl(rejects)).most_common(3)
    return "; ".join(f"{n} x {why}" for why, n in top)


def fields_seen(rows: list) -> str:
    """The fields of the first rows, as a hint for ``--response-field`` / ``--answer-field``.

    >>> fields_seen([{"completion": "4", "gold": "4"}])
    '; fields seen: completion, gold'
    """
    cols: list[str] = []
    for r in rows[:200]:
        if isinstance(r, dict):
            cols.extend(str(k) for k in r if str(k) not in cols)
    return f"; fields seen: {', '.join(cols[:12])}" if cols else ""
