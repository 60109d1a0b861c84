"""A tiny trained policy for the training tests, built once and cached in pytest's cache.

The build is the real ``build_tiny_model`` with a test-sized setting: one-digit arithmetic
(an easy fixed task), 150 SFT steps. The cache key is the config hash, so a changed config
rebuilds.
"""

from __future__ import annotations

import os
from pathlib import Path

TEST_MODEL_CONFIG = dict(digits=1, sft_steps=150, sft_batch=32, sft_lr=2e-3, depth_mix={2: 0.15}, eval_n=16)


def tiny_policy_dir(pytestconfig) -> Path:
    from composition_rl.jobs.tiny_model import TinyModelConfig, build_tiny_model

    cache = getattr(pytestconfig, "cache", None)
    if cache is not None:
        folder = cache.mkdir("crl-tiny-policy")
    else:  # -p no:cacheprovider: one build per process
        import tempfile

        folder = Path(tempfile.gettempdir()) / f"crl-tiny-policy-{os.getpid()}"
    return build_tiny_model(folder, TinyModelConfig(**TEST_MODEL_CONFIG), progress=False)


def sampled_reward(model_dir, problems, n: int = 16, seed: int = 123, max_new_tokens: int = 40) -> float:
    """Mean verifier reward of ``n`` temperature-1.0 samples per problem (the policy's expected reward)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from composition_rl.jobs.train.verifier_reward import VerifierReward

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tok.padding_side = "left"
    texts = [tok.apply_chat_template([{"role": "user", "content": p.question}], tokenize=False,
                                     add_generation_prompt=True) for p in problems]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(seed)
    with torch.no_grad():
        out = model.generate(**enc, do_sample=True, temperature=1.0, top_p=1.0, top_k=0, num_return_sequences=n,
                             max_new_tokens=max_new_tokens, eos_token_id=tok.eos_token_id,
                             pad_token_id=tok.pad_token_id)
    completions = tok.batch_decode(out[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    golds = [list(p.answers) for p in problems for _ in range(n)]
    scores = VerifierReward(timeout_s=5.0)(prompts=None, completions=completions, answers=golds)
    return sum(scores) / len(scores)


def arithmetic_set(size: int = 200, seed: int = 7):
    """``size`` distinct problems of the tiny policy's task: every one-digit a+b / a-b it
    draws, then depth-2 chains (the test policy solves some, so all three bands are filled)."""
    from composition_rl.jobs.train.arithmetic import make_problem

    seen: dict = {}
    for depth in (1, 2):
        for index in range(4000):
            if len(seen) == size:
                return list(seen.values())
            p, _ = make_problem(depth, seed=seed, index=index, digits=1)
            seen.setdefault(p.question, p)
    raise ValueError(f"fewer than {size} distinct problems")
