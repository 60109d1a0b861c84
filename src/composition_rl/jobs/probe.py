"""The solver probe: reject compositions whose answer a solver reaches without the first problem.

A composed record's answer is its last problem's own answer, reached through a variable whose
value comes from the earlier problem. When the rest of the later problem gives that value
away (a figure draws it, a constraint forces it, the answer ignores it), a policy can skip
the first problem and still be rewarded: the composition teaches nothing it claims to. Rules
over the text name only the classes someone wrote down; the probe asks a model instead.

For each record the solver gets the later problem alone, the earlier problem and the relation
removed and the variable left as an unknown (the sentence :func:`composition_rl.spc.text.withheld_note`
says so), ``k`` times; its replies are graded against the record's answer by the project's
verifier, exactly as a rollout of the policy is. A record whose pass rate is at least ``tau``
is rejected as ``guessable``, its pass rate in the rejected row.

The probe is relative to its solver: the answer is the later problem's original answer, so a
solver that remembers that problem (a public set it was trained on) reaches it without the
value, and a weak solver misses shortcuts a stronger policy would take. Use the policy being
trained, or a stronger model, as the solver.

Sampling runs through :func:`composition_rl.jobs.profile.profile_problems` (any rollout backend
or executor, batched, the rows appended as they finish), so a probe folder resumes after a
kill and a rerun with another solver or other settings into it is refused.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composition_rl.io.files import atomic_open, atomic_write_json, atomic_write_jsonl
from composition_rl.jobs.profile import ProfileConfig, load_profile, profile_problems, summarize
from composition_rl.records import Problem
from composition_rl.rollout.base import MAX_SAMPLES, PAPER_SAMPLING, SamplingConfig
from composition_rl.spc.text import find_glue, withheld_note

__all__ = ["ProbeConfig", "ProbeResult", "apply_to_run", "build_solver", "probe_records", "withheld_question",
           "write_split"]

REASON = "guessable"
STAGE = "probe"

# the solver's flags, worded once for crl probe and crl compose
MODEL_HELP = ("the solver: a .gguf file or a bundled GGUF by name (scripts/real_llm_models.py list), a local model folder, "
              "or the served model name with --probe-base-url; use the policy being trained, or a stronger model")
BASE_URL_HELP = "OpenAI-compatible endpoint of the solver (repeat to balance over several); key from $OPENAI_API_KEY"
BACKEND_HELP = ("auto: openai with --probe-base-url, llama for a GGUF when llama-cpp-python is installed, "
                "else hf")


@dataclass(frozen=True)
class ProbeConfig:
    """Settings of one probe.

    Args:
        k: samples per record.
        tau: the pass rate at or above which a record is rejected as guessable.
        sampling: decoding settings (the paper preset by default; ``max_tokens`` bounds the cost).
        template: rollout prompt template, as for ``crl profile`` (the policy's own format).
        chunk: records per generate call and log flush.
        keep_responses: also store the solver's replies in ``profile.jsonl`` (to read what it did).
    """

    k: int = field(default=4, metadata={
        "flag": "-k", "help": "samples per record: 4 gives pass rates in quarters at half the cost of the paper's group of 8"})
    tau: float = field(default=0.5, metadata={
        "help": "reject as guessable at this pass rate or above (0 < tau <= 1): 0.5 is a guess that "
                "succeeds as often as it fails, where GRPO's group already rewards skipping the first problem"})
    sampling: SamplingConfig = field(default_factory=lambda: PAPER_SAMPLING)
    template: str = "boxed"
    chunk: int = 32
    keep_responses: bool = False

    def __post_init__(self) -> None:
        bad = []
        if not 1 <= self.k <= MAX_SAMPLES:
            bad.append(f"k={self.k} (must be in [1, {MAX_SAMPLES}])")
        if not 0.0 < self.tau <= 1.0:
            bad.append(f"tau={self.tau} (must be in (0, 1])")
        if self.chunk < 1:  # said here, not first by the profile config it builds much later
            bad.append(f"chunk={self.chunk} (must be >= 1)")
        if bad:
            raise ValueError("invalid probe config: " + "; ".join(bad))

    def profile_config(self) -> ProfileConfig:
        """The :class:`ProfileConfig` the probe profiles the withheld problems with:
        ``k`` samples each, with this config's sampling, template, chunk and ``keep_responses``."""
        return ProfileConfig(n=self.k, sampling=self.sampling, template=self.template, chunk=self.chunk,
                             keep_responses=self.keep_responses)


@dataclass
class ProbeResult:
    """Every input record on one side: kept, rejected (``guessable``) or not probed (no
    composed later problem could be read from it; kept, and counted)."""

    kept: list[Problem]
    rejected: list[dict[str, Any]]
    unprobed: list[str]
    summary: dict[str, Any]


def withheld_question(rec: Problem) -> str | None:
    """The later problem of ``rec``'s last link with its variable left as an unknown: the
    text after the last relation paragraph, the note that the variable's value is not given
    before it. None when ``rec`` is not a composed record whose glue can be read.

    >>> from composition_rl.records import Link
    >>> text = ("What is $2+3$?\\n\\nLet $X$ be the answer to the problem above. $Y$ is $1$ less than $X$."
    ...         "\\n\\nA box holds $Y$ red and 2 blue balls. How many balls are there?")
    >>> link = Link("X", "Y", "5", "5", "4", "4", "1", "1", 12)
    >>> print(withheld_question(Problem.new(text, "6", depth=2, links=(link,))))
    Here $Y$ stands for a number whose value is not given.
    <BLANKLINE>
    A box holds $Y$ red and 2 blue balls. How many balls are there?
    """
    if not rec.links:
        return None
    last = rec.links[-1]
    glue = find_glue(rec.question, last.x, last.y) or find_glue(rec.question, last.x, last.y, free_definition=True)
    if glue is None:
        return None
    return f"{withheld_note(f'${last.y}$')}\n\n{rec.question[glue.end:]}"


def probe_records(
    records: Sequence[Problem],
    backend: Any,
    verifier: Any,
    out_dir: str | Path,
    config: ProbeConfig | None = None,
    progress: bool = True,
    identity: dict[str, Any] | None = None,
) -> ProbeResult:
    """Probe ``records`` with the solver ``backend`` and split them into kept and guessable.

    Args:
        records: composed records (a ``composed.jsonl`` read back).
        backend: a rollout backend or executor (as for :func:`composition_rl.jobs.profile.profile_problems`).
        verifier: the project verifier that grades the solver's replies.
        out_dir: the probe's folder: ``profile.jsonl`` (one row per withheld problem,
            resumable), ``run.json``, ``summary.json``.
        config: k, tau and sampling; default :class:`ProbeConfig`.
        identity: what else decides the pass rates (the solver, its backend, the input).

    Returns:
        A :class:`ProbeResult`; ``len(kept) + len(rejected) == len(records)``.

    Example (not run here: it needs a model to solve with):
        >>> probe_records(recs, build_backend("llama", model="qwen2.5-coder-0.5b-instruct-awq-q4_k_m"), verifier, "runs/probe")  # doctest: +SKIP
    """
    config = config or ProbeConfig()
    out = Path(out_dir)
    probes: dict[str, Problem] = {}  # record id -> its withheld problem (answers: the record's)
    unprobed: list[str] = []
    for rec in records:
        text = withheld_question(rec)
        if text is None:
            unprobed.append(rec.id)
        else:
            probes[rec.id] = Problem.new(text, rec.answers, source="probe", parents=(rec.id,))
    profile_problems(list(probes.values()), backend, verifier, out, config.profile_config(), progress=progress,
                     identity=identity)  # tau only splits the pass rates: a rerun with another reuses them
    rows = {r["id"]: r for r in load_profile(out, ids={p.id for p in probes.values()})}
    kept: list[Problem] = []
    rejected: list[dict[str, Any]] = []
    for rec in records:
        probe = probes.get(rec.id)
        row = rows.get(probe.id) if probe is not None else None
        if row is not None and row["pass_rate"] >= config.tau:
            # crl compose's rejected row (id, candidates, stage, reason, detail), plus the pass rate
            rejected.append({"id": rec.id, "candidates": list(rec.parents), "stage": STAGE, "reason": REASON,
                             "pass_rate": row["pass_rate"],
                             "correct": row["correct"], "k": row["n"], "probe_id": probe.id,
                             "detail": f"the solver reaches the answer in {row['correct']} of {row['n']} samples "
                                       f"with the value of {rec.links[-1].y} withheld (tau {config.tau})",
                             "problem": rec.to_dict()})
        else:
            kept.append(rec)
    rates = [rows[p.id]["pass_rate"] for p in probes.values() if p.id in rows]
    graded = summarize(list(rows.values()), config.k)
    summary = {"records": len(records), "probed": len(probes), "unprobed": len(unprobed),
               # a reply without an answer is no evidence either way: 0 guessable then means nothing
               "replies": graded["replies"], "no_answer": graded["no_answer"],
               "rejected_guessable": len(rejected), "kept": len(kept),
               "rejected_share": len(rejected) / len(records) if records else None,
               "k": config.k, "tau": config.tau,
               "mean_pass_rate": sum(rates) / len(rates) if rates else None,
               "pass_rate_counts": _counts(rows[p.id]["correct"] for p in probes.values() if p.id in rows)}
    atomic_write_json(out / "probe_summary.json", summary)
    return ProbeResult(kept, rejected, unprobed, summary)


def _counts(values) -> dict[str, int]:
    """How many records had each number of correct samples, as a JSON object."""
    c = Counter(values)
    return {str(k): c[k] for k in sorted(c)}


def build_solver(model: str, base_urls: Sequence[str] = (), backend: str = "auto", *, concurrency: int = 16,
                 batch_size: int = 16) -> Any:
    """The solver as an executor: an endpoint (``openai``) when ``base_urls`` are given, the
    in-process llama.cpp backend for a GGUF when llama-cpp-python is installed, else ``hf``.

    Raises:
        ValueError: an endpoint without a URL, or a URL with a local backend.
    """
    from composition_rl.executors import BackendSpec, ExecutorConfig, build_executor
    from composition_rl.rollout.base import resolve_backend

    backend = resolve_backend(backend, model, base_urls)
    if backend == "openai":
        if not base_urls:
            raise ValueError("the openai backend needs --probe-base-url")
        kw: dict[str, Any] = {"base_url": list(base_urls), "model": model, "concurrency": concurrency}
    elif base_urls:
        raise ValueError(f"--probe-base-url goes with the openai backend, not {backend}")
    elif backend == "llama":
        kw = {"model": model, "n_parallel": batch_size}
    elif backend == "hf":
        kw = {"model": model, "max_batch_sequences": batch_size}
    else:
        kw = {"model": model}
    return build_executor(ExecutorConfig(), BackendSpec(backend, kw))


def write_split(result: ProbeResult, kept_path: str | Path, rejected_path: str | Path) -> None:
    """``kept.jsonl`` (the records, whole) and ``rejected.jsonl`` (one row per guessable record)."""
    atomic_write_jsonl(kept_path, (p.to_dict() for p in result.kept))
    atomic_write_jsonl(rejected_path, result.rejected)



def apply_to_run(out_dir: str | Path, result: ProbeResult, exports: Sequence[str] = ()) -> dict[str, Any]:
    """Fold a probe of ``out_dir/composed.jsonl`` into that ``crl compose`` run (the caller
    holds its lock): the guessable records leave ``composed.jsonl`` for ``rejected.jsonl``,
    ``stats.json`` counts them (stage ``probe``, reason ``guessable``, a last funnel row and
    the probe's summary) and the trainer ``exports`` are rewritten from the kept records.
    The files are staged and replaced together at the end (:class:`StagedOutputs`): an
    interrupted fold leaves the run as it was. Returns the updated stats.
    """
    from composition_rl.io.files import StagedOutputs
    from composition_rl.jobs.export import export, export_path

    out = Path(out_dir)
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    n = len(result.rejected)
    names = ["rejected.jsonl", "composed.jsonl", "stats.json", *(export_path(out, e).name for e in exports)]
    # every file is staged and moved in only when all are written: a kill never leaves the
    # probe folded into composed.jsonl but not into stats.json and the exports
    with StagedOutputs(out, names) as stage:
        old = (out / "rejected.jsonl").read_bytes() if (out / "rejected.jsonl").is_file() else b""
        with atomic_open(stage.dir / "rejected.jsonl", "wb") as f:
            f.write(old)
            for row in result.rejected:
                f.write((json.dumps(row, sort_keys=True) + "\n").encode("utf-8"))
        atomic_write_jsonl(stage.dir / "composed.jsonl", (p.to_dict() for p in result.kept))
        stats["accepted"] -= n
        stats["rejected"] += n
        stats["acceptance"] = round(stats["accepted"] / stats["candidates"], 6) if stats["candidates"] else 0.0
        by_reason = stats.setdefault("rejected_by_reason", {})
        by_reason[REASON] = by_reason.get(REASON, 0) + n
        stats["rejected_by_reason"] = dict(sorted(by_reason.items()))
        by_stage = stats.setdefault("rejected_by_stage", {})
        by_stage[STAGE] = by_stage.get(STAGE, 0) + n
        stats["funnel"] = [r for r in stats.get("funnel", []) if r["stage"] != STAGE] + [
            {"stage": STAGE, "kept": stats["accepted"]}]
        stats["probe"] = result.summary
        atomic_write_json(stage.dir / "stats.json", stats)
        for name in exports:
            if result.kept:
                export(result.kept, name, stage.dir)
            # else: not staged, so the commit removes the export of records that are gone
        stage.commit()
    return stats


def probe_file(path: str, out: Path, config: ProbeConfig, verify_config: Any, fallbacks: Sequence[str], *,
               model: str, base_urls: Sequence[str] = (), backend: str = "auto", concurrency: int = 16,
               batch_size: int = 16, progress: bool = True) -> ProbeResult:
    """The ``crl probe`` job with ``out`` held: probe the composed records of ``path`` with
    the solver ``model`` (as :func:`build_solver` builds it) and write ``kept.jsonl`` and
    ``rejected.jsonl`` beside its pass rates. A ValueError says what is unusable (the input,
    the solver, or a folder probed with other settings)."""
    from composition_rl.grading import shared_verifier
    from composition_rl.io.identity import run_identity
    from composition_rl.io.readers import InputError, ReaderConfig, load_problems

    try:
        res = load_problems(path, ReaderConfig())
    except (InputError, OSError) as e:
        raise ValueError(str(e)) from None
    records = res.problems  # a record without links is kept unprobed, and counted
    if not any(p.links for p in records):
        raise ValueError(f"--input {path}: no composed record (a record with links); probe a crl compose output")
    try:
        solver = build_solver(model, base_urls, backend, concurrency=concurrency, batch_size=batch_size)
    except (ImportError, ValueError) as e:
        raise ValueError(f"--probe-model {model}: {e}") from None
    try:
        result = probe_records(records, solver, shared_verifier(verify_config), out, config, progress=progress,
                               identity=run_identity(model=model, backend=solver.name, inputs={"input": path},
                                                     command="probe", fallbacks=list(fallbacks)))
    finally:
        solver.close()
    write_split(result, out / "kept.jsonl", out / "rejected.jsonl")
    return result
