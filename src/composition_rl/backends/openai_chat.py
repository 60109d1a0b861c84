"""OpenAI-compatible chat endpoints (vLLM, SGLang, hosted providers) via the official client.

* Several ``base_urls`` may be given; each attempt goes to the endpoint with the fewest
  requests in flight (ties: round robin).
* ``concurrency`` bounds requests in flight over all endpoints; a request waiting out a
  backoff does not hold a slot.
* Each attempt has a hard ``timeout_s``. Timeouts, connection errors, 5xx/408/409 and
  garbled bodies are retried with exponential backoff and jitter; a 429 waits what its
  ``Retry-After`` (or ``retry-after-ms``) header says, else backs off. The client's own
  retries are off (``max_retries=0``) so every attempt is counted here.
* The API key is read only from the ``OPENAI_API_KEY`` environment variable, never taken as
  an argument, never logged, and scrubbed from any error text we keep. Servers that need no
  key (a local vLLM) get the placeholder ``EMPTY``.

>>> b = OpenAIChat(base_urls=["http://127.0.0.1:1/v1"], model="m")
>>> b.describe()["endpoints"]
['http://127.0.0.1:1/v1']
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from composition_rl.backends.base import (
    ChatBackend,
    ChatChoice,
    ChatError,
    ChatRequest,
    ChatResponse,
)

__all__ = ["API_KEY_ENV", "OpenAIChat"]

log = logging.getLogger(__name__)

#: The only place the key may come from.
API_KEY_ENV = "OPENAI_API_KEY"

STRUCTURED_MODES = ("json_schema", "json_object", "none")


def _safe_url(url: str) -> str:
    """The URL without any ``user:password@`` part, for logs and stats."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        host = parts.hostname or ""
        if parts.port:
            host = f"{host}:{parts.port}"
        parts = parts._replace(netloc=host)
    return urlunsplit(parts)


def parse_retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` / ``retry-after`` (seconds or HTTP date).

    >>> parse_retry_after({"retry-after": "2"})
    2.0
    >>> parse_retry_after({"retry-after-ms": "250"})
    0.25
    >>> parse_retry_after({}) is None
    True
    """
    if headers is None:
        return None
    for name, div in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        v = headers.get(name)
        if v is None:
            continue
        try:
            secs = float(v) / div
        except ValueError:
            if name == "retry-after":
                try:
                    when = email.utils.parsedate_to_datetime(v).timestamp()
                except (TypeError, ValueError):
                    return None
                secs = when - (time.time() if now is None else now)
            else:
                continue
        if secs != secs or secs < 0:  # NaN or in the past
            return 0.0
        return secs
    return None


@dataclass
class _Endpoint:
    idx: int
    url: str
    label: str
    outstanding: int = 0


class _LoopState:
    """Clients and the semaphore belong to one event loop (httpx pools cannot cross loops)."""

    def __init__(self, urls: Sequence[str], key: str, timeout_s: float, concurrency: int) -> None:
        from openai import AsyncOpenAI

        self.sem = asyncio.Semaphore(concurrency)
        self.clients = [
            AsyncOpenAI(base_url=u, api_key=key, max_retries=0, timeout=timeout_s + 5.0)
            for u in urls
        ]

    async def aclose(self) -> None:
        for c in self.clients:
            await c.close()


class OpenAIChat(ChatBackend):
    """Chat completions against one or more OpenAI-compatible base URLs.

    Args:
        base_urls: e.g. ``["http://gpu1:8000/v1", "http://gpu2:8000/v1"]``.
        model: the served model name.
        concurrency: most requests in flight over all endpoints.
        timeout_s: hard limit on one attempt.
        max_retries: retries after the first attempt (so ``max_retries + 1`` attempts).
        backoff_s: first backoff; doubles each retry, with jitter, up to ``backoff_max_s``.
        max_retry_after_s: cap on a server's ``Retry-After`` wait.
        structured: how a request's ``json_schema`` is sent: ``json_schema`` (strict schema,
            vLLM/SGLang/OpenAI), ``json_object`` (JSON mode only) or ``none`` (prompt only).
        cache: optional :class:`~composition_rl.backends.cache.ResponseCache`.
    """

    name = "openai"

    def __init__(
        self,
        base_urls: Sequence[str] | str,
        model: str,
        concurrency: int = 64,
        timeout_s: float = 120.0,
        max_retries: int = 6,
        backoff_s: float = 0.5,
        backoff_max_s: float = 30.0,
        max_retry_after_s: float = 120.0,
        structured: str = "json_schema",
        cache: Any | None = None,
    ) -> None:
        super().__init__(model=model, cache=cache)
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls)
        bad = []
        if not urls:
            bad.append("no base URL given (pass --base-url at least once)")
        for u in urls:
            if not urlsplit(u).scheme.startswith("http"):
                bad.append(f"base URL {_safe_url(u)!r} is not http(s)")
        if not model:
            bad.append("model is empty (pass --model)")
        if concurrency < 1:
            bad.append(f"concurrency={concurrency} (must be >= 1)")
        if timeout_s <= 0:
            bad.append(f"timeout_s={timeout_s} (must be > 0)")
        if max_retries < 0:
            bad.append(f"max_retries={max_retries} (must be >= 0)")
        if structured not in STRUCTURED_MODES:
            bad.append(f"structured={structured!r} (one of {', '.join(STRUCTURED_MODES)})")
        if bad:
            raise ValueError("invalid openai backend settings: " + "; ".join(bad))
        self.endpoints = [_Endpoint(i, u, _safe_url(u)) for i, u in enumerate(urls)]
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.max_retry_after_s = max_retry_after_s
        self.structured = structured
        self._rr = 0
        self._rng = random.Random()
        self._states: dict[int, _LoopState] = {}
        self.in_flight = 0
        self.max_in_flight = 0

    # -- the key: read when a client is built, never stored on self -------------------------
    @staticmethod
    def _key() -> str:
        return os.environ.get(API_KEY_ENV) or "EMPTY"

    def _redact(self, text: str) -> str:
        key = os.environ.get(API_KEY_ENV)
        if key and len(key) >= 4:
            text = text.replace(key, "***")
        return text[:500]

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self.model,
            "endpoints": [e.label for e in self.endpoints],
            "concurrency": self.concurrency,
            "timeout_s": self.timeout_s,
            "max_retries": self.max_retries,
            "structured": self.structured,
            "api_key_set": bool(os.environ.get(API_KEY_ENV)),
        }

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        st = self._states.get(id(loop))
        if st is None:
            st = _LoopState(
                [e.url for e in self.endpoints], self._key(), self.timeout_s, self.concurrency
            )
            self._states = {id(loop): st}  # drop clients of loops that are gone
        return st

    def _pick(self) -> _Endpoint:
        """Least outstanding requests; ties broken round robin."""
        low = min(e.outstanding for e in self.endpoints)
        n = len(self.endpoints)
        for k in range(n):
            e = self.endpoints[(self._rr + k) % n]
            if e.outstanding == low:
                self._rr = (e.idx + 1) % n
                return e
        raise AssertionError("unreachable")

    def _request_kwargs(self, req: ChatRequest) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in req.messages],
            "n": req.n,
            "temperature": req.temperature,
            "top_p": req.top_p,
            "max_tokens": req.max_tokens,
        }
        if req.seed is not None:
            kw["seed"] = req.seed
        if req.stop:
            kw["stop"] = list(req.stop)
        if req.top_k and req.top_k > 0:
            kw["extra_body"] = {"top_k": req.top_k}
        if req.json_schema is not None and self.structured == "json_schema":
            kw["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": dict(req.json_schema), "strict": True},
            }
        elif req.json_schema is not None and self.structured == "json_object":
            kw["response_format"] = {"type": "json_object"}
        return kw

    def _classify(self, exc: BaseException) -> tuple[str, bool, float | None, str]:
        """(kind, retryable, server-requested wait, detail) for a failed attempt."""
        import openai

        if isinstance(exc, (asyncio.TimeoutError, openai.APITimeoutError)):
            return "timeout", True, None, f"no response within {self.timeout_s}s"
        if isinstance(exc, openai.APIConnectionError):
            return "connection", True, None, self._redact(str(exc))
        if isinstance(exc, openai.APIStatusError):
            code = exc.status_code
            detail = self._redact(f"HTTP {code}: {exc.message}")
            if code == 429:
                wait = parse_retry_after(exc.response.headers)
                return "rate_limited", True, wait, detail
            return f"http_{code}", code >= 500 or code in (408, 409), None, detail
        if isinstance(exc, (openai.APIResponseValidationError, ValueError, KeyError, TypeError)):
            return "bad_response", True, None, self._redact(f"{type(exc).__name__}: {exc}")
        return f"error_{type(exc).__name__}", False, None, self._redact(str(exc))

    def _backoff(self, attempt: int) -> float:
        base = min(self.backoff_s * (2 ** (attempt - 1)), self.backoff_max_s)
        return base * (0.5 + 0.5 * self._rng.random())  # "equal jitter"

    async def _chat(self, req: ChatRequest) -> ChatResponse:
        st = self._state()
        kwargs = self._request_kwargs(req)
        attempt = 0
        while True:
            attempt += 1
            async with st.sem:
                ep = self._pick()
                ep.outstanding += 1
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                self.stats.calls += 1
                self.stats.calls_by_endpoint[ep.label] += 1
                try:
                    completion = await asyncio.wait_for(
                        st.clients[ep.idx].chat.completions.create(**kwargs), self.timeout_s
                    )
                    resp = self._convert(completion, req)
                except Exception as exc:  # classified below; nothing is swallowed silently
                    kind, retryable, wait, detail = self._classify(exc)
                else:
                    self.stats.prompt_tokens += resp.prompt_tokens
                    self.stats.completion_tokens += resp.completion_tokens
                    return resp
                finally:
                    ep.outstanding -= 1
                    self.in_flight -= 1
            if not retryable or attempt > self.max_retries:
                log.debug("request failed for good after %d attempts: %s", attempt, kind)
                raise ChatError(kind, detail, attempts=attempt)
            self.stats.retries += 1
            self.stats.retried_by_kind[kind] += 1
            if wait is not None:
                delay = min(wait, self.max_retry_after_s) * (1.0 + 0.1 * self._rng.random())
            else:
                delay = self._backoff(attempt)
            log.debug(
                "retrying after %s (attempt %d) in %.2fs via %s", kind, attempt, delay, ep.label
            )
            await asyncio.sleep(delay)

    def _convert(self, completion: Any, req: ChatRequest) -> ChatResponse:
        choices = getattr(completion, "choices", None)
        if not choices:
            raise ValueError("response has no choices")
        out = []
        for c in sorted(choices, key=lambda c: c.index or 0):
            msg = c.message
            text = (msg.content if msg is not None else None) or ""
            out.append(ChatChoice(text=text, finish_reason=str(c.finish_reason or "stop")))
        usage = getattr(completion, "usage", None)
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        return ChatResponse(
            choices=tuple(out),
            prompt_tokens=pt,
            completion_tokens=ct,
            model=str(completion.model or self.model),
        )

    async def end_loop(self) -> None:
        st = self._states.pop(id(asyncio.get_running_loop()), None)
        if st is not None:
            await st.aclose()

    async def aclose(self) -> None:
        for st in list(self._states.values()):
            try:
                await st.aclose()
            except RuntimeError:  # the loop that owned it is gone
                pass
        self._states.clear()
