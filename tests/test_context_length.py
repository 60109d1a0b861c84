"""A prompt longer than the model's context is set aside by itself, with a reason, and never
starves the prompts batched with it (one over-long prompt used to zero its whole batch)."""

from __future__ import annotations

import json

import pytest

from composition_rl.chat.context import TOO_LONG, PromptFit
from composition_rl.cli import main
from composition_rl.io.files import read_jsonl
from composition_rl.rollout.base import SamplingConfig, load_template, render_prompt

pytestmark = pytest.mark.slow  # builds the tiny model (512-token context) once for the module


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from composition_rl.jobs.tiny_model import TinyModelConfig, build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", TinyModelConfig(sft_steps=2, eval_n=1),
                            progress=False)


@pytest.fixture(scope="module")
def questions(tiny):
    """Questions whose boxed-template prompts are about 670, 540 and 240 tokens long."""
    fit = PromptFit.for_model(tiny)
    template = load_template("boxed")
    out = {}
    for target in (670, 540, 240):
        k = 1
        while fit.tokens(render_prompt(template, "Add the numbers. " + "3+4, " * k + "what is it?")) < target:
            k += 1
        out[target] = "Add the numbers. " + "3+4, " * k + "what is it?"
    sizes = {t: fit.tokens(render_prompt(template, q)) for t, q in out.items()}
    assert fit.context == 512 and sizes[670] > 512 and 512 < sizes[540] < 670 and 240 <= sizes[240] < 260, sizes
    return out


def test_the_backend_sets_aside_only_the_over_long_prompts(tiny, questions):
    """Breaks when the batch's room is set by its longest prompt: the 240-token prompt got
    0 tokens beside a 670-token one, and must get exactly what it gets alone."""
    from composition_rl.rollout.hf import HFRollout

    backend = HFRollout(tiny, device="cpu")
    template = load_template("boxed")
    prompts = [render_prompt(template, questions[t]) for t in (670, 540, 240)]
    sampling = SamplingConfig(max_tokens=40, seed=3)
    together = backend.generate(prompts, n=2, sampling=sampling)
    # a fresh backend: the same one would draw the prompt's next samples (2 and 3), not 0 and 1
    alone = HFRollout(tiny, device="cpu").generate(prompts[2:], n=2, sampling=sampling)
    assert [[c.finish_reason for c in cs] for cs in together[:2]] == [[TOO_LONG] * 2] * 2
    assert all(c.tokens == 0 for cs in together[:2] for c in cs)
    assert together[2] == alone[0] and all(c.tokens > 0 for c in alone[0])
    # asked beforehand (crl grow asks it of each student), the backend gives the same verdict
    assert [backend.prompt_too_long(p) is not None for p in prompts] == [True, True, False]
    assert "tokens and the model's context" in backend.prompt_too_long(prompts[0])


def test_profile_rejects_them_per_row_and_the_counts_add_up(tiny, questions, tmp_path, caplog):
    inp = tmp_path / "qa.jsonl"
    inp.write_text("".join(json.dumps({"question": questions[t], "answer": "7"}) + "\n" for t in (670, 540, 240)))
    out = tmp_path / "prof"
    assert main(["profile", "--model", str(tiny), "--input", str(inp), "-n", "2", "--max-tokens", "40",
                 "--device", "cpu", "--out", str(out), "--no-progress"]) == 0
    profiled = list(read_jsonl(out / "profile.jsonl"))
    rejects = list(read_jsonl(out / "input_rejects.jsonl"))
    assert len(profiled) == 1 and [r["reason"] for r in rejects] == [TOO_LONG, TOO_LONG]
    assert sorted(r["row"] for r in rejects) == [0, 1]
    assert "longer than the context" in caplog.text  # logged by composition_rl.jobs.profile


def test_eval_rejects_them_per_row(tiny, questions, tmp_path):
    inp = tmp_path / "bench.jsonl"
    inp.write_text("".join(json.dumps({"question": questions[t], "answer": "7"}) + "\n" for t in (670, 240)))
    out = tmp_path / "ev"
    assert main(["eval", "--model", str(tiny), "--benchmark", str(inp), "-n", "1", "--max-tokens", "20",
                 "--device", "cpu", "--out", str(out), "--no-progress"]) == 0
    rejects = list(read_jsonl(out / "input_rejects.jsonl"))
    assert [(r["benchmark"], r["reason"], r["row"]) for r in rejects] == [("bench", TOO_LONG, 0)]


def test_the_trainer_sets_them_aside_per_stage(tiny, questions):
    from composition_rl.jobs.train.data import fit_stage
    from composition_rl.records import Problem

    problems = [Problem.new(questions[t], "7") for t in (670, 240)]
    kept, rejects = fit_stage(problems, "d1", tiny)
    assert kept == problems[1:] and [(r["stage"], r["reason"]) for r in rejects] == [("d1", TOO_LONG)]
    with pytest.raises(ValueError, match="none of its 1 prompts fits the context"):
        fit_stage(problems[:1], "d1", tiny)


def test_the_chat_backend_fails_only_the_over_long_request(tiny, questions):
    """The local chat backend (the LLM compose engine): the over-long request fails by itself,
    not transient (a retry cannot help), and the other one is answered."""
    from composition_rl.chat.base import (
        ChatError,
        ChatRequest,
        build_chat_backend,
        run_chat_batch,
    )

    b = build_chat_backend("local_hf", model=str(tiny), device="cpu")
    reqs = [ChatRequest(messages=({"role": "user", "content": questions[t]},), max_tokens=8) for t in (670, 240)]
    long_, short = run_chat_batch(b, reqs)
    assert isinstance(long_, ChatError) and long_.kind == TOO_LONG and not long_.transient
    assert short.choices and short.prompt_tokens < 512


def test_grow_sets_aside_seeds_the_policy_cannot_read(tiny, questions):
    import argparse

    from composition_rl.jobs.profile import fit_to_context
    from composition_rl.records import Problem

    seeds = [Problem.new(questions[t], "7") for t in (670, 240)]
    kept, rejects = fit_to_context(seeds, argparse.Namespace(template="boxed"), model=str(tiny))
    assert kept == seeds[1:] and [r["reason"] for r in rejects] == [TOO_LONG]
