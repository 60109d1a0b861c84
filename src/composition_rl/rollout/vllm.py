"""Rollouts from vLLM's offline engine (``vllm.LLM``): GPU clusters, and vLLM's CPU build.

An optional extra: vLLM is imported only when this backend is built, and a missing install
fails with the command to fix it. Chat models go through ``LLM.chat`` (the tokenizer's chat
template); base models through ``LLM.generate``. One call submits every prompt with
``SamplingParams(n=...)`` and vLLM schedules them itself.

``--model`` is a model folder (or a name vLLM resolves), or a GGUF (``smollm2-135m-instruct-q4_1``,
``qwen2.5-coder-0.5b-instruct-awq-q4_k_m``, a ``.gguf`` path): a GGUF is converted once into a plain model folder by
:func:`composition_rl.io.hf_model.hf_folder` (de-quantized, its logits checked against
the copy, cached) and vLLM loads that folder.

**Seeds.** Every prompt gets its own seed, derived from the run's seed and the prompt's
text only (never the chunk it came in or the worker), and its samples are numbered through
the backend's life: sample ``k`` of a prompt is vLLM's child request with seed
``prompt_seed + k`` (vLLM seeds the ``n`` children of a request ``seed + index``), and a
prompt asked again continues the numbering instead of repeating its samples. So a rerun or
a resumed run of the same command samples the same completions. Greedy decoding (temperature
0) needs no seed and passes none.

**CPU.** vLLM's CPU build rewinds a seeded request's generator when it discards a token of a
partly scheduled prefill (``Generator.set_offset``), which CPU generators do not have: a
batch whose prefills outgrow one step's token budget then fails in the worker with ``CPU
Generator does not use offset``. On a CPU this backend therefore turns chunked prefill off
(every prefill is scheduled whole), so no token is ever discarded and seeds hold at any
batch size. It also runs eagerly (``enforce_eager``: the torch.compile warm-up took minutes
on 2 cores) and gives the KV cache ``kv_cache_gib`` (default 1 GiB; ``$VLLM_CPU_KVCACHE_SPACE``
in GiB, vLLM's own setting, wins when set). Threads: vLLM binds its worker to the cores
``$VLLM_CPU_OMP_THREADS_BIND`` names (``auto``: all but one).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Any

from composition_rl.chat.context import TOO_LONG, PromptFit
from composition_rl.rollout.base import Completion, Draws, SamplingConfig

__all__ = ["VLLMRollout", "VLLM_INSTALL", "engine_kwargs", "model_folder", "prompt_seed", "sampling_params_kwargs",
           "vllm_on_cpu"]

#: What fixes a missing vLLM.
VLLM_INSTALL = ("pip install 'composition-rl[vllm]' into vLLM's own venv (it brings its own torch); "
                "on a CPU: bash scripts/setup_vllm_venv.sh, then .venv-vllm/bin/crl")
#: The CPU KV cache when neither ``kv_cache_gib`` nor ``$VLLM_CPU_KVCACHE_SPACE`` says.
CPU_KV_CACHE_GIB = 1.0


def sampling_params_kwargs(n: int, sampling: SamplingConfig) -> dict[str, Any]:
    """Our :class:`SamplingConfig` as ``vllm.SamplingParams`` keyword arguments.

    >>> sampling_params_kwargs(8, SamplingConfig())["top_k"], sampling_params_kwargs(1, SamplingConfig(top_k=0))["top_k"]
    (20, -1)
    """
    return {
        "n": n,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k if sampling.top_k > 0 else -1,  # vLLM: -1 disables
        "max_tokens": sampling.max_tokens,
        "seed": sampling.seed,
    }


def prompt_seed(seed: int, prompt: str) -> int:
    """The seed of a prompt's first sample: the run's seed and the prompt's text only. Below
    2**31 with room for the sample numbers added to it (every engine takes it).

    >>> prompt_seed(0, "1+1?") == prompt_seed(0, "1+1?") != prompt_seed(1, "1+1?")
    True
    """
    digest = hashlib.sha256(f"{seed}:{prompt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 2  # < 2**30: + up to 2**30 samples stays < 2**31


def engine_kwargs(
    model: str,
    *,
    on_cpu: bool,
    tensor_parallel_size: int = 1,
    gpu_memory_utilization: float = 0.9,
    max_model_len: int | None = None,
    seed: int = 0,
    dtype: str = "auto",
    kv_cache_gib: float | None = None,
    enforce_eager: bool | None = None,
) -> dict[str, Any]:
    """The ``vllm.LLM`` / engine keyword arguments of this backend (the local engine and Ray
    Data's vLLM stage share them): on a CPU eager, chunked prefill off and a bounded KV cache
    (module docstring); on a GPU the memory share.

    >>> sorted(engine_kwargs("m", on_cpu=True))
    ['dtype', 'enable_chunked_prefill', 'enforce_eager', 'kv_cache_memory_bytes', 'model', 'seed', 'tensor_parallel_size']
    """
    kw: dict[str, Any] = {"model": model, "tensor_parallel_size": tensor_parallel_size, "seed": seed,
                          "dtype": dtype or "auto"}
    if max_model_len:
        kw["max_model_len"] = max_model_len
    if on_cpu:
        kw["enforce_eager"] = True if enforce_eager is None else bool(enforce_eager)
        kw["enable_chunked_prefill"] = False  # seeds at any batch size (module docstring)
        if not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
            kw["kv_cache_memory_bytes"] = int((kv_cache_gib or CPU_KV_CACHE_GIB) * 2**30)
    else:
        kw["gpu_memory_utilization"] = gpu_memory_utilization
        if enforce_eager is not None:
            kw["enforce_eager"] = bool(enforce_eager)
        if kv_cache_gib:
            kw["kv_cache_memory_bytes"] = int(kv_cache_gib * 2**30)
    return kw


def model_folder(model: str) -> str:
    """What vLLM loads for ``--model``: a folder or name as it is, a GGUF converted once."""
    from composition_rl.io.gguf import is_gguf

    if not is_gguf(model):
        return model
    from composition_rl.io.hf_model import hf_folder

    return hf_folder(model)


def vllm_on_cpu() -> bool:
    """Whether the vLLM installed here is a CPU build (False when vLLM is not installed)."""
    try:
        from vllm.platforms import current_platform
    except ImportError:
        return False
    return bool(current_platform.is_cpu())


class VLLMRollout:
    """``generate(prompts, n, sampling)`` on a local vLLM engine.

    Args:
        model: model folder, a name vLLM can resolve, or a GGUF (converted once).
        tensor_parallel_size: GPUs per model.
        gpu_memory_utilization: share of GPU memory vLLM may take (GPU only).
        chat_template: ``None`` uses the tokenizer's chat template when present; ``False``
            feeds raw prompts.
        max_model_len: context limit passed to vLLM (None: the model's).
        seed: the engine's seed (the samples' seeds come from the sampling config).
        dtype: ``auto`` (the folder's; a GGUF converts to float32), ``bfloat16``, ``float32``...
        kv_cache_gib: KV cache size in GiB (CPU; on a GPU it replaces the memory share).
        enforce_eager: skip torch.compile and CUDA graphs (None: on a CPU only).
    """

    name = "vllm"

    def __init__(
        self,
        model: str,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        chat_template: bool | None = None,
        max_model_len: int | None = None,
        seed: int = 0,
        dtype: str = "auto",
        kv_cache_gib: float | None = None,
        enforce_eager: bool | None = None,
        **_: Any,
    ) -> None:
        try:
            from vllm import LLM
        except ImportError as e:
            raise ImportError(f"the vllm backend needs vLLM: {VLLM_INSTALL} [{e}]") from None
        self.on_cpu = vllm_on_cpu()
        kw = engine_kwargs(model_folder(model), on_cpu=self.on_cpu, tensor_parallel_size=tensor_parallel_size,
                           gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len, seed=seed,
                           dtype=dtype, kv_cache_gib=kv_cache_gib, enforce_eager=enforce_eager)
        self.engine_kwargs = kw
        self.llm = LLM(**kw)
        has_template = bool(getattr(self.llm.get_tokenizer(), "chat_template", None))
        self.use_chat = has_template if chat_template is None else bool(chat_template)
        self.fit = PromptFit(self.llm.get_tokenizer(), self.llm.llm_engine.model_config.max_model_len, self.use_chat)
        self.draws = Draws()  # samples drawn of each prompt so far, shared with the hf and llama backends

    def _params(self, prompts: Sequence[str], n: int, sampling: SamplingConfig) -> list[Any]:
        from vllm import SamplingParams

        base = sampling_params_kwargs(n, sampling)
        if sampling.greedy:
            return [SamplingParams(**{**base, "seed": None})] * len(prompts)
        firsts = self.draws.first(prompts, n, sampling.seed)
        return [SamplingParams(**{**base, "seed": prompt_seed(sampling.seed, p) + k}) for p, k in zip(prompts, firsts)]

    def generate(
        self, prompts: Sequence[str], n: int, sampling: SamplingConfig
    ) -> list[list[Completion]]:
        """``n`` completions per prompt, in prompt order. A prompt that fills the context by
        itself gets ``n`` empty completions with finish reason ``prompt_too_long`` (vLLM would
        refuse the whole call); the others go to vLLM in one call."""
        if n < 1:
            raise ValueError(f"n must be >= 1; got {n}")
        out: list[list[Completion] | None] = [None] * len(prompts)
        todo = []
        for i, p in enumerate(prompts):
            if self.prompt_too_long(p) is not None:
                out[i] = [Completion(text="", tokens=0, finish_reason=TOO_LONG) for _ in range(n)]
            else:
                todo.append(i)
        if todo:
            chosen = [prompts[i] for i in todo]
            params = self._params(chosen, n, sampling)
            if self.use_chat:
                convs = [[{"role": "user", "content": p}] for p in chosen]
                outputs = self.llm.chat(convs, sampling_params=params, use_tqdm=False)
            else:
                outputs = self.llm.generate(chosen, sampling_params=params, use_tqdm=False)
            for i, req in zip(todo, outputs, strict=True):  # vLLM returns outputs in input order
                out[i] = [
                    Completion(text=o.text, tokens=len(o.token_ids), finish_reason=str(o.finish_reason or "stop"))
                    for o in sorted(req.outputs, key=lambda o: o.index)
                ]
            if not sampling.greedy:  # counted once the call succeeded: a failed call is redone
                self.draws.commit(chosen, n, sampling.seed)
        return [c for c in out if c is not None]

    def prompt_too_long(self, prompt: str) -> str | None:
        """``"prompt_too_long: ..."`` when ``prompt`` (as this backend wraps it) leaves no room
        for one new token: what :meth:`generate` answers it with, said before."""
        return self.fit.reason(prompt)

    def close(self) -> None:
        """Drop the engine and stop its engine-core process now rather than at interpreter exit."""
        llm, self.llm = self.llm, None
        if llm is not None:  # stop the engine core process now, not at interpreter exit
            core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
            if core is not None and hasattr(core, "shutdown"):
                core.shutdown()
