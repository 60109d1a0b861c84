"""What a user gets from ``pip install composition-rl``: the wheel, installed without extras
into a new virtualenv, composes a file and runs the library API; its metadata asks for
ranges, never an exact pin, of the engines a user already runs.

It builds the wheel from a copy of the tree (no build output in the checkout) and installs
it with CI's constraints (constraints/ci.txt), so a resolver slip cannot pull a CUDA torch.
It needs the package index (pip's cache makes reruns fast): marker ``slow``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "tiny_problems.jsonl"
CONSTRAINTS = REPO / "constraints" / "ci.txt"
PIP = [sys.executable, "-m", "pip"]

# The library in memory, as a user would call it after `pip install composition-rl`.
# TODO: run docs/api.md's first example here once that page exists.
API_SMOKE = r"""
import sys
import composition_rl
from composition_rl.jobs.compose import ComposeConfig, compose_problems
from composition_rl.grading import Verifier, VerifyConfig

q1 = composition_rl.Problem.new("What is $3+4$?", "7")
q2 = composition_rl.Problem.new("Compute $2 + 5$.", "7")
res = compose_problems([q1, q2], ComposeConfig(depth=2))
assert res.accepted, res.rejected
with Verifier(VerifyConfig(timeout_s=10.0)) as v:
    outcome = v.score(r"so the answer is $\boxed{\dfrac12}$", "0.5").outcome.value
heavy = sorted(m for m in ("torch", "transformers", "trl", "reasoning_gym") if m in sys.modules)
print(composition_rl.__version__, len(res.accepted), outcome, heavy)
"""


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} exited {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A fresh virtualenv with the wheel installed, no extras; its bin folder and environment."""
    tmp = tmp_path_factory.mktemp("wheel")
    # the subprocesses must import the installed wheel, never this checkout's src/
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    tree = tmp / "tree"
    tree.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, tree / name)
    shutil.copytree(REPO / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    dist = tmp / "dist"
    _run([*PIP, "wheel", "--no-deps", "-q", "-w", str(dist), str(tree)], tmp, env)
    (wheel,) = dist.glob("composition_rl-*.whl")
    venv = tmp / "venv"
    # no pip inside (ensurepip is the slowest step): this pip installs into it through --python
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp, env)
    bin_ = venv / "bin"
    _run([*PIP, "--python", str(bin_ / "python"), "install", "-q", "-c", str(CONSTRAINTS), str(wheel)], tmp, env)
    return bin_, env


@pytest.mark.slow
def test_the_wheel_without_extras_installs_no_torch_and_no_reasoning_gym(installed):
    bin_, env = installed
    code = "import importlib.metadata as m; print('\\n'.join(d.metadata['Name'] for d in m.distributions()))"
    listed = _run([str(bin_ / "python"), "-c", code], bin_, env).stdout.lower()
    names = {line.strip().replace("_", "-") for line in listed.splitlines() if line.strip()}
    assert "composition-rl" in names and "math-verify" in names, sorted(names)
    assert not names & {"torch", "transformers", "trl", "reasoning-gym", "pytest", "ruff", "playwright"}, sorted(names)


@pytest.mark.slow
def test_the_wheel_asks_for_ranges_of_math_verify_and_reasoning_gym(installed):
    bin_, env = installed
    code = "import importlib.metadata as m, json; print(json.dumps(m.requires('composition-rl')))"
    requires = json.loads(_run([str(bin_ / "python"), "-c", code], bin_, env).stdout)
    engines = [r for r in requires if r.lower().replace("_", "-").startswith(("math-verify", "reasoning-gym"))]
    assert any(r.startswith("math-verify") and "extra ==" not in r for r in engines), requires
    assert any(r.startswith("reasoning-gym") and 'extra == "demo"' in r for r in engines), requires
    assert not [r for r in engines if "==" in r.split(";")[0]], engines
    code = "import importlib.metadata as m, json; print(json.dumps([str(f) for f in m.distribution('composition-rl').files]))"
    files = json.loads(_run([str(bin_ / "python"), "-c", code], bin_, env).stdout)
    assert any(f.endswith(".dist-info/licenses/LICENSE") for f in files), files  # the Apache-2.0 text ships
    code = "import importlib.metadata as m; print(m.version('composition-rl'))"
    from composition_rl import __version__

    assert _run([str(bin_ / "python"), "-c", code], bin_, env).stdout.strip() == __version__


@pytest.mark.slow
def test_crl_compose_score_and_browse_run_from_the_wheel_and_the_demo_extra_is_named_when_needed(installed, tmp_path):
    bin_, env = installed
    out = tmp_path / "d2"
    _run([str(bin_ / "crl"), "compose", "--input", str(FIXTURE), "--depth", "2", "--out", str(out),
          "--no-progress"], tmp_path, env)
    rows = [json.loads(line) for line in (out / "composed.jsonl").read_text().splitlines()]
    assert rows and all(r["depth"] == 2 for r in rows)
    # the other commands the core install promises: score, browse, the help
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"response": r"so $\boxed{7}$", "answer": "7"}) + "\n")
    _run([str(bin_ / "crl"), "score", "--input", str(responses), "--out", str(tmp_path / "scored.jsonl")], tmp_path, env)
    assert json.loads((tmp_path / "scored.jsonl").read_text())["outcome"] == "correct"
    _run([str(bin_ / "crl"), "browse", str(out)], tmp_path, env)
    assert (out / "report.html").stat().st_size > 0
    assert "compose" in _run([str(bin_ / "crl"), "--help"], tmp_path, env).stdout
    # the built-in data source needs reasoning-gym: one line that names the extra, exit 2
    r = subprocess.run([str(bin_ / "crl"), "compose", "--out", str(tmp_path / "rg"), "--no-progress"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "composition-rl[demo]" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.slow
def test_the_library_api_runs_from_the_wheel_without_torch(installed, tmp_path):
    bin_, env = installed
    version, accepted, outcome, heavy = _run([str(bin_ / "python"), "-c", API_SMOKE], tmp_path, env).stdout.split(" ", 3)
    assert int(accepted) >= 1 and outcome == "correct" and heavy.strip() == "[]", (version, accepted, outcome, heavy)
