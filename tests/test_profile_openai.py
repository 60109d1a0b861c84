"""The endpoint rollout backend against the loopback OpenAI-compatible server."""

from __future__ import annotations

import pytest
from fakes.openai_server import FakeOpenAIServer, Fault

from composition_rl.rollout.base import SamplingConfig, build_backend
from composition_rl.rollout.openai import RolloutError


def numbered(body: dict) -> list[str]:
    """n distinct replies naming the prompt, the choice and the seed."""
    q = body["messages"][-1]["content"]
    return [f"{q} #{i} seed={body.get('seed')}" for i in range(int(body.get("n") or 1))]


def make(srv, **kw):
    return build_backend("openai", base_url=srv.url, model="fake-model", backoff_s=0.01, **kw)


def test_one_request_per_prompt_asks_for_n_with_the_sampling_settings():
    with FakeOpenAIServer(numbered) as srv:
        b = make(srv)
        s = SamplingConfig(temperature=0.6, top_p=0.95, top_k=20, max_tokens=77, seed=3)
        out = b.generate(["a", "b", "c"], n=4, sampling=s)
        b.close()
    assert [[c.text.split(" seed")[0] for c in comps] for comps in out] == [
        [f"{q} #{i}" for i in range(4)] for q in "abc"
    ]
    assert srv.requests == 3
    body = srv.bodies[0]
    assert (body["n"], body["temperature"], body["top_p"], body["top_k"], body["max_tokens"]) == (4, 0.6, 0.95, 20, 77)
    assert body["messages"] == [{"role": "user", "content": body["messages"][0]["content"]}]
    assert all(c.tokens > 0 for comps in out for c in comps)


def test_a_server_that_ignores_n_is_topped_up_with_distinct_seeds():
    def one_only(body):
        return numbered(body)[:1]

    with FakeOpenAIServer(one_only) as srv:
        b = make(srv)
        out = b.generate(["a", "b"], n=3, sampling=SamplingConfig())
        b.close()
    assert [len(c) for c in out] == [3, 3]
    for comps in out:
        assert len({c.text for c in comps}) == 3  # three different seeds, not one sample thrice
    assert srv.requests == 2 + 2 * 2


def test_use_n_false_sends_single_choice_requests():
    with FakeOpenAIServer(numbered) as srv:
        b = make(srv, use_n=False)
        out = b.generate(["a"], n=3, sampling=SamplingConfig())
        b.close()
    assert srv.requests == 3 and all(body["n"] == 1 for body in srv.bodies)
    assert len({c.text for c in out[0]}) == 3


def test_transient_faults_are_retried_by_the_shared_client():
    def faults(body, attempt):
        return Fault("status", status=503) if attempt == 0 else None

    with FakeOpenAIServer(numbered, faults=faults) as srv:
        b = make(srv)
        out = b.generate(["a", "b"], n=2, sampling=SamplingConfig())
        assert b.stats()["retries"] == 2
        b.close()
    assert [len(c) for c in out] == [2, 2]


def test_failures_for_good_stop_the_run_with_the_reason():
    with FakeOpenAIServer(numbered, faults=lambda body, attempt: Fault("status", status=400)) as srv:
        b = make(srv)
        with pytest.raises(RolloutError, match="http_400"):
            b.generate(["a"], n=2, sampling=SamplingConfig())
        b.close()
