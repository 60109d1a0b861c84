"""Whether a prompt fits a local model's context, asked of each prompt on its own.

A prompt as long as the context (or longer) leaves no room for one new token: the model
cannot answer it, and batched with others it used to starve them (the batch's longest
prompt set the room of all). So such a prompt is rejected by itself with a reason, before
sampling, by every command that samples a local model (profile, eval, grow, train), and the
rollout backend leaves it out of its batches.

Only the tokenizer and the model's config are read (no weights), so a command can check
its prompts before it loads the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["TOO_LONG", "PromptFit", "context_of"]

#: The reject reason of a prompt that does not fit.
TOO_LONG = "prompt_too_long"


def context_of(config: Any) -> int | None:
    """The longest sequence (prompt + completion) a model config was built for, or None."""
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)


class PromptFit:
    """Counts a prompt's tokens as the model will see them and says when it does not fit.

    Args:
        tokenizer: the model's tokenizer.
        context: the model's context in tokens (None: unknown, every prompt fits).
        chat: wrap the prompt in the tokenizer's chat template (as the backend does).

    Example (not run here: it loads a model folder's tokenizer):
        >>> fit = PromptFit.for_model("runs/tiny")             # doctest: +SKIP
        >>> fit.reason("What is 1+1?") is None                # doctest: +SKIP
        True
    """

    def __init__(self, tokenizer: Any, context: int | None, chat: bool) -> None:
        self.tokenizer = tokenizer
        self.context = context
        self.chat = chat

    @classmethod
    def for_model(cls, model: str | Path, chat_template: bool | None = None) -> PromptFit:
        """The fit of a local model folder; ``chat_template`` as in the hf rollout backend
        (None: the tokenizer's template when it has one, False: raw text)."""
        from transformers import AutoConfig, AutoTokenizer

        from composition_rl.io.hf_model import check_model_folder

        check_model_folder(model)
        tok = AutoTokenizer.from_pretrained(str(model))
        has = bool(getattr(tok, "chat_template", None))
        return cls(tok, context_of(AutoConfig.from_pretrained(str(model))),
                   has if chat_template is None else bool(chat_template))

    def text(self, prompt: str) -> str:
        """The exact text fed to the model for ``prompt`` (chat template or raw)."""
        if not self.chat:
            return prompt
        return self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                  add_generation_prompt=True)

    def tokens(self, prompt: str) -> int:
        """How many tokens the model sees for ``prompt`` (:meth:`text`, no special tokens added)."""
        return len(self.tokenizer(self.text(prompt), add_special_tokens=False)["input_ids"])

    def reason(self, prompt: str, tokens: int | None = None) -> str | None:
        """``"prompt_too_long: ..."`` when ``prompt`` leaves no room for a new token, else None."""
        if self.context is None:
            return None
        n = self.tokens(prompt) if tokens is None else tokens
        if n < self.context:
            return None
        return (f"{TOO_LONG}: the prompt is {n:,} tokens and the model's context {self.context:,} "
                "(prompt and completion together): no room for an answer")

    def reasons(self, prompts: Sequence[str]) -> list[str | None]:
        """:meth:`reason` for each prompt, in order."""
        return [self.reason(p) for p in prompts]
