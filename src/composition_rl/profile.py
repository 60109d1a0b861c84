"""Profile a policy: per-prompt pass rates, Wilson intervals and difficulty bands.

For a policy at a rollout budget ``n``, each prompt is ``solve_none`` (0/n correct),
``solve_all`` (n/n) or in the Goldilocks band (in between): only the band gives GRPO a
non-zero advantage (Composition-RL, Section 2 and Figure 2; MagicBeanStalk's calibration principle).
The profile then aims composition at the stale prompts (:func:`select_from_profile`) and
keeps only composed prompts that landed in the band (:func:`keep_from_profile`).

Outputs in ``out_dir``:
    profile.jsonl   one row per prompt, append-only and resumable (keyed by problem id)
    run.json        the settings of the run; a rerun with other settings is refused
    summary.json    ``solve_all``, ``solve_none``, ``goldilocks`` fractions, ``n`` and counts
    pass_rates.png  histogram of pass rates (when matplotlib is installed)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composition_rl.backends.rollout import (
    MAX_CHUNK,
    MAX_SAMPLES,
    PAPER_SAMPLING,
    RolloutBackend,
    SamplingConfig,
    load_template,
)
from composition_rl.executors.base import Executor, SampleJob, chunks_of
from composition_rl.executors.local import as_executor
from composition_rl.io.files import JsonlLog, atomic_write_json, read_jsonl
from composition_rl.io.runs import RUN_FILE, RunMismatch, claim_run
from composition_rl.records import Problem
from composition_rl.stats import (
    BANDS,
    PassBand,
    band,
    mean,
    parse_band,
    wilson_interval,
)

__all__ = [
    "ProfileConfig",
    "RunMismatch",
    "keep_from_profile",
    "load_profile",
    "no_answer_note",
    "profile_problems",
    "select_from_profile",
    "summarize",
]

PROFILE_FILE = "profile.jsonl"
SUMMARY_FILE = "summary.json"
HISTOGRAM_FILE = "pass_rates.png"


@dataclass(frozen=True)
class ProfileConfig:
    """Settings of one profiling run.

    Args:
        n: samples per prompt (the rollout budget the bands refer to; the paper uses 8).
        sampling: decoding settings; default the paper preset.
        template: prompt template name (``prompts/rollout_<name>.txt``) or a ``.txt`` path.
        chunk: prompts per ``generate`` call; each finished chunk is appended to the log.
        confidence: level of the Wilson interval.
        keep_responses: also store each response and its outcome in profile.jsonl.
    """

    n: int = 8
    sampling: SamplingConfig = field(default_factory=lambda: PAPER_SAMPLING)
    template: str = "boxed"
    chunk: int = 32
    confidence: float = 0.95
    keep_responses: bool = False

    def __post_init__(self) -> None:
        bad = []
        if not 1 <= self.n <= MAX_SAMPLES:
            bad.append(f"n={self.n} (must be in [1, {MAX_SAMPLES}])")
        if not 1 <= self.chunk <= MAX_CHUNK:
            bad.append(f"chunk={self.chunk} (must be in [1, {MAX_CHUNK}])")
        if not (0.0 < self.confidence < 1.0):
            bad.append(f"confidence={self.confidence} (must be in (0, 1))")
        if bad:
            raise ValueError("invalid profile config: " + "; ".join(bad))

    def run_record(self) -> dict[str, Any]:
        """The settings that must match for a rerun to resume the same profile."""
        return {"n": self.n, "sampling": self.sampling.to_dict(), "template": self.template}


def parse_bands(spec: str | Iterable[str]) -> set[str]:
    """``"solve_all"``, ``"solve_all,solve_none"`` or aliases -> a set of band names (``crl grow
    --select``, which selects by name). Read by :func:`~composition_rl.stats.parse_band`, the one
    reader of band spellings; ``informative`` is ``goldilocks``.

    >>> sorted(parse_bands("stale")), parse_bands(["informative"])
    (['solve_all', 'solve_none'], {'goldilocks'})
    """
    names = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec)]
    if not any(names):
        raise ValueError(f"no band named in {spec!r}")
    got = parse_band(names)
    if got.names:
        return set(got.names)
    if got == parse_band("informative"):
        return {"goldilocks"}
    raise ValueError(f"band {spec!r}: name bands here (goldilocks, solve_all, solve_none, or an alias), not an interval")


def profile_problems(
    problems: Sequence[Problem],
    backend: RolloutBackend | Executor,
    verifier: Any,
    out_dir: str | Path,
    config: ProfileConfig | None = None,
    progress: bool = True,
    extra_run_info: dict[str, Any] | None = None,
    identity: dict[str, Any] | None = None,
    label: str = "profiling",
) -> dict[str, Any]:
    """Sample ``n`` responses per prompt, score them, and write the profile of ``problems``.

    Resumable: prompts already in ``out_dir/profile.jsonl`` are skipped, so a rerun after a
    kill continues where it stopped; duplicate problem ids are profiled once.

    Args:
        problems: the prompts to profile.
        backend: a rollout backend (:mod:`composition_rl.backends.rollout`), run in this
            process, or an executor (:func:`composition_rl.executors.build_executor`) that
            places backends and grading itself (``--executor ray``); the rows are the same.
        verifier: the project verifier (``score_batch([(response, gold), ...])``); an
            executor that grades elsewhere uses its settings (``verifier.config``).
        out_dir: output folder (created).
        config: run settings; default :class:`ProfileConfig`.
        progress: show a progress bar.
        extra_run_info: recorded in run.json on the first run, not compared (input paths).
        identity: what else decides the results (model, backend, input hashes:
            :func:`composition_rl.io.runs.run_identity`); recorded with the settings, and a
            rerun into ``out_dir`` with any of them changed is refused (:class:`RunMismatch`).
        label: the progress bar's label (a caller running several profiles names each).

    Returns:
        The summary dict also written to ``summary.json``.

    Example (not run here: it samples a model; tests/test_profile.py runs it on a stand-in):
        >>> profile_problems(problems, HFRollout("tiny"), Verifier(), "runs/p")  # doctest: +SKIP
    """
    config = config or ProfileConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # how answers are read decides the verdicts: recorded for every caller, API or CLI
    graded = {"fallbacks": list(verifier.config.fallbacks)} if hasattr(verifier, "config") else {}
    claim_run(out / RUN_FILE, {**config.run_record(), **graded, **(identity or {})}, info=extra_run_info,
              has_work=_has_rows(out / PROFILE_FILE), what="a profile")

    job = SampleJob(load_template(config.template), config.n, config.sampling)
    runner = as_executor(backend)

    unique: dict[str, Problem] = {}
    for p in problems:
        unique.setdefault(p.id, p)
    with JsonlLog(out / PROFILE_FILE, key="id") as log:
        todo = [p for p in unique.values() if p.id not in log.done]
        with progress_bar(progress, len(unique), len(unique) - len(todo), label) as advance:
            # each chunk is appended as soon as the executor hands it over, in input order
            for scored in runner.run(chunks_of(todo, config.chunk), job, verifier):
                for s in scored:
                    log.append(_row(s.problem, s.completions, s.results, config))
                advance(len(scored))
    rows = load_profile(out, ids=unique.keys())
    summary = summarize(rows, config.n)
    atomic_write_json(out / SUMMARY_FILE, summary)
    write_histogram(rows, config.n, out / HISTOGRAM_FILE)
    return summary


def _has_rows(path: Path) -> bool:
    return path.is_file() and path.stat().st_size > 0


def _row(p: Problem, comps, results, config: ProfileConfig) -> dict[str, Any]:
    correct = sum(1 for r in results if r.score == 1.0)
    lo, hi = wilson_interval(correct, config.n, config.confidence)
    outcomes = Counter(str(getattr(r.outcome, "value", r.outcome)) for r in results)
    row: dict[str, Any] = {
        "id": p.id,
        "source": p.source,
        "depth": p.depth,
        "n": config.n,
        "correct": correct,
        "pass_rate": correct / config.n,
        "wilson_lo": lo,
        "wilson_hi": hi,
        "class": band(correct, config.n),
        "outcomes": dict(sorted(outcomes.items())),
        "mean_tokens": mean(c.tokens for c in comps),
        "truncated": sum(1 for c in comps if c.finish_reason == "length"),
    }
    if config.keep_responses:
        row["responses"] = [
            {"text": c.text, "outcome": str(getattr(r.outcome, "value", r.outcome)), "tokens": c.tokens}
            for c, r in zip(comps, results)
        ]
    return row


@contextmanager
def progress_bar(enabled: bool, total: int, done: int, label: str = "profiling") -> Iterator[Callable[[int], None]]:
    """A rich progress bar over prompts; yields ``advance(k)``. A no-op when disabled."""
    if not enabled:
        yield lambda k: None
        return
    from composition_rl.progress import ProgressBar

    with ProgressBar(label, total, completed=done, transient=False) as bar:
        yield bar.advance


def load_profile(profile_dir: str | Path, ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """The rows of ``profile_dir/profile.jsonl`` (only ``ids`` when given), in file order."""
    path = Path(profile_dir) / PROFILE_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {PROFILE_FILE} in {profile_dir}; run `crl profile` first")
    wanted = set(ids) if ids is not None else None
    rows = [r for r in read_jsonl(path) if wanted is None or r["id"] in wanted]
    return rows


def summarize(rows: Sequence[dict[str, Any]], n: int) -> dict[str, Any]:
    """Band fractions, counts and mean pass rate of profile rows.

    >>> rows = [{"class": "solve_all", "pass_rate": 1.0}, {"class": "goldilocks", "pass_rate": 0.5}]
    >>> s = summarize(rows, 8); (s["solve_all"], s["goldilocks"], s["solve_none"], s["n"])
    (0.5, 0.5, 0.0, 8)
    """
    counts = Counter(r["class"] for r in rows)
    total = len(rows)
    summary: dict[str, Any] = {
        "n": n,
        "prompts": total,
        "counts": {b: counts.get(b, 0) for b in BANDS},
        "mean_pass_rate": mean(r["pass_rate"] for r in rows) if rows else None,
        # a reply with nothing to grade is not a wrong one: counted, so a summary can say it
        "replies": sum(int(r.get("n", n)) for r in rows),
        "no_answer": sum(int(r.get("outcomes", {}).get("no_answer", 0)) for r in rows),
    }
    for b in BANDS:
        summary[b] = counts.get(b, 0) / total if total else None
    return summary


def no_answer_note(no_answer: int, replies: int) -> str:
    """What a summary says about replies that held no answer to grade ("" when none did).

    A solver that never writes the answer in the form the verifier reads scores 0 on every
    prompt: its pass rates say nothing of the problems. From half of the replies on, the note
    says where to look.

    >>> no_answer_note(87, 88)
    'no answer in 87 of 88 replies: check the template / --fallback (how answers are read)'
    >>> no_answer_note(2, 88), no_answer_note(0, 88)
    ('no answer in 2 of 88 replies', '')
    """
    if not no_answer:
        return ""
    note = f"no answer in {no_answer:,} of {replies:,} replies"
    if 2 * no_answer >= replies:
        note += ": check the template / --fallback (how answers are read)"
    return note


def write_histogram(rows: Sequence[dict[str, Any]], n: int, path: str | Path) -> bool:
    """Bar chart of how many prompts reached each pass rate k/n, coloured by band.

    Returns False (and writes nothing) when matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    per_k = Counter(int(r["correct"]) for r in rows)
    ks = list(range(n + 1))
    from composition_rl.colours import COLOURS

    colours = [COLOURS["solve_none"] if k == 0 else COLOURS["solve_all"] if k == n else COLOURS["goldilocks"]
               for k in ks]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.bar([k / n for k in ks], [per_k.get(k, 0) for k in ks], width=0.8 / n, color=colours)
    ax.set_xlabel(f"pass rate (correct / {n})")
    ax.set_ylabel("prompts")
    ax.set_title(f"{len(rows)} prompts: red solve_none, amber goldilocks, green solve_all")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(path).with_name(f".{Path(path).name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)
    return True


def select_from_profile(profile_dir: str | Path, select: str | Iterable[str] | PassBand) -> set[str]:
    """Ids of the profiled prompts whose band is in ``select``.

    This is what ``crl compose --from-profile DIR --select solve_all`` uses to aim
    composition at the prompts the policy has mastered (Composition-RL, Section 2).

    Args:
        profile_dir: a ``crl profile`` output folder.
        select: band names, comma-separated or as a list: ``solve_all``, ``solve_none``,
            ``goldilocks``; aliases ``informative`` (= goldilocks), ``stale``
            (= solve_all + solve_none), ``all``; or an interval of the pass rate,
            ``0.125,0.5`` or ``(0,0.5]`` (:func:`~composition_rl.stats.parse_band`).

    >>> import json, os
    >>> os.makedirs("prof")
    >>> _ = Path("prof/profile.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in [
    ...     {"id": "a", "correct": 8, "n": 8}, {"id": "b", "correct": 3, "n": 8}]))
    >>> select_from_profile("prof", "solve_all"), select_from_profile("prof", "goldilocks")
    ({'a'}, {'b'})
    """
    wanted = parse_band(select)
    return {r["id"] for r in load_profile(profile_dir) if wanted.admits(int(r["correct"]), int(r["n"]))}


def keep_from_profile(
    problems: Iterable[Problem], profile_dir: str | Path, keep: str | Iterable[str] | PassBand = "goldilocks"
) -> tuple[list[Problem], list[dict[str, Any]]]:
    """Split ``problems`` by their profiled band: (kept, rejected rows with a reason).

    Every input lands on one side, so ``len(kept) + len(rejected) == len(problems)``. A
    rejected row is ``{"id", "reason", "problem"}`` with reason ``band:<class>`` or
    ``not_profiled``. Used by ``crl profile ... --keep goldilocks`` to keep only the composed
    prompts the policy can still learn from (MagicBeanStalk's calibration principle).
    ``keep`` takes what :func:`select_from_profile` takes (band names or an interval).
    """
    wanted = parse_band(keep)
    rows = {r["id"]: r for r in load_profile(profile_dir)}
    kept: list[Problem] = []
    rejected: list[dict[str, Any]] = []
    for p in problems:
        row = rows.get(p.id)
        if row is not None and wanted.admits(int(row["correct"]), int(row["n"])):
            kept.append(p)
        else:
            reason = "not_profiled" if row is None else f"band:{row['class']}"
            rejected.append({"id": p.id, "reason": reason, "problem": p.to_dict()})
    return kept, rejected
