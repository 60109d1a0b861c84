"""The Ray executor: prompt chunks as a Ray Dataset, backend replicas, a grading stage.

The pipeline (Ray Data, streaming, order kept)::

    chunks of prompts  ->  generation: one row per sample  ->  grading (CPU)  ->  this process
    (one row a chunk)      (backend replicas)                  (verifier pools)   (rows in order)

- **Generation.** For ``hf`` and ``openai`` (and any registered rollout backend) each
  replica is a Ray actor holding one backend built from the :class:`BackendSpec`; a
  replica gets one whole chunk per ``generate`` call, the same chunks as the local
  executor, so a backend that seeds from its batch (``hf``) samples the same completions.
  ``openai`` replicas each balance over every ``--base-url`` given. For ``vllm`` the
  stage is Ray Data's LLM processor (``ray.data.llm``, vLLM engine replicas with
  ``--tensor-parallel-size`` GPUs each): each sample is its own request whose seed derives
  from the run's seed, the problem id and the sample index. That path needs
  ``ray[data,llm]`` (it brings vLLM) on GPU nodes and **has not been run on a GPU**; on
  vLLM's CPU build the engine reserves CPUs instead and starts, but on a 2-CPU Ray the
  pipeline did not get past it (docs/scale.md says where it stopped).
- **Grading** runs as a CPU stage of the same pipeline: Ray tasks (at most ``graders`` at a
  time), each grading a batch with the bounded verifier pool (:mod:`composition_rl.grading`)
  of its Ray worker, so GPU replicas never wait on grading.
- **Order and streaming.** ``preserve_order`` is on: this process receives the graded
  samples in input order and hands each chunk to the caller as soon as it is complete;
  the caller appends it to its log, so resume works as with the local executor.
- **Failures.** A replica that dies (kill -9, OOM) is restarted and its chunks retried by
  Ray, and so is a grading task whose worker dies; a chunk whose backend fails for good (``RolloutError``) stops the run
  with the chunks before it saved. Every wait has a deadline: replicas must start within
  :data:`START_TIMEOUT_S`.

Ray is imported only when this executor is built; without it the error gives the command
that installs it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Sequence
from typing import Any

from composition_rl.executors.base import (
    BackendSpec,
    ExecutorConfig,
    SampleJob,
    Scored,
    check_completions,
)
from composition_rl.records import Problem
from composition_rl.registry import Registry
from composition_rl.rollout.base import Completion, RolloutBackend, RolloutError, SamplingConfig

__all__ = ["RAY_INSTALL", "RayExecutor", "import_ray", "sample_seed"]

#: What fixes a missing Ray (the extra pins the tested version).
RAY_INSTALL = "pip install -e '.[ray]'  (from PyPI: pip install 'ray[data]==2.60.0')"
#: Replicas must have started within this many seconds (vLLM loads take minutes).
START_TIMEOUT_S = 900


def import_ray() -> Any:
    """``ray`` with Ray Data, or an ImportError that says how to install it."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as e:
        raise ImportError(f"the ray executor needs Ray Data: {RAY_INSTALL} [{e}]") from None
    return ray


def sample_seed(seed: int, problem_id: str, k: int) -> int:
    """The seed of sample ``k`` of a problem: the run's seed, the problem's id and ``k`` only,
    never the worker or the batch it ran in.

    >>> sample_seed(0, "abc", 1) == sample_seed(0, "abc", 1) != sample_seed(0, "abc", 2)
    True
    """
    digest = hashlib.sha256(f"{seed}:{problem_id}:{k}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1  # < 2**31: every engine takes it


def chunk_rows(chunks: Sequence[Sequence[Problem]], job: SampleJob) -> list[dict[str, Any]]:
    """The input Dataset's rows: one per chunk, its fields JSON text (exact through Arrow)."""
    return [
        {
            "chunk": c,
            "ids": json.dumps([p.id for p in chunk]),
            "prompts": json.dumps(job.prompts(chunk)),
            "golds": json.dumps([list(p.answers) for p in chunk]),
        }
        for c, chunk in enumerate(chunks)
    ]


def sample_row(chunk: int, i: int, k: int, completion: Completion, golds: list[str]) -> dict[str, Any]:
    """One generated sample as the grading stage receives it."""
    return {
        "chunk": int(chunk),
        "i": i,
        "k": k,
        "text": completion.text,
        "tokens": int(completion.tokens),
        "finish_reason": str(completion.finish_reason),
        "golds": json.dumps(golds),
    }


# ------------------------------------------------------------------------ generation stages


def _replica_class(spec: BackendSpec, job: SampleJob) -> type:
    """The actor class of a replica (a closure, so Ray ships the spec with the class)."""

    class BackendReplica:
        def __init__(self) -> None:
            self.backend: RolloutBackend = spec.build()

        def __call__(self, row: dict[str, Any]) -> Iterator[dict[str, Any]]:
            prompts = json.loads(row["prompts"])
            golds = json.loads(row["golds"])
            completions = self.backend.generate(prompts, job.n, job.sampling)
            check_completions(spec.name, len(prompts), completions, job.n)
            for i, comps in enumerate(completions):
                for k, c in enumerate(comps):
                    yield sample_row(row["chunk"], i, k, c, golds[i])

    return BackendReplica


def actor_pool_stage(ds: Any, spec: BackendSpec, job: SampleJob, replicas: int, config: ExecutorConfig) -> Any:
    """Our own backend in ``replicas`` actors, one chunk per ``generate`` call."""
    from ray.data import ActorPoolStrategy

    return ds.flat_map(_replica_class(spec, job), compute=ActorPoolStrategy(size=replicas),
                       num_cpus=config.replica_cpus)


def vllm_requests(row: dict[str, Any], n: int, sampling: SamplingConfig) -> list[dict[str, Any]]:
    """A chunk row as ``n`` one-sample vLLM requests per prompt, each with its own seed.

    Ray Data's vLLM stage keeps only the first output of a request, so ``n`` samples are
    ``n`` requests (vLLM's prefix cache shares their prompt).

    >>> rows = vllm_requests({"chunk": 0, "ids": '["a"]', "prompts": '["1+1?"]', "golds": '[["2"]]'}, 2,
    ...                      SamplingConfig(top_k=0, max_tokens=9))
    >>> [(r["k"], r["sampling_params"]["n"], r["sampling_params"]["top_k"]) for r in rows]
    [(0, 1, -1), (1, 1, -1)]
    """
    from composition_rl.rollout.vllm import sampling_params_kwargs

    ids, prompts, golds = (json.loads(row[f]) for f in ("ids", "prompts", "golds"))
    out = []
    for i, (pid, prompt) in enumerate(zip(ids, prompts)):
        for k in range(n):
            params = {**sampling_params_kwargs(1, sampling), "seed": sample_seed(sampling.seed, pid, k)}
            out.append({"chunk": int(row["chunk"]), "i": i, "k": k, "prompt": prompt,
                        "messages": [{"role": "user", "content": prompt}],
                        "sampling_params": params, "golds": json.dumps(golds[i])})
    return out


def vllm_sample(row: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """A vLLM stage output row as a sample row (the stage reports no finish reason: a
    completion that used all ``max_tokens`` counts as ``length``)."""
    tokens = int(row["num_generated_tokens"])
    done = Completion(str(row["generated_text"]), tokens, "length" if tokens >= max_tokens else "stop")
    return sample_row(row["chunk"], int(row["i"]), int(row["k"]), done, json.loads(row["golds"]))


def vllm_processor_stage(ds: Any, spec: BackendSpec, job: SampleJob, replicas: int, config: ExecutorConfig) -> Any:
    """vLLM engine replicas through ``ray.data.llm`` (untested here: needs GPUs and vLLM)."""
    try:
        from ray.data.llm import build_processor, vLLMEngineProcessorConfig
    except ImportError as e:
        raise ImportError(
            "the vllm backend on the ray executor needs Ray's LLM extra on the GPU nodes: "
            f"pip install -e '.[ray-vllm]'  (from PyPI: pip install 'ray[data,llm]==2.60.0') [{e}]"
        ) from None
    from composition_rl.rollout.vllm import engine_kwargs, model_folder, vllm_on_cpu

    kw = dict(spec.kwargs)
    # the same engine settings as the local vllm backend; on vLLM's CPU build each replica
    # reserves CPUs instead of Ray Data's default of one GPU per engine worker
    cpu = vllm_on_cpu()
    engine = engine_kwargs(model_folder(str(kw["model"])), on_cpu=cpu,
                           tensor_parallel_size=int(kw.get("tensor_parallel_size") or 1),
                           gpu_memory_utilization=kw.get("gpu_memory_utilization") or 0.9,
                           max_model_len=kw.get("max_model_len"), dtype=kw.get("dtype") or "auto",
                           kv_cache_gib=kw.get("kv_cache_gib"))
    model = engine.pop("model")
    chat = kw.get("chat_template") is not False
    # Ray's metrics export of the engine imports ray.serve (ray[llm] brings its dependencies);
    # without them the engine died on start (RayPrometheusMetric requires Ray to be installed)
    try:
        from ray import serve  # noqa: F401

        metrics = True
    except ImportError:
        metrics = False
    stages: dict[str, Any] = {"chat_template_stage": chat, "log_engine_metrics": metrics}
    if cpu:
        stages["placement_group_config"] = {"bundles": [{"CPU": config.replica_cpus or 1}] * engine["tensor_parallel_size"]}
        # the chat-template, tokenize and detokenize actors reserve a whole CPU each by default:
        # with the engine's they left a 2-CPU Ray no room for the engine (it waited forever)
        light = {"num_cpus": 0.1}
        stages.update(chat_template_stage={"enabled": chat, **light}, tokenize_stage=light, detokenize_stage=light)
    processor = build_processor(
        vLLMEngineProcessorConfig(model_source=model, engine_kwargs=engine, concurrency=replicas, batch_size=64,
                                  **stages),
        postprocess=lambda row: vllm_sample(row, job.sampling.max_tokens),
        # the request and output mapping tasks take a whole CPU by default too (same wait)
        postprocess_map_kwargs={"num_cpus": 0.1} if cpu else None,
    )
    n, sampling = job.n, job.sampling
    return processor(ds.flat_map(lambda row: vllm_requests(row, n, sampling), **({"num_cpus": 0.1} if cpu else {})))


#: backend name -> generation stage; a backend not named here runs in the actor pool.
RAY_STAGES: Registry[Any] = Registry("ray generation stage")
RAY_STAGES.register("vllm")(vllm_processor_stage)


# ------------------------------------------------------------------------ grading stage


def grade_batch(batch: dict[str, Any], verify_config: Any) -> dict[str, Any]:
    """The grading stage: each sample's verdict from the bounded verifier, as JSON text.

    A Ray task, not an actor: the verifier pool (``shared_verifier``) lives in the Ray worker
    process, so a worker that grades again (the next batch, the next run) finds it warm.
    """
    import numpy as np

    from composition_rl.grading import shared_verifier

    pairs = [(str(t), json.loads(g)) for t, g in zip(batch["text"], batch["golds"])]
    verdicts = [json.dumps(r.to_dict()) for r in shared_verifier(verify_config).score_batch(pairs)]
    return {**batch, "verdict": np.asarray(verdicts, dtype=object)}


def _verify_config(verifier: Any, cpus: float) -> Any:
    """The caller's verifier settings, which every grader reproduces; unless they fix the
    number of verifier processes, as many as the CPUs a grading task reserves."""
    import dataclasses

    from composition_rl.grading import VerifyConfig

    config = getattr(verifier, "config", None) or VerifyConfig()
    return config if config.workers else dataclasses.replace(config, workers=max(1, int(cpus)))


def _verdict(d: dict[str, Any]) -> Any:
    from composition_rl.grading import Outcome, VerifyResult

    return VerifyResult(**{**d, "outcome": Outcome(d["outcome"])})


# ------------------------------------------------------------------------ the executor


class RayExecutor:
    """Run the chunks through a Ray Data pipeline on a local Ray or a cluster.

    Args:
        spec: the backend every replica builds (its model path or endpoints must be
            reachable from every node).
        config: ``ray_address`` (None: start a local Ray with this machine's cores),
            ``replicas``, ``replica_cpus``, ``graders``, ``grader_cpus``.
        backend: ignored (replicas build their own).

    Example (not run here: it starts a Ray cluster and needs a model folder):
        >>> ex = RayExecutor(BackendSpec("hf", {"model": "runs/tiny"}), ExecutorConfig("ray"))  # doctest: +SKIP
    """

    options: tuple[str, ...] = ("ray_address", "replicas", "replica_cpus", "graders", "grader_cpus")

    def __init__(self, spec: BackendSpec, config: ExecutorConfig, backend: RolloutBackend | None = None) -> None:
        if not isinstance(spec, BackendSpec):
            raise ValueError("the ray executor builds its replicas from a BackendSpec")
        self.ray = import_ray()
        self.spec = spec
        self.name = spec.name
        self.config = config
        self._started = False
        if not self.ray.is_initialized():
            # "local" starts a new Ray here even when RAY_ADDRESS is set; only --ray-address joins one
            address = config.ray_address or "local"
            try:
                self.ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING,
                              log_to_driver=False)
            except (ConnectionError, RuntimeError, TimeoutError) as e:
                raise ValueError(f"cannot {'start' if address == 'local' else 'join'} Ray at {address}: {e}") from None
            self._started = True
        self.replicas = config.replicas or self._default_replicas()
        if self._started and spec.name not in RAY_STAGES:
            self._check_fits()

    def _cpus(self) -> float:
        return float(self.ray.cluster_resources().get("CPU", 0))

    def _default_replicas(self) -> int:
        if self.spec.name in RAY_STAGES:  # GPU engines: one replica per tensor-parallel group
            tp = int(dict(self.spec.kwargs).get("tensor_parallel_size", 1))
            return max(1, int(self.ray.cluster_resources().get("GPU", 0)) // tp)
        free = self._cpus() - self.config.graders * self.config.grader_cpus
        return max(1, int(free // self.config.replica_cpus))

    def _check_fits(self) -> None:
        """On a Ray we started (no autoscaler), refuse a pool that could never be placed."""
        need = self.replicas * self.config.replica_cpus + self.config.graders * self.config.grader_cpus
        have = self._cpus()
        if need > have + 1e-9:
            raise ValueError(
                f"{self.replicas} replicas x {self.config.replica_cpus} CPUs + {self.config.graders} graders x "
                f"{self.config.grader_cpus} CPUs = {need:g} CPUs, but this Ray has {have:g}: "
                f"lower --replicas, --replica-cpus or --grader-cpus"
            )

    def run(self, chunks: Sequence[Sequence[Problem]], job: SampleJob, verifier: Any) -> Iterator[list[Scored]]:
        """Sample and grade every chunk on Ray Data (replicas sample, grader tasks score with the
        ``verifier``'s config); one list of :class:`Scored` per chunk, in order. The process's Ray
        Data settings are restored afterwards.

        Raises:
            RolloutError: a replica's backend failed.
        """
        if not chunks:
            return
        ray = self.ray
        ctx = ray.data.DataContext.get_current()
        saved = (ctx.execution_options.preserve_order, ctx.enable_progress_bars, ctx.wait_for_min_actors_s)
        ctx.execution_options.preserve_order = True  # rows reach us in input order
        ctx.enable_progress_bars = False  # the caller shows one bar over prompts
        ctx.wait_for_min_actors_s = START_TIMEOUT_S
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        logging.getLogger("ray.data._internal.progress").setLevel(logging.ERROR)  # "bars disabled"
        try:
            yield from self._pipeline(chunks, job, verifier)
        finally:  # the process's other Ray Data users keep their settings
            ctx.execution_options.preserve_order, ctx.enable_progress_bars, ctx.wait_for_min_actors_s = saved

    def _pipeline(self, chunks: Sequence[Sequence[Problem]], job: SampleJob, verifier: Any) -> Iterator[list[Scored]]:
        ray = self.ray
        ds = ray.data.from_items(chunk_rows(chunks, job), override_num_blocks=len(chunks))
        stage = RAY_STAGES.get(self.name) if self.name in RAY_STAGES else actor_pool_stage
        ds = stage(ds, self.spec, job, self.replicas, self.config)
        ds = ds.map_batches(
            grade_batch,
            fn_kwargs={"verify_config": _verify_config(verifier, self.config.grader_cpus)},
            batch_size=max(1, len(chunks[0]) * job.n),
            compute=ray.data.TaskPoolStrategy(size=self.config.graders),
            num_cpus=self.config.grader_cpus,
        )
        try:
            yield from _regroup(ds.iter_rows(), chunks, job.n)
        except Exception as e:
            failure = _rollout_failure(e)
            if failure is not None:
                raise RolloutError(failure) from None
            raise

    def close(self) -> None:
        """Shut Ray down if this executor started it; a Ray it joined keeps running."""
        if self._started and self.ray.is_initialized():
            self.ray.shutdown()
        self._started = False


def _regroup(rows: Iterator[dict[str, Any]], chunks: Sequence[Sequence[Problem]], n: int) -> Iterator[list[Scored]]:
    """Sample rows (in input order) back into one list of :class:`Scored` per chunk."""
    it = iter(rows)
    for c, chunk in enumerate(chunks):
        comps: list[list[Any]] = [[None] * n for _ in chunk]
        verdicts: list[list[Any]] = [[None] * n for _ in chunk]
        for _ in range(len(chunk) * n):
            row = next(it, None)
            if row is None:
                raise RuntimeError(f"the Ray pipeline ended before chunk {c} was complete")
            if int(row["chunk"]) != c:
                raise RuntimeError(f"the Ray pipeline gave a row of chunk {row['chunk']} while chunk {c} was open")
            i, k = int(row["i"]), int(row["k"])
            comps[i][k] = Completion(str(row["text"]), int(row["tokens"]), str(row["finish_reason"]))
            verdicts[i][k] = _verdict(json.loads(row["verdict"]))
        yield [Scored(p, tuple(cs), tuple(vs)) for p, cs, vs in zip(chunk, comps, verdicts)]


def _rollout_failure(e: BaseException) -> str | None:
    """The message of a ``RolloutError`` raised in a replica, found in Ray's wrapping."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [e]
    while todo:
        x = todo.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, RolloutError):
            return str(x)
        todo += [x.__cause__, x.__context__, getattr(x, "cause", None)]
    text = str(e)
    marker = "RolloutError: "
    return text[text.rindex(marker) + len(marker):].strip().splitlines()[0] if marker in text else None
