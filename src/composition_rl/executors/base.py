"""Where sampling and grading run: the executor seam of ``crl profile`` and ``crl eval``.

Profiling and evaluation turn prompts into scored samples the same way everywhere: put
each question into the template, sample ``n`` completions, grade each one against the gold
answers with the bounded verifier. An executor decides where that happens:

- ``local`` (:mod:`composition_rl.executors.local`): one backend in this process and the
  verifier's process pool (the only path before executors existed, unchanged);
- ``ray`` (:mod:`composition_rl.executors.ray_data`): a Ray Dataset of the prompt chunks
  through backend replicas and a grading stage, on a local Ray or a cluster.

The caller cuts its prompts into chunks; every executor yields one list of
:class:`Scored` per chunk, in the chunks' order, so the caller appends rows to its log the
same way whatever ran them. Logs, resume and outputs stay with the caller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from composition_rl.records import Problem
from composition_rl.registry import Registry
from composition_rl.rollout.base import (
    Completion,
    RolloutBackend,
    SamplingConfig,
    build_backend,
    render_prompt,
)

__all__ = [
    "EXECUTORS",
    "BackendSpec",
    "Executor",
    "ExecutorConfig",
    "SampleJob",
    "Scored",
    "build_executor",
    "check_completions",
    "chunks_of",
]


@dataclass(frozen=True)
class BackendSpec:
    """A rollout backend by registry name and constructor arguments.

    It is what an executor places: the local one builds it here, the Ray one ships the
    spec to each replica, which builds its own copy.

    >>> BackendSpec("openai", {"base_url": ["http://h:8000/v1"], "model": "m"}).name
    'openai'
    """

    name: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def build(self) -> RolloutBackend:
        """A fresh backend from the registry, built in this process."""
        return build_backend(self.name, **dict(self.kwargs))


@dataclass(frozen=True)
class SampleJob:
    """What to sample for every prompt.

    Args:
        template: the template text (``load_template``'s result) holding ``{question}``.
        n: completions per prompt.
        sampling: decoding settings.
    """

    template: str
    n: int
    sampling: SamplingConfig

    def prompts(self, problems: Sequence[Problem]) -> list[str]:
        """The rendered prompt of each problem, in order."""
        return [render_prompt(self.template, p.question) for p in problems]


@dataclass(frozen=True)
class Scored:
    """One problem's ``n`` completions and their verdicts (``VerifyResult``), in sample order."""

    problem: Problem
    completions: tuple[Completion, ...]
    results: tuple[Any, ...]


def chunks_of(problems: Sequence[Problem], size: int) -> list[list[Problem]]:
    """``problems`` cut into consecutive chunks of ``size`` (the last may be shorter).

    >>> [len(c) for c in chunks_of(list("abcde"), 2)]
    [2, 2, 1]
    """
    return [list(problems[s : s + size]) for s in range(0, len(problems), size)]


def check_completions(backend: str, prompts: int, completions: Sequence[Sequence[Completion]], n: int) -> None:
    """Refuse a backend answer that is not ``n`` completions for each of ``prompts`` prompts."""
    if len(completions) != prompts or any(len(c) != n for c in completions):
        raise RuntimeError(
            f"backend {backend!r} returned {[len(c) for c in completions]} completions for "
            f"{prompts} prompts x n={n}"
        )


@runtime_checkable
class Executor(Protocol):
    """What every executor provides.

    ``name`` is the backend's name (run.json records it); ``run`` yields, for each chunk in
    ``chunks`` and in their order, one :class:`Scored` per problem of the chunk.
    """

    name: str

    def run(self, chunks: Sequence[Sequence[Problem]], job: SampleJob, verifier: Any) -> Iterator[list[Scored]]:
        """Sample ``job`` for every problem and grade with ``verifier``: one list of :class:`Scored`
        per chunk, yielded in the order of ``chunks``."""
        ...

    def close(self) -> None:
        """Release what the executor started (backend, cluster); a backend it was handed stays
        open."""
        ...


#: name -> "module:Class" (imported when chosen, so Ray is imported only for ``ray``).
EXECUTORS: Registry[str] = Registry("executor")
EXECUTORS.register("local")("composition_rl.executors.local:LocalExecutor")
EXECUTORS.register("ray")("composition_rl.executors.ray_data:RayExecutor")


@dataclass(frozen=True)
class ExecutorConfig:
    """Where ``crl profile`` / ``crl eval`` run (the flags are generated from these fields).

    Fields other than ``executor`` belong to one executor (each class lists its own in
    ``options``); setting one that the chosen executor does not take is refused.
    """

    executor: str = field(default="local", metadata={
        "help": "where sampling and grading run: local (this process) or ray (a Ray Dataset "
                "through backend replicas and a grading stage; needs pip install -e '.[ray]')",
        "choices": EXECUTORS.names})
    ray_address: str | None = field(default=None, metadata={
        "help": "ray: the cluster to join: auto (the cluster this node belongs to), HOST:PORT or "
                "ray://HOST:PORT; default: start a local Ray with this machine's cores",
        "type": str, "metavar": "ADDRESS"})
    replicas: int | None = field(default=None, metadata={
        "help": "ray: backend replicas (default: one per --tensor-parallel-size GPUs for vllm, "
                "else as many as the free CPUs allow at --replica-cpus each)",
        "type": int, "metavar": "N"})
    replica_cpus: float = field(default=1.0, metadata={
        "help": "ray: CPUs each backend replica reserves (hf: its torch threads)"})
    graders: int = field(default=1, metadata={
        "help": "ray: grading tasks at a time (each grades a batch with its worker's verifier pool)"})
    grader_cpus: float = field(default=1.0, metadata={
        "help": "ray: CPUs each grading task reserves, and the verifier processes it runs"})

    def __post_init__(self) -> None:
        bad = []
        if self.replicas is not None and self.replicas < 1:
            bad.append(f"replicas={self.replicas} (must be >= 1)")
        if self.graders < 1:
            bad.append(f"graders={self.graders} (must be >= 1)")
        for name in ("replica_cpus", "grader_cpus"):
            if not getattr(self, name) > 0:
                bad.append(f"{name}={getattr(self, name)} (must be > 0)")
        a = self.ray_address
        if a is not None and not (a == "auto" or a.startswith("ray://") or a.rpartition(":")[2].isdigit()):
            bad.append(f"ray_address={a!r} (auto, HOST:PORT or ray://HOST:PORT)")
        if bad:
            raise ValueError("invalid executor config: " + "; ".join(bad))

    def changed(self) -> list[str]:
        """The fields (other than ``executor``) set to something other than their default."""
        return [f.name for f in dataclasses.fields(self)
                if f.name != "executor" and getattr(self, f.name) != f.default]


def build_executor(
    config: ExecutorConfig, spec: BackendSpec, backend: RolloutBackend | None = None
) -> Executor:
    """The executor ``config`` names, placing the backend ``spec`` describes.

    Args:
        config: which executor and its options.
        spec: the backend, by name and arguments.
        backend: an instance of ``spec`` already built in this process; an in-process
            executor uses it instead of building a second one (``crl grow`` shares its policy
            with its students). Executors that place replicas elsewhere ignore it.

    Raises:
        ValueError: an option the chosen executor does not take.
        ImportError: the executor's engine is not installed (the message says how to fix it).

    >>> build_executor(ExecutorConfig(replicas=2), BackendSpec("hf", {"model": "m"}))
    Traceback (most recent call last):
    ...
    ValueError: --replicas is not an option of the local executor (options of ray: --ray-address, --replicas, --replica-cpus, --graders, --grader-cpus)
    """
    cls = EXECUTORS.load(config.executor)
    stray = [f for f in config.changed() if f not in cls.options]
    if stray:
        flags = ", ".join("--" + f.replace("_", "-") for f in stray)
        others = "; ".join(
            f"options of {name}: {', '.join('--' + o.replace('_', '-') for o in EXECUTORS.load(name).options)}"
            for name in EXECUTORS.names() if name != config.executor and EXECUTORS.load(name).options
        )
        raise ValueError(f"{flags} {'is' if len(stray) == 1 else 'are'} not an option of the "
                         f"{config.executor} executor ({others})")
    return cls(spec, config, backend=backend)
