"""The LLM engine's settings (one frozen dataclass; ``crl compose`` flags are generated from
its fields) and the chat backend they name."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from composition_rl.chat.base import CHAT_BACKENDS, ChatBackend

__all__ = ["DEPENDENCE_MODES", "PLANS", "STRUCTURED", "VERIFY_MODES", "LLMComposeConfig", "build_backend"]

VERIFY_MODES = ("auto", "always", "never")
DEPENDENCE_MODES = ("model", "blind", "exact")
STRUCTURED = ("auto", "json_schema", "json_object", "none")
PLANS = ("program", "model")


def _h(help_: str, **more: Any) -> dict[str, Any]:
    return {"help": help_, **more}


@dataclass(frozen=True)
class LLMComposeConfig:
    """How the LLM engine talks to its model (each field's help is its documentation; the
    API key is read from ``OPENAI_API_KEY`` only and is never part of the config)."""

    backend: str = field(default="openai", metadata=_h(
        "chat backend: openai (any OpenAI-compatible endpoint) or local_hf (a local transformers "
        "model directory)", flag="--llm-backend", choices=CHAT_BACKENDS.names))
    base_urls: tuple[str, ...] = field(default=(), metadata=_h(
        "OpenAI-compatible base URL, e.g. http://host:8000/v1 (repeatable; least-loaded balancing)",
        flag="--base-url", append=True, metavar="URL"))
    model: str = field(default="", metadata=_h(
        "served model name, or a model directory for --llm-backend local_hf", no_default_in_help=True))
    concurrency: int = field(default=64, metadata=_h("requests in flight"))
    timeout_s: float = field(default=120.0, metadata=_h("per-request timeout in seconds", flag="--timeout"))
    max_retries: int = field(default=6, metadata=_h("retries on timeouts, 5xx, 429, connection errors"))
    stop_after: int = field(default=16, metadata=_h(
        "stop the run when this many candidates in a row failed for want of an answer (timeouts, "
        "connection errors, 5xx, after their retries): the endpoint is down. Such candidates are "
        "never recorded as rejected; a rerun retries them"))
    temperature: float = field(default=0.1, metadata=_h("sampling temperature (paper, Section 3.4: 0.1)"))
    top_p: float = field(default=0.7, metadata=_h("nucleus mass (paper: 0.7)"))
    max_tokens: int = field(default=2048, metadata=_h(
        "most tokens per reply; a reply cut off there is a counted rejection"))
    structured: str = field(default="auto", metadata=_h(
        "how JSON output is requested: auto (json_schema, else json_object with a schema, else the "
        "prompt alone, as the server accepts), or one of them", choices=STRUCTURED))
    verify: str = field(default="auto", metadata=_h(
        "verification calls: auto (only where exact checks cannot decide), always (one per link, "
        "the paper's stricter self-check), never", choices=VERIFY_MODES))
    dependence: str = field(default="model", metadata=_h(
        "check 5 where exact reading cannot decide whether the answer depends on the variable: model "
        "(solve the later problem at v2 and at v2 + 1; the same answer rejects the chain), blind "
        "(model, and then solve it with the variable's value withheld: q2's answer reached without "
        "the value is a shortcut, rejected as revealed_model; one more call per link; a model that "
        "knows the source problems reaches their answers anyway, so use it with the policy being "
        "trained, on data it has not memorised: docs/composition.md), or exact "
        "(leave such links \"unknown\" in the record)", choices=DEPENDENCE_MODES))
    plan: str = field(default="program", metadata=_h(
        "who does what in a link: program (v1 is q1's exact answer or a number the symbolic engine "
        "derives from it, the constant is the symbolic finder's pick where it has a safe one, the "
        "relation is computed; the model writes the definition of X, and places a constant only "
        "where the finder has none, e.g. a number in words) or model (the model proposes v1, the "
        "definition, the constant and the rewritten problem; the exact checks read it)",
        flag="--llm-plan", choices=PLANS))
    feedback_tries: int = field(default=1, metadata=_h(
        "a definition or placed constant the exact checks reject for something the model can mend "
        "(words not in what problem 1 asks, a constant not written in problem 2, no JSON object) "
        "goes back to the model with the reason this many times; 0 never"))
    cache: str | None = field(default=None, metadata=_h(
        "response cache file (default OUT/llm_cache.jsonl)", type=str))
    no_cache: bool = field(default=False, metadata=_h("do not cache responses"))
    device: str = field(default="auto", metadata=_h("device for --llm-backend local_hf", no_default_in_help=True))
    max_definition_chars: int = field(default=300, metadata=_h("longest accepted definition", cli=False))

    def __post_init__(self) -> None:
        bad = []
        if self.backend not in CHAT_BACKENDS:
            bad.append(f"backend={self.backend!r} ({' or '.join(CHAT_BACKENDS.names())})")
        if not self.model:
            bad.append("model is empty (pass --model)")
        if self.concurrency < 1:
            bad.append(f"concurrency={self.concurrency} (must be >= 1)")
        if self.timeout_s <= 0:
            bad.append(f"timeout_s={self.timeout_s} (must be > 0)")
        if self.max_retries < 0:
            bad.append(f"max_retries={self.max_retries} (must be >= 0)")
        if self.feedback_tries < 0:
            bad.append(f"feedback_tries={self.feedback_tries} (must be >= 0)")
        if self.stop_after < 1:
            bad.append(f"stop_after={self.stop_after} (must be >= 1)")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            bad.append(f"temperature={self.temperature}, top_p={self.top_p} (need >= 0 and (0, 1])")
        if self.max_tokens < 16:
            bad.append(f"max_tokens={self.max_tokens} (must be >= 16)")
        if self.structured not in STRUCTURED:
            bad.append(f"structured={self.structured!r} (one of {', '.join(STRUCTURED)})")
        if self.verify not in VERIFY_MODES:
            bad.append(f"verify={self.verify!r} (one of {', '.join(VERIFY_MODES)})")
        if self.plan not in PLANS:
            bad.append(f"plan={self.plan!r} (one of {', '.join(PLANS)})")
        if self.dependence not in DEPENDENCE_MODES:
            bad.append(f"dependence={self.dependence!r} (one of {', '.join(DEPENDENCE_MODES)})")
        if bad:
            raise ValueError("invalid LLM engine settings: " + "; ".join(bad))

    def public(self) -> dict[str, Any]:
        """Settings for stats.json (the key is never part of the config)."""
        d = asdict(self)
        d["base_urls"] = [re.sub(r"//[^/@]*@", "//", u) for u in self.base_urls]
        return d


def build_backend(cfg: LLMComposeConfig, cache: Any | None) -> ChatBackend:
    """The chat backend ``cfg`` names, with ``cache`` attached."""
    from composition_rl.chat.base import build_chat_backend

    if cfg.backend == "openai":
        if not cfg.base_urls:
            raise ValueError(
                "the openai backend needs an endpoint: pass --base-url URL (repeatable)"
            )
        return build_chat_backend(
            "openai",
            base_urls=list(cfg.base_urls),
            model=cfg.model,
            concurrency=cfg.concurrency,
            timeout_s=cfg.timeout_s,
            max_retries=cfg.max_retries,
            structured=cfg.structured,
            cache=cache,
        )
    return build_chat_backend("local_hf", model=cfg.model, device=cfg.device, cache=cache)
