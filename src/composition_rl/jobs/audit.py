"""A blind human audit of a composed set: scan, sample, show, score.

:func:`scan` runs the defect scanners (:mod:`composition_rl.spc.quality`) over every
record of a run and counts each class; :func:`sample` draws a seeded sample of accepted
records (of one class, with ``where``) and turns each into a blind item:
the problems in order, the relation paragraphs, the later problems with the replaced
places marked, and the answer. Nothing from the engine (ids of parents, offsets, exact
expressions, the engine's name) is shown, so the reviewer judges the prompt as a policy
would see it. :func:`write_csv` and :func:`write_html` write the form; :func:`score` reads a
filled CSV and reports the invalid, shortcut and natural rates with Wilson intervals.

A reviewer answers three questions per item (``y`` or ``n``; the judging rules are in
docs/composition.md, "Judging rules"):

* ``valid``: the prompt is well posed and the answer is right (q1 solves to X, the relation
  gives the replaced value, the rewritten problem still has the stated answer);
* ``shortcut``: the chain can be skipped (the replaced value is still visible, or the
  answer does not depend on it);
* ``natural``: a reader would accept the wording (LaTeX renders, the relation reads as a
  sensible statement).
"""

from __future__ import annotations

import csv
import html
import io
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from composition_rl.io.files import atomic_open
from composition_rl.records import Problem
from composition_rl.spc.quality import DEFECTS, NOTES, glues, scan_record
from composition_rl.stats import wilson_interval

__all__ = ["CLASSES", "QUESTIONS", "SHORTCUT_CLASSES", "AuditItem", "AuditScore", "sample", "scan", "score",
           "write_csv", "write_html"]

#: what ``scan`` counts and ``sample(where=...)`` selects: the scanners' defect classes
#: (spc/quality.py), the reported-only notes, and records the scanners could not read
CLASSES = (*DEFECTS, *NOTES, "unreadable")

QUESTIONS = ("valid", "shortcut", "natural")
#: why a shortcut is one (the optional ``class`` column; docs/composition.md, "Judging rules"):
#: the classes a 260-record hunt sorted the shortcuts of MATH compositions into
SHORTCUT_CLASSES = ("answer_independent", "problem_constraint", "visible", "parts_whole", "world_fact",
                    "pattern", "range_or_form", "grammar", "derivation_known", "other")
FIELDS = ("item", "first_problem", "relations", "later_problems", "answer", *QUESTIONS, "note")
CLASS_FIELDS = ("class", "hint")  # with write_csv(classes=True): the class and the words that give it away
MARK_OPEN, MARK_CLOSE = "[[", "]]"  # how a replaced place is marked in the CSV


@dataclass(frozen=True)
class AuditItem:
    """One blind item: what the reviewer reads."""

    item: str
    record_id: str  # kept in the key file, never shown
    first_problem: str
    relations: tuple[str, ...]
    later_problems: tuple[str, ...]  # with each replaced place wrapped in MARK_OPEN/MARK_CLOSE
    answer: str


def _blind(rec: Problem, item: str) -> AuditItem:
    gs = glues(rec)
    if gs is None:
        raise ValueError(f"record {rec.id}: no relation paragraph found; is this a composed record?")
    text = rec.question
    ends = [g.start for g in gs[1:]] + [len(text)]
    laters = tuple(_mark(text[g.end : e], lk) for g, e, lk in zip(gs, ends, rec.links))
    relations = tuple(text[g.start : g.end].strip() for g in gs)
    return AuditItem(item, rec.id, text[: gs[0].start], relations, laters, rec.answer)


def _mark(seg: str, lk) -> str:
    """``seg`` with every place the variable was written marked (``[[Y]]``)."""
    out, pos, shift = [], 0, 0
    for off in sorted((lk.v2_offset, *lk.v2_also)):
        at = off + shift
        for tok in (f"${lk.y}$", f"{lk.y} \\cdot ", lk.y):
            if seg.startswith(tok, at):
                break
        else:
            return seg
        out += [seg[pos:at], MARK_OPEN + tok + MARK_CLOSE]
        pos = at + len(tok)
        shift += len(tok) - len(lk.v2_literal)
    out.append(seg[pos:])
    return "".join(out)


def _records(path: Path):
    """(line number, record) for each line of a ``composed.jsonl``."""
    with open(path, "rb") as f:
        for idx, line in enumerate(f):
            if not line.strip():
                continue
            try:
                yield idx, Problem.from_dict(json.loads(line))
            except (ValueError, KeyError) as e:
                raise ValueError(f"{path}: line {idx + 1} is not a composed record: {e}") from e


def _composed(run_dir: str | Path) -> Path:
    path = Path(run_dir) / "composed.jsonl"
    if not path.is_file():
        raise ValueError(f"{run_dir}: no composed.jsonl (is this the output folder of crl compose?)")
    return path


def scan(run_dir: str | Path, examples: int = 5, progress: bool = False) -> dict[str, object]:
    """Every record of a run through the scanners of :mod:`composition_rl.spc.quality`:
    the records scanned, the records in each class of :data:`CLASSES`, and up to ``examples``
    (record id, detail) per class.

    Raises:
        ValueError: no ``composed.jsonl`` in ``run_dir``, or a line that is not a record.
    """
    from composition_rl.progress import ProgressBar

    path = _composed(run_dir)
    counts = dict.fromkeys(CLASSES, 0)
    found: dict[str, list[list[str]]] = {}
    n = 0
    with ProgressBar("scanning", None, enabled=progress) as bar:
        for _, rec in _records(path):
            n += 1
            first: dict[str, str] = {}
            for cls, detail in scan_record(rec):
                first.setdefault(cls, detail)
            for cls, detail in first.items():
                counts[cls] = counts.get(cls, 0) + 1
                ex = found.setdefault(cls, [])
                if len(ex) < examples:
                    ex.append([rec.id, detail])
            bar.update(n)
    return {"run": str(run_dir), "records": n, "classes": counts, "examples": found}


def sample(run_dir: str | Path, n: int, seed: int, where: str | None = None) -> list[AuditItem]:
    """A seeded sample of ``n`` accepted records of a ``crl compose`` run, in a shuffled order;
    with ``where``, only among the records the scanners put in that class (:data:`CLASSES`).

    Raises:
        ValueError: no ``composed.jsonl`` in ``run_dir``, a line that is not a record, or an
            unknown class.
    """
    path = _composed(run_dir)
    if n < 1:
        raise ValueError(f"sample size {n} must be >= 1")
    if where is not None and where not in CLASSES:
        raise ValueError(f"--where {where!r}: unknown class; known: {', '.join(CLASSES)}")
    offsets = []
    with open(path, "rb") as f:
        pos = 0
        for line in f:
            if line.strip():
                offsets.append(pos)
            pos += len(line)
    if where is None and n > len(offsets):  # a form of every record is no sample: say so instead of writing it
        raise ValueError(f"sample size {n:,} is more than the {len(offsets):,} records in {path}; give at most that")
    if where is not None:  # one class: all its records when it has fewer than n (the form says how many)
        keep = {idx for idx, rec in _records(path) if any(c == where for c, _ in scan_record(rec))}
        lines, pos = [], 0
        with open(path, "rb") as f:
            for idx, line in enumerate(f):
                if idx in keep:
                    lines.append(pos)
                pos += len(line)
        offsets = lines
    rng = random.Random(f"audit:{seed}" if where is None else f"audit:{seed}:{where}")
    picked = rng.sample(range(len(offsets)), min(n, len(offsets)))
    items = []
    with open(path, "rb") as f:
        for i, idx in enumerate(picked, 1):
            f.seek(offsets[idx])
            line = f.readline()
            try:
                rec = Problem.from_dict(json.loads(line))
            except (ValueError, KeyError) as e:
                raise ValueError(f"{path}: record {idx + 1} is not a composed record: {e}") from e
            items.append(_blind(rec, f"A{i:03d}"))
    return items


def write_csv(items: Sequence[AuditItem], path: str | Path, classes: bool = False) -> None:
    """The form to fill: one row per item, empty ``valid``, ``shortcut``, ``natural``, ``note``;
    with ``classes`` also ``class`` (one of :data:`SHORTCUT_CLASSES` for each shortcut) and
    ``hint`` (the words of the later problem that give the value away)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, FIELDS + CLASS_FIELDS if classes else FIELDS)
    w.writeheader()
    for it in items:
        w.writerow({"item": it.item, "first_problem": it.first_problem, "relations": "\n\n".join(it.relations),
                    "later_problems": "\n\n".join(it.later_problems), "answer": it.answer})
    with atomic_open(path) as f:  # a form being written never replaces a filled one half-way
        f.write(buf.getvalue())


def write_key(items: Sequence[AuditItem], path: str | Path, run_dir: str | Path, seed: int,
              where: str | None = None) -> None:
    """Which record each item is (kept apart from the form, so the review stays blind)."""
    with atomic_open(path) as f:
        f.write(json.dumps({"run": str(run_dir), "seed": seed, "where": where,
                            "items": {it.item: it.record_id for it in items}}, indent=1) + "\n")


_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>composition audit</title>
<script>window.MathJax={{tex:{{inlineMath:[['$','$'],['\\\\(','\\\\)']],processEscapes:true}}}};</script>
<script async src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"></script>
<style>body{{font-family:sans-serif;max-width:60em;margin:auto}} .item{{border-top:2px solid #888;padding:.5em 0}}
pre{{white-space:pre-wrap;background:#f6f6f6;padding:.4em}} mark{{background:#ffd54f}} .q label{{margin-right:1.5em}}</style>
</head><body><h1>Blind audit: {n} composed prompts</h1>
<p>For each item answer: <b>valid</b> (well posed, answer right), <b>shortcut</b> (the chain can be
skipped), <b>natural</b> (a reader would accept it). The replaced places are <mark>marked</mark>.
Then press <button onclick="save()">download filled CSV</button> and score it with
<code>crl audit --score FILE.csv</code>. The page works offline too (formulas then stay as LaTeX).</p>
{items}
<script>
const FIELDS={fields};
function cell(s){{s=String(s??'');return /[",\\n]/.test(s)?'"'+s.replace(/"/g,'""')+'"':s;}}
function save(){{const rows=[FIELDS.join(',')];
for(const d of document.querySelectorAll('.item')){{const it=JSON.parse(d.dataset.row);
for(const q of ['valid','shortcut','natural']){{const c=d.querySelector('input[name="'+it.item+'-'+q+'"]:checked');it[q]=c?c.value:'';}}
it.note=d.querySelector('textarea').value;rows.push(FIELDS.map(f=>cell(it[f])).join(','));}}
const a=document.createElement('a');a.href=URL.createObjectURL(new Blob([rows.join('\\n')+'\\n'],{{type:'text/csv'}}));
a.download='audit_filled.csv';a.click();}}
</script></body></html>
"""


def _html_marked(text: str) -> str:
    esc = html.escape(text)
    return esc.replace(html.escape(MARK_OPEN), "<mark>").replace(html.escape(MARK_CLOSE), "</mark>")


def write_html(items: Sequence[AuditItem], path: str | Path) -> None:
    """A self-contained page: the items with radio buttons, and a button that saves the CSV."""
    parts = []
    for it in items:
        row = {"item": it.item, "first_problem": it.first_problem, "relations": "\n\n".join(it.relations),
               "later_problems": "\n\n".join(it.later_problems), "answer": it.answer}
        qs = "".join(
            f'<span class="q">{q}: <label><input type="radio" name="{it.item}-{q}" value="y">y</label>'
            f'<label><input type="radio" name="{it.item}-{q}" value="n">n</label></span> '
            for q in QUESTIONS
        )
        body = "".join(f"<pre>{_html_marked(r)}</pre><pre>{_html_marked(p)}</pre>"
                       for r, p in zip(it.relations, it.later_problems))
        parts.append(
            f'<div class="item" data-row="{html.escape(json.dumps(row))}"><h2>{it.item}</h2>'
            f"<pre>{html.escape(it.first_problem)}</pre>{body}"
            f"<p>Answer: <code>{html.escape(it.answer)}</code></p><p>{qs}</p>"
            f'<textarea rows="2" cols="80" placeholder="note"></textarea></div>'
        )
    with atomic_open(path) as f:
        f.write(_PAGE.format(n=len(items), items="\n".join(parts), fields=json.dumps(list(FIELDS))))


@dataclass(frozen=True)
class AuditScore:
    """Counts of a filled audit and their rates with 95% Wilson intervals."""

    items: int
    answered: dict[str, int]  # per question: rows with y or n
    yes: dict[str, int]
    classes: dict[str, int] | None = None  # shortcuts by class, when the form has the column

    def rate(self, q: str) -> tuple[float, float, float]:
        """(share of "y", low, high) for question ``q`` among the rows that answer it."""
        n, k = self.answered[q], self.yes[q]
        lo, hi = wilson_interval(k, n) if n else (0.0, 1.0)
        return (k / n if n else 0.0), lo, hi

    def to_dict(self) -> dict[str, object]:
        """The figures as JSON: per question its yes count, answered count, rate and 95%
        Wilson interval, ``invalid`` (the rows marked not valid) likewise, and ``shortcut_classes``
        when the form had the class column."""
        out: dict[str, object] = {"items": self.items}
        for q in QUESTIONS:
            r, lo, hi = self.rate(q)
            out[q] = {"yes": self.yes[q], "answered": self.answered[q], "rate": round(r, 4),
                      "wilson95": [round(lo, 4), round(hi, 4)]}
        v = self.answered["valid"]
        out["invalid"] = {"count": v - self.yes["valid"], "answered": v,
                          "rate": round((v - self.yes["valid"]) / v, 4) if v else 0.0,
                          "wilson95": [round(x, 4) for x in (wilson_interval(v - self.yes["valid"], v) if v else (0.0, 1.0))]}
        if self.classes is not None:
            out["shortcut_classes"] = dict(self.classes)
        return out


_YES = {"y", "yes", "1", "true"}
_NO = {"n", "no", "0", "false"}


def score(path: str | Path) -> AuditScore:
    """Read a filled audit CSV.

    Raises:
        ValueError: a missing column, or an answer that is not y/n (naming the item and field).
    """
    p = Path(path)
    try:
        rows = list(csv.DictReader(p.read_text(encoding="utf-8").splitlines(keepends=True)))
    except OSError as e:
        raise ValueError(f"{path}: {e}") from e
    if not rows:
        raise ValueError(f"{path}: no rows")
    missing = [q for q in ("item", *QUESTIONS) if q not in rows[0]]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    answered = dict.fromkeys(QUESTIONS, 0)
    yes = dict.fromkeys(QUESTIONS, 0)
    classes: dict[str, int] | None = {} if "class" in rows[0] else None
    for row in rows:
        if classes is not None and (row.get("shortcut") or "").strip().lower() in _YES:
            c = (row.get("class") or "").strip()
            if c not in SHORTCUT_CLASSES:
                raise ValueError(f"{path}: item {row.get('item')!r}, field 'class': {c!r} is not one of "
                                 f"{', '.join(SHORTCUT_CLASSES)} (every shortcut needs one)")
            classes[c] = classes.get(c, 0) + 1
        for q in QUESTIONS:
            v = (row.get(q) or "").strip().lower()
            if not v:
                continue
            if v not in _YES | _NO:
                raise ValueError(f"{path}: item {row.get('item')!r}, field {q!r}: {row[q]!r} is not y or n")
            answered[q] += 1
            yes[q] += v in _YES
    if not any(answered.values()):
        raise ValueError(f"{path}: none of its {len(rows)} items has an answer yet; fill in "
                         f"{', '.join(QUESTIONS)} with y or n, then score it")
    if classes is not None:
        classes = dict(sorted(classes.items(), key=lambda kv: (-kv[1], SHORTCUT_CLASSES.index(kv[0]))))
    return AuditScore(len(rows), answered, yes, classes)


def write_form(items: Sequence[AuditItem], out: str | Path, run_dir: str | Path, seed: int,
               where: str | None = None, classes: bool = False) -> Path:
    """Write the blind form of ``items`` to ``out`` (``.html``, or ``.csv``, with the class and
    hint columns when ``classes``) and its key beside it (``<out>.key.json``: the record ids,
    to keep from the reviewer); returns the key's path."""
    out = Path(out)
    if out.suffix == ".html":
        if classes:
            raise ValueError("--classes needs a .csv form (--out NAME.csv)")
        write_html(items, out)
    else:
        write_csv(items, out, classes=classes)
    key = out.with_name(out.name + ".key.json")
    write_key(items, key, run_dir, seed, where=where)
    return key
