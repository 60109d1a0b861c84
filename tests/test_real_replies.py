"""Regressions built from what a real server and a real model sent back.

Each fixture under ``tests/fixtures/real_llm/`` is a reply of llama.cpp's OpenAI-compatible
server (``llama-cpp-python[server]`` 0.3.36, serving SmolLM2-135M-Instruct through
``scripts/serve_real_llm.sh``) that broke something in our client or engine; its
``provenance`` field says whether it was recorded from the running server or rebuilt from
the server's source. The tests replay them offline through the loopback fake server, so the
default suite keeps every fix.
Beside them: the error shapes other real servers are known to send (vLLM's context-length
400, a chat template without a system role), each named after where it comes from.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fakes.composer_script import good_composer
from fakes.openai_server import FakeOpenAIServer, Fault

from composition_rl.chat.base import ChatError, ChatRequest, RequestRefused, run_chat_batch
from composition_rl.chat.openai import OpenAIChat, refusal
from composition_rl.jobs.compose.with_model import compose_candidates
from composition_rl.records import Problem
from composition_rl.spc.llm import PROPOSE_SCHEMA, LLMComposeConfig

FIXTURES = Path(__file__).parent / "fixtures" / "real_llm"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


REFUSAL = fixture("refusal_json_schema.json")  # llama.cpp's answer to a json_schema request


def refuses_json_schema(body: dict, attempt: int) -> Fault | None:
    """llama.cpp's behaviour: response_format type json_schema is a 500 validation error."""
    rf = body.get("response_format")
    if rf is not None and rf.get("type") == "json_schema":
        return Fault("status", status=REFUSAL["status"], message=REFUSAL["body"]["error"]["message"])
    return None


def fast(url: str, **kw) -> OpenAIChat:
    kw.setdefault("timeout_s", 5.0)
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("backoff_max_s", 0.05)
    return OpenAIChat([url], "smollm2", **kw)


REQ = ChatRequest.user("give JSON", json_schema=PROPOSE_SCHEMA, max_tokens=64)


def test_the_recorded_refusal_is_a_refusal_of_response_format():
    assert REFUSAL["status"] == 500  # not a 4xx: a status code alone cannot tell
    field, option = refusal(REFUSAL["status"], REFUSAL["body"]["error"]["message"])
    assert field == "response_format" and option.startswith("--structured")


@pytest.mark.parametrize(
    "status, text, expected",
    [
        (500, "CUDA out of memory", None),  # an ordinary fault: retried
        (503, "model is loading", None),
        (429, "slow down", None),
        (400, "This model's maximum context length is 2048 tokens. However, you requested "
              "2100 tokens (1700 in the messages, 400 in the completion).", None),
        (401, "Incorrect API key provided", ("", "the key in OPENAI_API_KEY")),
        (404, "The model `qwen` does not exist", ("model", "--model (the name the server serves)")),
        (404, "Not Found", ("", "--base-url (it ends in /v1) or --model")),
        (400, "max_tokens must be at least 1, got -3.", ("max_tokens", "--max-tokens")),
        (422, "[{'type': 'less_than_equal', 'loc': ('body', 'top_p'), 'msg': 'Input should "
              "be less than or equal to 1'}]", ("top_p", "--top-p")),
    ],
)  # fmt: skip
def test_refusal_table(status, text, expected):
    assert refusal(status, text) == expected


def test_auto_steps_down_to_json_object_once_and_sends_the_schema():
    with FakeOpenAIServer(lambda b: '{"v1": "1"}', faults=refuses_json_schema) as srv:
        b = fast(srv.url)
        reqs = [REQ] + [ChatRequest.user(f"q {i}", json_schema=PROPOSE_SCHEMA) for i in range(5)]
        out = run_chat_batch(b, reqs)
        first = list(srv.bodies)
        types = [x.get("response_format", {}).get("type") for x in first]
        # the next request goes straight to the negotiated mode
        srv.reset_counts()
        run_chat_batch(b, [ChatRequest.user("again", json_schema=PROPOSE_SCHEMA)])
        later = [x["response_format"]["type"] for x in srv.bodies]
    assert later == ["json_object"]
    assert not any(isinstance(r, ChatError) for r in out)
    assert b.structured_used == "json_object"
    # concurrent first requests may each see one refusal; none is sent strict afterwards
    n_strict = types.count("json_schema")
    assert 1 <= n_strict <= 6 and types[n_strict:] == ["json_object"] * 6
    assert all(x["response_format"]["schema"] == PROPOSE_SCHEMA for x in first[n_strict:])
    assert b.stats.ok == 7 and not b.stats.failed_by_kind


def test_a_server_refusing_every_format_ends_with_the_prompt_alone():
    def refuses_all(body, attempt):
        if "response_format" in body:
            return Fault("status", status=400, message="response_format is not supported")
        return None

    with FakeOpenAIServer(lambda b: '{"v1": "1"}', faults=refuses_all) as srv:
        b = fast(srv.url)
        (r,) = run_chat_batch(b, [REQ])
    assert r.text == '{"v1": "1"}' and b.structured_used == "none"
    assert ["response_format" in x for x in srv.bodies] == [True, True, False]


def test_an_explicit_mode_the_server_refuses_fails_at_once_naming_the_option():
    with FakeOpenAIServer(lambda b: "{}", faults=refuses_json_schema) as srv:
        b = fast(srv.url, structured="json_schema", max_retries=6)
        (r,) = run_chat_batch(b, [REQ])
    assert isinstance(r, RequestRefused) and r.field == "response_format"
    assert "--structured (now json_schema; auto negotiates)" in str(r)
    assert srv.requests == 1  # a refusal is not retried (the issue saw 30 s of retries)


def _pairs() -> list[tuple[Problem, Problem]]:
    qs = [
        ("What is $3+4$?", "7"),
        ("A box holds 5 apples and 2 pears. How many fruits are in the box?", "7"),
        ("Compute $2 \\cdot 6$.", "12"),
        ("Tom has 9 marbles and gives away 4. How many are left?", "5"),
    ]
    ps = [Problem.new(q, (a,), source="t") for q, a in qs]
    return [(a, b) for a in ps for b in ps if a.id != b.id]


def test_compose_stops_the_run_with_one_error_instead_of_a_reject_per_candidate(tmp_path):
    pairs = _pairs()
    with FakeOpenAIServer(good_composer, faults=refuses_json_schema) as srv:
        cfg = LLMComposeConfig(
            base_urls=(srv.url,), model="smollm2", structured="json_schema", concurrency=4
        )
        t0 = time.monotonic()
        with pytest.raises(RequestRefused) as err:
            compose_candidates(pairs, tmp_path, cfg, progress=False)
        assert time.monotonic() - t0 < 10
        assert srv.requests <= 4 + 4  # what was in flight, not one per candidate, no retries
    assert "--structured" in str(err.value) and "rerun" in str(err.value)
    assert not (tmp_path / "rejected.jsonl").exists()
    # the same folder with --structured auto resumes and finishes; counts add up
    with FakeOpenAIServer(good_composer, faults=refuses_json_schema) as srv:
        cfg = LLMComposeConfig(base_urls=(srv.url,), model="smollm2", concurrency=4)
        stats = compose_candidates(pairs, tmp_path, cfg, progress=False)
    assert stats["candidates"] == len(pairs) == stats["accepted"] + stats["rejected"]
    assert stats["backend"]["structured_used"] == "json_object"


def test_a_prompt_over_the_context_window_rejects_that_candidate_only(tmp_path):
    pairs = _pairs()
    # a q1 whose definition needs the model (a formula alone, "What is $3+4$?", is the program's)
    long = next(a for a, _ in pairs if "fruits" in a.question)
    long_id = long.id

    def too_long(body, attempt):
        if long.question in body["messages"][-1]["content"]:
            return Fault(
                "status", status=400,
                message="This model's maximum context length is 2048 tokens. However, you "
                "requested 2300 tokens (1900 in the messages, 400 in the completion). Please "
                "reduce the length of the messages or completion.",
            )  # fmt: skip
        return None

    with FakeOpenAIServer(good_composer, faults=too_long) as srv:
        cfg = LLMComposeConfig(base_urls=(srv.url,), model="smollm2", concurrency=4)
        stats = compose_candidates(pairs, tmp_path, cfg, progress=False)
    first = sum(1 for a, _ in pairs if a.id == long_id)
    assert stats["rejected_by_reason"].get("llm_context_length", 0) >= first
    assert stats["candidates"] == len(pairs) == stats["accepted"] + stats["rejected"]


def test_a_chat_template_without_a_system_role_gets_the_system_text_in_the_user_turn():
    # Gemma's chat template raises this inside the server (a 500 for every such request)
    def no_system(body, attempt):
        if body["messages"][0]["role"] == "system":
            return Fault("status", status=500, message="TemplateError: System role not supported")
        return None

    with FakeOpenAIServer(lambda b: b["messages"][0]["content"], faults=no_system) as srv:
        b = fast(srv.url, max_retries=6)
        reqs = [ChatRequest.user(f"U{i}", system="S", max_tokens=8) for i in range(3)]
        out = run_chat_batch(b, reqs)
    assert [r.text for r in out] == [f"S\n\nU{i}" for i in range(3)]
    assert b.fold_system and b.describe()["fold_system"] is True
    assert srv.requests <= 3 + 3  # one refusal each at most, no retry storm
    assert not b.stats.failed_by_kind


# -- replies of a real 0.5B model (qwen-0.5b), each a failure shape the parser must name --------
REPLIES = sorted((FIXTURES / "replies").glob("*.json"))


def link_outcome(fx: dict) -> tuple[str, str] | dict[str, str]:
    """What the engine's reading of one recorded proposal decides: the (stage, reason) of
    the first step that rejects it, or the draft's fields when every exact step passes."""
    from composition_rl.chat.base import ChatResponse
    from composition_rl.spc.base import Rejection
    from composition_rl.spc.llm.proposal import (
        LINK_STEPS,
        Draft,
        check_position,
        proposal_fields,
        read_reply,
    )
    from composition_rl.values import find_constants

    earlier = Problem.new(fx["earlier"]["question"], (fx["earlier"]["answer"],), source="fixture")
    later = Problem.new(fx["later"]["question"], (fx["later"]["answer"],), source="fixture")
    obj = read_reply(ChatResponse.from_dict(fx["response"]), PROPOSE_SCHEMA, "output")
    if isinstance(obj, Rejection):
        return obj.stage, obj.reason
    f = proposal_fields(obj)
    if isinstance(f, Rejection):
        return f.stage, f.reason
    d = Draft(earlier, later, f)
    for step in LINK_STEPS:
        rej = step(d, LLMComposeConfig(model="m").max_definition_chars)
        if rej is not None:
            return rej.stage, rej.reason
    allowed = frozenset(c.offset for c in find_constants(later.question, later.answer) if c.literal == d.literal)
    rej = check_position(d, allowed, "auto")
    return (rej.stage, rej.reason) if rej is not None else f


@pytest.mark.parametrize("path", REPLIES, ids=[p.stem for p in REPLIES])
def test_a_recorded_real_reply_gets_its_named_outcome(path):
    fx = json.loads(path.read_text(encoding="utf-8"))
    assert fx["provenance"].startswith("recorded ") and "qwen-0.5b" in fx["provenance"]
    got = link_outcome(fx)
    want = fx["expect"]
    if "reason" in want:
        assert got == (want["stage"], want["reason"]), (got, fx["note"])
    else:  # a reply the parser must read: the fields it must get
        assert isinstance(got, dict), got
        assert {k: got[k] for k in want["fields"]} == want["fields"]


def test_the_recorded_replies_cover_the_shapes_seen():
    shapes = {json.loads(p.read_text(encoding="utf-8"))["shape"] for p in REPLIES}
    assert len(shapes) == len(REPLIES) >= 7


def test_raw_latex_in_a_real_reply_is_read_as_latex_not_as_json_escapes():
    fx = json.loads((FIXTURES / "replies" / "empty_fields_and_raw_latex.json").read_text(encoding="utf-8"))
    text = fx["response"]["choices"][0]["text"]
    assert "\\frac" in text and json.loads(text)["definition"].count("\f") == 1  # strict JSON: a form feed
    from composition_rl.spc.llm.prompts import parse_json_object

    obj = parse_json_object(text)
    assert "$\\frac{25}{4}$" in obj["definition"] and "\f" not in obj["definition"]
    assert obj["v1"] == "" and obj["constant"] == ""
