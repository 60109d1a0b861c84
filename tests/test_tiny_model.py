"""The tiny Qwen2 builder: offline tokenizer with Qwen's pre-tokenizer, ~1M parameters, an
SFT warm-up that gives non-zero reward, and a cached rebuild."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("transformers")

from fakes.tiny_policy import TEST_MODEL_CONFIG, tiny_policy_dir  # noqa: E402

from composition_rl.jobs.tiny_model import (  # noqa: E402
    TinyModelConfig,
    build_tiny_model,
    build_tokenizer,
    check_tokenizer_roundtrip,
)
from composition_rl.jobs.train.arithmetic import make_problem  # noqa: E402


@pytest.fixture(scope="module")
def built(pytestconfig):
    return tiny_policy_dir(pytestconfig)


# The tests that take `built` train the tiny policy (150 SFT steps; the longest test of the
# fast suite by far) unless pytest's cache holds it: slow on a fresh clone. The slow training tests build
# the same cached policy, so `make test` trains it once either way.


def test_tokenizer_survives_save_and_reload_as_qwen2(tmp_path):
    from transformers import AutoTokenizer

    corpus = [make_problem(d, 0, i)[1] for d in (1, 2, 3) for i in range(100)]
    tok = build_tokenizer(corpus, 300)
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert type(again).__name__ == "Qwen2Tokenizer"
    texts = corpus[:20] + ["Hello, world!\n  x=1234567890 \\boxed{-12}", "naïve café"]
    check_tokenizer_roundtrip(tok, tmp_path, texts)
    # Qwen's pre-tokenizer: every digit is its own token, even where BPE saw "12" a lot.
    ids = again("X=123+45", add_special_tokens=False)["input_ids"]
    assert [again.decode([i]) for i in ids][2:5] == ["1", "2", "3"]
    assert 256 < len(again) <= 300


def test_roundtrip_check_catches_a_different_pre_tokenizer(tmp_path):
    from tokenizers import pre_tokenizers

    corpus = [make_problem(2, 0, i)[0].question for i in range(200)]
    tok = build_tokenizer(corpus, 300)
    tok.save_pretrained(tmp_path)
    assert "=X" in tok.tokenize("Y=X-82.")  # Qwen's regex lets one symbol lead a word: "=X" merges
    # GPT-2's regex splits "=" from "X", so the same BPE tokenizes differently.
    tok._tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    with pytest.raises(RuntimeError, match="differs"):
        check_tokenizer_roundtrip(tok, tmp_path, ["Y=X-82."])


@pytest.mark.slow
def test_built_model_is_a_small_qwen2_with_a_chat_template_and_nonzero_accuracy(built):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    info = json.loads((built / "build_info.json").read_text())
    assert 0.7e6 < info["params"] < 1.5e6
    assert info["sft_loss_last"] < info["sft_loss_first"] / 3
    assert info["greedy_accuracy"]["1"] > 0.1, info["greedy_accuracy"]
    model = AutoModelForCausalLM.from_pretrained(built)
    tok = AutoTokenizer.from_pretrained(built)
    assert model.config.model_type == "qwen2" and model.config.num_hidden_layers == 4
    text = tok.apply_chat_template([{"role": "user", "content": "3+4=?"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\n3+4=?<|im_end|>\n<|im_start|>assistant\n"
    assert tok.eos_token == "<|im_end|>" and model.generation_config.eos_token_id == tok.eos_token_id


@pytest.mark.slow
def test_a_second_build_with_the_same_config_is_reused(built):
    t0 = time.perf_counter()
    assert build_tiny_model(built, TinyModelConfig(**TEST_MODEL_CONFIG), progress=False) == built
    assert time.perf_counter() - t0 < 1.0


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="num_heads"):
        TinyModelConfig(hidden_size=130).validate()
    with pytest.raises(ValueError, match="depth_mix"):
        TinyModelConfig(depth_mix={2: 0.7, 3: 0.4}).validate()


def test_a_custom_sft_task_is_used_and_keys_the_cache(tmp_path):
    from composition_rl.records import Problem

    class EchoTask:
        """q 'say 7' -> '7. \\boxed{7}' at every depth."""

        def __repr__(self):
            return "EchoTask()"

        def example(self, depth, index):
            v = str(index % 10)
            return Problem.new(f"say {v}", v, depth=depth), f"{v}. \\boxed{{{v}}}"

    cfg = TinyModelConfig(sft_steps=2, sft_batch=4, eval_n=2, warmup_steps=1)
    out = build_tiny_model(tmp_path, cfg, progress=False, task=EchoTask())
    info = json.loads((out / "build_info.json").read_text())
    assert info["task"] == "EchoTask()"
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(out)
    assert "say" in tok.get_vocab() or "Ġsay" in tok.get_vocab()  # the task's text trained the BPE
    # the default task under the same config is a different build
    assert json.loads((build_tiny_model(tmp_path / "d", cfg, progress=False) / "build_info.json").read_text())["key"] != info["key"]
