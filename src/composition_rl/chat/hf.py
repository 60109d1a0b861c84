"""A local transformers chat backend for small models on CPU or GPU.

Messages go through the tokenizer's own chat template (never hand-written special tokens);
``n`` completions come from one ``generate`` call with ``num_return_sequences``. Generation
runs in a worker thread, one request at a time, so the event loop stays free for the rest
of the job. There is no constrained decoding: a request's ``json_schema`` is only a hint in
the prompt, and the caller's tolerant parser and checks must cope with whatever comes out.

torch and transformers are imported when the backend is built, never at import time of the
package.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path
from typing import Any

from composition_rl.chat.base import (
    ChatBackend,
    ChatChoice,
    ChatError,
    ChatRequest,
    ChatResponse,
)
from composition_rl.chat.context import TOO_LONG, context_of

__all__ = ["LocalHFChat"]


class LocalHFChat(ChatBackend):
    """Chat with a local causal LM directory (``save_pretrained`` layout).

    Args:
        model: path to the model and tokenizer directory, or a GGUF (a ``.gguf`` path or a name
            such as ``smollm2-135m-instruct-q4_1``; io/hf_model.py).
        device: ``cpu``, ``cuda``, ``cuda:1`` ... (``auto``: cuda when available).
        dtype: torch dtype name (``float32``, ``bfloat16``); default float32 on CPU,
            bfloat16 on GPU.
        seed: base seed; each request's sampling seed is derived from it and the request,
            so a rerun repeats.
        cache: optional :class:`~composition_rl.chat.cache.ResponseCache`.

    >>> LocalHFChat("/nonexistent")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: local model directory not found: /nonexistent
    """

    name = "local_hf"

    def __init__(
        self,
        model: str,
        device: str = "auto",
        dtype: str | None = None,
        seed: int = 0,
        cache: Any | None = None,
    ) -> None:
        from composition_rl.io.hf_model import is_local_model, load_causal_lm

        path = Path(model)
        if not is_local_model(model):
            raise ValueError(f"local model directory not found: {model}")
        super().__init__(model=str(path), cache=cache)
        import torch

        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if dtype is None:
            dtype = "float32" if device == "cpu" else "bfloat16"
        self.device = device
        self.seed = seed
        self._torch = torch
        self.tokenizer, self.lm = load_causal_lm(model, dtype=getattr(torch, dtype))
        if self.tokenizer.chat_template is None:
            raise ValueError(f"tokenizer in {model} has no chat template; a chat backend needs one")
        self.lm.to(device)
        self.lm.eval()
        self._lock = threading.Lock()

    @property
    def namespace(self) -> str:
        """Cache namespace with the model folder by its absolute path (``model_identity``)."""
        from composition_rl.io.identity import model_identity

        return f"{self.name}:{model_identity(self.model)}"

    def describe(self) -> dict[str, Any]:
        """Settings safe to write into stats.json: backend, model folder and device."""
        return {
            "backend": self.name,
            "model": self.model,
            "device": self.device,
            "structured": "none",
        }

    async def _chat(self, req: ChatRequest) -> ChatResponse:
        return await asyncio.to_thread(self._generate, req)

    def _request_seed(self, req: ChatRequest) -> int:
        if req.seed is not None:
            return int(req.seed)
        h = hashlib.sha256(f"{self.seed}:{req.cache_key(self.namespace)}".encode()).hexdigest()
        return int(h[:8], 16)

    def _generate(self, req: ChatRequest) -> ChatResponse:
        torch = self._torch
        tok = self.tokenizer
        try:
            text = tok.apply_chat_template(
                [dict(m) for m in req.messages], tokenize=False, add_generation_prompt=True
            )
        except Exception as e:  # a template that rejects these messages
            raise ChatError(
                "bad_request", f"chat template failed: {type(e).__name__}: {e}"
            ) from None
        enc = tok(text, return_tensors="pt", add_special_tokens=False).to(self.device)
        n_prompt = int(enc["input_ids"].shape[1])
        # a prompt that fills the context cannot be answered: this request fails by itself
        # (not transient: a retry cannot change it) and says why
        context = context_of(self.lm.config)
        if context is not None and n_prompt >= context:
            raise ChatError(TOO_LONG, f"the prompt is {n_prompt:,} tokens and the model's context {context:,}")
        max_new = req.max_tokens if context is None else min(req.max_tokens, context - n_prompt)
        eos = tok.eos_token_id
        pad = tok.pad_token_id if tok.pad_token_id is not None else eos
        gen_kw: dict[str, Any] = {
            "max_new_tokens": max_new,
            "num_return_sequences": req.n,
            "pad_token_id": pad,
        }
        if req.temperature > 0:
            gen_kw.update(do_sample=True, temperature=req.temperature, top_p=req.top_p)
            gen_kw["top_k"] = req.top_k if req.top_k and req.top_k > 0 else 0
        else:
            gen_kw.update(do_sample=False)
        with self._lock:
            self.stats.calls += 1
            self.stats.calls_by_endpoint[self.device] += 1
            torch.manual_seed(self._request_seed(req))
            with torch.inference_mode():
                out = self.lm.generate(**enc, **gen_kw)
        choices = []
        total_new = 0
        for row in out[:, n_prompt:]:
            ids = row.tolist()
            stop_at = len(ids)
            if eos is not None and eos in ids:
                stop_at = ids.index(eos)
            new = ids[:stop_at]
            while new and pad is not None and new[-1] == pad and pad != eos:
                new.pop()
            finish = "stop" if stop_at < len(ids) or len(ids) < max_new else "length"
            total_new += len(new)
            choices.append(
                ChatChoice(
                    text=tok.decode(new, skip_special_tokens=True),
                    finish_reason=finish,
                    completion_tokens=len(new),
                )
            )
        self.stats.prompt_tokens += n_prompt
        self.stats.completion_tokens += total_new
        return ChatResponse(
            choices=tuple(choices),
            prompt_tokens=n_prompt,
            completion_tokens=total_new,
            model=Path(self.model).name,
        )

    async def aclose(self) -> None:
        """Drop the model so its memory can be freed."""
        self.lm = None
