"""The rollout interface and the local transformers backend, with real generation on a tiny
random Qwen2 built in a fixture (its text is nonsense; the sampling machinery is real)."""

from __future__ import annotations

import pytest
from fakes.rollout_tiny_qwen import build_tiny_qwen

from composition_rl.rollout.base import (
    PAPER_SAMPLING,
    ROLLOUT_BACKENDS,
    SamplingConfig,
    build_backend,
    load_template,
    render_prompt,
)

PROMPTS = [
    "What is 1+1?",
    "The sum of the roots of $x^2 - 7x + 12 = 0$ is what number? Give it in \\boxed{}.",
    "Y",
]


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory):
    return build_tiny_qwen(tmp_path_factory.mktemp("tiny-qwen"))


@pytest.fixture(scope="session")
def hf(tiny_dir):
    backend = build_backend("hf", model=str(tiny_dir), device="cpu", max_batch_sequences=8)
    yield backend
    backend.close()


def test_paper_preset_is_the_default():
    assert (PAPER_SAMPLING.temperature, PAPER_SAMPLING.top_p, PAPER_SAMPLING.top_k) == (0.6, 0.95, 20)


@pytest.mark.parametrize(
    "kw,bad",
    [({"temperature": -1}, "temperature=-1"), ({"top_p": 0}, "top_p=0"), ({"max_tokens": 0}, "max_tokens=0")],
)
def test_sampling_config_names_the_bad_value(kw, bad):
    with pytest.raises(ValueError, match=bad):
        SamplingConfig(**kw)


def test_registry_lists_backends_and_rejects_unknown():
    assert ROLLOUT_BACKENDS.names() == ["hf", "llama", "openai", "vllm"]
    with pytest.raises(KeyError, match="known: hf, llama, openai, vllm"):
        build_backend("sglang-offline")


def test_default_template_asks_for_boxed_and_keeps_latex_braces():
    t = load_template()
    prompt = render_prompt(t, "Compute $\\frac{1}{2} + {3}$.")
    assert prompt.startswith("Compute $\\frac{1}{2} + {3}$.")
    assert "\\boxed{}" in prompt
    with pytest.raises(ValueError, match="unknown prompt template 'nope'.*boxed"):
        load_template("nope")


def test_template_file_must_hold_the_question_once(tmp_path):
    p = tmp_path / "mine.txt"
    p.write_text("Answer briefly: {question} {question}")
    with pytest.raises(ValueError, match="exactly once"):
        load_template(str(p))
    p.write_text("Q: {question}\nA:")
    assert render_prompt(load_template(str(p)), "2+2?") == "Q: 2+2?\nA:"


def test_chat_models_go_through_the_chat_template(hf):
    text = hf.format("What is 1+1?")
    assert text == "<|im_start|>user\nWhat is 1+1?<|im_end|>\n<|im_start|>assistant\n"


def test_hf_gives_n_completions_per_prompt_within_max_tokens(hf):
    out = hf.generate(PROMPTS, n=3, sampling=SamplingConfig(max_tokens=12, temperature=1.0, top_k=0))
    assert [len(c) for c in out] == [3, 3, 3]
    for comps in out:
        for c in comps:
            assert 1 <= c.tokens <= 12
            assert c.finish_reason in ("stop", "length")
            assert (c.finish_reason == "length") == (c.tokens == 12 and "<|im_end|>" not in c.text)
    # Random weights and temperature 1: the samples of one prompt are not all the same.
    assert any(len({c.text for c in comps}) > 1 for comps in out)


def test_hf_batched_greedy_equals_one_prompt_at_a_time(hf):
    greedy = SamplingConfig(temperature=0, max_tokens=10)
    batched = hf.generate(PROMPTS, n=2, sampling=greedy)
    for prompt, comps in zip(PROMPTS, batched):
        alone = hf.generate([prompt], n=1, sampling=greedy)[0][0]
        assert [c.text for c in comps] == [alone.text, alone.text]


def test_hf_top_k_1_sampling_is_greedy(hf):
    greedy = hf.generate(PROMPTS, n=1, sampling=SamplingConfig(temperature=0, max_tokens=8))
    top1 = hf.generate(PROMPTS, n=2, sampling=SamplingConfig(temperature=1.5, top_k=1, max_tokens=8))
    assert [[c.text for c in comps] for comps in top1] == [[g[0].text] * 2 for g in greedy]


def test_hf_sampling_repeats_with_the_same_seed_and_changes_with_another(tiny_dir):
    s = SamplingConfig(max_tokens=8, temperature=1.0)
    a = build_backend("hf", model=str(tiny_dir), device="cpu", max_batch_sequences=8).generate(PROMPTS, n=2, sampling=s)
    b = build_backend("hf", model=str(tiny_dir), device="cpu", max_batch_sequences=8).generate(PROMPTS, n=2, sampling=s)
    c = build_backend("hf", model=str(tiny_dir), device="cpu", max_batch_sequences=8).generate(
        PROMPTS, n=2, sampling=SamplingConfig(max_tokens=8, temperature=1.0, seed=1))
    assert a == b
    assert a != c


def test_hf_more_samples_of_a_prompt_are_new_draws_and_a_new_backend_repeats_them(tiny_dir):
    # a second ask for the same prompts (more evidence on a pass rate) must not copy the first
    s = SamplingConfig(max_tokens=8, temperature=1.0)
    one = build_backend("hf", model=str(tiny_dir), device="cpu", max_batch_sequences=8)
    first, again = one.generate(PROMPTS, n=2, sampling=s), one.generate(PROMPTS, n=2, sampling=s)
    assert all(x != y for x, y in zip(first, again))
    two = build_backend("hf", model=str(tiny_dir), device="cpu", max_batch_sequences=8)
    assert two.generate(PROMPTS, n=2, sampling=s) == first
    assert two.generate(PROMPTS, n=2, sampling=s) == again


def test_hf_raw_prompts_without_chat_template(tiny_dir):
    raw = build_backend("hf", model=str(tiny_dir), device="cpu", chat_template=False)
    assert raw.format("plain text") == "plain text"
    with pytest.raises(ValueError, match="not a local model folder"):
        build_backend("hf", model=str(tiny_dir / "missing"))


def test_shared_prefill_samples_exactly_what_n_separate_prefills_sample(tiny_dir):
    # Prefill draws no random numbers, so with one seed both paths must give the same samples;
    # a wrong KV-cache copy or wrong positions under left padding would change the text.
    shared = build_backend("hf", model=str(tiny_dir), device="cpu", max_batch_sequences=8)
    plain = build_backend("hf", model=str(tiny_dir), device="cpu", max_batch_sequences=8, share_prefill=False)
    s = SamplingConfig(max_tokens=10, temperature=1.0)
    assert shared.share_prefill
    assert shared.generate(PROMPTS, n=2, sampling=s) == plain.generate(PROMPTS, n=2, sampling=s)


def test_vllm_sampling_params_follow_our_config():
    from composition_rl.rollout.vllm import sampling_params_kwargs

    assert sampling_params_kwargs(8, SamplingConfig(max_tokens=100, seed=5)) == {
        "n": 8, "temperature": 0.6, "top_p": 0.95, "top_k": 20, "max_tokens": 100, "seed": 5,
    }
    assert sampling_params_kwargs(1, SamplingConfig(top_k=0))["top_k"] == -1  # vLLM's "off"


def test_vllm_backend_is_import_guarded():
    import importlib.util

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here; the guard only shows without it")
    with pytest.raises(ImportError, match=r"pip install 'composition-rl\[vllm\]'.*setup_vllm_venv.sh"):
        build_backend("vllm", model="some/model")


@pytest.mark.gpu
def test_hf_on_cuda_matches_greedy_one_at_a_time(tiny_dir):
    gpu = build_backend("hf", model=str(tiny_dir), device="cuda", dtype="float32")
    greedy = SamplingConfig(temperature=0, max_tokens=10)
    batched = gpu.generate(PROMPTS, n=2, sampling=greedy)
    for prompt, comps in zip(PROMPTS, batched):
        assert [c.text for c in comps] == [gpu.generate([prompt], n=1, sampling=greedy)[0][0].text] * 2
    sampled = gpu.generate(PROMPTS, n=4, sampling=SamplingConfig(max_tokens=16))
    assert [len(c) for c in sampled] == [4, 4, 4]


def test_max_tokens_is_capped_at_the_models_context_and_said_once(tmp_path, caplog):
    from fakes.rollout_tiny_qwen import build_tiny_qwen

    from composition_rl.rollout.base import SamplingConfig, build_backend

    model = build_tiny_qwen(tmp_path / "m", hidden=16, layers=1, max_positions=48)
    hf = build_backend("hf", model=str(model), device="cpu", max_batch_sequences=4)
    prompt_len = len(hf.tokenizer(hf.format("What is 1+1?"))["input_ids"])
    with caplog.at_level("WARNING"):
        for _ in range(2):
            out = hf.generate(["What is 1+1?"], n=2, sampling=SamplingConfig(max_tokens=4096, temperature=1.0,
                                                                              top_k=0))
    assert all(c.tokens <= 48 - prompt_len for comps in out for c in comps)
    said = [r for r in caplog.records if "more than the context" in r.getMessage()]
    assert len(said) == 1 and "4096" in said[0].getMessage() and "48 tokens" in said[0].getMessage()
    hf.close()


def test_a_profile_resumed_by_a_new_backend_gives_the_rows_of_an_uninterrupted_one(tiny_dir, tmp_path):
    # samples are numbered per backend life: a resumed run asks each remaining prompt for the
    # first time, as the uninterrupted run did, so its draws (and rows) are the same
    from composition_rl.grading import Verifier, VerifyConfig
    from composition_rl.jobs.profile import ProfileConfig, load_profile, profile_problems
    from composition_rl.records import Problem

    problems = [Problem.new(p, ["2"]) for p in PROMPTS]
    cfg = ProfileConfig(n=2, sampling=SamplingConfig(max_tokens=8, temperature=1.0), chunk=1, keep_responses=True)

    def backend():
        return build_backend("hf", model=str(tiny_dir), device="cpu", max_batch_sequences=8)

    with Verifier(VerifyConfig(timeout_s=5.0, workers=1)) as v:
        profile_problems(problems, backend(), v, tmp_path / "whole", cfg, progress=False)
        profile_problems(problems[:1], backend(), v, tmp_path / "resumed", cfg, progress=False)  # "killed" here
        profile_problems(problems, backend(), v, tmp_path / "resumed", cfg, progress=False)
    texts = lambda d: {r["id"]: [x["text"] for x in r["responses"]] for r in load_profile(tmp_path / d)}  # noqa: E731
    assert texts("resumed") == texts("whole") and len(texts("whole")) == 3


def test_a_folder_that_is_no_model_or_whose_weights_misfit_is_one_line_naming_it(tiny_dir, tmp_path, capsys):
    """A folder without config.json got transformers' lines about sentencepiece; weights of
    another vocabulary size than config.json's a RuntimeError traceback."""
    import json
    import shutil

    from composition_rl.cli import main

    inp = tmp_path / "q.jsonl"
    inp.write_text(json.dumps({"question": "What is 1+1?", "answer": "2"}) + "\n")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "readme.txt").write_text("not a model")
    misfit = tmp_path / "misfit"
    shutil.copytree(tiny_dir, misfit)
    cfg = json.loads((misfit / "config.json").read_text())
    cfg["vocab_size"] += 7
    (misfit / "config.json").write_text(json.dumps(cfg))
    for folder, said in [(notes, "no config.json"), (misfit, "model.embed_tokens.weight")]:
        with pytest.raises(ValueError, match=said):
            build_backend("hf", model=str(folder), device="cpu")
        capsys.readouterr()
        assert main(["profile", "--model", str(folder), "--input", str(inp), "--out", str(tmp_path / f"o-{folder.name}"),
                     "-n", "1", "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert "sentencepiece" not in err and said in err and str(folder) in err, err
        assert len([line for line in err.splitlines() if line.startswith("crl profile: error")]) == 1, err
