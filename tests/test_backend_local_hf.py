"""The local transformers chat backend on a tiny random Qwen2 built offline."""

from __future__ import annotations

import pytest
from fakes.tiny_qwen import build_tiny_qwen

from composition_rl.chat.base import ChatRequest, build_chat_backend, run_chat_batch


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_qwen(tmp_path_factory.mktemp("tiny_qwen"))


def test_chat_template_n_choices_tokens_and_repeatable_sampling(tiny):
    b = build_chat_backend("local_hf", model=str(tiny), device="cpu")
    msgs = [
        {"role": "system", "content": "Answer in JSON."},
        {"role": "user", "content": "What is 2+2?"},
    ]
    prompt = b.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert prompt.startswith("<|im_start|>system\nAnswer in JSON.<|im_end|>") and prompt.endswith(
        "<|im_start|>assistant\n"
    )
    n_prompt = len(b.tokenizer(prompt, add_special_tokens=False)["input_ids"])
    req = ChatRequest(messages=tuple(msgs), n=3, temperature=0.8, top_k=20, max_tokens=12, seed=5)
    a, again, greedy = run_chat_batch(
        b, [req, req, ChatRequest(messages=tuple(msgs), max_tokens=12)]
    )
    assert len(a.choices) == 3 and a.prompt_tokens == n_prompt
    assert [c.text for c in a.choices] == [c.text for c in again.choices]  # seeded
    assert a.completion_tokens == sum(c.completion_tokens for c in a.choices) <= 36
    assert all(c.finish_reason in ("stop", "length") for c in a.choices + greedy.choices)
    assert (
        b.stats.calls == 3
        and b.stats.completion_tokens == 2 * a.completion_tokens + greedy.completion_tokens
    )


def test_missing_model_dir_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        build_chat_backend("local_hf", model=str(tmp_path / "nope"))


def test_tiny_model_compositions_are_rejected_cleanly(tiny, tmp_path):
    """A random model writes nonsense: every candidate ends counted, and nothing the model wrote
    is accepted (a record may pass only where the program wrote every part: a derived v1 with
    its own phrase, or a q1 that asks for one formula, and the finder's constant)."""
    import itertools
    import json

    from composition_rl.jobs.compose.with_model import compose_candidates
    from composition_rl.records import Problem
    from composition_rl.spc.llm import LLMComposeConfig

    probs = [
        Problem.new("What is $3 + 4$?", "7"),
        Problem.new(
            "Find the center of the hyperbola $4x^2 - 24x - 25y^2 + 250y - 489 = 0.$", "(3,5)"
        ),
        Problem.new("Compute $2 \\cdot 5 + 1$.", "11"),
        # a question in words: only the model can turn it into X's definition
        Problem.new("A box holds 5 apples and 2 pears. How many fruits are in the box?", "7"),
    ]
    chains = list(itertools.permutations(probs, 2))
    cfg = LLMComposeConfig(
        backend="local_hf",
        model=str(tiny),
        max_tokens=24,
        temperature=0.8,
        top_p=0.95,
        concurrency=2,
    )
    b = build_chat_backend("local_hf", model=str(tiny), device="cpu")
    stats = compose_candidates(chains, tmp_path, cfg, backend=b, progress=False)
    rejected = [json.loads(x) for x in (tmp_path / "rejected.jsonl").read_text().splitlines()]
    accepted = [json.loads(x) for x in (tmp_path / "composed.jsonl").read_text().splitlines()]
    assert stats["candidates"] == len(chains) == len(rejected) + len(accepted)
    assert stats["accepted"] == len(accepted) < len(chains)
    assert all(r["metadata"]["defined_by"] == ["program"] for r in accepted)
    assert any(r["candidates"][0] == probs[3].id for r in rejected)
    assert "internal_error" not in stats["rejected_by_reason"]
    assert {r["stage"] for r in rejected} <= {
        "llm_output",
        "check1_v1",
        "constant",
        "check2_substitution",
    }
    # every call counted once. No chain here needs a placement, so a chain costs at most a
    # definition and its feedback turn (the program plan decides some chains without the model
    # and asks for a q1's definition once for all the chains it leads)
    assert 0 < stats["llm"]["requests"] == b.stats.calls <= 2 * len(chains)
    assert stats["llm"]["completion_tokens"] > 0
