"""The TRL and verl reward adapters, called through their engines' real call signatures."""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import pickle
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from composition_rl.grading import Verifier, VerifyConfig, close_shared_verifiers
from composition_rl.integrations import verl as verl_reward
from composition_rl.integrations.trl import completion_text, make_reward_fn

GOLD = r"\frac{1}{2}"
COMPLETIONS = [
    r"Halve it: $\boxed{\frac{1}{2}}$",
    r"It is $\boxed{0.5}$.",
    r"I think $\boxed{2}$.",
    "I ran out of tok",
]
EXPECTED = [1.0, 1.0, 0.0, 0.0]


@pytest.fixture(scope="module")
def verifier():
    with Verifier(VerifyConfig(timeout_s=1.0, workers=2)) as v:
        yield v


@pytest.fixture(scope="module", autouse=True)
def _release_shared_verifiers():
    yield
    close_shared_verifiers()  # the verl adapter uses shared ones; free their processes here


def _conversational(texts):
    return [[{"role": "assistant", "content": t}] for t in texts]


def test_trl_reward_plain_and_conversational(verifier):
    reward = make_reward_fn(verifier=verifier)
    prompts = ["What is 1/2?"] * 4
    assert reward(prompts=prompts, completions=COMPLETIONS, answer=[GOLD] * 4) == EXPECTED
    conv_prompts = [[{"role": "user", "content": p}] for p in prompts]
    assert reward(prompts=conv_prompts, completions=_conversational(COMPLETIONS), answer=[GOLD] * 4) == EXPECTED


def test_trl_reward_reads_every_gold_type_and_skips_missing_answers(verifier):
    reward = make_reward_fn(verifier=verifier)
    got = reward(
        prompts=["p"] * 4,
        completions=[r"\boxed{70}", r"\boxed{142}", r"\boxed{0.02}", r"\boxed{1}"],
        answer=[70, 142.0, ["0.01\n", "0.02\n"], None],
    )
    assert got == [1.0, 1.0, 1.0, None]


def test_trl_reward_names_a_missing_column(verifier):
    reward = make_reward_fn(verifier=verifier, answer_column="solution")
    with pytest.raises(ValueError, match="solution.*answer"):
        reward(prompts=["p"], completions=["x"], answer=["1"])


def test_completion_text_forms():
    assert completion_text("plain") == "plain"
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a1"}, {"role": "assistant", "content": "a2"}]
    assert completion_text(msgs) == "a2"
    assert completion_text([{"role": "assistant", "content": [{"type": "text", "text": "so "}, {"type": "text", "text": "3"}]}]) == "so 3"


def test_trl_reward_is_picklable_and_named():
    reward = make_reward_fn(VerifyConfig(timeout_s=2.0), name="acc")
    clone = pickle.loads(pickle.dumps(reward))
    assert clone.__name__ == "acc" and clone.config == reward.config


def _fake_trainer(reward_funcs):
    """The attributes GRPOTrainer._calculate_rewards reads, around TRL's own event-loop thread."""
    from trl.trainer.utils import get_callable_name, start_event_loop_in_daemon

    thread, loop, ready = start_event_loop_in_daemon(name="test-reward-loop")
    ready.wait()
    logged = {"metrics": {}, "extra": {}}
    fake = SimpleNamespace(
        accelerator=SimpleNamespace(device="cpu", is_main_process=True),
        state=SimpleNamespace(global_step=0),
        args=SimpleNamespace(report_to=[]),
        reward_funcs=reward_funcs,
        reward_processing_classes=[None] * len(reward_funcs),
        reward_func_names=[get_callable_name(f) for f in reward_funcs],
        environments=None,
        async_loop=loop,
        _log_completion_extra=lambda col, vals: logged["extra"].setdefault(col, []).extend(vals),
        _log_metric=lambda name, val: logged["metrics"].setdefault(name, []).append(val),
    )
    return fake, logged, (thread, loop)


def test_through_trl_grpo_trainer_calculate_rewards(verifier):
    """TRL's own reward step calls our sync and async rewards with its real kwargs."""
    trl_grpo = pytest.importorskip("trl.trainer.grpo_trainer")
    from trl.trainer.utils import shutdown_event_loop_in_daemon

    sync_fn = make_reward_fn(verifier=verifier, name="mv_sync")
    async_fn = make_reward_fn(verifier=verifier, name="mv_async", asynchronous=True)
    fake, logged, (thread, loop) = _fake_trainer([sync_fn, async_fn])
    try:
        prompts = [[{"role": "user", "content": "What is 1/2?"}]] * 4
        inputs = [{"prompt": p, "answer": GOLD, "subject": "Algebra"} for p in prompts]
        rewards = trl_grpo.GRPOTrainer._calculate_rewards(
            fake, inputs, prompts, _conversational(COMPLETIONS), [[1, 2]] * 4
        )
    finally:
        shutdown_event_loop_in_daemon(thread, loop)
    assert rewards.shape == (4, 2)
    assert rewards[:, 0].tolist() == EXPECTED and rewards[:, 1].tolist() == EXPECTED
    assert logged["metrics"]["verify/correct"] == [0.5, 0.5]
    assert logged["metrics"]["verify/no_answer"] == [0.25, 0.25]
    assert logged["extra"]["verify_outcome"][:4] == ["correct", "correct", "incorrect", "no_answer"]


# ---------------------------------------------------------------- verl
KEYS = {"score", "acc", "pred", "outcome"}


def _verl_call(fn, response, gold):
    # exactly how verl's reward managers call a custom compute_score
    return fn(data_source="math", solution_str=response, ground_truth=gold, extra_info={"index": 0})


def test_verl_compute_score_keywords_and_keys():
    close_shared_verifiers()  # also: a closed shared verifier is recreated on the next call
    fn = functools.partial(verl_reward.compute_score, timeout_s=1.0, workers=2)  # reward_kwargs
    outs = [_verl_call(fn, c, GOLD) for c in COMPLETIONS]
    assert all(set(o) == KEYS for o in outs)
    assert [o["score"] for o in outs] == EXPECTED
    assert [o["acc"] for o in outs] == EXPECTED
    assert [o["outcome"] for o in outs] == ["correct", "correct", "incorrect", "no_answer"]
    assert all(isinstance(o["pred"], str) for o in outs)
    # positional, as older verl versions call it
    assert verl_reward.compute_score("aime", r"\boxed{025}", "25", None, timeout_s=1.0, workers=2)["acc"] == 1.0


def test_verl_ground_truth_as_numpy_array_of_forms():
    gold = np.array(["6630.65\n", "6630\n"], dtype=object)  # a list column read back from parquet
    out = verl_reward.compute_score("minerva", r"\boxed{6630}", gold, timeout_s=1.0, workers=2)
    assert out["acc"] == 1.0


def test_verl_from_a_thread_pool_with_a_pathological_item():
    """verl's reward loop runs sync compute_score in executor threads: no signal.alarm there."""
    fn = functools.partial(verl_reward.compute_score, timeout_s=1.0, workers=2)
    cases = [(c, GOLD) for c in COMPLETIONS] + [(r"\boxed{10^{10^{10^{10}}}}", "5")]
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(lambda c: _verl_call(fn, *c), cases))
    assert [o["score"] for o in outs] == EXPECTED + [0.0]
    assert outs[-1]["outcome"] == "timeout"


def test_verl_async_compute_score():
    async def main():
        fn = functools.partial(verl_reward.compute_score_async, timeout_s=1.0, workers=2)
        return await asyncio.gather(*(_verl_call(fn, c, GOLD) for c in COMPLETIONS))

    assert [o["score"] for o in asyncio.run(main())] == EXPECTED


def test_verl_loads_the_file_by_path_and_dapo_filter_on_acc():
    """verl imports custom_reward_function.path with spec_from_file_location; DAPO filters on acc."""
    path = Path(verl_reward.__file__)
    spec = importlib.util.spec_from_file_location("custom_module", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn = functools.partial(mod.compute_score, timeout_s=1.0, workers=2)
    groups = {"uid-a": [r"\boxed{0.5}"] * 4, "uid-b": COMPLETIONS, "uid-c": ["no answer"] * 4}
    acc_by_uid = {uid: [_verl_call(fn, c, GOLD)["acc"] for c in cs] for uid, cs in groups.items()}
    kept = [uid for uid, accs in acc_by_uid.items() if np.std(accs) > 0]  # verl's filter_groups rule
    assert kept == ["uid-b"]
