"""Local transformers rollouts: batched sampling on CPU or GPU.

Many prompts times ``n`` samples go through one ``model.generate`` call (left padding,
``num_return_sequences=n``), which is what makes a local profile affordable: see
``benchmarks/rollout_throughput.py`` for the measured gain over a one-prompt loop.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from composition_rl.chat.context import TOO_LONG, PromptFit, context_of
from composition_rl.rollout.base import Completion, Draws, SamplingConfig

log = logging.getLogger(__name__)

__all__ = ["HFRollout"]


class HFRollout:
    """Sample completions from a local causal LM folder with ``transformers``.

    Args:
        model: path to a folder holding the model and tokenizer (``save_pretrained`` layout),
            or a GGUF (a ``.gguf`` path or a name such as ``smollm2-135m-instruct-q4_1``; io/hf_model.py).
        device: ``cpu``, ``cuda``, ``cuda:1`` ...; default CUDA when available.
        dtype: ``float32``, ``bfloat16``, ``float16`` or ``auto`` (bf16 on CUDA, fp32 on CPU).
        max_batch_sequences: most sequences (prompts x n) in one ``generate`` call.
        chat_template: ``None`` uses the tokenizer's chat template when it has one; ``False``
            feeds the prompt text raw (base models); ``True`` requires a chat template.
        share_prefill: encode each prompt once and copy its KV cache to its ``n`` samples,
            instead of encoding it ``n`` times (``num_return_sequences`` does the latter).

    Example (not run here: it needs a model folder):
        >>> backend = HFRollout("runs/tiny-model")                      # doctest: +SKIP
        >>> backend.generate(["What is 1+1?"], n=4, sampling=SamplingConfig())  # doctest: +SKIP
    """

    name = "hf"

    def __init__(
        self,
        model: str | Path,
        device: str | None = None,
        dtype: str = "auto",
        max_batch_sequences: int = 64,
        chat_template: bool | None = None,
        share_prefill: bool = True,
        **_: Any,
    ) -> None:
        import torch

        from composition_rl.io.hf_model import is_local_model, load_causal_lm

        path = Path(model)
        if not is_local_model(str(model)):
            raise ValueError(f"--model {model!r} is not a local model folder or GGUF")
        if max_batch_sequences < 1:
            raise ValueError(f"max_batch_sequences must be >= 1; got {max_batch_sequences}")
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if dtype == "auto":
            torch_dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32
        else:
            torch_dtype = getattr(torch, dtype)
        self.tokenizer, self.model = load_causal_lm(str(model), dtype=torch_dtype, padding_side="left")
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model.to(self.device)
        self.model.eval()
        has_template = bool(getattr(self.tokenizer, "chat_template", None))
        if chat_template and not has_template:
            raise ValueError(f"the tokenizer in {path} has no chat template")
        self.use_chat = has_template if chat_template is None else bool(chat_template)
        self.max_batch_sequences = max_batch_sequences
        self.share_prefill = share_prefill
        self.stop_ids = self._stop_ids()
        #: the longest sequence (prompt + completion) the model was built for, or None if unknown
        self.context = context_of(self.model.config)
        #: the check every prompt passes before it joins a batch (and commands ask before sampling)
        self.fit = PromptFit(self.tokenizer, self.context, self.use_chat)
        self._capped_said = False
        self._draws = Draws()

    def _stop_ids(self) -> set[int]:
        ids: set[int] = set()
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        for v in (gen_eos, self.tokenizer.eos_token_id):
            if v is None:
                continue
            ids.update(v if isinstance(v, (list, tuple)) else [v])
        return ids

    def prompt_too_long(self, prompt: str) -> str | None:
        """``"prompt_too_long: ..."`` (the prompt's tokens and the context) when ``prompt``
        leaves no room for an answer: what :meth:`generate` answers it with, said before."""
        return self.fit.reason(prompt)

    def format(self, prompt: str) -> str:
        """The exact text fed to the model for ``prompt`` (chat template or raw)."""
        return self.fit.text(prompt)

    def generate(
        self, prompts: Sequence[str], n: int, sampling: SamplingConfig
    ) -> list[list[Completion]]:
        """``n`` completions per prompt, batching up to ``max_batch_sequences`` sequences.

        A prompt that fills the context by itself gets ``n`` empty completions with finish
        reason ``prompt_too_long`` and stays out of every batch; the others are batched with
        prompts that have the same room left, so no prompt's length shortens another's answer.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1; got {n}")
        texts = [self.format(p) for p in prompts]
        # samples are numbered through the backend's life: asking a prompt again draws anew
        firsts = self._draws.first(texts, 1 if sampling.greedy else n, sampling.seed)
        lengths = [len(self.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
        out: list[list[Completion] | None] = [None] * len(texts)
        room: dict[int, list[int]] = {}  # new tokens allowed -> prompts, shortest text first
        # Similar lengths share a batch so little compute goes to padding.
        for i in sorted(range(len(texts)), key=lambda i: len(texts[i])):
            if self.fit.reason("", tokens=lengths[i]) is not None:
                out[i] = [Completion(text="", tokens=0, finish_reason=TOO_LONG) for _ in range(n)]
            else:
                room.setdefault(self._max_new(sampling.max_tokens, lengths[i]), []).append(i)
        per_batch = max(1, self.max_batch_sequences // n)
        for max_new, order in room.items():
            for start in range(0, len(order), per_batch):
                idx = order[start : start + per_batch]
                batch = self._generate_batch([texts[i] for i in idx], n, sampling, max_new, [firsts[i] for i in idx])
                for i, comps in zip(idx, batch):
                    out[i] = comps
        self._draws.commit(texts, 1 if sampling.greedy else n, sampling.seed)
        return [c for c in out if c is not None]

    def _generate_batch(
        self, texts: list[str], n: int, sampling: SamplingConfig, max_new: int, firsts: list[int] | None = None
    ) -> list[list[Completion]]:
        import torch

        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        ids = enc["input_ids"].to(self.device)
        mask = enc["attention_mask"].to(self.device)
        kwargs: dict[str, Any] = {
            "max_new_tokens": max_new,
            "pad_token_id": self.tokenizer.pad_token_id,
            "eos_token_id": sorted(self.stop_ids) or None,
        }
        if sampling.greedy:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        else:
            kwargs.update(
                do_sample=True,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                top_k=sampling.top_k if sampling.top_k > 0 else None,
            )
        # Greedy samples are all the same: decode once, copy n times.
        copies = 1 if sampling.greedy else n
        # The seed depends on the batch content, so a rerun of the same batch repeats exactly,
        # and on where each prompt's samples start, so a prompt asked again draws anew (a first
        # ask keeps the seed it always had).
        key = "\x1f".join(texts)
        if firsts and any(firsts):
            key += "\x1e" + ",".join(map(str, firsts))
        digest = hashlib.sha1(key.encode("utf-8")).digest()
        torch.manual_seed((sampling.seed * 1_000_003 + int.from_bytes(digest[:6], "big")) % 2**63)
        with torch.inference_mode():
            if copies > 1 and self.share_prefill and ids.shape[1] > 1:
                cache = self._prefill(ids[:, :-1], mask[:, :-1])
                cache.batch_repeat_interleave(copies)
                seqs = self.model.generate(
                    input_ids=ids.repeat_interleave(copies, 0),
                    attention_mask=mask.repeat_interleave(copies, 0),
                    cache=cache,
                    **kwargs,
                )
            else:
                seqs = self.model.generate(
                    input_ids=ids, attention_mask=mask, num_return_sequences=copies, **kwargs
                )
        gen = seqs[:, ids.shape[1] :].tolist()
        if sampling.greedy:
            gen = [row for row in gen for _ in range(n)]
        result: list[list[Completion]] = []
        for p in range(len(texts)):
            comps = []
            for row in gen[p * n : (p + 1) * n]:
                stop = next((j for j, t in enumerate(row) if t in self.stop_ids), None)
                body = row if stop is None else row[:stop]
                comps.append(
                    Completion(
                        text=self.tokenizer.decode(body, skip_special_tokens=True),
                        tokens=len(row) if stop is None else stop + 1,
                        finish_reason="length" if stop is None else "stop",
                    )
                )
            result.append(comps)
        return result

    def _max_new(self, wanted: int, prompt_len: int) -> int:
        """``wanted`` new tokens, capped at what the model's context leaves after the prompt
        (a 512-token model asked for 4,096 sampled past its positions for minutes);
        the cap is said once per backend."""
        if self.context is None or prompt_len + wanted <= self.context:
            return wanted
        if not self._capped_said:
            self._capped_said = True
            log.warning("note: --max-tokens %d is more than the context of %s (%d tokens, prompt included): "
                        "completions are capped at %d tokens minus the prompt's length",
                        wanted, self.model.name_or_path, self.context, self.context)
        return self.context - prompt_len

    def _prefill(self, ids, mask):
        """KV cache of all but the last prompt token (generate feeds that one and goes on)."""
        position_ids = (mask.long().cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=position_ids, use_cache=True, logits_to_keep=1
        )
        return out.cache

    def close(self) -> None:
        """Drop the model so its memory can be freed."""
        self.model = None
