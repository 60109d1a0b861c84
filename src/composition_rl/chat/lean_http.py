"""The lean HTTP/1.1 transport of the OpenAI-compatible backend: a named seam with a clear
opt-out (``OpenAIChat(lean_transport=False)``, which keeps the official client's httpx
transport; ``https://`` endpoints always keep it).

Why it exists (docs/benchmarks.md, ``benchmarks/llm_compose_throughput.py --compare-httpx``):
the default transport (httpx + httpcore + anyio) spends several ms of CPU per request on a
2-core client, which capped composition at ~100 calls/s; with this one the engine reaches
0.93-0.94 of the concurrency/latency bound (395-400 calls/s at 64 in flight, 150 ms).
"""

from __future__ import annotations

import asyncio

__all__ = ["lean_transport"]


def lean_transport():
    """A lean HTTP/1.1 keep-alive transport on asyncio streams, for ``http://`` endpoints.

    The official client's default transport (httpx + httpcore + anyio) spends several ms of
    CPU per request on this class of machine, which caps a 2-core client at ~100 calls/s no
    matter how many servers answer. This transport does one write per request and reads
    Content-Length or chunked bodies; everything above the socket (auth headers, error
    mapping to ``APIStatusError``/``APIConnectionError``, Retry-After headers) is still the
    official client's. ``https://`` endpoints keep the default transport.
    """

    import httpx2  # imported here: importing this module never imports httpx

    class StreamTransport(httpx2.AsyncBaseTransport):
        def __init__(self) -> None:
            self._idle: dict[
                tuple[str, int], list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]
            ] = {}

        async def _conn(self, host: str, port: int):
            pool = self._idle.get((host, port))
            while pool:
                r, w = pool.pop()
                if not r.at_eof() and not w.is_closing():
                    return r, w
                w.close()
            return await asyncio.open_connection(host, port)

        async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
            url = request.url
            if url.scheme != "http":
                raise httpx2.UnsupportedProtocol(
                    f"lean transport serves http only, not {url.scheme}", request=request
                )
            host, port = url.host, url.port or 80
            body = await request.aread()
            head = [request.method.encode() + b" " + url.raw_path + b" HTTP/1.1\r\n"]
            head += [k + b": " + v + b"\r\n" for k, v in request.headers.raw]
            data = b"".join(head) + b"\r\n" + body
            try:
                r, w = await self._conn(host, port)
            except OSError as e:
                raise httpx2.ConnectError(str(e), request=request) from None
            done = False
            try:
                w.write(data)
                await w.drain()
                parts, status, headers = await _read_head(r, request, httpx2)
                hmap = {k.lower(): v for k, v in headers}
                content = await _read_body(r, hmap)
                done = True
            except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as e:
                raise httpx2.ReadError(f"{type(e).__name__}: {e}", request=request) from None
            finally:
                if not done:
                    w.close()
            if hmap.get(b"connection", b"").lower() == b"close" or parts[0] == b"HTTP/1.0":
                w.close()
            else:
                self._idle.setdefault((host, port), []).append((r, w))
            # the body is already decoded bytes: drop encoding headers httpx would reapply
            headers = [
                (k, v)
                for k, v in headers
                if k.lower() not in (b"transfer-encoding", b"content-encoding")
            ]
            return httpx2.Response(status, headers=headers, content=content, request=request)

        async def aclose(self) -> None:
            for pool in self._idle.values():
                for _, w in pool:
                    w.close()
            self._idle.clear()

    return StreamTransport()


async def _read_head(r: asyncio.StreamReader, request, httpx2):
    """The status line's parts, the status and the headers of a response; a connection closed
    before the blank line after the headers is httpx's ``RemoteProtocolError``."""
    line = await r.readline()
    if not line:
        raise httpx2.RemoteProtocolError(
            "server closed the connection without a response", request=request
        )
    parts = line.split(b" ", 2)
    status = int(parts[1])
    headers: list[tuple[bytes, bytes]] = []
    while True:
        h = await r.readline()
        if h in (b"\r\n", b"\n"):
            break
        if not h:
            raise httpx2.RemoteProtocolError(
                "connection closed inside the headers", request=request
            )
        k, _, v = h.partition(b":")
        headers.append((k.strip(), v.strip()))
    return parts, status, headers


async def _read_body(r: asyncio.StreamReader, hmap: dict[bytes, bytes]) -> bytes:
    """The body by its Content-Length, chunked, or else up to the close (then ``hmap`` is
    marked ``connection: close`` so that the connection is not reused)."""
    if b"content-length" in hmap:
        return await r.readexactly(int(hmap[b"content-length"]))
    if hmap.get(b"transfer-encoding", b"").lower() == b"chunked":
        chunks = []
        while True:
            size = int((await r.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await r.readline()) not in (b"\r\n", b"\n", b""):
                    pass
                break
            chunks.append(await r.readexactly(size))
            await r.readline()
        return b"".join(chunks)
    content = await r.read()
    hmap[b"connection"] = b"close"
    return content
