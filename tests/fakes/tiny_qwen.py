"""The tiny random Qwen2 for the chat-backend and LLM-composer tests: the shared builder
(:mod:`fakes.rollout_tiny_qwen`) with a smaller model, long positions for composer prompts,
and a corpus with the composer's JSON, so its output is nonsense that the checks reject."""

from __future__ import annotations

from pathlib import Path

from fakes.rollout_tiny_qwen import build_tiny_qwen as _build

CORPUS = [
    "What is the sum of the values of n for which |2n - 7| = 3? The answer is 7.",
    'Return JSON: {"v1": "7", "definition": "the sum", "constant": "5", "rewritten": "<VAR>"}',
    "Let X be the number of apples. Y is 6 less than X. Simplify 2((5p + 1) - 2p * 4).",
    "\\frac{3}{4} \\sqrt{2} (3,-1) 0123456789 $x^2 + y^2 = 25$ \\boxed{12}",
]


def build_tiny_qwen(out: str | Path, seed: int = 0) -> Path:
    """Write a tiny Qwen2ForCausalLM + tokenizer to ``out`` and return the path."""
    # 8,192 positions: the LLM engine's proposal prompts (about 2,500 byte-level tokens) fit,
    # so the tests reach the model's replies (a prompt over the context fails by itself)
    return _build(out, seed=seed, hidden=32, layers=1, max_positions=8192, corpus=CORPUS)
