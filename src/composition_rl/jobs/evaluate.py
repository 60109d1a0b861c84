"""Evaluate a policy on benchmarks: avg@k, unbiased pass@k, and the compositional analyses.

The per-benchmark table and its macro average follow the Composition-RL paper, Table 1 (avg@k with the
paper's decoding preset). The compositional analyses follow Section 5.2: the policy is run
on a benchmark and on depth-K compositions of it, side by side (Figure 2, right), and on the
composed prompts we measure how often a response reaches the right intermediate value v1 of
each link (Figure 3, right) and where a wrong response first went wrong.

Outputs in ``out_dir``:
    samples/<benchmark>.jsonl  every response with its outcome (append-only, resumable)
    results.json               metrics per benchmark, overall averages, compositional block
    results.md                 the same as markdown tables
"""

from __future__ import annotations

import argparse
import logging
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composition_rl.executors.base import Executor, SampleJob, Scored, chunks_of
from composition_rl.executors.local import as_executor
from composition_rl.io.files import JsonlLog, atomic_open, atomic_write_json, read_jsonl
from composition_rl.io.identity import claim_run
from composition_rl.io.runs import RUN_FILE
from composition_rl.jobs.profile import progress_bar
from composition_rl.records import Link, Problem
from composition_rl.rollout.base import (
    MAX_CHUNK,
    MAX_SAMPLES,
    PAPER_SAMPLING,
    RolloutBackend,
    SamplingConfig,
    load_template,
)
from composition_rl.stats import BANDS, band, mean, mean_pass_at_k

__all__ = [
    "ERROR_KINDS",
    "EvalConfig",
    "benchmark_metrics",
    "evaluate_benchmarks",
    "link_errors",
    "composition_analysis",
    "stated_value",
    "render_markdown",
]

RESULTS_FILE = "results.json"
TABLE_FILE = "results.md"
SAMPLES_DIR = "samples"

log = logging.getLogger(__name__)

#: Where a wrong response to a composed prompt first went wrong (see :func:`link_errors`).
ERROR_KINDS = ("q1", "linkage", "middle", "last", "undecidable")


@dataclass(frozen=True)
class EvalConfig:
    """Settings of one evaluation run.

    Args:
        n: samples per problem (the k of avg@k; pass@k is reported for every k <= n).
        sampling: decoding settings; default the paper preset (T 0.6, top_p 0.95, top_k 20).
        template: prompt template name or ``.txt`` path; default asks for ``\\boxed{}``.
        chunk: problems per ``generate`` call; each finished chunk is appended to its log.
    """

    n: int = 8
    sampling: SamplingConfig = field(default_factory=lambda: PAPER_SAMPLING)
    template: str = "boxed"
    chunk: int = 32

    def __post_init__(self) -> None:
        if not (1 <= self.n <= MAX_SAMPLES and 1 <= self.chunk <= MAX_CHUNK):
            raise ValueError(f"n={self.n} must be in [1, {MAX_SAMPLES}] and chunk={self.chunk} in [1, {MAX_CHUNK}]")

    def run_record(self) -> dict[str, Any]:
        """The settings that must match for a rerun to resume the same evaluation
        (``n``, sampling, template; not ``chunk``)."""
        return {"n": self.n, "sampling": self.sampling.to_dict(), "template": self.template}


def _outcome(r: Any) -> str:
    return str(getattr(r.outcome, "value", r.outcome))


def sample_sets(
    sets: Mapping[str, Sequence[Problem]],
    backend: RolloutBackend | Executor,
    verifier: Any,
    out_dir: Path,
    config: EvalConfig,
    progress: bool = True,
) -> dict[str, list[dict[str, Any]]]:
    """Sample and score ``n`` responses per problem of every named set into
    ``samples/<name>.jsonl`` (resumable), all sets in one pass of the executor.

    One pass, so an executor that starts replicas (``--executor ray``) starts them once per
    evaluation, not once per benchmark. Each set is cut into its own chunks, the same
    chunks whichever executor runs them.

    Returns:
        name -> the sample rows of that set's problems (one per distinct id), in input order.
    """
    runner = as_executor(backend)
    job = SampleJob(load_template(config.template), config.n, config.sampling)
    uniques: dict[str, dict[str, Problem]] = {}
    for name, problems in sets.items():
        uniques[name] = {}
        for p in problems:
            uniques[name].setdefault(p.id, p)
    paths = {name: out_dir / SAMPLES_DIR / f"{name}.jsonl" for name in sets}
    with ExitStack() as stack:
        logs = {name: stack.enter_context(JsonlLog(paths[name], key="id")) for name in sets}
        chunks: list[list[Problem]] = []
        owners: list[str] = []
        for name, unique in uniques.items():
            for chunk in chunks_of([p for p in unique.values() if p.id not in logs[name].done], config.chunk):
                chunks.append(chunk)
                owners.append(name)
        total = sum(len(u) for u in uniques.values())
        with progress_bar(progress, total, total - sum(map(len, chunks)), "eval") as advance:
            for name, scored in zip(owners, runner.run(chunks, job, verifier)):
                for s in scored:
                    logs[name].append(_sample_row(name, s, config.n))
                advance(len(scored))
    out = {}
    for name, unique in uniques.items():
        by_id = {r["id"]: r for r in read_jsonl(paths[name])}
        out[name] = [by_id[i] for i in unique]
    return out


def _sample_row(name: str, s: Scored, n: int) -> dict[str, Any]:
    p = s.problem
    return {
        "id": p.id,
        "benchmark": name,
        "depth": p.depth,
        "question": p.question,
        "answers": list(p.answers),
        "n": n,
        "correct": sum(1 for r in s.results if r.score == 1.0),
        "responses": [
            {
                "text": c.text,
                "outcome": _outcome(r),
                "score": r.score,
                "tokens": c.tokens,
                "finish_reason": c.finish_reason,
            }
            for c, r in zip(s.completions, s.results)
        ],
    }


def benchmark_metrics(rows: Sequence[dict[str, Any]], n: int) -> dict[str, Any]:
    """avg@n, unbiased pass@k for k = 1..n, band fractions and lengths of one benchmark.

    >>> rows = [{"n": 2, "correct": 1, "responses": []}, {"n": 2, "correct": 2, "responses": []}]
    >>> m = benchmark_metrics(rows, 2); (m["avg@2"], m["pass@k"]["1"], m["pass@k"]["2"], m["solve_all"])
    (0.75, 0.75, 1.0, 0.5)
    """
    counts = [(int(r["n"]), int(r["correct"])) for r in rows]
    bands = Counter(band(c, k) for k, c in counts)
    total = len(rows)
    responses = [x for r in rows for x in r["responses"]]
    if not total:  # e.g. no composition was possible at some depth: no numbers, not NaN
        return {"problems": 0, "samples": 0, f"avg@{n}": None, "pass@k": {}, **dict.fromkeys(BANDS),
                "mean_tokens": None, "truncated": None}
    return {
        "problems": total,
        "samples": sum(k for k, _ in counts),
        f"avg@{n}": mean(c / k for k, c in counts),
        "pass@k": {str(k): mean_pass_at_k(counts, k) for k in range(1, n + 1)},
        **{b: bands.get(b, 0) / total for b in BANDS},
        "mean_tokens": mean(x.get("tokens", 0) for x in responses) if responses else None,
        "truncated": mean(x.get("finish_reason") == "length" for x in responses) if responses else None,
    }


def evaluate_benchmarks(
    benchmarks: Mapping[str, Sequence[Problem]],
    backend: RolloutBackend | Executor,
    verifier: Any,
    out_dir: str | Path,
    config: EvalConfig | None = None,
    compositional: Mapping[str, Mapping[int, Sequence[Problem]]] | None = None,
    progress: bool = True,
    extra_run_info: dict[str, Any] | None = None,
    identity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Evaluate on named benchmarks; write results.json, results.md and the sample logs.

    Args:
        benchmarks: benchmark name -> problems (names become file names and table rows).
        backend: a rollout backend run in this process, or an executor
            (:func:`composition_rl.executors.build_executor`; see :func:`sample_sets`).
        verifier: the project verifier (``score_batch``).
        out_dir: output folder; a rerun with the same settings resumes.
        config: run settings.
        compositional: benchmark name -> {depth: composed problems} for the Section 5.2
            analyses (built by the command from the composition engine); depth 1 is the
            benchmark itself.
        progress: show progress bars.
        extra_run_info: recorded in run.json on the first run, not compared.
        identity: what else decides the results (model, backend, benchmark hashes:
            :func:`composition_rl.io.identity.run_identity`); a rerun into ``out_dir`` with any
            of them changed is refused (:class:`composition_rl.io.identity.RunMismatch`).

    Returns:
        The results dict also written to results.json.

    Example (not run here: it samples a model):
        >>> evaluate_benchmarks({"aime24": probs}, HFRollout("m"), Verifier(), "runs/e")  # doctest: +SKIP
    """
    config = config or EvalConfig()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    samples = out / SAMPLES_DIR
    # how answers are read decides the verdicts: recorded for every caller, API or CLI
    graded = {"fallbacks": list(verifier.config.fallbacks)} if hasattr(verifier, "config") else {}
    claim_run(out / RUN_FILE, {**config.run_record(), **graded, **(identity or {})}, info=extra_run_info,
              has_work=samples.is_dir() and any(f.stat().st_size for f in samples.glob("*.jsonl")),
              what="an evaluation")
    results: dict[str, Any] = {"n": config.n, "config": config.run_record(), "benchmarks": {}}
    sets: dict[str, Sequence[Problem]] = dict(benchmarks)
    for name, by_depth in (compositional or {}).items():
        for depth, probs in by_depth.items():
            if depth != 1:
                sets[f"{name}.depth{depth}"] = probs
    rows_of = sample_sets(sets, backend, verifier, out, config, progress)
    for name in benchmarks:
        results["benchmarks"][name] = benchmark_metrics(rows_of[name], config.n)
    results["overall"] = _overall(results["benchmarks"], config.n)
    if compositional:
        block: dict[str, Any] = {}
        for name, by_depth in compositional.items():
            entry: dict[str, Any] = {}
            for depth, probs in sorted(by_depth.items()):
                if depth == 1:
                    entry["1"] = _side(results["benchmarks"][name], config.n)
                    continue
                rows = rows_of[f"{name}.depth{depth}"]
                metrics = benchmark_metrics(rows, config.n)
                entry[str(depth)] = {
                    **_side(metrics, config.n),
                    **composition_analysis(rows, {p.id: p for p in probs}),
                }
            block[name] = entry
        results["compositional"] = block
    atomic_write_json(out / RESULTS_FILE, results)
    with atomic_open(out / TABLE_FILE) as f:
        f.write(render_markdown(results))
    return results


def _overall(per_bench: Mapping[str, Mapping[str, Any]], n: int) -> dict[str, Any]:
    """Macro averages over benchmarks (Table 1 averages benchmark scores, not problems)."""
    vals = [m for m in per_bench.values() if m["problems"]]
    return {
        "benchmarks": len(vals),
        f"avg@{n}": mean(m[f"avg@{n}"] for m in vals) if vals else None,
        "pass@k": {str(k): mean(m["pass@k"][str(k)] for m in vals) for k in range(1, n + 1)} if vals else {},
    }


def _side(m: Mapping[str, Any], n: int) -> dict[str, Any]:
    return {
        "problems": m["problems"],
        f"avg@{n}": m[f"avg@{n}"],
        "solve_all": m["solve_all"],
        "solve_none": m["solve_none"],
    }


# ---------------------------------------------------------------------------------------------
# Compositional analyses (Composition-RL, Section 5.2)
# ---------------------------------------------------------------------------------------------

# A value stated for a variable ends at the end of the math span, the sentence or a clause.
_VALUE_END = r"(?=\$|\\\)|\\\]|\n|;|,\s|\.\s|\.$|\s+(?:and|so|then|which|since|because|thus|hence)\b|\\quad|\\text|\\,\\text|$)"


_RELATION_AFTER = re.compile(
    r"\$?\s*(?:less|more|greater|fewer|smaller|larger|bigger|times|plus|minus|added|subtracted)\b"
)


def _assignment_re(var: str) -> re.Pattern[str]:
    return re.compile(
        r"(?<![A-Za-z0-9_\\])"
        + re.escape(var)
        + r"(?![A-Za-z0-9_])\s*\$?\s*(?:=|:=|\\coloneqq|\bis\b|\bequals\b)\s*\$?\s*(.+?)"
        + _VALUE_END,
        re.MULTILINE,
    )


def stated_value(text: str, var: str) -> Any | None:
    """The last exact value ``text`` states for variable ``var`` (``X = 7``), or None.

    In a chain ``X = 3 + 4 = 7`` the last member counts; statements whose value is not a
    number (``X is the sum of ...``) are not statements of a value.

    >>> stated_value("First, $X = 3 + 4 = 7$. Then $Y = X - 6 = 1$.", "X")
    7
    >>> stated_value("Let X be the number of roots.", "X") is None
    True
    >>> stated_value("$Y$ is $6$ less than $X$, so $Y = 1$.", "Y")
    1
    """
    from composition_rl.values import parse_answer_value

    last = None
    for m in _assignment_re(var).finditer(text):
        if _RELATION_AFTER.match(text, m.end()):
            continue  # "Y is 6 less than X" restates the link; it states no value of Y
        value = m.group(1).split("=")[-1].strip().rstrip(".").strip()
        parsed = parse_answer_value(value) if value else None
        if parsed is not None:
            last = parsed.value
    return last


def _same(a: Any, b: Any) -> bool:
    """Exact equality (:func:`composition_rl.values.exact_equal`); a missing value is never equal."""
    from composition_rl.values import exact_equal

    if a is None or b is None:
        return False
    try:
        return exact_equal(a, b)
    except (TypeError, ValueError, AttributeError):
        return False


def _link_values(link: Link) -> tuple[Any, Any]:
    """Exact (v1, v2) of a link, read from its LaTeX (the safe parser, no eval)."""
    import sympy

    from composition_rl.values import parse_answer_value
    from composition_rl.values.literals import mixed_value

    out = []
    for latex in (link.v1_latex, link.v2_literal):
        mixed = mixed_value(latex)  # a literal 6\\frac{1}{4} is the mixed number 25/4
        if mixed is not None:
            out.append(sympy.Rational(mixed.numerator, mixed.denominator))
            continue
        v = parse_answer_value(latex)
        out.append(v.value if v is not None else None)
    return out[0], out[1]


def link_errors(text: str, links: Sequence[Link]) -> tuple[list[bool | None], str]:
    """Per-link v1 recovery of one response, and where a wrong chain first broke.

    The chain is q1 -link1-> q2 -link2-> ... -> qK. Walking the links in order: a stated
    x that is not v1 is a ``q1`` error on the first link (a ``middle`` error on later ones,
    whose q was solved wrongly); a right x with a wrong y (= x - d, which must equal v2) is
    a ``linkage`` error; all links right means the ``last`` problem went wrong. A missing
    statement of the value that decides this makes the response ``undecidable``.

    Returns:
        (recovered per link: True / False / None when x is never stated, error kind). The
        error kind is meaningful only for a response whose final answer is wrong.
    """
    recovered: list[bool | None] = []
    kind: str | None = None
    for j, link in enumerate(links):
        v1, v2 = _link_values(link)
        x = stated_value(text, link.x)
        ok_x = None if x is None else _same(x, v1)
        recovered.append(ok_x)
        if kind is not None:
            continue
        if ok_x is None:
            kind = "undecidable"
        elif not ok_x:
            kind = "q1" if j == 0 else "middle"
        else:
            y = stated_value(text, link.y)
            if y is None:
                kind = "undecidable"
            elif not _same(y, v2):
                kind = "linkage"
    return recovered, kind or "last"


def composition_analysis(
    rows: Sequence[dict[str, Any]], problems: Mapping[str, Problem]
) -> dict[str, Any]:
    """v1-recovery rate and error split over the sample rows of composed problems.

    ``v1_recovery`` is over every (response, link) pair: the share where the response states
    the right v1 (a link whose x is never stated counts as not recovered; ``v1_stated`` gives
    how often it was stated at all). ``error_split`` counts wrong responses by
    :data:`ERROR_KINDS` and gives fractions of the decidable ones.
    """
    pairs = stated = recovered = 0
    errors: Counter[str] = Counter()
    wrong = 0
    for r in rows:
        p = problems[r["id"]]
        if not p.links:
            continue
        for resp in r["responses"]:
            per_link, kind = link_errors(resp["text"], p.links)
            pairs += len(per_link)
            stated += sum(1 for v in per_link if v is not None)
            recovered += sum(1 for v in per_link if v)
            if resp["score"] != 1.0:
                wrong += 1
                errors[kind] += 1
    decidable = wrong - errors["undecidable"]
    return {
        "v1_recovery": recovered / pairs if pairs else None,
        "v1_stated": stated / pairs if pairs else None,
        "links_scored": pairs,
        "wrong_responses": wrong,
        "error_counts": {k: errors.get(k, 0) for k in ERROR_KINDS},
        "error_split": {
            k: (errors.get(k, 0) / decidable if decidable else None)
            for k in ERROR_KINDS
            if k != "undecidable"
        },
    }


# ---------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------


def _pct(v: Any) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    return f"{100 * v:.1f}"


def render_markdown(results: Mapping[str, Any]) -> str:
    """Tables of results.json: benchmarks x (avg@n, pass@k), and the compositional block."""
    n = results["n"]
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64) if k <= n]
    if n not in ks:
        ks.append(n)
    head = ["benchmark", "problems", f"avg@{n}", *(f"pass@{k}" for k in ks), "solve_all", "solve_none"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, m in results["benchmarks"].items():
        cells = [name, str(m["problems"]), _pct(m[f"avg@{n}"])]
        cells += [_pct(m["pass@k"].get(str(k))) for k in ks]
        cells += [_pct(m["solve_all"]), _pct(m["solve_none"])]
        lines.append("| " + " | ".join(cells) + " |")
    o = results["overall"]
    cells = ["**average**", "", _pct(o[f"avg@{n}"]), *(_pct(o["pass@k"].get(str(k))) for k in ks), "", ""]
    lines.append("| " + " | ".join(cells) + " |")
    text = f"# Evaluation (n = {n}, values in %)\n\n" + "\n".join(lines) + "\n"
    comp = results.get("compositional")
    if comp:
        head = ["benchmark", "depth", "problems", f"avg@{n}", "solve_all", "solve_none", "v1 recovery",
                "q1 err", "linkage err", "middle err", "last err", "undecidable"]
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for name, by_depth in comp.items():
            for depth, m in by_depth.items():
                split = m.get("error_split", {})
                counts = m.get("error_counts", {})
                rows.append(
                    "| "
                    + " | ".join(
                        [name, depth, str(m["problems"]), _pct(m[f"avg@{n}"]), _pct(m["solve_all"]),
                         _pct(m["solve_none"]), _pct(m.get("v1_recovery")),
                         *(_pct(split.get(k)) for k in ("q1", "linkage", "middle", "last")),
                         str(counts.get("undecidable", "-"))]
                    )
                    + " |"
                )
        text += (
            "\n## Compositional analyses (Composition-RL, Section 5.2)\n\n"
            "Error split: share of the wrong responses whose first broken step is decidable.\n\n"
            + "\n".join(rows)
            + "\n"
        )
    return text


# --- reading an eval folder back --------------------------------------------------------------


def eval_sample_files(folder: str | Path) -> dict[str, Path]:
    """``{set name: its sample log}`` of a ``crl eval`` folder (``samples/<name>.jsonl``; a
    compositional set is named ``<benchmark>.depth<K>``), by name; empty without samples.

    >>> eval_sample_files("no/such/folder")
    {}
    """
    samples = Path(folder) / SAMPLES_DIR
    return {p.stem: p for p in sorted(samples.glob("*.jsonl"))} if samples.is_dir() else {}


def read_eval_samples(folder: str | Path, name: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """``{set name: its sample rows}`` of a ``crl eval`` folder (only set ``name`` when given;
    a KeyError names the sets there when it is missing). A row is one problem: ``id``, ``n``,
    ``correct`` and its ``responses``, each with ``outcome`` and ``finish_reason``.

    >>> read_eval_samples("no/such/folder")
    {}
    """
    files = eval_sample_files(folder)
    if name is not None:
        if name not in files:
            raise KeyError(f"{folder} has no samples of {name!r} (it has: {', '.join(files) or 'none'})")
        files = {name: files[name]}
    return {k: list(read_jsonl(p)) for k, p in files.items()}


# --- the crl eval job ---------------------------------------------------------------------------


def parse_depths(spec: str) -> list[int]:
    """``--compositional`` depths such as ``2,3``, sorted, each >= 2 (ValueError otherwise).

    >>> parse_depths("3,2,3")
    [2, 3]
    """
    try:
        depths = sorted({int(x) for x in spec.split(",") if x.strip()})
    except ValueError:
        raise ValueError(f"--compositional {spec!r}: give depths like 2,3") from None
    if not depths or min(depths) < 2:
        raise ValueError(f"--compositional {spec!r}: depths must be >= 2")
    return depths


def benchmark_names(paths: Sequence[str]) -> list[str]:
    """Benchmark names from file stems; a repeated stem gets its parent folder in front.

    >>> benchmark_names(["a/math500.json", "b/aime.json", "c/aime.json"])
    ['math500', 'b-aime', 'c-aime']
    """
    stems = [Path(p).stem for p in paths]
    return [
        f"{Path(p).parent.name}-{s}" if stems.count(s) > 1 else s for p, s in zip(paths, stems)
    ]


def build_compositional(problems: Sequence[Problem], depths: Sequence[int], pool_size: int = 20,
                        max_candidates: int = 200, seed: int = 0) -> dict[int, list[Problem]]:
    """{depth: composed problems} built from a benchmark with the composition engine (depth 1
    is the benchmark itself); each depth's yield is logged."""
    from composition_rl.jobs.compose.pipeline import ComposeConfig, compose_problems

    out: dict[int, list[Problem]] = {1: list(problems)}
    for d in depths:
        cfg = ComposeConfig(depth=d, pool_size=pool_size, max_candidates=max_candidates, seed=seed)
        res = compose_problems(problems, cfg)
        log.info(
            f"  depth {d}: {len(res.accepted)} composed prompts from {res.candidates} candidates"
            + (f" (rejected: {res.by_reason()})" if res.rejected else "")
        )
        out[d] = res.accepted
    return out


@dataclass
class EvalRun:
    """What one ``crl eval`` run did: the results dict and the rows set aside before sampling."""

    results: dict[str, Any]
    input_rejects: list[dict[str, Any]]


def evaluate_from_args(args: argparse.Namespace, config: EvalConfig, verify_config, fallbacks) -> EvalRun:
    """The ``crl eval`` job with ``--out`` held: read each ``--benchmark``, set aside the
    prompts too long for the model, build the ``--compositional`` sets, evaluate, and write
    ``input_rejects.jsonl`` beside the results.

    Raises:
        ValueError: an unusable benchmark or flag, or a folder made with other settings.
        RolloutError: generation failed (finished prompts are saved; a rerun resumes).
    """
    from composition_rl.grading import shared_verifier
    from composition_rl.io.files import atomic_write_jsonl
    from composition_rl.io.identity import run_identity
    from composition_rl.jobs.profile import backend_from_args, fit_to_context, load_input

    depths = parse_depths(args.compositional) if args.compositional else []
    input_rejects: list = []
    benchmarks = {}
    names = benchmark_names(args.benchmark)
    for name, path in zip(names, args.benchmark):
        rejects: list = []
        benchmarks[name] = load_input(path, args, rejects)
        input_rejects += [{"benchmark": name, **r} for r in rejects]
    backend = backend_from_args(args)
    try:
        # the backend says what fits its context (a GGUF's is known only once it is loaded)
        for name, path in zip(names, args.benchmark):
            benchmarks[name], too_long = fit_to_context(benchmarks[name], args, where=path, backend=backend)
            input_rejects += [{"benchmark": name, **r} for r in too_long]
            if not benchmarks[name]:
                raise ValueError(f"{path}: no prompt fits the context of {args.model} ({len(too_long)} set aside)")
        compositional = None
        if depths:
            compositional = {}
            for name, probs in benchmarks.items():
                log.info(f"composing {name}:")
                compositional[name] = build_compositional(probs, depths, args.comp_pool_size, args.comp_max,
                                                          args.comp_seed)
        for name in compositional or {}:
            for d in depths:
                compositional[name][d], too_long = fit_to_context(compositional[name][d], args,
                                                                        where=f"{name} depth {d}", backend=backend)
                input_rejects += [{"benchmark": name, "depth": d, **r} for r in too_long]
        # The process-wide pool: one per process, closed at exit (see verify.shared_verifier).
        verifier = shared_verifier(verify_config)
        results = evaluate_benchmarks(
            benchmarks,
            backend,
            verifier,
            args.out,
            config,
            compositional=compositional,
            progress=not args.no_progress,
            extra_run_info={"benchmarks": list(args.benchmark)},
            identity=run_identity(model=args.model, backend=backend.name,
                                  inputs={f"benchmark {n}": p for n, p in zip(benchmarks, args.benchmark)},
                                  command="eval", fallbacks=list(fallbacks)),
        )
    finally:
        backend.close()
    # every benchmark row is accounted for: evaluated, or here with its reason
    atomic_write_jsonl(Path(args.out) / "input_rejects.jsonl", input_rejects)
    return EvalRun(results, input_rejects)

