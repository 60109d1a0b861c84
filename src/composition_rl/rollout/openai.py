"""Rollouts from an OpenAI-compatible endpoint (a vLLM or SGLang server, or a hosted API).

A thin adapter over the project's chat client (:class:`~composition_rl.chat.openai.OpenAIChat`:
retries with backoff, 429 ``Retry-After``, bounded concurrency, several endpoints balanced
by load). Each prompt is one request asking for ``n`` choices; a server that returns fewer
(some ignore ``n``) is topped up with single-choice requests, so the caller always gets ``n``.
The key comes from ``OPENAI_API_KEY`` only, as in the composition engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from composition_rl.chat.base import (
    ChatError,
    ChatRequest,
    RequestRefused,
    run_chat_batch,
    run_sync,
)
from composition_rl.rollout.base import Completion, RolloutError, SamplingConfig

__all__ = ["OpenAIRollout", "RolloutError"]


class OpenAIRollout:
    """``generate(prompts, n, sampling)`` through chat completions.

    Args:
        base_url: one base URL (``http://host:8000/v1``) or several, comma-separated.
        model: the served model name.
        concurrency: most requests in flight.
        use_n: ask for ``n`` choices per request; False sends ``n`` single-choice requests.
        timeout_s, max_retries: per-attempt limit and retries of the chat client.
        chat_options: further :class:`OpenAIChat` settings (``backoff_s``, ``cache`` ...).

    Example (not run here: it needs a served model):
        >>> OpenAIRollout("http://localhost:8000/v1", "Qwen3-4B").generate(  # doctest: +SKIP
        ...     ["What is 1+1?"], n=8, sampling=SamplingConfig())
    """

    name = "openai"

    def __init__(
        self,
        base_url: str | Sequence[str],
        model: str,
        concurrency: int = 16,
        use_n: bool = True,
        timeout_s: float = 600.0,
        max_retries: int = 6,
        **chat_options: Any,
    ) -> None:
        from composition_rl.chat.openai import OpenAIChat

        urls = [u.strip() for u in base_url.split(",")] if isinstance(base_url, str) else list(base_url)
        self.chat = OpenAIChat(
            base_urls=[u for u in urls if u],
            model=model,
            concurrency=concurrency,
            timeout_s=timeout_s,
            max_retries=max_retries,
            **chat_options,
        )
        self.use_n = use_n
        self.max_rounds = 3

    def _request(self, prompt: str, n: int, sampling: SamplingConfig, seed: int) -> ChatRequest:
        return ChatRequest.user(
            prompt,
            n=n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k if sampling.top_k > 0 else None,
            max_tokens=sampling.max_tokens,
            seed=seed,
        )

    def generate(
        self, prompts: Sequence[str], n: int, sampling: SamplingConfig
    ) -> list[list[Completion]]:
        """``n`` completions per prompt, in prompt order; raises :class:`RolloutError`."""
        if n < 1:
            raise ValueError(f"n must be >= 1; got {n}")
        out: list[list[Completion]] = [[] for _ in prompts]
        for round_ in range(self.max_rounds):
            reqs: list[ChatRequest] = []
            owners: list[int] = []
            for i in range(len(prompts)):
                missing = n - len(out[i])
                if missing <= 0:
                    continue
                if round_ == 0 and self.use_n:
                    sizes = [missing]
                else:  # one choice per request; top-ups for servers that ignore n
                    sizes = [1] * missing
                for j, k in enumerate(sizes):
                    # Distinct seeds, so single-choice requests are not copies of one sample.
                    seed = sampling.seed + 7919 * (round_ * n + len(out[i]) + j)
                    reqs.append(self._request(prompts[i], k, sampling, seed))
                    owners.append(i)
            if not reqs:
                return out
            results = run_chat_batch(self.chat, reqs)
            failed = [r for r in results if isinstance(r, ChatError)]
            refused = [r for r in failed if isinstance(r, RequestRefused)]
            if refused:  # every request fails alike: say which setting to change
                raise RolloutError(f"{refused[0]} ({len(refused)} of {len(reqs)} requests)")
            if failed:
                kinds = sorted({e.kind for e in failed})
                where = sorted({e.endpoint for e in failed if e.endpoint})
                raise RolloutError(
                    f"{len(failed)} of {len(reqs)} requests failed for good "
                    f"({', '.join(kinds)}){' at ' + ', '.join(where) if where else ''}: {failed[0]}"
                )
            for i, resp in zip(owners, results):
                per_choice = resp.completion_tokens // max(1, len(resp.choices))
                for ch in resp.choices[: n - len(out[i])]:
                    out[i].append(
                        Completion(
                            text=ch.text,
                            tokens=ch.completion_tokens or per_choice,
                            finish_reason=ch.finish_reason,
                        )
                    )
        short = [i for i in range(len(prompts)) if len(out[i]) < n]
        if short:
            raise RolloutError(
                f"prompts {short[:5]} still lack choices after {self.max_rounds} rounds of requests"
            )
        return out

    def stats(self) -> dict[str, Any]:
        """The chat client's counters (:meth:`ChatStats.to_dict`): requests, retries, tokens."""
        return self.chat.stats.to_dict()

    def close(self) -> None:
        """Close the chat client's connections."""
        run_sync(self.chat.aclose())
