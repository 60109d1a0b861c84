"""The OpenAI-compatible chat backend against a real loopback HTTP server with faults."""

from __future__ import annotations

import json
import logging
import time

import pytest
from fakes.openai_server import FakeOpenAIServer, Fault

from composition_rl.chat.base import ChatError, ChatRequest, build_chat_backend, run_chat_batch
from composition_rl.chat.cache import ResponseCache
from composition_rl.chat.openai import OpenAIChat, parse_retry_after

SECRET = "sk-test-DO-NOT-LEAK-4f9a8c7e1b"


def echo(body: dict) -> str:
    return "echo " + body["messages"][-1]["content"]


def fast(urls, **kw) -> OpenAIChat:
    kw.setdefault("timeout_s", 2.0)
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    return OpenAIChat(urls, "fake-model", **kw)


def idx(body: dict) -> int:
    return int(body["messages"][-1]["content"].split()[-1])


FAULTS = [
    Fault("delay", seconds=3.0),  # longer than the 0.5 s timeout below
    Fault("status", status=500),
    Fault("status", status=503),
    Fault("rate_limit", retry_after="0.05"),
    Fault("malformed"),
    Fault("drop"),
    Fault("truncate"),
    None,
]


def test_every_fault_is_survived_and_counts_add_up():
    def faults(body, attempt):
        return FAULTS[idx(body) % len(FAULTS)] if attempt == 0 else None

    with FakeOpenAIServer(echo, faults=faults) as srv:
        b = fast([srv.url], timeout_s=0.5)
        reqs = [ChatRequest.user(f"q {i}") for i in range(24)]
        t0 = time.monotonic()
        out = run_chat_batch(b, reqs)
        elapsed = time.monotonic() - t0
    assert all(not isinstance(r, ChatError) for r in out)
    assert [r.text for r in out if r.choices[0].finish_reason == "stop"] == [
        f"echo q {i}"
        for i in range(24)
        if FAULTS[i % 8] is None or FAULTS[i % 8].kind != "truncate"
    ]
    truncated = [r for r in out if r.choices[0].finish_reason == "length"]
    assert len(truncated) == 3  # a truncated answer is a reply, not an error
    s = b.stats
    # every HTTP attempt is counted exactly once on both sides
    assert s.calls == srv.requests
    retried = {
        "timeout": 3,
        "http_500": 3,
        "http_503": 3,
        "rate_limited": 3,
        "bad_response": 3,
        "connection": 3,
    }
    assert dict(s.retried_by_kind) == retried
    assert s.calls == 24 + sum(retried.values()) and s.ok == 24 and not s.failed_by_kind
    assert s.completion_tokens == sum(len(r.text.split()) for r in out)
    assert elapsed < 5.0  # the 3 s delays were cut off by the 0.5 s timeout, in parallel


def test_rate_limit_waits_what_retry_after_says():
    for header, wait in (("0.6", 0.6), ("0", 0.0)):
        with FakeOpenAIServer(
            echo,
            faults=lambda b, a, h=header: Fault("rate_limit", retry_after=h) if a == 0 else None,
        ) as srv:
            b = fast([srv.url], backoff_s=0.0, backoff_max_s=0.0)
            t0 = time.monotonic()
            (r,) = run_chat_batch(b, [ChatRequest.user("q 0")])
            elapsed = time.monotonic() - t0
        assert r.text == "echo q 0" and b.stats.retried_by_kind["rate_limited"] == 1
        assert wait <= elapsed < wait + 0.5


@pytest.mark.parametrize(
    "headers, secs",
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:05 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers, secs):
    assert parse_retry_after(headers) == secs


def test_gives_up_after_max_retries_and_does_not_retry_client_errors():
    with FakeOpenAIServer(
        echo,
        faults=lambda b, a: (
            Fault("status", status=503) if idx(b) == 0 else Fault("status", status=400)
        ),
    ) as srv:
        b = fast([srv.url], max_retries=3)
        r503, r400 = run_chat_batch(b, [ChatRequest.user("q 0"), ChatRequest.user("q 1")])
    assert isinstance(r503, ChatError) and r503.kind == "http_503" and r503.attempts == 4
    assert isinstance(r400, ChatError) and r400.kind == "http_400" and r400.attempts == 1
    assert srv.requests == 5 and dict(b.stats.failed_by_kind) == {"http_503": 1, "http_400": 1}


def test_concurrency_limit_is_reached_and_never_exceeded():
    with FakeOpenAIServer(echo, latency_s=0.1) as srv:
        b = fast([srv.url], concurrency=8)
        run_chat_batch(b, [ChatRequest.user(f"q {i}") for i in range(40)])
    assert srv.max_in_flight == 8 and b.max_in_flight == 8


def test_least_outstanding_balancing_favours_the_fast_server():
    with (
        FakeOpenAIServer(echo, latency_s=0.3) as slow,
        FakeOpenAIServer(echo, latency_s=0.01) as quick,
    ):
        b = fast([slow.url, quick.url], concurrency=4)
        out = run_chat_batch(b, [ChatRequest.user(f"q {i}") for i in range(60)])
    assert all(r.text.startswith("echo") for r in out)
    assert slow.requests + quick.requests == 60
    assert quick.requests > 4 * slow.requests
    # with no load difference the tie-break alternates
    with FakeOpenAIServer(echo) as a, FakeOpenAIServer(echo) as c:
        b = fast([a.url, c.url], concurrency=1)
        run_chat_batch(b, [ChatRequest.user(f"q {i}") for i in range(10)])
    assert a.requests == c.requests == 5


def test_request_fields_reach_the_server():
    schema = {"type": "object", "properties": {"v": {"type": "string"}}, "required": ["v"]}
    with FakeOpenAIServer(lambda body: [f"c{i}" for i in range(body["n"])]) as srv:
        b = fast([srv.url])
        (r,) = run_chat_batch(
            b,
            [
                ChatRequest.user(
                    "q 0",
                    n=3,
                    temperature=0.6,
                    top_p=0.95,
                    top_k=20,
                    max_tokens=64,
                    seed=7,
                    json_schema=schema,
                )
            ],
        )
        (body,) = srv.bodies
    assert [c.text for c in r.choices] == ["c0", "c1", "c2"]
    assert body["n"] == 3 and body["top_k"] == 20 and body["seed"] == 7 and body["max_tokens"] == 64
    assert body["temperature"] == 0.6 and body["top_p"] == 0.95 and body["model"] == "fake-model"
    assert body["response_format"]["json_schema"]["schema"] == schema


def test_cache_makes_a_rerun_free_and_survives_a_torn_tail(tmp_path):
    path = tmp_path / "cache.jsonl"
    reqs = [ChatRequest.user(f"q {i}", n=2, temperature=0.7) for i in range(6)]
    with FakeOpenAIServer(echo) as srv:
        with ResponseCache(path) as cache:
            first = run_chat_batch(fast([srv.url], cache=cache), reqs)
        assert srv.requests == 6
        with open(path, "ab") as f:  # what kill -9 mid-write leaves behind
            f.write(b'{"k": "deadbeef", "v": {"choi')
        with ResponseCache(path) as cache:
            b = fast([srv.url], cache=cache)
            again = run_chat_batch(b, reqs)
            other = run_chat_batch(
                b, [ChatRequest.user("q 0", n=2, temperature=0.8)]
            )  # new params: a call
        assert srv.requests == 7
    assert [r.to_dict() for r in again] == [r.to_dict() for r in first]
    assert all(r.cached for r in again) and not other[0].cached
    assert b.stats.cache_hits == 6 and b.stats.calls == 1
    assert path.read_bytes().endswith(b"\n") and len(path.read_text().splitlines()) == 7


def test_no_secret_in_logs_errors_or_stats(monkeypatch, caplog, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)

    def leaky(body, attempt):  # a server that echoes the key in its error text
        return (
            Fault("status", status=400, message="Incorrect API key provided: {auth}")
            if idx(body) == 1
            else None
        )

    caplog.set_level(logging.DEBUG)
    with FakeOpenAIServer(
        lambda body: f"echo {body['messages'][-1]['content']}", faults=leaky
    ) as srv:
        with ResponseCache(tmp_path / "c.jsonl") as cache:
            b = build_chat_backend(
                "openai", base_urls=[srv.url], model="fake-model", cache=cache, timeout_s=2.0
            )
            ok, bad = run_chat_batch(b, [ChatRequest.user("q 0"), ChatRequest.user("q 1")])
    assert srv.auth_headers == {f"Bearer {SECRET}"}  # the key was used ...
    assert isinstance(bad, ChatError) and "Incorrect API key" in bad.detail and "***" in bad.detail
    everything = "\n".join(
        [
            caplog.text,
            json.dumps(b.stats.to_dict()),
            json.dumps(b.describe()),
            str(bad),
            bad.detail,
            (tmp_path / "c.jsonl").read_text(),
            ok.text,
        ]
    )
    assert SECRET not in everything  # ... and shown nowhere
    assert b.describe()["api_key_set"] is True


def test_bad_settings_are_reported_together():
    with pytest.raises(ValueError, match="no base URL.*model is empty.*concurrency=0"):
        OpenAIChat([], "", concurrency=0)


def test_one_cache_file_one_writer(tmp_path):
    with ResponseCache(tmp_path / "c.jsonl"):
        with pytest.raises(ValueError, match="in use by another process"):
            ResponseCache(tmp_path / "c.jsonl")
