"""Which view shows a run folder, and the data each view embeds in the page.

A view is registered by name with the files that identify the folder it reads, and a
``collect(folder, cfg) -> dict`` that turns those files into JSON for the page. The page's
script has one renderer per view name (``assets/browse.js``, ``RENDERERS``). Adding a view is
one registered function here and one renderer there.

Detection is by the files a folder holds, so any folder with the files of a ``crl compose``
run is shown as one, wherever it sits (``crl demo`` nests two compose runs and a train run).
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from composition_rl.registry import Registry
from composition_rl.spc import text as spc

__all__ = ["BrowseConfig", "VIEWS", "View", "detect", "find_runs", "split_composed"]


@dataclass(frozen=True)
class BrowseConfig:
    """What a report embeds.

    Args:
        max_records: composed records embedded per compose run; a larger run is sampled
            (seeded by ``seed`` and each record's id, so the same run gives the same sample
            whatever the file order) and the page states both counts.
        max_rejects: rejected candidates embedded per compose run, same sampling.
        seed: the sampling seed.
        max_depth: how deep to look for nested runs under the folder given.
    """

    max_records: int = 200_000
    max_rejects: int = 50_000
    seed: int = 0
    max_depth: int = 3

    def __post_init__(self) -> None:
        bad = {k: v for k, v in (("max_records", self.max_records), ("max_rejects", self.max_rejects),
                                 ("max_depth", self.max_depth)) if not isinstance(v, int) or v < 0}
        if bad:
            raise ValueError(f"BrowseConfig: these must be integers >= 0: {bad}")


@dataclass(frozen=True)
class View:
    """A registered view: ``needs`` are the files whose presence marks its folder."""

    name: str
    needs: tuple[str, ...]
    collect: Callable[[Path, BrowseConfig], dict[str, Any]]
    title: str

    def matches(self, folder: Path) -> bool:
        """Whether ``folder`` holds every file in ``needs`` (so this view shows it)."""
        return all((folder / f).is_file() for f in self.needs)


VIEWS: Registry[View] = Registry("browse view")


def view(name: str, needs: tuple[str, ...], title: str):
    """Register ``collect`` as the view ``name`` for folders holding every file in ``needs``."""

    def deco(fn: Callable[[Path, BrowseConfig], dict[str, Any]]):
        VIEWS.register(name)(View(name, needs, fn, title))
        return fn

    return deco


def detect(folder: Path) -> list[str]:
    """The names of the views whose files ``folder`` holds, in name order."""
    return [n for n in VIEWS if VIEWS.get(n).matches(folder)]


# folders that hold model weights, checkpoints or raw samples: never a run of their own
_SKIP = {"checkpoints", "model", "final", "samples", "__pycache__"}


def find_runs(root: Path, max_depth: int = 3) -> list[tuple[Path, list[str]]]:
    """Every folder under ``root`` (itself included, down to ``max_depth``) that a view shows,
    in path order, with the views that show it."""
    found: list[tuple[Path, list[str]]] = []

    def walk(folder: Path, depth: int) -> None:
        names = detect(folder)
        if names:
            found.append((folder, names))
        if depth >= max_depth:
            return
        for sub in sorted(p for p in folder.iterdir() if p.is_dir()):
            if sub.name in _SKIP or sub.name.startswith("."):
                continue
            walk(sub, depth + 1)

    walk(root, 0)
    return found


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: not readable as JSON ({e})") from e


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) for each row of ``path``; a torn last line (a run still writing or
    killed) is skipped, any other bad line raises naming the file and line."""
    if not path.is_file():
        return
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                if not line.endswith("\n"):  # only the last line can lack its newline
                    return
                raise ValueError(f"{path}:{i}: not a JSON line ({e})") from e
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{i}: expected a JSON object, got {type(row).__name__}")
            yield i, row


def _sample_key(seed: int, key: str) -> bytes:
    return hashlib.sha1(f"{seed}\x1f{key}".encode()).digest()


class _Sample:
    """Keeps every item while there are at most ``cap``; past that, the ``cap`` items with the
    smallest seeded hash of their key: a sample that does not depend on file order."""

    def __init__(self, cap: int, seed: int) -> None:
        self.cap, self.seed, self.seen = cap, seed, 0
        self._all: list[tuple[int, Any]] | None = []
        self._heap: list[tuple[bytes, int, Any]] = []  # a max-heap on the hash (bytes inverted)

    def _push(self, key: str, n: int, item: Any) -> None:
        neg = bytes(255 - b for b in _sample_key(self.seed, key))
        if len(self._heap) < self.cap:
            heapq.heappush(self._heap, (neg, n, item))
        elif self.cap and neg > self._heap[0][0]:
            heapq.heapreplace(self._heap, (neg, n, item))

    def add(self, key: str, item: Any) -> None:
        self.seen += 1
        if self._all is not None:
            self._all.append((key, item))
            if len(self._all) <= self.cap:
                return
            kept, self._all = self._all, None  # over the cap: from now on keep the smallest hashes
            for n, (k, it) in enumerate(kept, 1):
                self._push(k, n, it)
            return
        self._push(key, self.seen, item)

    def items(self) -> list[Any]:
        """The kept items in the order they were added."""
        if self._all is not None:
            return [it for _, it in self._all]
        return [it for _, _, it in sorted(self._heap, key=lambda t: t[1])]


# ---------------------------------------------------------------------------------------------
# compose
# ---------------------------------------------------------------------------------------------


def _token_at(seg: str, off: int, y: str) -> str | None:
    """The token the composer wrote for ``y`` at ``off`` of a later problem's segment, by the
    rule of :func:`spc.variable_token` (prose ``$Y$``; in math ``Y \\cdot `` before a bracket,
    else ``Y``), or None when no token of ``y`` starts there."""
    prose = f"${y}$"
    if seg.startswith(prose, off):
        return prose
    cdot = f"{y} \\cdot "
    if seg.startswith(cdot, off) and spc.variable_token(y, True, seg[off + len(cdot):]) == cdot:
        return cdot
    if seg.startswith(y, off):
        return y
    return None


def split_composed(question: str, links: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Split a composed prompt into what the diff view shows.

    Returns ``{"q1": text, "glues": [paragraph, ...], "segments": [(original, token), ...]}``
    where ``original`` is the later problem's text before substitution (the literal ``v2`` at
    ``v2_offset``) and ``token`` is what replaced it, or None when the text does not have
    the SPC shape (an LLM rephrase, ``v2_offset == -1``). The caller checks the round trip
    (:func:`join_composed`) so the page never shows a text other than the record's.

    >>> q = "What is $2+3$?\\n\\nLet $X$ be the answer to the problem above. $Y$ is $2$ less than $X$.\\n\\nWhat is $Y+1$?"
    >>> s = split_composed(q, [{"x": "X", "y": "Y", "v2": "3", "v2_offset": 9}])
    >>> s["segments"], join_composed(s, [{"x": "X", "y": "Y", "v2": "3", "v2_offset": 9}]) == q
    ([('What is $3+1$?', 'Y')], True)
    """
    glues: list[spc.Glue] = []
    pos = 0
    for lk in links:
        g = spc.find_glue(question, lk["x"], lk["y"], pos)
        if g is None:
            return None
        glues.append(g)
        pos = g.end
    segments = []
    for k, lk in enumerate(links):
        seg = question[glues[k].end: glues[k + 1].start if k + 1 < len(glues) else len(question)]
        off = lk.get("v2_offset", -1)
        if not isinstance(off, int) or off < 0 or lk.get("v2_also"):
            # a value replaced in several places (Link.v2_also) is not one splice: the page
            # shows such a record whole, without the diff
            return None
        tok = _token_at(seg, off, lk["y"])
        if tok is None:
            return None
        segments.append((seg[:off] + lk["v2"] + seg[off + len(tok):], tok))
    return {
        "q1": question[: glues[0].start] if glues else question,
        "glues": [question[g.start + 2: g.end - 2] for g in glues],
        "segments": segments,
    }


def join_composed(parts: dict[str, Any], links: list[dict[str, Any]]) -> str:
    """The composed text back from :func:`split_composed`'s parts, as the page's script
    rebuilds it; a report embeds the parts only where this gives the record's own text."""
    out = [parts["q1"]]
    for glue, (orig, tok), lk in zip(parts["glues"], parts["segments"], links):
        off = lk["v2_offset"]
        out.append(f"\n\n{glue}\n\n{orig[:off]}{tok}{orig[off + len(lk['v2']):]}")
    return "".join(out)


class _Table:
    """Distinct strings -> small ints (texts repeat across 100K records: each is stored once)."""

    def __init__(self) -> None:
        self.index: dict[Any, int] = {}
        self.items: list[Any] = []

    def add(self, key: Any, make: Callable[[], Any] | None = None) -> int:
        """The index of ``key``; a new key stores ``make()`` (or the key itself)."""
        i = self.index.get(key)
        if i is None:
            i = self.index[key] = len(self.items)
            self.items.append(key if make is None else make())
        return i


def _parent_label(meta: Any) -> str:
    if not isinstance(meta, dict):
        return ""
    parts = [str(meta[k]) for k in ("type", "subject", "generator") if meta.get(k) not in (None, "")]
    for k in ("level", "difficulty"):
        if meta.get(k) not in (None, ""):
            parts.append(f"{k} {meta[k]}")
    return " · ".join(parts)


def _compact(row: dict[str, Any], canon: dict[str, str]) -> dict[str, Any]:
    """One composed record as the page stores it, before its texts go into tables:
    ``p`` holds (parent id, original text, metadata), ``g`` the glue paragraphs, ``t`` the
    tokens that replaced each ``v2``; ``text`` only when the record does not split (no diff)."""
    rid = str(row["id"])
    links = row.get("links") or []
    parents = [str(p) for p in row.get("parents") or []]
    question = row.get("question", "")
    meta = row.get("metadata") or {}
    pmeta = meta.get("parent_metadata") or [None] * len(parents)
    psrc = meta.get("parent_sources") or []
    parts = None
    if links and len(parents) == len(links) + 1:
        parts = split_composed(question, links)
        if parts is not None and join_composed(parts, links) != question:
            parts = None
    answers = row.get("answers") or [row.get("answer", "")]
    rec: dict[str, Any] = {
        "id": rid,
        "k": int(row.get("depth", len(parents) or 1)),
        "a": str(answers[0]) if answers else "",
        "s": " → ".join(str(s) for s in psrc) if psrc else str(row.get("source", "")),
        "e": str(row.get("engine", "")),
        "l": [[lk.get("x", ""), lk.get("y", ""), lk.get("v1", ""), lk.get("d", ""), lk.get("v2", ""),
               lk.get("v2_offset", -1)] for lk in links],
    }
    if parts is None:
        rec["text"] = question
        rec["p"] = [(p, None, m) for p, m in zip(parents, pmeta)]
        return rec
    texts = [parts["q1"]] + [orig for orig, _ in parts["segments"]]
    # a parent is keyed by (id, text): one id seen with two texts would be two entries
    rec["p"] = [(p, canon.setdefault(t, t), m) for p, t, m in zip(parents, texts, pmeta)]
    rec["g"] = [canon.setdefault(g, g) for g in parts["glues"]]
    rec["t"] = [tok for _, tok in parts["segments"]]
    # the page indexes strings in UTF-16 units, Python in code points: differ past U+FFFF
    u16 = [len(orig[: lk["v2_offset"]].encode("utf-16-le")) // 2 for (orig, _), lk in zip(parts["segments"], links)]
    if u16 != [lk["v2_offset"] for lk in links]:
        rec["u"] = u16
    return rec


@view("compose", ("stats.json", "composed.jsonl"), "compose run")
def collect_compose(folder: Path, cfg: BrowseConfig) -> dict[str, Any]:
    """The funnel, rejects by stage and reason, and the composed records in the diff shape.

    Each embedded record points into a table of problem texts (each parent stored once) and
    a table of glue paragraphs; the page rebuilds the prompt from them. A record whose text
    does not split into that shape is embedded whole (``text``) and shown without a diff.
    """
    stats = _read_json(folder / "stats.json")
    if not isinstance(stats, dict):
        raise ValueError(f"{folder / 'stats.json'}: expected a JSON object")
    canon: dict[str, str] = {}  # one string object per distinct text while reading
    recs = _Sample(cfg.max_records, cfg.seed)
    whole = 0
    for line, row in _jsonl(folder / "composed.jsonl"):
        try:
            rec = _compact(row, canon)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{folder / 'composed.jsonl'}:{line}: not a composed record ({type(e).__name__}: {e})") from None
        recs.add(rec["id"], rec)

    # only the sampled records' texts go into the tables
    problems, glues, sources, engines = _Table(), _Table(), _Table(), _Table()
    records = []
    for rec in recs.items():
        rec["s"] = sources.add(rec["s"])
        rec["e"] = engines.add(rec["e"])
        if "text" in rec:
            whole += 1
        rec["p"] = [problems.add((pid, text), lambda t=text, i=pid, m=meta: [t, i, _parent_label(m)])
                    for pid, text, meta in rec["p"]]
        if "g" in rec:
            rec["g"] = [glues.add(g) for g in rec["g"]]
        records.append(rec)

    rej = _Sample(cfg.max_rejects, cfg.seed)
    reasons: Counter = Counter()
    for path, stage_default in ((folder / "rejected.jsonl", ""), (folder / "input_rejects.jsonl", "input")):
        for line, row in _jsonl(path):
            reason = str(row.get("reason", ""))
            stage = str(row.get("stage", stage_default) or stage_default)
            if not reason:
                raise ValueError(f"{path}:{line}: reject has no 'reason'")
            reasons[(stage, reason)] += 1
            key = str(row.get("id") or f"{path.name}:{line}")
            item = {"stage": stage, "reason": reason, "detail": str(row.get("detail", "")), "id": key}
            if "candidates" in row:
                item["c"] = [str(c) for c in row["candidates"]]
            if "row" in row:
                item["row"] = row["row"]
            if isinstance(row.get("record"), dict):
                rq = row["record"]
                text = next((rq[k] for k in ("problem", "question", "prompt") if isinstance(rq.get(k), str)), "")
                item["q"] = text[:600]
            rej.add(key, item)

    return {
        "stats": stats,
        "records": records,
        "records_total": recs.seen,
        "records_whole": whole,
        "problems": problems.items,
        "glues": glues.items,
        "sources": sources.items,
        "engines": engines.items,
        "rejects": rej.items(),
        "rejects_total": rej.seen,
        "rejects_by": [[s, r, n] for (s, r), n in sorted(reasons.items(), key=lambda t: (-t[1], t[0]))],
    }


# ---------------------------------------------------------------------------------------------
# profile / eval
# ---------------------------------------------------------------------------------------------


def _band(n: int, c: int) -> str:
    return "solve_all" if c >= n else "solve_none" if c <= 0 else "goldilocks"


def _histogram(rows: list[tuple[int, int, int]]) -> dict[str, Any]:
    """Counts of prompts per pass rate c/n: ``rows`` are (n, correct, depth)."""
    hist: Counter = Counter()
    bands: Counter = Counter()
    by_depth: dict[int, Counter] = {}
    for n, c, d in rows:
        hist[(n, c)] += 1
        b = _band(n, c)
        bands[b] += 1
        by_depth.setdefault(d, Counter())[b] += 1
    return {
        "hist": [[n, c, k] for (n, c), k in sorted(hist.items())],
        "bands": dict(bands),
        "by_depth": {str(d): dict(v) for d, v in sorted(by_depth.items())},
        "prompts": len(rows),
    }


@view("profile", ("profile.jsonl", "summary.json"), "profile")
def collect_profile(folder: Path, cfg: BrowseConfig) -> dict[str, Any]:
    """Pass-rate histogram with the solve_all / goldilocks / solve_none split, per depth."""
    rows = []
    for line, r in _jsonl(folder / "profile.jsonl"):
        try:
            rows.append((int(r["n"]), int(r["correct"]), int(r.get("depth", 1) or 1)))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{folder / 'profile.jsonl'}:{line}: needs integer 'n' and 'correct'") from None
    run = _read_json(folder / "run.json") if (folder / "run.json").is_file() else {}
    return {"summary": _read_json(folder / "summary.json"), "run": run, **_histogram(rows)}


@view("eval", ("results.json", "results.md"), "evaluation")
def collect_eval(folder: Path, cfg: BrowseConfig) -> dict[str, Any]:
    """Per-benchmark tables, pass-rate histograms from the sample logs, the compositional block."""
    results = _read_json(folder / "results.json")
    hists = {}
    from composition_rl.jobs.evaluate import eval_sample_files

    for path in eval_sample_files(folder).values():
        rows = []
        for line, r in _jsonl(path):
            try:
                rows.append((int(r["n"]), int(r["correct"]), int(r.get("depth", 1) or 1)))
            except (KeyError, TypeError, ValueError):
                raise ValueError(f"{path}:{line}: needs integer 'n' and 'correct'") from None
        hists[path.stem] = _histogram(rows)
    return {"results": results, "hists": hists}


# ---------------------------------------------------------------------------------------------
# train
# ---------------------------------------------------------------------------------------------

_TRAIN_KEYS = ("step", "stage", "depth", "solve_all", "solve_none", "informative", "reward_mean",
               "reward_mean_trained", "response_length", "trained_groups", "rounds", "generated", "step_seconds")


@view("train", ("metrics.jsonl",), "training run")
def collect_train(folder: Path, cfg: BrowseConfig) -> dict[str, Any]:
    """Per-step metrics (solve_all / solve_none / informative, reward, length) and transitions."""
    steps = []
    for line, r in _jsonl(folder / "metrics.jsonl"):
        if "step" not in r:
            raise ValueError(f"{folder / 'metrics.jsonl'}:{line}: row has no 'step'")
        steps.append({k: r[k] for k in _TRAIN_KEYS if k in r})
    transitions = [r for _, r in _jsonl(folder / "transitions.jsonl")]
    summary = _read_json(folder / "summary.json") if (folder / "summary.json").is_file() else {}
    return {"steps": steps, "transitions": transitions, "summary": summary}
