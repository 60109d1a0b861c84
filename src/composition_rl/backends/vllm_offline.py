"""Rollouts from vLLM's offline engine (``vllm.LLM``), for GPU users.

An optional extra: vLLM is imported only when this backend is built, and a missing install
fails with the command to fix it. Chat models go through ``LLM.chat`` (the tokenizer's chat
template); base models through ``LLM.generate``. One call submits every prompt with
``SamplingParams(n=...)`` and vLLM schedules them itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from composition_rl.backends.rollout import Completion, SamplingConfig

__all__ = ["VLLMRollout", "sampling_params_kwargs"]


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


class VLLMRollout:
    """``generate(prompts, n, sampling)`` on a local vLLM engine.

    Args:
        model: model folder (or a name vLLM can resolve offline).
        tensor_parallel_size: GPUs per model.
        gpu_memory_utilization: share of GPU memory vLLM may take.
        chat_template: ``None`` uses the tokenizer's chat template when present; ``False``
            feeds raw prompts.
        max_model_len: context limit passed to vLLM (None: the model's).
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
        **_: Any,
    ) -> None:
        try:
            from vllm import LLM
        except ImportError as e:
            raise ImportError(
                "the vllm backend needs vLLM on a CUDA machine: pip install 'vllm' "
                f"(it brings its own torch; use a separate venv) [{e}]"
            ) from None
        kw: dict[str, Any] = {
            "model": model,
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "seed": seed,
        }
        if max_model_len:
            kw["max_model_len"] = max_model_len
        self.llm = LLM(**kw)
        has_template = bool(getattr(self.llm.get_tokenizer(), "chat_template", None))
        self.use_chat = has_template if chat_template is None else bool(chat_template)

    def generate(
        self, prompts: Sequence[str], n: int, sampling: SamplingConfig
    ) -> list[list[Completion]]:
        from vllm import SamplingParams

        params = SamplingParams(**sampling_params_kwargs(n, sampling))
        if self.use_chat:
            convs = [[{"role": "user", "content": p}] for p in prompts]
            outputs = self.llm.chat(convs, sampling_params=params, use_tqdm=False)
        else:
            outputs = self.llm.generate(list(prompts), sampling_params=params, use_tqdm=False)
        result = []
        for req in outputs:  # vLLM returns outputs in input order
            result.append(
                [
                    Completion(
                        text=o.text,
                        tokens=len(o.token_ids),
                        finish_reason=str(o.finish_reason or "stop"),
                    )
                    for o in req.outputs
                ]
            )
        return result

    def close(self) -> None:
        self.llm = None
