"""The chat interface: ``await backend.chat(ChatRequest) -> ChatResponse`` (n choices).

Every chat backend (an OpenAI-compatible endpoint, a local transformers model) takes the
same :class:`ChatRequest` and returns the same :class:`ChatResponse`, so composition,
profiling rollouts and evaluation can use any of them. Backends are registered by name as
``"module:Class"`` strings and imported only when built, so using an endpoint never imports
torch. This module knows nothing about what the text is for.

A failure that survived every retry is raised as :class:`ChatError` with a short ``kind``
(``timeout``, ``connection``, ``http_500``, ``rate_limited``, ``bad_response`` ...), so a
caller can count it as a reason and go on.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from composition_rl.registry import Registry

__all__ = [
    "CHAT_BACKENDS",
    "ChatBackend",
    "ChatChoice",
    "ChatError",
    "ChatRequest",
    "ChatResponse",
    "ChatStats",
    "RequestRefused",
    "build_chat_backend",
    "run_chat_batch",
    "run_sync",
]


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completions request, independent of the backend.

    Args:
        messages: ``({"role": ..., "content": ...}, ...)`` in order.
        n: completions wanted for this prompt.
        temperature: 0 means greedy.
        top_p: nucleus mass (1.0 disables).
        top_k: top tokens kept; ``None``/0/-1 disables (sent as an extra body field, which
            vLLM and SGLang read and hosted OpenAI does not need).
        max_tokens: most new tokens per completion.
        seed: sampling seed where the backend supports one.
        json_schema: ask for JSON output following this schema (``response_format``).
        stop: stop strings.

    >>> r = ChatRequest.user("hi", max_tokens=8)
    >>> r.messages[0]["role"], r.n
    ('user', 1)
    """

    messages: tuple[Mapping[str, str], ...]
    n: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int | None = None
    max_tokens: int = 1024
    seed: int | None = None
    json_schema: Mapping[str, Any] | None = None
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        bad = []
        if not self.messages:
            bad.append("messages is empty")
        if self.n < 1:
            bad.append(f"n={self.n} (must be >= 1)")
        if self.temperature < 0:
            bad.append(f"temperature={self.temperature} (must be >= 0)")
        if not 0 < self.top_p <= 1:
            bad.append(f"top_p={self.top_p} (must be in (0, 1])")
        if self.max_tokens < 1:
            bad.append(f"max_tokens={self.max_tokens} (must be >= 1)")
        if bad:
            raise ValueError("invalid chat request: " + "; ".join(bad))

    @classmethod
    def user(cls, content: str, system: str | None = None, **kw: Any) -> ChatRequest:
        """A request with one user message (and an optional system message)."""
        msgs: list[dict[str, str]] = []
        if system:
            msgs.append({"role": "system", "content": system})
        msgs.append({"role": "user", "content": content})
        return cls(messages=tuple(msgs), **kw)

    def params(self) -> dict[str, Any]:
        """Everything but the messages, as plain JSON-able values (for cache keys and logs)."""
        return {
            "n": self.n,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k if self.top_k and self.top_k > 0 else None,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "json_schema": _plain(self.json_schema),
            "stop": list(self.stop),
        }

    def cache_key(self, namespace: str) -> str:
        """sha256 of the namespace (backend + model), the parameters and the prompt."""
        blob = json.dumps(
            {
                "ns": namespace,
                "params": self.params(),
                "messages": [dict(m) for m in self.messages],
            },
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _plain(obj: Any) -> Any:
    if obj is None:
        return None
    return json.loads(json.dumps(obj, sort_keys=True))


@dataclass(frozen=True)
class ChatChoice:
    """One completion: its text and why generation stopped (``stop``, ``length``, ...)."""

    text: str
    finish_reason: str = "stop"
    completion_tokens: int = 0


@dataclass(frozen=True)
class ChatResponse:
    """All ``n`` choices of one request plus token usage.

    ``cached`` is True when the response came from the on-disk cache (no call was made).
    """

    choices: tuple[ChatChoice, ...]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model: str = ""
    cached: bool = False

    @property
    def text(self) -> str:
        """The first choice's text."""
        return self.choices[0].text

    def to_dict(self) -> dict[str, Any]:
        """The JSON form the response cache stores (``cached`` is left out)."""
        return {
            "choices": [asdict(c) for c in self.choices],
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "model": self.model,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], cached: bool = False) -> ChatResponse:
        """The response :meth:`to_dict` wrote, marked ``cached`` when it comes from the cache
        (missing token counts read as 0, a missing model as ``""``)."""
        return cls(
            choices=tuple(ChatChoice(**c) for c in d["choices"]),
            prompt_tokens=int(d.get("prompt_tokens", 0)),
            completion_tokens=int(d.get("completion_tokens", 0)),
            model=str(d.get("model", "")),
            cached=cached,
        )


class ChatError(Exception):
    """A request that failed for good (after retries). ``kind`` is a short countable reason.

    ``transient``: the failure says nothing about the request (a timeout, a connection error,
    a 5xx, rate limiting that outlasted the retries), so a caller must not record it as the
    request's outcome: it stops or leaves the item for the next run. ``endpoint``: where the
    last attempt went (a URL; no secret), for the message.
    """

    def __init__(self, kind: str, detail: str = "", attempts: int = 1, transient: bool = False,
                 endpoint: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail
        self.attempts = attempts
        self.transient = transient
        self.endpoint = endpoint


class RequestRefused(ChatError, ValueError):
    """The server refuses the request as such: no retry and no other prompt can change that.

    A 4xx other than 408/409/429 (bad settings, an unknown model, a missing key), or a 500
    whose body is a request-validation error (llama.cpp's server answers a field it does not
    accept that way). Every request of a run would fail the same way, so a caller stops the
    run with this one message instead of counting a failure per item. ``field`` is the
    request field the server named (``response_format``, ``max_tokens`` ...) or ``""``;
    ``option`` is the setting to change. It is a ``ValueError`` too: like an invalid config,
    it is fixed by changing a setting, and command lines report it as such.

    >>> e = RequestRefused("http_400", "HTTP 400: bad", field="max_tokens", option="--max-tokens")
    >>> str(e)
    'the server refuses the request (http_400: HTTP 400: bad); change --max-tokens'
    """

    def __init__(
        self, kind: str, detail: str = "", field: str = "", option: str = "", attempts: int = 1
    ) -> None:
        super().__init__(kind, detail, attempts)
        self.field = field
        self.option = option
        fix = f"; change {option}" if option else ""
        self.args = (f"the server refuses the request ({kind}: {detail}){fix}",)

    def __str__(self) -> str:
        return self.args[0]


@dataclass
class ChatStats:
    """Counters every backend keeps (what ``stats.json`` reports under ``llm``).

    ``requests`` are calls of :meth:`ChatBackend.chat`; ``calls`` are attempts that reached
    the model (HTTP requests or local generations), so retries and cache hits show up as the
    difference.
    """

    requests: int = 0
    calls: int = 0
    ok: int = 0
    cache_hits: int = 0
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: seconds spent in successful attempts, as the client saw them (queueing included)
    latency_s: float = 0.0
    retried_by_kind: Counter = field(default_factory=Counter)
    failed_by_kind: Counter = field(default_factory=Counter)
    calls_by_endpoint: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        """The counters as JSON for ``stats.json``: latency rounded to milliseconds, the per-kind
        and per-endpoint counters as sorted plain dicts."""
        d = asdict(self)
        d["latency_s"] = round(self.latency_s, 3)
        for k in ("retried_by_kind", "failed_by_kind", "calls_by_endpoint"):
            d[k] = dict(sorted(getattr(self, k).items()))
        return d


class ChatBackend:
    """Base class: subclasses implement :meth:`_chat` (one request, may raise ChatError).

    :meth:`chat` adds the optional response cache and the request/cache counters; the
    subclass counts calls, retries and tokens of what it actually sent.
    """

    name: str = "base"

    def __init__(self, model: str, cache: Any | None = None) -> None:
        self.model = model
        self.cache = cache  # a backends.cache.ResponseCache or None
        self.stats = ChatStats()

    @property
    def namespace(self) -> str:
        """Cache namespace: responses of different backends or models never mix."""
        return f"{self.name}:{self.model}"

    async def chat(self, req: ChatRequest) -> ChatResponse:
        """The response to ``req``: from the cache when it holds it, else from :meth:`_chat`, whose
        successful response is then cached.

        Raises:
            ChatError: the request failed (counted in ``stats.failed_by_kind``).
        """
        self.stats.requests += 1
        key = req.cache_key(self.namespace) if self.cache is not None else ""
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                self.stats.cache_hits += 1
                return ChatResponse.from_dict(hit, cached=True)
        try:
            resp = await self._chat(req)
        except ChatError as e:
            self.stats.failed_by_kind[e.kind] += 1
            raise
        self.stats.ok += 1
        if self.cache is not None:
            self.cache.put(key, resp.to_dict())
        return resp

    async def _chat(self, req: ChatRequest) -> ChatResponse:  # pragma: no cover - abstract
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release connections or models."""

    async def end_loop(self) -> None:
        """Release what is bound to the running event loop (connections), keep the rest.

        Called by :func:`run_chat_batch` before its loop closes.
        """

    def describe(self) -> dict[str, Any]:
        """Settings safe to write into stats.json (never a secret)."""
        return {"backend": self.name, "model": self.model}


def run_chat_batch(
    backend: ChatBackend,
    requests: Sequence[ChatRequest],
    on_result: Callable[[int, ChatResponse | ChatError], None] | None = None,
) -> list[ChatResponse | ChatError]:
    """Run ``requests`` concurrently from synchronous code; results in input order.

    Concurrency is the backend's own limit. A failed request yields its :class:`ChatError`
    in place, so one bad prompt never sinks a batch.
    """

    async def one(i: int, r: ChatRequest) -> ChatResponse | ChatError:
        try:
            out: ChatResponse | ChatError = await backend.chat(r)
        except ChatError as e:
            out = e
        if on_result is not None:
            on_result(i, out)
        return out

    async def main() -> list[ChatResponse | ChatError]:
        try:
            return list(await asyncio.gather(*(one(i, r) for i, r in enumerate(requests))))
        finally:
            await backend.end_loop()

    return run_sync(main())


def run_sync(coro: Any, loop: asyncio.AbstractEventLoop | None = None) -> Any:
    """Run ``coro`` to completion from synchronous code and return its result.

    On ``loop`` when given (kept open for the caller's next call), else on a new loop that
    is closed after. Where this thread already runs an event loop (a Jupyter cell, an async
    web handler), ``asyncio.run`` and ``run_until_complete`` refuse to start: the coroutine
    then runs on a helper thread, and this call waits for it (each request in it has its
    backend's timeout, so the wait is bounded by them).

    >>> async def two():
    ...     return 2
    >>> run_sync(two())
    2
    """

    def go() -> Any:
        return asyncio.run(coro) if loop is None else loop.run_until_complete(coro)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return go()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = go()
        except BaseException as e:  # handed back to the caller's thread below
            box["error"] = e

    t = threading.Thread(target=target, name="crl-run-sync", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


#: name -> "module:Class", imported lazily by :func:`build_chat_backend`.
CHAT_BACKENDS: Registry[str] = Registry("chat backend")
CHAT_BACKENDS.register("openai")("composition_rl.chat.openai:OpenAIChat")
CHAT_BACKENDS.register("local_hf")("composition_rl.chat.hf:LocalHFChat")


def build_chat_backend(name: str, **kwargs: Any) -> ChatBackend:
    """Import and construct the chat backend registered as ``name``.

    >>> build_chat_backend("nope")
    Traceback (most recent call last):
    ...
    KeyError: "unknown chat backend 'nope'; known: local_hf, openai"
    """
    return CHAT_BACKENDS.build(name, **kwargs)
