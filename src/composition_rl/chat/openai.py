"""OpenAI-compatible chat endpoints (vLLM, SGLang, hosted providers) via the official client.

* Several ``base_urls`` may be given; each attempt goes to the endpoint with the fewest
  requests in flight (ties: round robin).
* ``concurrency`` bounds requests in flight over all endpoints; a request waiting out a
  backoff does not hold a slot.
* Each attempt has a hard ``timeout_s``. Timeouts, connection errors, 5xx/408/409 and
  garbled bodies are retried with exponential backoff and jitter; a 429 waits what its
  ``Retry-After`` (or ``retry-after-ms``) header says, else backs off. The client's own
  retries are off (``max_retries=0``) so every attempt is counted here.
* A request the server can never accept (a 4xx other than 408/409/429, or a 500 whose body
  is a request-validation error, which is how llama.cpp's server answers an unknown field
  value) is not retried: it raises :class:`~composition_rl.chat.base.RequestRefused`
  naming the field and the option to change. A prompt longer than the model's context is
  the exception: it concerns that prompt only (kind ``context_length``).
* Structured output is negotiated (``structured="auto"``): strict ``json_schema`` first
  (vLLM, SGLang, OpenAI), then ``json_object`` with the schema in a ``schema`` field
  (llama.cpp), then the prompt alone, each step taken once, when the server refuses the
  previous one.
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
import json
import logging
import os
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from composition_rl.chat.base import (
    ChatBackend,
    ChatChoice,
    ChatError,
    ChatRequest,
    ChatResponse,
    RequestRefused,
)
from composition_rl.chat.lean_http import lean_transport

__all__ = ["API_KEY_ENV", "STRUCTURED_MODES", "OpenAIChat", "refusal"]

log = logging.getLogger(__name__)

#: The only place the key may come from.
API_KEY_ENV = "OPENAI_API_KEY"

STRUCTURED_MODES = ("auto", "json_schema", "json_object", "none")
#: What ``structured="auto"`` tries next when the server refuses a ``response_format``.
_FALLBACK = {"json_schema": "json_object", "json_object": "none"}

#: Request field -> the setting a user changes (the flags of crl compose/profile/eval).
FIELD_OPTIONS = {
    "response_format": "--structured (auto, json_schema, json_object or none)",
    "max_tokens": "--max-tokens",
    "top_k": "--top-k",
    "top_p": "--top-p",
    "temperature": "--temperature",
    "seed": "--seed",
    "stop": "the stop sequences",
    "n": "-n or the backend's use_n",
    "model": "--model (the name the server serves)",
    "messages": "the prompt template",
}
_FIELD_RE = re.compile(
    r"\b(response_format|json_schema|max_tokens|top_k|top_p|temperature|seed|stop|model|messages)\b"
)
# how a request-validation error reads: pydantic / FastAPI (llama.cpp's server returns these
# as HTTP 500 with the error list as the message), or a plain "invalid request" wording
_VALIDATION_RE = re.compile(
    r"validation error|literal_error|extra_forbidden|Input should be|Field required"
    r"|'loc': \(|\"loc\":|invalid_request_error|Unrecognized request argument",
    re.I,
)
# the field a pydantic error list names first: ('body', 'response_format', 'type')
_LOC_RE = re.compile(r"""['"]loc['"]:\s*[(\[]\s*['"]body['"],\s*['"](\w+)['"]""")
_CONTEXT_RE = re.compile(r"context length|context window|context_length_exceeded", re.I)
# a chat template that takes no system message (Gemma's, Mistral's older ones) raises this
# inside the server, which answers 500 for every request that carries one
_SYSTEM_RE = re.compile(
    r"system role not supported|roles must alternate|system message(s)? (is |are )?not supported",
    re.I,
)


def refusal(status: int, text: str) -> tuple[str, str] | None:
    """(field, option) when an error response means the request itself is refused, else None.

    ``text`` is the error body. A 4xx other than 408/409/429 is a refusal; so is a 500 whose
    body is a validation error. A context-length error concerns one prompt, not the run.

    >>> refusal(500, "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type')}]")
    ('response_format', '--structured (auto, json_schema, json_object or none)')
    >>> refusal(400, "This model's maximum context length is 4096 tokens") is None
    True
    >>> refusal(503, "overloaded") is None, refusal(404, "no such route")[1][:10]
    (True, '--base-url')
    """
    if status in (408, 409, 429) or not (400 <= status < 500 or status == 500):
        return None
    if _SYSTEM_RE.search(text):
        return "messages", "the prompt's system message (the chat template refuses it)"
    if status == 500 and not _VALIDATION_RE.search(text):
        return None  # an ordinary server fault: retried
    if _CONTEXT_RE.search(text):
        return None
    if status in (401, 403):
        return "", f"the key in {API_KEY_ENV}"
    m = _LOC_RE.search(text) or _FIELD_RE.search(text)
    field = "" if m is None else ("response_format" if m.group(1) == "json_schema" else m.group(1))
    if status == 404 and field != "model":
        return field, "--base-url (it ends in /v1) or --model"
    return field, FIELD_OPTIONS.get(field, "the request settings")


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


_timeout = getattr(asyncio, "timeout", None)


def _httpx_response() -> type:
    import httpx2

    return httpx2.Response


def _fold_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The system message's text put in front of the first user message.

    >>> _fold_system([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    [{'role': 'user', 'content': 'S\\n\\nU'}]
    """
    system, rest = messages[0], [dict(m) for m in messages[1:]]
    for m in rest:
        if m.get("role") == "user":
            m["content"] = f"{system['content']}\n\n{m['content']}"
            return rest
    return [{"role": "user", "content": system["content"]}, *rest]


@dataclass
class _Endpoint:
    idx: int
    url: str
    label: str
    outstanding: int = 0


class _LoopState:
    """Clients and the semaphore belong to one event loop (connection pools cannot cross loops)."""

    def __init__(
        self, urls: Sequence[str], key: str, timeout_s: float, concurrency: int, lean: bool
    ) -> None:
        import httpx2
        from openai import AsyncOpenAI

        self.sem = asyncio.Semaphore(concurrency)
        self.clients = []
        for u in urls:
            http_client = None
            if lean and urlsplit(u).scheme == "http":
                http_client = httpx2.AsyncClient(
                    transport=lean_transport(), timeout=timeout_s + 5.0
                )
            self.clients.append(
                AsyncOpenAI(
                    base_url=u,
                    api_key=key,
                    max_retries=0,
                    timeout=timeout_s + 5.0,
                    http_client=http_client,
                )
            )

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
            vLLM/SGLang/OpenAI), ``json_object`` (JSON mode with a ``schema`` field, which
            llama.cpp enforces), ``none`` (prompt only) or ``auto`` (the first of these the
            server accepts; see the module docstring).
        lean_transport: send ``http://`` requests through :func:`~composition_rl.chat.lean_http.lean_transport` (the
            official client still builds, authenticates and checks every request).
        cache: optional :class:`~composition_rl.chat.cache.ResponseCache`.
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
        structured: str = "auto",
        lean_transport: bool = True,
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
        #: the mode requests are sent with now; ``auto`` starts strict and steps down once
        #: per refusal (json_schema -> json_object -> none)
        self.structured_used = "json_schema" if structured == "auto" else structured
        #: set once the server's chat template refuses a system message: from then on the
        #: system text is sent as the start of the first user message
        self.fold_system = False
        self.lean_transport = lean_transport
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
        """Settings safe to write into stats.json: endpoints, limits, structured-output mode, and
        whether an API key is set (never the key)."""
        return {
            "backend": self.name,
            "model": self.model,
            "endpoints": [e.label for e in self.endpoints],
            "concurrency": self.concurrency,
            "timeout_s": self.timeout_s,
            "max_retries": self.max_retries,
            "structured": self.structured,
            "structured_used": self.structured_used,
            "fold_system": self.fold_system,
            "api_key_set": bool(os.environ.get(API_KEY_ENV)),
        }

    def _state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        st = self._states.get(id(loop))
        if st is None:
            st = _LoopState(
                [e.url for e in self.endpoints],
                self._key(),
                self.timeout_s,
                self.concurrency,
                self.lean_transport,
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

    def _request_kwargs(self, req: ChatRequest, mode: str | None = None) -> dict[str, Any]:
        # the body chat.completions.create would send; posted through the client's documented
        # custom-request path (``client.post(..., cast_to=httpx.Response)``), which skips the
        # per-call typed-dict transform and pydantic parsing (a few ms of CPU per call here)
        messages = [dict(m) for m in req.messages]
        if self.fold_system and messages and messages[0].get("role") == "system":
            messages = _fold_system(messages)
        kw: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
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
            kw["top_k"] = req.top_k
        mode = mode or self.structured_used
        if req.json_schema is not None and mode == "json_schema":
            kw["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": dict(req.json_schema), "strict": True},
            }
        elif req.json_schema is not None and mode == "json_object":
            # llama.cpp's servers constrain the reply to a ``schema`` given with JSON mode
            kw["response_format"] = {"type": "json_object", "schema": dict(req.json_schema)}
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
            if code in (400, 413, 422) and _CONTEXT_RE.search(str(exc.message)):
                return "context_length", False, None, detail  # this prompt only
            return f"http_{code}", code >= 500 or code in (408, 409), None, detail
        if isinstance(
            exc,
            (openai.APIResponseValidationError, ValueError, KeyError, TypeError, AttributeError),
        ):
            return "bad_response", True, None, self._redact(f"{type(exc).__name__}: {exc}")
        return f"error_{type(exc).__name__}", False, None, self._redact(str(exc))

    def _backoff(self, attempt: int) -> float:
        base = min(self.backoff_s * (2 ** (attempt - 1)), self.backoff_max_s)
        return base * (0.5 + 0.5 * self._rng.random())  # "equal jitter"

    def _refused(self, exc: BaseException, kind: str, detail: str, attempt: int, kwargs: dict):
        """None when ``exc`` is no refusal; "fallback" when ``auto`` may step down a mode;
        else the :class:`RequestRefused` to raise."""
        import openai

        if not isinstance(exc, openai.APIStatusError) or kind == "context_length":
            return None
        hit = refusal(exc.status_code, str(exc.message))
        if hit is None:
            return None
        field, option = hit
        if _SYSTEM_RE.search(str(exc.message)) and kwargs["messages"][0].get("role") == "system":
            return "fold_system"
        sent_format = "response_format" in kwargs
        if self.structured == "auto" and sent_format and field in ("response_format", ""):
            return "fallback"
        if field == "response_format" and self.structured != "auto":
            option = f"--structured (now {self.structured}; auto negotiates)"
        return RequestRefused(kind, detail, field=field, option=option, attempts=attempt)

    async def _chat(self, req: ChatRequest) -> ChatResponse:
        st = self._state()
        mode = self.structured_used
        kwargs = self._request_kwargs(req, mode)
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
                t_call = time.perf_counter()
                try:
                    call = st.clients[ep.idx].post(
                        "/chat/completions", cast_to=_httpx_response(), body=kwargs
                    )
                    if _timeout is not None:  # Python >= 3.11: no extra task per call
                        async with _timeout(self.timeout_s):
                            raw = await call
                    else:  # pragma: no cover - Python 3.10
                        raw = await asyncio.wait_for(call, self.timeout_s)
                    resp = self._convert(json.loads(raw.content))
                except Exception as exc:  # classified below; nothing is swallowed silently
                    kind, retryable, wait, detail = self._classify(exc)
                    refused = self._refused(exc, kind, detail, attempt, kwargs)
                else:
                    self.stats.latency_s += time.perf_counter() - t_call
                    self.stats.prompt_tokens += resp.prompt_tokens
                    self.stats.completion_tokens += resp.completion_tokens
                    return resp
                finally:
                    ep.outstanding -= 1
                    self.in_flight -= 1
            if refused == "fold_system" or refused == "fallback":
                mode = self._renegotiate(refused, ep.label, kind, detail, mode)
                kwargs = self._request_kwargs(req, mode)
                attempt -= 1  # a negotiation step is no failed attempt
                continue
            if isinstance(refused, RequestRefused):
                raise refused
            if not retryable or attempt > self.max_retries:
                log.debug("request failed for good after %d attempts: %s", attempt, kind)
                # what is worth retrying says nothing about the request: never a final answer
                raise ChatError(kind, detail, attempts=attempt, transient=retryable, endpoint=ep.label)
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

    def _renegotiate(self, refused: str, label: str, kind: str, detail: str, mode: str) -> str:
        """Adapt to an endpoint that refused a system message (``"fold_system"``: send it as
        the start of the user message) or a ``response_format`` (``"fallback"``: send the next
        weaker one); the first refusal decides, for every request. Returns the mode to send."""
        if refused == "fold_system":
            if not self.fold_system:
                self.fold_system = True
                log.warning(
                    "%s: the chat template refuses a system message; sending it as the "
                    "start of the user message from now on",
                    label,
                )
            self.stats.retries += 1
            self.stats.retried_by_kind["refused_system_message"] += 1
            return mode
        if self.structured_used == mode:
            self.structured_used = _FALLBACK[mode]
            log.warning(
                "%s refuses response_format %s (%s); sending %s from now on",
                label,
                mode,
                detail[:200],
                self.structured_used,
            )
        self.stats.retries += 1
        self.stats.retried_by_kind[f"refused_{kind}"] += 1
        return self.structured_used

    def _convert(self, body: Any) -> ChatResponse:
        if (
            not isinstance(body, dict)
            or not isinstance(body.get("choices"), list)
            or not body["choices"]
        ):
            raise ValueError("response has no choices")
        out = []
        for c in sorted(body["choices"], key=lambda c: c.get("index") or 0):
            msg = c.get("message") or {}
            text = msg.get("content") or ""
            if not isinstance(text, str):
                raise ValueError("message content is not text")
            out.append(ChatChoice(text=text, finish_reason=str(c.get("finish_reason") or "stop")))
        usage = body.get("usage") or {}
        pt = int(usage.get("prompt_tokens") or 0)
        ct = int(usage.get("completion_tokens") or 0)
        return ChatResponse(
            choices=tuple(out),
            prompt_tokens=pt,
            completion_tokens=ct,
            model=str(body.get("model") or self.model),
        )

    async def end_loop(self) -> None:
        """Close the clients bound to the running event loop; other loops' clients stay."""
        st = self._states.pop(id(asyncio.get_running_loop()), None)
        if st is not None:
            await st.aclose()

    async def aclose(self) -> None:
        """Close every event loop's clients (those of a loop already gone are dropped)."""
        for st in list(self._states.values()):
            try:
                await st.aclose()
            except RuntimeError:  # the loop that owned it is gone
                pass
        self._states.clear()
