"""A real loopback HTTP server that speaks the OpenAI chat-completions API, with faults.

It listens on 127.0.0.1 on a random free port, runs its own asyncio loop in a daemon
thread, and answers ``POST /v1/chat/completions`` with whatever ``responder(body)``
returns (a string used for every one of the ``n`` choices, or a list of ``n`` strings).
``faults(body, attempt)`` may inject, per request, one :class:`Fault`; ``attempt`` counts
earlier requests with the same body, so "fail the first try only" is easy to script.

Faults: ``delay`` (sleep, then answer), ``status`` (e.g. 500), ``rate_limit`` (429 with
``Retry-After``), ``malformed`` (200 with broken JSON), ``truncate`` (half the text,
``finish_reason: length``), ``drop`` (close the connection without a reply).

>>> with FakeOpenAIServer(lambda body: "hello") as srv:
...     srv.url.startswith("http://127.0.0.1:")
True
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Fault", "FakeOpenAIServer"]


@dataclass(frozen=True)
class Fault:
    """One injected fault (see the module docstring for the kinds)."""

    kind: str
    seconds: float = 0.0
    status: int = 500
    retry_after: str | None = "0.05"
    message: str = "injected server error"  # "{auth}" is replaced by the Authorization header

    def __post_init__(self) -> None:
        kinds = ("delay", "status", "rate_limit", "malformed", "truncate", "drop")
        if self.kind not in kinds:
            raise ValueError(f"unknown fault {self.kind!r}; known: {', '.join(kinds)}")


Responder = Callable[[dict], "str | list[str]"]
FaultFn = Callable[[dict, int], "Fault | None"]

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def body_key(body: dict) -> str:
    """Stable hash of a request body (messages and sampling), used to count attempts."""
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def _words(text: str) -> int:
    return len(text.split())


class FakeOpenAIServer:
    """Loopback OpenAI-compatible server; use as a context manager.

    Args:
        responder: body -> reply text (or a list of ``n`` texts).
        faults: (body, attempt) -> Fault or None.
        latency_s: fixed delay before every reply (the benchmark's 150 ms).
        model: the model name reported back.
    """

    def __init__(
        self,
        responder: Responder,
        faults: FaultFn | None = None,
        latency_s: float = 0.0,
        model: str = "fake-model",
    ) -> None:
        self.responder = responder
        self.faults = faults
        self.latency_s = latency_s
        self.model = model
        self.requests = 0
        self.completed = 0
        self.faults_injected: Counter = Counter()
        self.attempts: Counter = Counter()
        self.auth_headers: set[str] = set()
        self.bodies: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> FakeOpenAIServer:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)

            async def boot() -> None:
                self._server = await asyncio.start_server(
                    self._handle, "127.0.0.1", 0, backlog=1024
                )
                self.port = self._server.sockets[0].getsockname()[1]

            loop.run_until_complete(boot())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-openai", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake OpenAI server did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return

        async def shut() -> None:
            if self._server is not None:
                self._server.close()
            for t in asyncio.all_tasks():
                if t is not asyncio.current_task():
                    t.cancel()

        fut = asyncio.run_coroutine_threadsafe(shut(), loop)
        try:
            fut.result(5)
        except Exception:
            pass
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)
        self._loop = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- HTTP ------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    return
                method, path, _ = line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    headers[k.strip().lower()] = v.strip()
                n = int(headers.get("content-length", "0"))
                raw = await reader.readexactly(n) if n else b""
                keep = await self._respond(method, path, headers, raw, writer)
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        except asyncio.CancelledError:
            return
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        payload: bytes,
        extra: dict[str, str] | None = None,
    ) -> None:
        head = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
            "Content-Type: application/json",
            f"Content-Length: {len(payload)}",
            "Connection: keep-alive",
        ]
        for k, v in (extra or {}).items():
            head.append(f"{k}: {v}")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
        await writer.drain()

    async def _respond(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        raw: bytes,
        writer: asyncio.StreamWriter,
    ) -> bool:
        if method != "POST" or not path.rstrip("/").endswith("/chat/completions"):
            await self._send(
                writer, 404, b'{"error":{"message":"not found","type":"invalid_request_error"}}'
            )
            return True
        body = json.loads(raw)
        key = body_key(body)
        with self._lock:
            self.requests += 1
            attempt = self.attempts[key]
            self.attempts[key] += 1
            if "authorization" in headers:
                self.auth_headers.add(headers["authorization"])
            self.bodies.append(body)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            fault = self.faults(body, attempt) if self.faults else None
            if fault is not None:
                self.faults_injected[fault.kind] += 1
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            if fault is not None and fault.kind == "delay":
                await asyncio.sleep(fault.seconds)
            if fault is not None and fault.kind == "drop":
                writer.transport.abort()
                return False
            if fault is not None and fault.kind in ("status", "rate_limit", "malformed"):
                await self._send_fault(writer, fault, headers)
                return True
            truncate = fault is not None and fault.kind == "truncate"
            payload = self._completion(body, key, attempt, truncate)
            await self._send(writer, 200, json.dumps(payload).encode())
            with self._lock:
                self.completed += 1
            return True
        finally:
            with self._lock:
                self.in_flight -= 1

    async def _send_fault(self, writer: asyncio.StreamWriter, fault: Fault, headers: dict[str, str]) -> None:
        """The error reply of a ``status``, ``rate_limit`` or ``malformed`` fault."""
        if fault.kind == "status":
            await self._send(
                writer,
                fault.status,
                json.dumps(
                    {
                        "error": {
                            "message": fault.message.replace(
                                "{auth}", headers.get("authorization", "")
                            ),
                            "type": "server_error",
                        }
                    }
                ).encode(),
            )
            return
        if fault.kind == "rate_limit":
            extra = {"Retry-After": fault.retry_after} if fault.retry_after is not None else {}
            await self._send(
                writer,
                429,
                json.dumps(
                    {"error": {"message": "rate limited", "type": "rate_limit_error"}}
                ).encode(),
                extra,
            )
            return
        if fault.kind == "malformed":
            await self._send(
                writer,
                200,
                b'{"id": "chatcmpl-x", "object": "chat.completion", "choices": [{"index": 0, "mess',
            )

    def _completion(self, body: dict, key: str, attempt: int, truncate: bool) -> dict:
        """The chat completion the responder gives for ``body`` (its texts cut in half and
        marked ``length`` when ``truncate``), with usage counted in words."""
        n = int(body.get("n") or 1)
        reply = self.responder(body)
        texts = [reply] * n if isinstance(reply, str) else list(reply)
        finish = ["stop"] * len(texts)
        if truncate:
            texts = [t[: len(t) // 2] for t in texts]
            finish = ["length"] * len(texts)
        prompt_words = sum(_words(str(m.get("content", ""))) for m in body.get("messages", []))
        completion_words = sum(_words(t) for t in texts)
        payload = {
            "id": f"chatcmpl-{key}-{attempt}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [
                {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": f}
                for i, (t, f) in enumerate(zip(texts, finish))
            ],
            "usage": {
                "prompt_tokens": prompt_words,
                "completion_tokens": completion_words,
                "total_tokens": prompt_words + completion_words,
            },
        }
        return payload

    def reset_counts(self) -> None:
        with self._lock:
            self.requests = 0
            self.completed = 0
            self.faults_injected.clear()
            self.bodies.clear()
            self.max_in_flight = 0
