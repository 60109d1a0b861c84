"""The LLM composition engine against faults, kills and dead endpoints, over a real loopback
OpenAI-compatible server: every fault is survived with counts that add up, a rerun resumes
where a kill stopped it and sends only what is missing, a transient failure is never a
rejection, and no secret is written anywhere. The cases are in ``llm_compose_cases.py``."""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_run import REPO
from fakes.composer_script import good_composer
from fakes.openai_server import FakeOpenAIServer, Fault, body_key
from llm_compose_cases import (
    CFG,
    MATH,
    PAIRS,
    assert_contract,
    assert_counts_add_up,
    backend,
    rows,
)

from composition_rl.chat.base import RequestRefused
from composition_rl.chat.cache import ResponseCache
from composition_rl.jobs.compose.with_model import compose_candidates
from composition_rl.spc.llm import LLMComposeConfig

FAULT_CYCLE = [
    Fault("delay", seconds=5.0),
    Fault("status", status=500),
    Fault("rate_limit", retry_after="0.05"),
    Fault("malformed"),
    Fault("drop"),
    Fault("truncate"),
    None,
    None,
]


def fault_for(body: dict, attempt: int) -> Fault | None:
    h = int(body_key(body), 16)
    if h % 23 == 0:
        return Fault("status", status=503)  # never recovers: retries run out
    if attempt > 0:
        return None
    return FAULT_CYCLE[h % len(FAULT_CYCLE)]


def test_every_fault_is_survived_and_counts_add_up(tmp_path):
    with FakeOpenAIServer(good_composer) as clean_srv:
        clean = compose_candidates(
            PAIRS, tmp_path / "clean", CFG, backend=backend(clean_srv.url), progress=False
        )
    with FakeOpenAIServer(good_composer, faults=fault_for) as srv:
        t0 = time.monotonic()
        stats = compose_candidates(
            PAIRS,
            tmp_path / "faulty",
            CFG,
            backend=backend(srv.url, timeout_s=0.5, max_retries=3),
            progress=False,
        )
        elapsed = time.monotonic() - t0
        injected = dict(srv.faults_injected)
    assert set(injected) == {"delay", "status", "rate_limit", "malformed", "drop", "truncate"}
    # a candidate whose requests failed for good (503 after every retry) got no answer: it is
    # pending for the next run, never a reject (an outage says nothing about the candidate)
    assert stats["pending"] >= 1
    assert_counts_add_up(stats, tmp_path / "faulty", len(PAIRS) - stats["pending"])
    assert_contract(tmp_path / "faulty")
    reasons = stats["rejected_by_reason"]
    assert "internal_error" not in reasons
    assert reasons.get("truncated_output", 0) + reasons.get("truncated_verification", 0) >= 1
    assert not any(k.startswith("llm_http_5") for k in reasons)
    retried = stats["this_run"]["retried_by_kind"]
    assert {"timeout", "http_500", "rate_limited", "bad_response", "connection"} <= set(retried)
    # whatever survived the faults is exactly what the clean run produced for that candidate
    clean_by_cand = {
        r["metadata"]["candidate"]: r for r in rows(tmp_path / "clean" / "composed.jsonl")
    }
    faulty = rows(tmp_path / "faulty" / "composed.jsonl")
    assert faulty and all(clean_by_cand[r["metadata"]["candidate"]] == r for r in faulty)
    # and every clean acceptance that is missing was lost to a fault, with the fault as reason
    faulty_rej = {r["id"]: r["reason"] for r in rows(tmp_path / "faulty" / "rejected.jsonl")}
    lost = set(clean_by_cand) - {r["metadata"]["candidate"] for r in faulty}
    assert lost and all(faulty_rej.get(c, "pending").startswith(("llm_", "truncated_", "pending")) for c in lost)
    assert clean["accepted"] - stats["accepted"] == len(lost)
    assert elapsed < 30


def test_rerun_of_a_finished_job_makes_zero_calls(tmp_path):
    with FakeOpenAIServer(good_composer) as srv:
        with ResponseCache(tmp_path / "cache.jsonl") as cache:
            first = compose_candidates(
                PAIRS[:40], tmp_path / "a", CFG, backend=backend(srv.url, cache), progress=False
            )
        n_first = srv.requests
        with ResponseCache(tmp_path / "cache.jsonl") as cache:  # same out dir: the journal answers
            again = compose_candidates(
                PAIRS[:40], tmp_path / "a", CFG, backend=backend(srv.url, cache), progress=False
            )
            fresh = compose_candidates(
                PAIRS[:40], tmp_path / "b", CFG, backend=backend(srv.url, cache), progress=False
            )
        assert srv.requests == n_first > 0  # not one more request
    assert again["this_run"]["calls"] == 0 and again["this_run"]["requests"] == 0
    assert (
        fresh["this_run"]["calls"] == 0
        and fresh["this_run"]["cache_hits"] == first["llm"]["requests"]
    )
    for name in ("composed.jsonl", "rejected.jsonl"):
        a = (tmp_path / "a" / name).read_bytes()
        assert a == (tmp_path / "b" / name).read_bytes()
    for key in ("candidates", "accepted", "rejected_by_reason", "funnel", "llm"):
        assert first[key] == again[key] == fresh[key]
    # resuming with other settings would mix two runs in one output: refused
    with pytest.raises(ValueError, match="temperature: 0.1 -> 0.7"):
        compose_candidates(
            PAIRS[:40],
            tmp_path / "a",
            LLMComposeConfig(model="fake-model", temperature=0.7),
            backend=backend("http://127.0.0.1:9/v1"),
            progress=False,
        )


CHILD = r"""
import json, sys
from composition_rl.records import Problem
from composition_rl.spc.llm import LLMComposeConfig
from composition_rl.jobs.compose.with_model import compose_candidates
import itertools
url, out, data = sys.argv[1:4]
probs = [Problem.new(q, a, source="math_train") for q, a in json.load(open(data))]
cfg = LLMComposeConfig(base_urls=(url,), model="fake-model", concurrency=4, timeout_s=5)
compose_candidates(list(itertools.permutations(probs, 2)), out, cfg, progress=False)
"""


def test_kill_9_mid_run_then_rerun_equals_an_uninterrupted_run(tmp_path):
    data = tmp_path / "problems.json"
    data.write_text(json.dumps(MATH))
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    with FakeOpenAIServer(good_composer, latency_s=0.03) as srv:
        cfg = LLMComposeConfig(base_urls=(srv.url,), model="fake-model", concurrency=4, timeout_s=5)
        compose_candidates(
            PAIRS, tmp_path / "clean", cfg, progress=False
        )  # the same job, uninterrupted
        clean_requests = srv.requests
        srv.reset_counts()
        out = tmp_path / "killed"
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, srv.url, str(out), str(data)], env=env
        )
        journal = out / "llm_journal.jsonl"
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and child.poll() is None:
            if journal.exists() and journal.read_text().count("\n") >= 40:
                break
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        assert not (out / "composed.jsonl").exists()  # killed before the end
        done_at_kill = journal.read_text().count("\n")
        assert 40 <= done_at_kill < len(PAIRS)
        killed_requests = srv.requests
        srv.reset_counts()
        compose_candidates(PAIRS, out, cfg, progress=False)  # the rerun
        resumed_requests = srv.requests
    for name in ("composed.jsonl", "rejected.jsonl"):
        assert (out / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()
    lines = [json.loads(x)["cid"] for x in journal.read_text().splitlines()]
    assert len(lines) == len(set(lines)) == len(PAIRS)
    # the rerun only asked for what the killed run had not finished (+ what was in flight)
    assert killed_requests + resumed_requests <= clean_requests + 8
    assert resumed_requests < clean_requests


SECRET = "sk-live-NEVER-WRITE-ME-0a1b2c3d"


def test_no_secret_in_logs_outputs_or_stats(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)

    served = itertools.count()

    def leaky(body, attempt):
        # the key "expires" after a few requests: from then on every request is refused alike
        # (counted, not keyed on the body: a 401 on a request that asks for a response_format is
        # first read as that format being refused, and which bodies those are depends on the prompt)
        return Fault("status", status=401, message="Incorrect API key provided: {auth}") if next(served) >= 6 else None

    with FakeOpenAIServer(good_composer, faults=leaky) as srv:
        cfg = LLMComposeConfig(base_urls=(srv.url,), model="fake-model", concurrency=8, timeout_s=2)
        # a 401 is refused for every request alike: the run stops with one error naming the
        # key's variable (not one rejection per candidate)
        with pytest.raises(RequestRefused) as err:
            compose_candidates(PAIRS[:30], tmp_path, cfg, progress=False)
    assert srv.auth_headers == {f"Bearer {SECRET}"}
    assert err.value.kind == "http_401" and "OPENAI_API_KEY" in str(err.value)
    assert "Incorrect API key" in str(err.value)
    # the rest of the run, resumed without the fault, keeps the key out of every file
    with FakeOpenAIServer(good_composer) as srv:
        cfg = LLMComposeConfig(base_urls=(srv.url,), model="fake-model", concurrency=8, timeout_s=2)
        stats = compose_candidates(PAIRS[:30], tmp_path, cfg, progress=False)
    assert stats["candidates"] == 30
    blobs = [caplog.text, str(err.value), json.dumps(stats)] + [
        p.read_text() for p in tmp_path.iterdir() if p.is_file()
    ]
    assert all(SECRET not in b for b in blobs)
    assert stats["backend"]["api_key_set"] is True


def _math14(tmp_path: Path) -> Path:
    data = tmp_path / "math.json"
    data.write_text(json.dumps([{"problem": q, "answer": a} for q, a in MATH]))
    return data


def test_llm_compose_against_a_dead_endpoint_stops_early_and_a_rerun_sends_them(tmp_path):
    import socket

    from composition_rl.cli import main

    data = _math14(tmp_path)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # bound, never listening: connection refused
    out = tmp_path / "llm"
    common = ["compose", "--input", str(data), "--engine", "llm", "--model", "fake-model", "--pool-size", "5",
              "--seed", "3", "--no-progress", "--out", str(out), "--max-retries", "1", "--concurrency", "4",
              "--stop-after", "8"]
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "composition_rl.cli", *common, "--base-url", dead],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")},
                       timeout=300)
    s.close()
    assert r.returncode == 1, r.stderr
    line = [x for x in r.stderr.splitlines() if x.startswith("crl compose: error:")]
    assert len(line) == 1 and dead in line[0] and "in a row" in line[0] and "Traceback" not in r.stderr
    assert time.monotonic() - t0 < 120
    journal = out / "llm_journal.jsonl"
    done = [json.loads(x) for x in journal.read_text().splitlines()] if journal.exists() else []
    # no connection failure became a reject (what the program decides without a call may be)
    assert all(r["requests"] == 0 and not r["ok"] and r["row"]["stage"] != "llm_call" for r in done)
    with FakeOpenAIServer(good_composer) as srv:  # the endpoint is back: every candidate is sent
        assert main([*common, "--base-url", srv.url]) == 0
        assert srv.requests > 0
    stats = json.loads((out / "stats.json").read_text())
    assert stats["pending"] == 0 and "llm_connection" not in stats["rejected_by_reason"]
    assert stats["candidates"] == stats["accepted"] + stats["rejected"] > 0


def test_a_candidate_whose_requests_all_fail_is_pending_not_rejected(tmp_path):
    from composition_rl.jobs.compose.with_model import compose_candidates

    q2 = PAIRS[0][1].question[:30]  # among the first 12 pairs only the first one holds this problem

    def faults(body, attempt):  # every request of that candidate fails, retries included (503)
        return Fault("status", status=503) if q2 in json.dumps(body) else None

    with FakeOpenAIServer(good_composer, faults=faults) as srv:
        stats = compose_candidates(PAIRS[:12], tmp_path / "o", CFG, backend=backend(srv.url, max_retries=1),
                                   progress=False)
    assert stats["pending"] >= 1 and not any(k.startswith("llm_http_5") for k in stats["rejected_by_reason"])
    assert stats["candidates"] + stats["pending"] == 12
    with FakeOpenAIServer(good_composer) as srv:  # rerun: only the pending ones are sent
        again = compose_candidates(PAIRS[:12], tmp_path / "o", CFG, backend=backend(srv.url), progress=False)
        assert srv.requests > 0
    assert again["pending"] == 0 and again["candidates"] == 12


def test_an_internal_error_is_journaled_as_retryable_and_a_rerun_composes_it_again(tmp_path, monkeypatch):
    """A bug in the engine (an exception in one candidate) is counted, not fatal; the journal
    marks it retryable, so once the bug is fixed a rerun composes that candidate again instead
    of keeping the internal_error forever, and the outputs are an uninterrupted run's."""
    from composition_rl.spc.llm.composer import LLMComposer

    real = LLMComposer.acompose
    broken = {(a.id, b.id) for a, b in PAIRS[:30:3]}  # a third of the candidates trip the bug

    async def buggy(self, chain, cid, usage=None):
        if tuple(p.id for p in chain) in broken:
            raise ZeroDivisionError("a bug")
        return await real(self, chain, cid, usage)

    with FakeOpenAIServer(good_composer) as srv:
        monkeypatch.setattr(LLMComposer, "acompose", buggy)
        first = compose_candidates(PAIRS[:30], tmp_path / "a", CFG, backend=backend(srv.url), progress=False)
        hit = first["rejected_by_reason"].get("internal_error", 0)
        assert hit == len(broken)
        journal = [json.loads(x) for x in (tmp_path / "a" / "llm_journal.jsonl").read_text().splitlines()]
        assert sum(bool(e.get("retryable")) for e in journal) == hit
        monkeypatch.setattr(LLMComposer, "acompose", real)  # the bug fixed
        again = compose_candidates(PAIRS[:30], tmp_path / "a", CFG, backend=backend(srv.url), progress=False)
        fresh = compose_candidates(PAIRS[:30], tmp_path / "b", CFG, backend=backend(srv.url), progress=False)
        third = compose_candidates(PAIRS[:30], tmp_path / "a", CFG, backend=backend(srv.url), progress=False)
    assert "internal_error" not in again["rejected_by_reason"] and again["candidates"] == 30
    assert again["accepted"] == fresh["accepted"] and again["rejected_by_reason"] == fresh["rejected_by_reason"]
    assert again["this_run"]["calls"] > 0 and third["this_run"]["calls"] == 0  # retried once, then done
    for name in ("composed.jsonl", "rejected.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
