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

import argparse
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composition_rl.executors.base import Executor, SampleJob, chunks_of
from composition_rl.executors.local import as_executor
from composition_rl.io.files import JsonlLog, atomic_write_json, read_jsonl
from composition_rl.io.identity import RunMismatch, claim_run
from composition_rl.io.runs import RUN_FILE
from composition_rl.records import Problem
from composition_rl.rollout.base import (
    MAX_CHUNK,
    MAX_SAMPLES,
    PAPER_SAMPLING,
    RolloutBackend,
    SamplingConfig,
    load_template,
)
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

log = logging.getLogger(__name__)


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
        backend: a rollout backend (:mod:`composition_rl.rollout.base`), run in this
            process, or an executor (:func:`composition_rl.executors.build_executor`) that
            places backends and grading itself (``--executor ray``); the rows are the same.
        verifier: the project verifier (``score_batch([(response, gold), ...])``); an
            executor that grades elsewhere uses its settings (``verifier.config``).
        out_dir: output folder (created).
        config: run settings; default :class:`ProfileConfig`.
        progress: show a progress bar.
        extra_run_info: recorded in run.json on the first run, not compared (input paths).
        identity: what else decides the results (model, backend, input hashes:
            :func:`composition_rl.io.identity.run_identity`); recorded with the settings, and a
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


# --- the policy flags shared by crl profile, eval and refresh, and the profile job ---------


def add_backend_arguments(p: argparse.ArgumentParser) -> None:
    """Model, backend and decoding flags shared by ``crl profile``, ``crl eval`` and ``crl refresh``."""
    from composition_rl.flags import positive_int
    from composition_rl.rollout.base import ROLLOUT_BACKENDS

    g = p.add_argument_group("policy")
    g.add_argument("--model", required=True,
                   help="local model folder, a .gguf file or a bundled GGUF by name (scripts/real_llm_models.py list), "
                        "or the served model name with --base-url")
    g.add_argument(
        "--base-url",
        action="append",
        help="OpenAI-compatible endpoint (vLLM, SGLang); repeat to balance over several; "
        "the key is read from $OPENAI_API_KEY",
    )
    g.add_argument(
        "--backend",
        choices=["auto", *ROLLOUT_BACKENDS.names()],
        default="auto",
        help="auto: openai with --base-url, llama for a GGUF (a .gguf file or a bundled one by name) "
        "when llama-cpp-python is installed, else hf (local transformers)",
    )
    g.add_argument("--concurrency", type=int, default=16, help="parallel requests to an endpoint")
    g.add_argument("--device", help="hf backend: cpu, cuda, cuda:1 (default: cuda if available)")
    g.add_argument("--dtype", default="auto", help="hf and vllm backends: auto, float32, bfloat16, float16")
    g.add_argument(
        "--batch-size",
        type=int,
        help="most sequences decoded together: per generate call for hf (default 64), per decode "
        "step for llama (default 16)",
    )
    g.add_argument("--tensor-parallel-size", type=int, default=1, help="vllm backend: GPUs per model")
    g.add_argument("--gpu-memory-utilization", type=float, default=0.9,
                   help="vllm backend on a GPU: share of the GPU's memory vLLM may take (weights and KV cache)")
    g.add_argument("--kv-cache-gib", type=float,
                   help="vllm backend: KV cache size in GiB (on a CPU default 1, or $VLLM_CPU_KVCACHE_SPACE; "
                        "on a GPU it replaces --gpu-memory-utilization's share)")
    g.add_argument(
        "--no-chat-template",
        action="store_true",
        help="feed the prompt raw even if the tokenizer has a chat template (base models)",
    )
    s = p.add_argument_group("decoding (defaults: the paper preset)")
    s.add_argument("-n", type=int, default=8, help="samples per prompt (1 to 1024)")
    from composition_rl.flags import add_flags

    add_flags(s, SamplingConfig)  # --temperature, --top-p, --top-k, --max-tokens, --seed
    s.add_argument("--template", default="boxed", help="prompts/rollout_<NAME>.txt or a .txt path")
    s.add_argument(
        "--chunk",
        type=int,
        help="prompts per generate call and log flush (default: 32 locally, 4 x --concurrency "
        "for an endpoint, so slow requests overlap)",
    )
    from composition_rl.executors import ExecutorConfig

    add_flags(p.add_argument_group("executor (where sampling and grading run; see docs/scale.md)"), ExecutorConfig)
    i = p.add_argument_group("input")
    i.add_argument("--question-field", help="force the question field")
    i.add_argument("--answer-field", help="force the answer field")
    i.add_argument("--limit", type=positive_int, help="use only the first N problems of each file (N >= 1)")
    i.add_argument("--verify-timeout", type=float, default=5.0, help="seconds per answer check")
    from composition_rl.grading.verifier import FALLBACK_HELP

    i.add_argument("--fallback", action="append", help=FALLBACK_HELP)
    from composition_rl.progress import progress_help

    i.add_argument("--no-progress", action="store_true", help=progress_help())


def sampling_from_args(args: argparse.Namespace) -> SamplingConfig:
    """The :class:`SamplingConfig` of the decoding flags (ValueError naming a bad value)."""
    from composition_rl.flags import from_flags

    return from_flags(SamplingConfig, args)


def chunk_from_args(args: argparse.Namespace) -> int:
    """``--chunk``, or its default: 4 x ``--concurrency`` for an endpoint, else 32."""
    if args.chunk is not None:
        return args.chunk
    return 4 * args.concurrency if args.base_url else 32


def backend_from_args(args: argparse.Namespace) -> Executor:
    """The executor the flags ask for, holding (or placing) the rollout backend they ask for
    (ValueError, in one line, for flags that do not go together or a backend that cannot start)."""
    from composition_rl.rollout.base import resolve_backend

    # a GGUF with llama.cpp installed is decoded on its quantized weights, many sequences per
    # step; without llama-cpp-python the hf backend de-quantizes it (slower on a CPU)
    name = resolve_backend(args.backend, args.model, args.base_url)
    chat = False if args.no_chat_template else None
    if name == "openai":
        if not args.base_url:
            raise ValueError("--backend openai needs --base-url")
        kw: dict[str, Any] = {
            "base_url": args.base_url,
            "model": args.model,
            "concurrency": args.concurrency,
        }
    elif name == "hf":
        if args.base_url:
            raise ValueError("--base-url goes with --backend openai, not hf")
        from composition_rl.io.hf_model import is_local_model

        if not is_local_model(args.model):
            raise ValueError(f"--model {args.model!r} is not a local model folder or GGUF (use --base-url for an "
                             "endpoint)")
        kw = {
            "model": args.model,
            "device": args.device,
            "dtype": args.dtype,
            "max_batch_sequences": args.batch_size or 64,
            "chat_template": chat,
        }
    elif name == "llama":
        if args.base_url:
            raise ValueError("--base-url goes with --backend openai, not llama")
        kw = {"model": args.model, "n_parallel": args.batch_size or 16, "chat_template": chat}
    else:
        if args.base_url:
            raise ValueError(f"--base-url goes with --backend openai, not {name}")
        kw = {"model": args.model, "tensor_parallel_size": args.tensor_parallel_size, "chat_template": chat,
              "dtype": args.dtype, "gpu_memory_utilization": args.gpu_memory_utilization,
              "kv_cache_gib": args.kv_cache_gib}
    from composition_rl.executors import BackendSpec, ExecutorConfig, build_executor
    from composition_rl.flags import from_flags

    try:
        return build_executor(from_flags(ExecutorConfig, args), BackendSpec(name, kw))
    except (ImportError, ValueError) as e:
        raise ValueError(f"cannot start the {name} backend ({args.executor} executor): {e}") from None


def fit_to_context(problems, args: argparse.Namespace, model: str | None = None, where: str = "", backend=None):
    """``problems`` whose prompt fits the local model's context, and the rest as rejects
    (reason ``prompt_too_long``). A prompt that fills the context cannot be answered, so it
    is set aside by itself before sampling instead of being sampled to nothing.

    The built ``backend`` (or the local executor's) says it when it can (the hf and llama
    backends answer ``prompt_too_long(prompt)``: a GGUF's context is known only to them);
    without one, a model folder's tokenizer and config say it. An endpoint's context is not
    known here: its problems all pass. An unreadable tokenizer or template is a ValueError.
    """
    model = model or args.model
    if getattr(args, "base_url", None):
        return list(problems), []
    from composition_rl.executors.local import LocalExecutor
    from composition_rl.io.readers import set_aside
    from composition_rl.rollout.base import render_prompt

    local = backend.backend if isinstance(backend, LocalExecutor) else backend
    ask = getattr(local, "prompt_too_long", None)
    if callable(ask):
        reason, context = ask, getattr(local, "context", None)
    elif Path(model).is_dir():
        from composition_rl.chat.context import PromptFit

        try:
            fit = PromptFit.for_model(model, False if getattr(args, "no_chat_template", False) else None)
        except (OSError, ValueError) as e:
            raise ValueError(f"--model {model}: cannot read its tokenizer and config ({e})") from None
        reason, context = fit.reason, fit.context
    else:
        return list(problems), []
    try:
        template = load_template(args.template)
    except (OSError, ValueError) as e:
        raise ValueError(str(e)) from None
    kept, rejects = set_aside(problems, lambda p: reason(render_prompt(template, p.question)))
    if rejects:
        log.warning(f"{where or 'input'}: {len(rejects):,} of {len(problems):,} prompts are longer than the context "
                    f"of {model}" + (f" ({context:,} tokens)" if context else "")
                    + f": set aside (e.g. {rejects[0]['detail']})")
    return kept, rejects


def load_input(path: str, args: argparse.Namespace, rejects: list | None = None) -> list[Problem]:
    """Problems of one input file (rejected rows are logged and added to ``rejects``, not
    fatal; an unreadable file or one without a usable problem is a ValueError).

    Problem records (composed sets) are read back as they are, keeping their ids, links and
    parents, so ``--keep`` writes composed prompts that can be composed or analysed again.
    """
    from composition_rl.io.readers import InputError, ReaderConfig, load_problems

    # the reader keeps Problem records (composed sets) whole: ids, links, parents
    try:
        res = load_problems(path, ReaderConfig(question_field=args.question_field, answer_field=args.answer_field))
    except (InputError, OSError) as e:
        raise ValueError(str(e)) from None
    problems = res.problems
    if res.rejects:
        log.warning(res.rejected_note(path))
        if rejects is not None:
            rejects.extend(res.rejects)
    problems = problems[: args.limit] if args.limit else problems
    if not problems:
        raise ValueError(f"{path}: no usable problems")
    return problems


@dataclass
class ProfileRun:
    """What one ``crl profile`` run did: the profile summary, the input rows set aside (with
    their reasons) and, with ``--keep``, the problems kept and the rows dropped."""

    summary: dict[str, Any]
    input_rejects: list[dict[str, Any]]
    kept: list[Problem] | None = None
    dropped: list[dict[str, Any]] | None = None


def profile_from_args(args: argparse.Namespace, config: ProfileConfig, out: Path, verify_config, fallbacks,
                      keep_out: Path | None = None, keep_rejects: Path | None = None) -> ProfileRun:
    """The ``crl profile`` job with ``out`` held: read ``--input``, set aside the prompts too
    long for the model, profile the rest, write ``input_rejects.jsonl`` and, with ``--keep``,
    the problems in that band to ``keep_out`` (the others to ``keep_rejects``).

    Raises:
        ValueError: an unusable input or flag, or a run folder made with other settings.
        RolloutError: generation failed (finished prompts are saved; a rerun resumes).
    """
    from composition_rl.grading import shared_verifier
    from composition_rl.io.files import atomic_write_jsonl
    from composition_rl.io.identity import run_identity

    input_rejects: list = []
    problems = load_input(args.input, args, input_rejects)
    backend = backend_from_args(args)
    try:
        # the backend says what fits its context (a GGUF's is known only once it is loaded)
        problems, too_long = fit_to_context(problems, args, where=args.input, backend=backend)
        input_rejects += too_long
        if not problems:
            raise ValueError(f"{args.input}: no prompt fits the context of {args.model} ({len(too_long)} set aside)")
        # The process-wide pool: one per process, closed at exit (see verify.shared_verifier).
        verifier = shared_verifier(verify_config)
        summary = profile_problems(
            problems,
            backend,
            verifier,
            out,
            config,
            progress=not args.no_progress,
            extra_run_info={"input": str(args.input)},
            identity=run_identity(model=args.model, backend=backend.name, inputs={"input": args.input},
                                  command="profile", fallbacks=list(fallbacks)),
        )
    finally:
        backend.close()
    # every input row is accounted for: profiled, or here with its reason
    atomic_write_jsonl(out / "input_rejects.jsonl", input_rejects)
    run = ProfileRun(summary, input_rejects)
    if args.keep:
        run.kept, run.dropped = keep_from_profile(problems, out, args.keep)
        atomic_write_jsonl(keep_out, (p.to_dict() for p in run.kept))
        atomic_write_jsonl(keep_rejects, run.dropped)
    return run
