"""``--backend vllm`` and ``vllm serve`` for real: SmolLM2-135M on vLLM's CPU build.

Run in .venv-verl, which holds vLLM's CPU build too (``make test-vllm``, which ``make test``
runs)::

    .venv-verl/bin/python -m pytest -q -m vllm tests/test_vllm_cpu.py   # or .venv-vllm/bin/python

Every ``crl`` here is a subprocess of that venv's Python with this checkout's ``src`` first,
as a researcher runs it inside their vLLM environment. Each vLLM engine start costs about a
minute on 2 busy cores, so the runs are few and small: 16 one-line sums, 10 new tokens, a
template that asks for the number alone (SmolLM2 gets about a third right, greedy).

- a sampled profile with a seed, 16 prompts x 8 samples in one vLLM call (prefills beyond one
  step's 4,096-token budget: the batch that failed with ``CPU Generator does not use offset``)
  finishes, and a second run of the same command gives the same rows;
- a greedy profile through vLLM gives rows of the same schema and the same pass rates as
  through the ``hf`` backend (the same converted folder, float32), and the same schema as the
  ``llama`` backend (the main .venv, when llama-cpp-python is installed there);
- ``crl compose --engine llm`` against vLLM's OpenAI server (``vllm serve``'s, started as
  ``python -m vllm.entrypoints.openai.api_server``): counts add up, every drop has a reason,
  tokens come from the server's usage.

In the main .venv (no vLLM) the module skips, saying so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here; run with .venv-verl (make verl-env) or .venv-vllm (make vllm-env)")

from served import free_port, served  # noqa: E402

from composition_rl.io.files import read_jsonl  # noqa: E402

pytestmark = [pytest.mark.vllm]

REPO = Path(__file__).resolve().parents[1]
MAIN_PY = REPO / ".venv" / "bin" / "python"
MODEL = "smollm2"
#: Each run is bounded (a deadline against a hang, not a speed check).
RUN_LIMIT_S = 600


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB: small, on a shared machine
    if (REPO / ".venv-llm" / "models").is_dir():  # where make test assembles the GGUF
        env.setdefault("CRL_MODELS_DIR", str(REPO / ".venv-llm" / "models"))
    return env


def crl(*args: str, python: str | Path = sys.executable) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), "-m", "composition_rl.cli", *args], capture_output=True, text=True,
                          env=_env(), cwd=REPO, timeout=RUN_LIMIT_S)


PROMPTS = 16


@pytest.fixture(scope="module")
def sums(tmp_path_factory) -> tuple[Path, Path]:
    """16 one-line sums a 135M model gets right some of the time, and a template asking for
    the number alone (read with ``--fallback prose``)."""
    d = tmp_path_factory.mktemp("sums")
    rows = [{"question": f"What is {i} + {i % 7 + 1}?", "answer": str(i + i % 7 + 1)} for i in range(PROMPTS)]
    (d / "sums.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "number.txt").write_text("{question}\nReply with only the final number.\n")
    return d / "sums.jsonl", d / "number.txt"


def _profile(sums, out: Path, backend: str, *extra: str, python: str | Path = sys.executable):
    data, template = sums
    r = crl("profile", "--backend", backend, "--model", MODEL, "--input", str(data), "--template", str(template),
            "--fallback", "prose", "--max-tokens", "10", "--chunk", str(PROMPTS), "--no-progress",
            "--out", str(out), *extra, python=python)
    assert r.returncode == 0, r.stderr[-4000:]
    return list(read_jsonl(out / "profile.jsonl"))


def test_seeded_profile_of_a_large_batch_runs_and_a_rerun_gives_the_same_rows(sums, tmp_path):
    from composition_rl.chat.context import PromptFit
    from composition_rl.io.hf_model import hf_folder
    from composition_rl.io.readers import load_problems
    from composition_rl.rollout.base import load_template, render_prompt

    # one generate call of 16 prompts x 8 samples: its prefills exceed the 4,096 tokens vLLM
    # schedules in one step, so with chunked prefill one would be split (the old failure)
    os.environ.update({k: v for k, v in _env().items() if k == "CRL_MODELS_DIR"})
    fit = PromptFit.for_model(hf_folder(MODEL))
    template = load_template(str(sums[1]))
    questions = [p.question for p in load_problems(str(sums[0])).problems]
    assert 8 * sum(fit.tokens(render_prompt(template, q)) for q in questions) > 4096
    args = ("-n", "8", "--seed", "3", "--keep-responses")
    first = _profile(sums, tmp_path / "a", "vllm", *args)
    again = _profile(sums, tmp_path / "b", "vllm", *args)
    assert first == again
    assert len(first) == PROMPTS and len({r["id"] for r in first}) == PROMPTS
    assert all(len(r["responses"]) == 8 and all(0 < x["tokens"] <= 10 for x in r["responses"]) for r in first)
    # sampled, not one answer repeated: most prompts' samples differ among themselves
    assert sum(len({x["text"] for x in r["responses"]}) > 1 for r in first) >= PROMPTS // 2
    print(f"\n[vllm sampled, n=8] correct per prompt {[r['correct'] for r in first]}")


def test_greedy_profile_matches_the_hf_backend_and_the_llama_schema(sums, tmp_path):
    args = ("-n", "1", "--temperature", "0")
    vllm_rows = _profile(sums, tmp_path / "vllm", "vllm", *args, "--dtype", "float32")
    hf_rows = _profile(sums, tmp_path / "hf", "hf", *args, "--keep-responses")
    assert [set(r) for r in vllm_rows] == [set(r) - {"responses"} for r in hf_rows]
    passed = {r["id"]: r["correct"] for r in vllm_rows}
    assert passed == {r["id"]: r["correct"] for r in hf_rows}
    print(f"\n[vllm greedy] {sum(passed.values())}/{PROMPTS} correct, as hf")
    if not (REPO / ".venv" / ".llama").exists():
        pytest.skip("llama-cpp-python is not in .venv (make .venv/.llama): the llama schema was not compared")
    llama_rows = _profile(sums, tmp_path / "llama", "llama", *args, python=MAIN_PY)
    assert [set(r) for r in llama_rows] == [set(r) for r in vllm_rows]
    print(f"[llama greedy] {sum(r['correct'] for r in llama_rows)}/{PROMPTS} correct (Q4_1 weights)")


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    """``vllm serve`` of the converted SmolLM2 folder on 127.0.0.1:<free port>; its base URL."""
    import urllib.request

    from composition_rl.io.hf_model import hf_folder

    env = _env()
    os.environ.update({k: v for k, v in env.items() if k == "CRL_MODELS_DIR"})
    folder = hf_folder(MODEL)
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"

    def ready(_log: str) -> str | None:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5) as r:
                return url if MODEL in r.read().decode() else None
        except OSError:
            return None

    # `python -m` of the server module, not the `vllm serve` script: vllm-cpu 0.32.0's script
    # asks for the version of the distribution "vllm" (this one is "vllm-cpu") and dies.
    # Chunked prefill off as in the vllm backend: a seeded request must never be split.
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", folder,
            "--served-model-name", MODEL, "--host", "127.0.0.1", "--port", str(port), "--enforce-eager",
            "--max-model-len", "2048", "--no-enable-chunked-prefill"]
    with served(argv, env=env, ready=ready, log=tmp_path_factory.mktemp("vllm_serve") / "serve.log",
                limit_s=RUN_LIMIT_S, what="vllm serve") as base:
        yield base


@pytest.mark.shared_data
def test_compose_llm_against_vllm_serve(vllm_server, shared_data, tmp_path):
    from composition_rl.spc.llm import LLM_STAGES

    out = tmp_path / "llm"
    r = crl("compose", "--input", str(shared_data / "train" / "math_train.json"), "--depth", "2",
            "--pool-size", "4", "--max-candidates", "4", "--seed", "0", "--engine", "llm",
            "--base-url", vllm_server, "--model", MODEL, "--concurrency", "4", "--max-tokens", "300",
            "--timeout", "120", "--max-retries", "1", "--no-progress", "--out", str(out))
    if r.returncode == 1:  # a 135M model may compose nothing that passes the checks
        assert "0 of " in r.stderr and "candidates accepted" in r.stderr, r.stderr[-3000:]
    else:
        assert r.returncode == 0, r.stderr[-3000:]
    stats = json.loads((out / "stats.json").read_text())
    rejected = list(read_jsonl(out / "rejected.jsonl"))
    assert stats["candidates"] == stats["accepted"] + stats["rejected"] == 4
    assert sum(stats["rejected_by_reason"].values()) == stats["rejected"] == len(rejected)
    assert all(x["stage"] in LLM_STAGES and x["reason"] for x in rejected)
    # the model answered: tokens counted from the server's usage
    assert stats["llm"]["prompt_tokens"] > 0 and stats["llm"]["completion_tokens"] > 0, stats["llm"]
    print(f"\n[compose --engine llm, vllm serve] accepted {stats['accepted']} rejected "
          f"{stats['rejected_by_reason']} structured {stats['backend'].get('structured_used')}")
