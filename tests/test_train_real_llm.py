"""``crl train --config real-cpu`` on the real SmolLM2-135M-Instruct, from its GGUF, for 2 steps.

The model file is the one ``scripts/serve_real_llm.sh --setup`` assembles into
``.venv-llm/models/smollm2.gguf`` (``make test-real-llm`` sets it up first); transformers
reads it, and the first run converts it once into the user cache (io/hf_model.py).
What is checked is what a new user would meet on day one: the model's own chat template and
end-of-turn token reach the trainer, two steps of metrics are written, and a second run into
the folder with another model is refused in one line before that model is looked for.
Marker ``real_llm``: the main suite skips it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.real_llm, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
#: a deadline against a hang, not a speed check. On the 2 shared cores: converting the GGUF
#: took 358 s at load average 20-400 (once per machine, then cached); with the first preset
#: (64 tokens, temperature 1.0) the 2-step run took 9 min 13 s at load average 7-17 (steps of
#: 279 s and 204 s), this test 8 min 5 s once and over 900 s once. The present preset (96
#: tokens) has not been timed to the end here: one step ran over 8 minutes at load average
#: 10-12 beside four other jobs; an idle 2-core machine should take about 2 minutes a step
RUN_LIMIT_S = 1500


def _crl(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.run([sys.executable, "-m", "composition_rl.cli", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=RUN_LIMIT_S)


def test_two_real_cpu_steps_then_another_model_is_refused(tmp_path):
    from composition_rl.io.gguf import gguf_file

    model = REPO / ".venv-llm" / "models" / "smollm2.gguf"
    if not model.is_file() and not os.environ.get("CRL_MODELS_DIR"):  # asked for by marker: a skip would hide it
        pytest.fail(f"{model} is missing: run `bash scripts/serve_real_llm.sh --setup`")
    gguf_file("smollm2", assemble_missing=False)  # there and the pinned one
    out = tmp_path / "run"
    r = _crl("train", "--config", "real-cpu", "--max-steps", "2", "--output-dir", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        assert row["stage"] == "depth1" and row["generated"] >= 16 and 0 < row["response_length"] <= 96
        assert row["solve_all"] + row["solve_none"] + row["informative"] == pytest.approx(1.0)
    groups = [json.loads(line) for line in (out / "pass_rates.jsonl").read_text().splitlines()]
    assert len(groups) >= 8 and {g["step"] for g in groups} == {1, 2}
    # completions stop at SmolLM2's end of turn (<|im_end|>): on a mean, before the 96-token cap
    assert min(row["response_length"] for row in rows) < 96
    run = json.loads((out / "run.json").read_text())
    assert run["model"] == "Smollm2 135M 8k Lc100K Mix1 Ep2 (GGUF sha256 b179c9523d0e6a0f)"
    assert run["reward_fallbacks"] == ["prose"]  # the preset's reward reads SmolLM2's unboxed endings
    tok = json.loads((out / "final" / "tokenizer_config.json").read_text())
    assert tok["eos_token"] == "<|im_end|>" and "<|im_start|>assistant" in (out / "final" / "chat_template.jinja").read_text()
    print(f"\n[real-cpu, 2 steps] {[{k: row[k] for k in ('reward_mean', 'informative', 'step_seconds', 'gen_seconds', 'response_length')} for row in rows]}")

    again = _crl("train", "--config", "real-cpu", "--max-steps", "2", "--output-dir", str(out), "--no-progress",
                 "--model", "qwen2.5-coder-0.5b-instruct-awq-q4_k_m")
    assert again.returncode == 2
    err = again.stderr.strip().splitlines()
    assert len(err) == 1 and "holds a training run made with other settings" in err[0], again.stderr[-2000:]
    assert "Qwen2.5 Coder 0.5B Instruct AWQ (GGUF sha256 1d9614638d18024d)" in err[0]
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
