"""The verbs of the top-level package: compose, verify, score, profile, probe.

Each is a thin entry to the library (the same code ``crl`` runs), in memory where the work
allows it. ``import composition_rl`` loads this module only when one of them is first used.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from composition_rl.grading import VerifyConfig, VerifyResult
    from composition_rl.jobs.compose.pipeline import ComposeConfig, ComposeResult
    from composition_rl.jobs.probe import ProbeConfig, ProbeResult
    from composition_rl.jobs.profile import ProfileConfig
    from composition_rl.jobs.refresh import RefreshConfig, RefreshResult
    from composition_rl.records import Problem
    from composition_rl.spc.llm.config import LLMComposeConfig

__all__ = ["compose", "probe", "profile", "refresh", "score", "verify"]


def compose(
    problems: Sequence[Problem],
    config: ComposeConfig | None = None,
    *,
    llm: LLMComposeConfig | None = None,
    backend: Any = None,
    first_pool: Sequence[Problem] | None = None,
    **options: Any,
) -> ComposeResult:
    """Compose problems into harder ones, in memory, with any engine (Section 3 of the paper).

    Args:
        problems: the problems to chain (:class:`~composition_rl.Problem`).
        config: a :class:`~composition_rl.ComposeConfig`; ``options`` set its fields instead
            (or on top of it): ``depth``, ``engine`` (``symbolic``, ``llm`` or ``auto``),
            ``max_candidates``, ``seed`` ...
        llm: for the ``llm`` and ``auto`` engines, the model behind any OpenAI-compatible
            endpoint (:class:`~composition_rl.LLMComposeConfig`).
        backend: a ready chat backend instead of ``llm`` (the caller closes it).
        first_pool: other problems to draw q1 from (cross-domain composition, Section 4.4).

    Returns:
        A :class:`~composition_rl.jobs.compose.ComposeResult`: ``accepted`` (Problems, each
        checked against its parents), ``rejected`` (one row per rejected candidate, with its
        stage and reason) and ``candidates``.

    Example:
        >>> import composition_rl as crl
        >>> q1 = crl.Problem.new("What is $3+4$?", "7")
        >>> q2 = crl.Problem.new("Compute $2 + 5$.", "7")
        >>> crl.compose([q1, q2], depth=2).accepted[0].answer
        '7'
    """
    from composition_rl.jobs.compose.pipeline import ComposeConfig, compose_problems
    from composition_rl.jobs.compose.run import is_resumable

    cfg = config or ComposeConfig()
    if options:
        known = [f.name for f in dataclasses.fields(ComposeConfig)]
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise TypeError(f"compose() got unknown options {unknown}; the ComposeConfig fields are {known}")
        cfg = dataclasses.replace(cfg, **options)
    if is_resumable(cfg.engine):
        from composition_rl.jobs.compose.with_model import compose_in_memory

        return compose_in_memory(problems, cfg, llm, backend, first_pool)
    if llm is not None or backend is not None:
        raise ValueError(f"engine={cfg.engine!r} uses no model: drop llm/backend, or pick engine='llm' or 'auto'")
    return compose_problems(problems, cfg, first_pool)


def verify(completion: Any, answers: Any, config: VerifyConfig | None = None) -> VerifyResult:
    """Grade one completion against every accepted answer, with the bounded Math-Verify.

    Args:
        completion: the model's text, or a conversation (its last assistant message is graded).
        answers: a :class:`~composition_rl.Problem`, one answer (string or number) or a list
            of accepted forms.
        config: verifier settings (time bound, workers); one verifier per settings is shared
            by the process.

    Returns:
        A :class:`~composition_rl.grading.VerifyResult`: ``correct``, ``score`` (1.0 or 0.0),
        ``outcome`` (correct, incorrect, no_answer, timeout, error) and ``extracted``.

    Raises:
        ValueError: ``answers`` holds no answer.

    Example:
        >>> import composition_rl as crl
        >>> crl.verify(r"... so the ratio is $\\boxed{\\dfrac12}$.", "0.5").correct
        True
    """
    from composition_rl.grading import shared_verifier
    from composition_rl.grading.reward import score_completions

    (r,) = score_completions([completion], [answers], shared_verifier(config))
    if r is None:
        raise ValueError(f"no accepted answer to grade against: {answers!r}")
    return r


def score(completions: Sequence[Any], answers: Sequence[Any], config: VerifyConfig | None = None) -> list[float | None]:
    """The reward of each completion: 1.0 when its final answer equals any accepted answer.

    This is the one reward function behind ``crl train``, :func:`~composition_rl.make_reward_fn`
    (TRL) and :func:`~composition_rl.compute_score` (verl), so the three agree.

    Args:
        completions: texts or conversations.
        answers: per completion, its record's answers (a Problem, one answer or a list of forms).
        config: verifier settings.

    Returns:
        One float per completion; ``None`` where the record has no answer.

    Raises:
        ValueError: the two sequences differ in length.

    Example:
        >>> import composition_rl as crl
        >>> crl.score([r"\\boxed{6630}", [{"role": "assistant", "content": r"\\boxed{6000}"}]],
        ...           [["6630.65", "6630"], "6630.65"])
        [1.0, 0.0]
    """
    from composition_rl.grading import shared_verifier
    from composition_rl.grading.reward import score_completions

    return [None if r is None else r.score for r in score_completions(completions, answers, shared_verifier(config))]


def profile(
    problems: Sequence[Problem],
    out_dir: str | os.PathLike,
    backend: Any = "auto",
    *,
    config: ProfileConfig | None = None,
    verify_config: VerifyConfig | None = None,
    progress: bool = False,
    **backend_options: Any,
) -> dict[str, Any]:
    """Sample ``n`` answers per problem from a policy, grade them, and band the problems.

    Each problem gets its pass rate and band: ``solve_all``, ``solve_none`` or ``goldilocks``
    (in between: the only prompts with a GRPO learning signal, Section 2). The rows go to
    ``out_dir/profile.jsonl`` as they finish, so a rerun resumes; a rerun with other settings
    is refused.

    Args:
        problems: the prompts to profile.
        out_dir: the run folder (``profile.jsonl``, ``summary.json``).
        backend: ``auto`` (as :func:`probe`: ``openai`` with ``base_url``, llama.cpp for a GGUF
            when llama-cpp-python is installed, else ``hf``), a rollout backend name (``openai``:
            any OpenAI-compatible endpoint; ``hf``: a local transformers model; ``llama``;
            ``vllm``) built with ``backend_options`` (``base_url``, ``model`` ...) and closed
            afterwards, or a ready backend (the caller closes it).
        config: :class:`~composition_rl.ProfileConfig` (``n``, sampling, template). The
            decoding settings may also be given as keywords (``max_tokens=512``,
            ``temperature=0``: the fields of :class:`~composition_rl.SamplingConfig`).
        verify_config: verifier settings.
        progress: show a progress bar.

    Returns:
        The summary: ``solve_all``, ``solve_none``, ``goldilocks`` fractions, ``n`` and counts.

    Raises:
        RunBusy: another run holds ``out_dir``.
        RunClash: ``out_dir`` holds another command's run or files crl did not make.
        RunMismatch: ``out_dir`` holds a profile made with other settings.

    Example:
        Not run here, as it needs a served model (docs/api.md shows it against a stand-in
        server, which tests/test_docs_commands.py runs):

        >>> import composition_rl as crl
        >>> crl.profile(problems, "runs/profile", base_url="http://localhost:8000/v1",  # doctest: +SKIP
        ...             model="Qwen/Qwen3-4B", config=crl.ProfileConfig(n=8))["goldilocks"]
        0.4
    """
    from composition_rl.grading import shared_verifier
    from composition_rl.io.identity import run_identity
    from composition_rl.io.runs import run_folder
    from composition_rl.jobs.profile import ProfileConfig, profile_problems
    from composition_rl.rollout.base import build_backend, resolve_backend

    config = _with_sampling(config, ProfileConfig, backend_options)

    def build() -> Any:
        return build_backend(resolve_backend(backend, backend_options.get("model"), backend_options.get("base_url")),
                             **backend_options)

    # the folder's lock and the foreign-folder checks, as `crl profile` takes them
    with run_folder(out_dir, "profile", flag="out_dir", work=("profile.jsonl",)), \
            _runner(backend, build, sorted(backend_options)) as (runner, name):
        # the run folder records what made it: a rerun with another model is refused, not mixed in
        model = backend_options.get("model", getattr(runner, "model", None))
        ident = run_identity(model=str(model) if model is not None else None, backend=name)
        return profile_problems(problems, runner, shared_verifier(verify_config), out_dir, config=config,
                                progress=progress, identity=ident)


def _with_sampling(config: Any, cls: Any, options: dict[str, Any]) -> Any:
    """``config`` with the decoding settings given as keywords (taken out of ``options``,
    where a backend would ignore them); refused when ``config`` sets its own too."""
    import dataclasses

    from composition_rl.rollout.base import SamplingConfig

    fields = {f.name for f in dataclasses.fields(SamplingConfig)}
    given = {k: options.pop(k) for k in sorted(fields & set(options))}
    if not given:
        return config
    if config is not None and config.sampling != cls().sampling:
        raise TypeError(f"{sorted(given)} given as keywords and config.sampling set too: give the decoding "
                        "settings in one place")
    config = config or cls()
    return dataclasses.replace(config, sampling=dataclasses.replace(config.sampling, **given))


@contextmanager
def _runner(backend: Any, build: Any, given: Sequence[str]):
    """``(runner, its name)`` for a verb's ``backend``: a name is built by ``build()`` and
    closed afterwards; a ready backend is the caller's, and options ``given`` with it are refused."""
    own = isinstance(backend, str)
    if not own and given:
        raise ValueError(f"backend options {list(given)} go with a backend name, not a ready backend")
    runner = build() if own else backend
    try:
        yield runner, getattr(runner, "name", None) or (backend if own else type(runner).__name__)
    finally:
        if own and hasattr(runner, "close"):
            runner.close()


# long because: 43 of its 81 lines are the docstring a public verb owes its users
def probe(
    records: Sequence[Problem],
    out_dir: str | os.PathLike,
    backend: Any = "auto",
    *,
    model: str | None = None,
    base_url: str | Sequence[str] | None = None,
    config: ProbeConfig | None = None,
    verify_config: VerifyConfig | None = None,
    progress: bool = False,
    **backend_options: Any,
) -> ProbeResult:
    """Reject the composed records a solver answers without their first problem (``guessable``).

    For each record the solver gets the later problem alone, its variable left as an unknown,
    ``k`` times; a record whose pass rate is at least ``tau`` is rejected. The solver's pass
    rates go to ``out_dir/profile.jsonl`` as they finish, so a rerun resumes (and a rerun with
    another ``tau`` only re-splits them); a rerun with another solver or ``k`` is refused.

    Args:
        records: composed records (:func:`compose`'s ``accepted``, or a ``composed.jsonl``
            read with :func:`load_problems`); one without a readable relation is kept unprobed.
        out_dir: the probe's folder (``profile.jsonl``, ``run.json``, ``probe_summary.json``).
        backend: ``auto`` (``openai`` with ``base_url``, llama.cpp for a GGUF when
            llama-cpp-python is installed, else ``hf``), a rollout backend name built with
            ``model``, ``base_url`` and ``backend_options`` (``concurrency``, ``batch_size``) and
            closed afterwards, or a ready backend (the caller closes it).
        model: the solver (the policy being trained, or a stronger model): a served model's
            name with ``base_url``, a GGUF file or name (``qwen2.5-coder-0.5b-instruct-awq-q4_k_m``), a local model folder.
        base_url: the solver's OpenAI-compatible endpoint, or several to balance over.
        config: :class:`~composition_rl.ProbeConfig` (``k``, ``tau``, sampling, template); the
            decoding settings may also be given as keywords (``max_tokens=512``).
        verify_config: verifier settings.
        progress: show a progress bar.

    Returns:
        A :class:`~composition_rl.jobs.probe.ProbeResult`: ``kept`` (Problems), ``rejected`` (one
        row per guessable record, with its pass rate), ``unprobed`` (ids) and ``summary``;
        ``len(kept) + len(rejected)`` is ``len(records)``.

    Raises:
        RunBusy: another run holds ``out_dir``.
        RunClash: ``out_dir`` holds another command's run or files crl did not make.
        RunMismatch: ``out_dir`` holds a probe made with another solver or ``k``.

    Example:
        Not run here, as it needs a served model (docs/api.md shows it against a stand-in
        server, which tests/test_docs_commands.py runs):

        >>> import composition_rl as crl
        >>> res = crl.probe(composed, "runs/probe", base_url="http://localhost:8000/v1",  # doctest: +SKIP
        ...                 model="Qwen/Qwen3-4B", config=crl.ProbeConfig(k=4, tau=0.5))
        >>> res.summary["rejected_guessable"], len(res.kept)  # doctest: +SKIP
        (3, 97)
    """
    from composition_rl.grading import shared_verifier
    from composition_rl.io.identity import run_identity
    from composition_rl.io.runs import run_folder
    from composition_rl.jobs.probe import ProbeConfig, build_solver, probe_records

    config = _with_sampling(config, ProbeConfig, backend_options)

    def build() -> Any:
        if model is None:
            raise ValueError("probe() needs model=: the solver (a served model's name with base_url, a GGUF, "
                             "a local model folder)")
        unknown = sorted(set(backend_options) - {"concurrency", "batch_size"})
        if unknown:
            raise TypeError(f"probe() got unknown backend options {unknown}; they are ['batch_size', 'concurrency']")
        urls = (base_url,) if isinstance(base_url, str) else tuple(base_url or ())
        return build_solver(model, urls, backend, **backend_options)

    given = sorted([*backend_options, *(["model"] if model is not None else []),
                    *(["base_url"] if base_url is not None else [])])
    with run_folder(out_dir, "probe", flag="out_dir", work=("profile.jsonl",)), \
            _runner(backend, build, given) as (runner, name):
        solver = model if isinstance(backend, str) else getattr(runner, "model", None)
        # the folder records its solver (as crl probe and crl compose --probe-model do): another is refused
        ident = run_identity(model=str(solver) if solver is not None else None, backend=name, command="probe")
        return probe_records(records, runner, shared_verifier(verify_config), out_dir, config, progress=progress,
                             identity=ident)


def refresh(
    problems: Sequence[Problem],
    out_dir: str | os.PathLike,
    backend: Any = "openai",
    *,
    config: RefreshConfig | None = None,
    benchmarks: Sequence[str | os.PathLike] = (),
    verify_config: VerifyConfig | None = None,
    exports: Sequence[str] = (),
    progress: bool = False,
    teacher: Any = None,
    **backend_options: Any,
) -> RefreshResult:
    """Make a stale prompt set informative again for a policy, in one resumable run folder.

    Profiles ``problems`` at ``n``, confirms the n/n ones with ``confirm`` more samples,
    composes the confirmed solve_all prompts at depth 2 (depth 3 where depth 2 stays
    solve_all), keeps the compositions in the target band, sets aside whatever overlaps a
    benchmark, writes ``refreshed.jsonl`` with each prompt's provenance, and re-profiles the
    refreshed set with another seed for the report (``report.md``, ``report.json``).

    Args:
        problems: the stale set.
        out_dir: the run folder; a rerun resumes it, a rerun with other settings is refused.
        backend: a rollout backend name built with ``backend_options`` (``model``,
            ``base_url`` ...) and closed afterwards, or a ready backend (the caller closes it).
        config: :class:`~composition_rl.RefreshConfig` (``confirm``, ``band``, ``max_depth``,
            ``per_prompt``; ``profile`` holds ``n`` and the sampling settings).
        benchmarks: files (any format :func:`load_problems` reads) to decontaminate against.
        verify_config: verifier settings.
        exports: trainer datasets to write (``"verl"``, ``"trl"``).
        progress: progress bars.
        teacher: with ``RefreshConfig(grow=True)``, the MagicBeanStalk teacher that grows the
            solve_none prompts (``composition_rl.jobs.grow.build_teacher("program")`` or ``"openai"``).

    Returns:
        A :class:`~composition_rl.jobs.refresh.RefreshResult`: ``refreshed`` (Problems whose
        ``metadata["refresh"]`` holds the provenance), ``set_aside`` (rows with a reason)
        and ``report``.

    Example:
        Not run here, as it needs a served model (docs/api.md shows it against a stand-in
        server, which tests/test_docs_commands.py runs):

        >>> import composition_rl as crl
        >>> res = crl.refresh(problems, "runs/refresh", "llama", model="qwen2.5-coder-0.5b-instruct-awq-q4_k_m",  # doctest: +SKIP
        ...                   benchmarks=["math500.parquet"])
        >>> res.report["informative_share"]["refreshed_reprofiled"]["share"]  # doctest: +SKIP
        0.61
    """
    from composition_rl.grading import shared_verifier
    from composition_rl.io.identity import run_identity
    from composition_rl.io.readers import load_problems
    from composition_rl.jobs.refresh import refresh_problems

    marks = [(str(b), load_problems(str(b)).problems) for b in benchmarks]
    with _runner(backend, lambda: _build_rollout(backend, backend_options), sorted(backend_options)) as (runner, name):
        model = backend_options.get("model", getattr(runner, "model", None))
        # the folder records what made it: another model or other benchmark files are refused
        ident = run_identity(model=str(model) if model is not None else None, backend=name,
                             inputs={f"benchmark {b}": b for b, _ in marks})
        return refresh_problems(problems, runner, shared_verifier(verify_config), out_dir, config,
                                benchmarks=marks, identity=ident, progress=progress, exports=exports,
                                teacher=teacher)


def _build_rollout(name: str, options: dict[str, Any]) -> Any:
    from composition_rl.rollout.base import build_backend

    return build_backend(name, **options)
