"""The rollout interface: ``generate(prompts, n, sampling) -> n completions per prompt``.

Backends are registered by name (``hf``, ``openai``, ``vllm``) and imported only when built,
so profiling through an endpoint never imports torch. A prompt here is the *user message*
(the question already put into a template); each backend wraps it for its model: the
tokenizer's chat template for chat models, the API's ``messages`` for endpoints.

This module knows nothing about problems, verification or profiling.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from composition_rl.registry import Registry

__all__ = [
    "MAX_CHUNK",
    "MAX_NEW_TOKENS",
    "MAX_SAMPLES",
    "PAPER_SAMPLING",
    "Completion",
    "Draws",
    "RolloutBackend",
    "RolloutError",
    "ROLLOUT_BACKENDS",
    "SamplingConfig",
    "build_backend",
    "load_template",
    "render_prompt",
    "resolve_backend",
]


#: Upper bounds of the decoding settings: far above any real use (the paper allows 32K new
#: tokens; vocabularies are ~150K), low enough that a typo fails in one line instead of
#: allocating terabytes or overflowing a C integer deep inside a backend.
MAX_NEW_TOKENS = 1_048_576
MAX_TOP_K = 1_000_000
#: Most samples per prompt (pass@1024 is the largest budget in common use) and most prompts
#: per generate call, for the configs that ask for them.
MAX_SAMPLES = 1024
MAX_CHUNK = 100_000


@dataclass(frozen=True)
class SamplingConfig:
    """Decoding settings shared by every backend.

    Args:
        temperature: softmax temperature; 0 means greedy decoding.
        top_p: nucleus mass kept (1.0 disables).
        top_k: number of top tokens kept (0 or -1 disables).
        max_tokens: most new tokens per completion.
        seed: base seed; backends derive per-batch seeds from it so reruns repeat.

    The defaults are the paper's evaluation preset (Composition-RL, experimental setup, "Metrics"):
    temperature 0.6, top_p 0.95, top_k 20. The paper allows 32K new tokens; the default here
    is 4096 so a CPU run stays bounded: pass ``max_tokens=32768`` to match it.
    """

    temperature: float = field(default=0.6, metadata={
        "help": "softmax temperature of sampling; 0 decodes greedily (0 to 100)"})
    top_p: float = field(default=0.95, metadata={
        "help": "nucleus sampling: keep the smallest token set holding this much probability; 1 keeps all"})
    top_k: int = field(default=20, metadata={
        "help": "keep only the K most likely tokens at each step; 0 or -1 keeps all"})
    max_tokens: int = field(default=4096, metadata={
        "help": f"most new tokens per completion (1 to {MAX_NEW_TOKENS:,}); a local model also "
        "stops where its context ends"})
    seed: int = field(default=0, metadata={
        "help": "base sampling seed; each batch's seed derives from it and the batch, so a rerun repeats"})

    def __post_init__(self) -> None:
        bad = []
        if not (math.isfinite(self.temperature) and 0 <= self.temperature <= 100):
            bad.append(f"temperature={self.temperature} (must be in [0, 100])")
        if not (0.0 < self.top_p <= 1.0):
            bad.append(f"top_p={self.top_p} (must be in (0, 1])")
        if not (-1 <= self.top_k <= MAX_TOP_K):
            bad.append(f"top_k={self.top_k} (must be in [-1, {MAX_TOP_K:,}]; 0 or -1 disables)")
        if not (1 <= self.max_tokens <= MAX_NEW_TOKENS):
            bad.append(f"max_tokens={self.max_tokens} (must be in [1, {MAX_NEW_TOKENS:,}])")
        if not (0 <= self.seed < 2**63):
            bad.append(f"seed={self.seed} (must be in [0, 2**63))")
        if bad:
            raise ValueError("invalid sampling config: " + "; ".join(bad))

    @property
    def greedy(self) -> bool:
        """Whether sampling is greedy (temperature 0)."""
        return self.temperature == 0

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict (for run records)."""
        return asdict(self)


#: The paper's decoding preset (temperature 0.6, top_p 0.95, top_k 20).
PAPER_SAMPLING = SamplingConfig()


@dataclass(frozen=True)
class Completion:
    """One sampled completion.

    Args:
        text: the generated text only (no prompt).
        tokens: generated tokens as counted by the backend (0 where unknown).
        finish_reason: ``stop`` (end of sequence), ``length`` (hit max_tokens) or what the
            server reported.
    """

    text: str
    tokens: int = 0
    finish_reason: str = "stop"


class Draws:
    """How many samples of each prompt a backend has drawn so far, so that its samples are
    numbered through the backend's life: a second call for a prompt gets samples ``n..2n-1``
    (new draws), not samples ``0..n-1`` again, and a fresh backend given the same calls in
    the same order gives the same completions.

    A local backend seeds sample ``i`` of a prompt from (seed, prompt, ``i``), so a profile
    rerun or resumed in a new process repeats its rows (each prompt is asked once there),
    while more samples asked later of the same prompt are more evidence, not copies.

    >>> d = Draws()
    >>> d.first(["a", "b", "a"], copies=4, seed=0)
    [0, 0, 4]
    >>> d.commit(["a", "b", "a"], copies=4, seed=0)
    >>> d.first(["a"], copies=4, seed=0), d.first(["a"], copies=4, seed=1)
    ([8], [0])
    """

    def __init__(self) -> None:
        self._drawn: dict[bytes, int] = {}

    @staticmethod
    def _key(prompt: str, seed: int) -> bytes:
        return hashlib.sha256(f"{seed}\x1f{prompt}".encode()).digest()

    def first(self, prompts: Sequence[str], copies: int, seed: int) -> list[int]:
        """The run index of the first sample of each prompt in this call (a prompt given
        twice in one call continues after its first ``copies``)."""
        extra: dict[bytes, int] = {}
        out = []
        for p in prompts:
            k = self._key(p, seed)
            out.append(self._drawn.get(k, 0) + extra.get(k, 0))
            extra[k] = extra.get(k, 0) + copies
        return out

    def commit(self, prompts: Sequence[str], copies: int, seed: int) -> None:
        """Count a call's samples as drawn (after it succeeded: a failed call is redone)."""
        for p in prompts:
            k = self._key(p, seed)
            self._drawn[k] = self._drawn.get(k, 0) + copies


class RolloutError(RuntimeError):
    """Generation failed for good (e.g. an endpoint kept failing); a rerun resumes the job."""


@runtime_checkable
class RolloutBackend(Protocol):
    """What every rollout backend provides."""

    name: str

    def generate(
        self, prompts: Sequence[str], n: int, sampling: SamplingConfig
    ) -> list[list[Completion]]:
        """Sample ``n`` completions for each prompt; output order follows ``prompts``."""
        ...

    def close(self) -> None:
        """Release the model, engine or connections."""
        ...


#: name -> "module:Class" (imported lazily by :func:`build_backend`).
ROLLOUT_BACKENDS: Registry[str] = Registry("rollout backend")
ROLLOUT_BACKENDS.register("hf")("composition_rl.rollout.hf:HFRollout")
ROLLOUT_BACKENDS.register("openai")("composition_rl.rollout.openai:OpenAIRollout")
ROLLOUT_BACKENDS.register("vllm")("composition_rl.rollout.vllm:VLLMRollout")
ROLLOUT_BACKENDS.register("llama")("composition_rl.rollout.llama:LlamaCppRollout")


def resolve_backend(name: str, model: Any = None, base_url: Any = None) -> str:
    """The backend ``auto`` stands for, one choice for every command and verb: ``openai``
    with an endpoint URL, ``llama`` for a GGUF when llama-cpp-python is installed (decoded on
    its quantized weights), else ``hf``; any other name is itself.

    >>> resolve_backend("auto", "m", "http://localhost:8000/v1"), resolve_backend("hf", "x.gguf")
    ('openai', 'hf')
    """
    if name != "auto":
        return name
    if base_url:
        return "openai"
    import importlib.util

    from composition_rl.io.gguf import is_gguf

    gguf = model is not None and is_gguf(str(model))
    return "llama" if gguf and importlib.util.find_spec("llama_cpp") is not None else "hf"


def build_backend(name: str, **kwargs: Any) -> RolloutBackend:
    """Import and construct the backend registered as ``name``.

    >>> build_backend("nope")
    Traceback (most recent call last):
    ...
    KeyError: "unknown rollout backend 'nope'; known: hf, llama, openai, vllm"
    """
    return ROLLOUT_BACKENDS.build(name, **kwargs)


def load_template(name_or_path: str = "boxed") -> str:
    """A prompt template: a packaged ``prompts/rollout_<name>.txt`` or a file path.

    A template holds ``{question}`` exactly once; nothing else in it is interpreted, so
    LaTeX braces in templates and questions are safe.
    """
    p = Path(name_or_path)
    if p.suffix == ".txt" and p.is_file():
        text = p.read_text(encoding="utf-8")
    else:
        res = resources.files("composition_rl") / "prompts" / f"rollout_{name_or_path}.txt"
        if not res.is_file():
            known = sorted(
                f.name[len("rollout_") : -len(".txt")]
                for f in (resources.files("composition_rl") / "prompts").iterdir()
                if f.name.startswith("rollout_") and f.name.endswith(".txt")
            )
            raise ValueError(
                f"unknown prompt template {name_or_path!r}: not a .txt file and not one of {known}"
            )
        text = res.read_text(encoding="utf-8")
    if text.count("{question}") != 1:
        raise ValueError(
            f"prompt template {name_or_path!r} must contain {{question}} exactly once "
            f"(found {text.count('{question}')})"
        )
    return text.rstrip("\n")


def render_prompt(template: str, question: str) -> str:
    """Put ``question`` into ``template`` (plain substitution, no format-string parsing)."""
    return template.replace("{question}", question.strip())
