"""``crl profile`` and the profile library against a loopback OpenAI-compatible server whose
answers are controlled: for each problem it returns the gold answer in a planned number of
its n choices, so the true pass rates are known and the profile must recover them exactly.
Scoring goes through the project's real verifier."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fakes.openai_server import FakeOpenAIServer

from composition_rl.cli import main as crl
from composition_rl.grading import VerifyConfig, close_shared_verifiers, shared_verifier
from composition_rl.io.files import atomic_write_jsonl, read_jsonl
from composition_rl.jobs.profile import (
    ProfileConfig,
    keep_from_profile,
    profile_problems,
    select_from_profile,
)
from composition_rl.records import Problem
from composition_rl.rollout.base import SamplingConfig, build_backend
from composition_rl.stats import wilson_interval

REPO = Path(__file__).resolve().parents[1]
N = 4

# (question, gold, a correct reply in another accepted form, planned correct out of N)
CASES = [
    ("What is $3 + 4$?", "7", "7", 4),
    ("Compute $\\frac{1}{2} + \\frac{1}{4}$.", "\\frac{3}{4}", "0.75", 3),
    ("Solve $x + 1 = 0$ and $y = 2x + 1$; give $(y, x)$.", "(-1,-1)", "(-1, -1)", 2),
    ("What is $\\sqrt{2} \\cdot \\sqrt{8}$?", "4", "4", 1),
    ("How many primes are below 10?", "4", "4", 0),
    ("What is $2^{10}$?", "1024", "1,024", 4),
    ("Simplify $\\frac{6}{8}$.", "\\frac34", "\\frac{3}{4}", 2),
    ("What is $14\\pi / 2$?", "7\\pi", "7\\pi", 0),
    ("What is 64,328 + 0?", "64,\\!328", "64328", 3),
    ("Evaluate $\\tfrac{10}{4}$.", "\\frac{5}{2}", "2.5", 1),
]


def make_problems() -> list[Problem]:
    return [Problem.new(q, gold, source="controlled") for q, gold, _, _ in CASES]


def controlled_responder(problems):
    """body -> n replies: the planned number carry the gold (in another form), the rest not."""
    plan = {p.question: (alt, c) for p, (_, _, alt, c) in zip(problems, CASES)}

    def respond(body):
        content = body["messages"][-1]["content"]
        q = next(q for q in plan if content.startswith(q))
        alt, c = plan[q]
        n = int(body.get("n") or 1)
        wrong = ["The answer is \\boxed{99991}.", "I am not sure.", "So it is $\\boxed{-3}$."]
        return [f"Step by step... the answer is $\\boxed{{{alt}}}$." if i < c else wrong[i % 3] for i in range(n)]

    return respond


@pytest.fixture(scope="module")
def verifier():
    # The process-wide pool the commands use too (their default config): started once here,
    # its workers released when the module is done.
    yield shared_verifier(VerifyConfig(timeout_s=5.0))
    close_shared_verifiers()


@pytest.fixture
def server():
    problems = make_problems()
    with FakeOpenAIServer(controlled_responder(problems)) as srv:
        yield srv, problems


def test_profile_recovers_the_planned_pass_rates_exactly(server, verifier, tmp_path):
    srv, problems = server
    backend = build_backend("openai", base_url=srv.url, model="fake-model")
    summary = profile_problems(
        problems, backend, verifier, tmp_path, ProfileConfig(n=N, chunk=3), progress=False
    )
    backend.close()
    rows = {r["id"]: r for r in read_jsonl(tmp_path / "profile.jsonl")}
    assert len(rows) == len(problems)
    for p, (_, _, _, c) in zip(problems, CASES):
        r = rows[p.id]
        assert (r["correct"], r["n"], r["pass_rate"]) == (c, N, c / N)
        assert (r["wilson_lo"], r["wilson_hi"]) == pytest.approx(wilson_interval(c, N))
        assert r["class"] == ("solve_none" if c == 0 else "solve_all" if c == N else "goldilocks")
        assert sum(r["outcomes"].values()) == N and r["outcomes"].get("correct", 0) == c
    planned = [c for *_, c in CASES]
    assert summary["n"] == N and summary["prompts"] == len(CASES)
    assert summary["solve_all"] == planned.count(N) / len(CASES)
    assert summary["solve_none"] == planned.count(0) / len(CASES)
    assert summary["goldilocks"] == sum(0 < c < N for c in planned) / len(CASES)
    assert summary["solve_all"] + summary["solve_none"] + summary["goldilocks"] == pytest.approx(1.0)
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    assert (tmp_path / "pass_rates.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Sampling used the paper preset and asked the server for n choices per prompt.
    assert {(b["n"], b["temperature"], b["top_p"], b["top_k"]) for b in srv.bodies} == {(N, 0.6, 0.95, 20)}
    assert srv.requests == len(problems)


class StopAfter:
    """Wrap a backend; raise KeyboardInterrupt (a kill) on the k-th generate call."""

    def __init__(self, inner, k):
        self.inner, self.k, self.calls, self.name = inner, k, 0, inner.name

    def generate(self, prompts, n, sampling):
        self.calls += 1
        if self.calls == self.k:
            raise KeyboardInterrupt
        return self.inner.generate(prompts, n, sampling)

    def close(self):
        self.inner.close()


def asked(srv) -> list[str]:
    return [b["messages"][-1]["content"].split("\n")[0] for b in srv.bodies]


def test_resume_after_interrupt_profiles_nothing_twice_and_loses_nothing(server, verifier, tmp_path):
    srv, problems = server
    backend = build_backend("openai", base_url=srv.url, model="fake-model")
    cfg = ProfileConfig(n=N, chunk=3)
    with pytest.raises(KeyboardInterrupt):
        profile_problems(problems, StopAfter(backend, 3), verifier, tmp_path, cfg, progress=False)
    first = [r["id"] for r in read_jsonl(tmp_path / "profile.jsonl")]
    assert len(first) == 6  # two chunks of 3 finished before the kill
    srv.reset_counts()
    # Duplicated input ids are profiled once.
    profile_problems(problems + problems[:2], backend, verifier, tmp_path, cfg, progress=False)
    backend.close()
    ids = [r["id"] for r in read_jsonl(tmp_path / "profile.jsonl")]
    assert sorted(ids) == sorted(p.id for p in problems)  # none lost, none twice
    done_first = set(first)
    assert sorted(asked(srv)) == sorted(p.question.split("\n")[0] for p in problems if p.id not in done_first)


def test_a_rerun_with_other_settings_is_refused(server, verifier, tmp_path):
    srv, problems = server
    backend = build_backend("openai", base_url=srv.url, model="fake-model")
    profile_problems(problems[:2], backend, verifier, tmp_path, ProfileConfig(n=N), progress=False)
    with pytest.raises(ValueError, match="other settings"):
        profile_problems(problems[:2], backend, verifier, tmp_path, ProfileConfig(n=N + 1), progress=False)
    with pytest.raises(ValueError, match="other settings"):
        cfg = ProfileConfig(n=N, sampling=SamplingConfig(temperature=1.0))
        profile_problems(problems[:2], backend, verifier, tmp_path, cfg, progress=False)
    backend.close()


def write_input(path: Path, problems) -> Path:
    atomic_write_jsonl(path, [{"problem": p.question, "answer": p.answer} for p in problems])
    return path


def test_cli_profile_select_and_keep_goldilocks(server, verifier, tmp_path, capsys):
    srv, problems = server
    inp = write_input(tmp_path / "in.jsonl", problems)
    out = tmp_path / "prof"
    keep_out = tmp_path / "kept.jsonl"
    rc = crl(
        ["profile", "--base-url", srv.url, "--model", "fake-model", "--input", str(inp), "-n", str(N),
         "--out", str(out), "--no-progress", "--keep", "goldilocks", "--keep-out", str(keep_out)]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "profiled 10 prompts at n=4" in text
    planned = {p.question: c for p, (*_, c) in zip(problems, CASES)}
    kept = [Problem.from_dict(d) for d in read_jsonl(keep_out)]
    rejects = list(read_jsonl(tmp_path / "kept.rejects.jsonl"))
    assert sorted(p.question for p in kept) == sorted(q for q, c in planned.items() if 0 < c < N)
    assert len(kept) + len(rejects) == len(problems)
    assert {r["reason"] for r in rejects} == {"band:solve_all", "band:solve_none"}
    # The library contract the compose command uses.
    ids_all = select_from_profile(out, "solve_all")
    assert ids_all == {p.id for p in kept + [Problem.from_dict(r["problem"]) for r in rejects]
                       if planned[p.question] == N}
    assert select_from_profile(out, "stale") == {p.id for p in problems if planned[p.question] in (0, N)}
    extra = Problem.new("Not profiled?", "1")
    k2, r2 = keep_from_profile([*problems, extra], out, "goldilocks")
    assert [r["reason"] for r in r2 if r["id"] == extra.id] == ["not_profiled"]
    with pytest.raises(ValueError, match="unknown band 'easy'"):
        select_from_profile(out, "easy")


def test_cli_usage_errors_are_clean(tmp_path, capsys):
    assert crl(["profile", "--model", str(tmp_path / "nope"), "--input", str(tmp_path / "x.jsonl"),
                "--out", str(tmp_path / "o")]) == 2
    assert "error" in capsys.readouterr().err
    inp = write_input(tmp_path / "in.jsonl", make_problems()[:1])
    assert crl(["profile", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--input", str(inp),
                "--out", str(tmp_path / "o"), "--keep", "easy"]) == 2
    assert "unknown band 'easy'" in capsys.readouterr().err


def test_killed_profile_resumes_with_every_prompt_once(tmp_path):
    """SIGKILL a real `crl profile` process mid-run, rerun it, and check the log."""
    problems = make_problems()
    inp = write_input(tmp_path / "in.jsonl", problems)
    out = tmp_path / "prof"
    log = out / "profile.jsonl"
    cmd = [sys.executable, "-m", "composition_rl.cli", "profile", "--model", "fake-model", "--input", str(inp),
           "-n", str(N), "--out", str(out), "--chunk", "1", "--concurrency", "1", "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    with FakeOpenAIServer(controlled_responder(problems), latency_s=0.15) as srv:
        cmd += ["--base-url", srv.url]
        proc = subprocess.Popen(cmd, env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if log.exists() and len(log.read_text().splitlines()) >= 3:
                    break
                time.sleep(0.02)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the process and its verifier workers
            proc.wait()
        killed_at = len(list(read_jsonl(log)))
        assert 3 <= killed_at < len(problems)
        rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert rerun.returncode == 0, rerun.stderr
    rows = list(read_jsonl(log))
    assert sorted(r["id"] for r in rows) == sorted(p.id for p in problems)
    planned = {p.id: c for p, (*_, c) in zip(problems, CASES)}
    assert {r["id"]: r["correct"] for r in rows} == planned


def test_keep_goldilocks_on_a_composed_set_keeps_the_records_whole(verifier, tmp_path, capsys):
    """Profile composed Problem records (as `crl compose` writes them) and keep the band:
    the kept rows are the same records, ids, links and parents included."""
    from composition_rl.records import Link

    link = Link(x="X", y="Y", v1_latex="7", v1_expr="7", v2_literal="2", v2_expr="2", d_latex="5",
                d_expr="5", v2_offset=10)
    composed = [
        Problem(id=f"comp{i:02d}", question=f"q1 number {i}. Let $X$ be the answer. $Y$ is 5 less than $X$. "
                f"What is $Y + {i}$?", answers=(str(2 + i),), source="compose:symbolic", depth=2,
                parents=(f"a{i}", f"b{i}"), links=(link,), engine="symbolic")
        for i in range(6)
    ]
    plan = {p.question: (p.answer, c) for p, c in zip(composed, [0, 1, 2, 4, 3, 4])}

    def respond(body):
        content = body["messages"][-1]["content"]
        gold, c = next(v for q, v in plan.items() if content.startswith(q))
        return [f"\\boxed{{{gold}}}" if i < c else "\\boxed{-100}" for i in range(int(body["n"]))]

    inp = tmp_path / "composed.jsonl"
    atomic_write_jsonl(inp, [p.to_dict() for p in composed])
    keep_out = tmp_path / "keep.jsonl"
    with FakeOpenAIServer(respond) as srv:
        assert crl(["profile", "--base-url", srv.url, "--model", "m", "--input", str(inp), "-n", str(N),
                    "--out", str(tmp_path / "p"), "--no-progress", "--keep", "goldilocks",
                    "--keep-out", str(keep_out)]) == 0
    kept = [Problem.from_dict(d) for d in read_jsonl(keep_out)]
    assert kept == [p for p in composed if 0 < plan[p.question][1] < N]
    assert select_from_profile(tmp_path / "p", "solve_all") == {"comp03", "comp05"}
    capsys.readouterr()


def test_endpoint_failing_for_good_exits_cleanly_and_keeps_finished_work(verifier, tmp_path, capsys):
    from fakes.openai_server import Fault

    problems = make_problems()
    inp = write_input(tmp_path / "in.jsonl", problems)
    bad = {problems[5].question}

    def faults(body, attempt):  # one prompt always gets a 400: that chunk fails for good
        return Fault("status", status=400) if body["messages"][-1]["content"].split("\n")[0] in bad else None

    with FakeOpenAIServer(controlled_responder(problems), faults=faults) as srv:
        rc = crl(["profile", "--base-url", srv.url, "--model", "m", "--input", str(inp), "-n", str(N),
                  "--out", str(tmp_path / "p"), "--chunk", "5", "--no-progress"])
    assert rc == 1
    assert "rerun the same command to resume" in capsys.readouterr().err
    assert sorted(r["id"] for r in read_jsonl(tmp_path / "p" / "profile.jsonl")) == sorted(p.id for p in problems[:5])


@pytest.mark.shared_data
def test_cli_profile_with_a_tiny_local_model(shared_data, verifier, tmp_path, capsys):
    """Real generation: a random-weight model answers nothing right, so every prompt is
    solve_none, and each row accounts for all n samples."""
    from fakes.rollout_tiny_qwen import build_tiny_qwen

    model = build_tiny_qwen(tmp_path / "tiny")
    runs = []
    for name in ("d1", "d2"):  # twice: the same inputs and settings give byte-identical outputs
        assert crl(["profile", "--model", str(model), "--input", str(shared_data / "eval" / "amc.json"),
                    "--limit", "4", "-n", "3", "--max-tokens", "8", "--out", str(tmp_path / name),
                    "--no-progress", "--device", "cpu", "--keep-responses", "--chunk", "2"]) == 0
        runs.append((tmp_path / name / "profile.jsonl").read_bytes())
    rows = list(read_jsonl(tmp_path / "d1" / "profile.jsonl"))
    assert len(rows) == 4 and all(sum(r["outcomes"].values()) == 3 == len(r["responses"]) for r in rows)
    summary = json.loads((tmp_path / "d1" / "summary.json").read_text())
    assert (summary["solve_none"], summary["prompts"], summary["n"]) == (1.0, 4, 3)
    assert runs[0] == runs[1] and b'"responses"' in runs[0]
    capsys.readouterr()


class _SmallContextGGUF:
    """A local backend with a 64-token context, as the llama backend answers it: a prompt over
    300 characters gets empty ``prompt_too_long`` completions, the others a right answer."""

    name = "llama"
    context = 64

    def __init__(self):
        self.asked: list[str] = []

    def prompt_too_long(self, prompt):
        if len(prompt) <= 300:
            return None
        return f"prompt_too_long: the prompt is {len(prompt) // 4} tokens and the model's context {self.context}"

    def generate(self, prompts, n, sampling):
        from composition_rl.rollout.base import Completion

        self.asked += prompts
        return [[Completion("", 0, "prompt_too_long") if self.prompt_too_long(p) else Completion("so \\boxed{4}", 5)
                 for _ in range(n)] for p in prompts]

    def close(self):
        pass


@pytest.mark.parametrize("command", ["profile", "eval"])
def test_a_gguf_prompt_longer_than_the_context_is_set_aside_not_profiled(command, tmp_path, monkeypatch, caplog):
    """The llama backend answers a prompt that fills its context with empty completions; profile
    and eval must set it aside as prompt_too_long (as with a model folder), not count it a
    solve_none problem with n no_answer replies."""
    import importlib

    fake = _SmallContextGGUF()
    # both jobs build their backend through the policy flags of the profile module
    monkeypatch.setattr(importlib.import_module("composition_rl.jobs.profile"), "backend_from_args", lambda args: fake)
    inp = tmp_path / "qa.jsonl"
    inp.write_text(json.dumps({"question": "What is 2+2?", "answer": "4"}) + "\n"
                   + json.dumps({"question": "What is 2+2? " + "Think about it. " * 30, "answer": "4"}) + "\n")
    out = tmp_path / "o"
    if command == "profile":
        args = ["profile", "--input", str(inp), "-n", "2"]
    else:
        args = ["eval", "--benchmark", str(inp), "-n", "2"]
    assert crl([*args, "--model", "smollm2", "--out", str(out), "--no-progress"]) == 0
    rejects = list(read_jsonl(out / "input_rejects.jsonl"))
    assert [(r["reason"], r["row"]) for r in rejects] == [("prompt_too_long", 1)]
    assert "longer than the context" in caplog.text  # logged by composition_rl.jobs.profile
    assert len(fake.asked) == 1  # nothing was sampled for the long prompt
    if command == "profile":
        rows = list(read_jsonl(out / "profile.jsonl"))
        assert [r["class"] for r in rows] == ["solve_all"]


def test_profile_says_how_many_replies_had_no_answer(tmp_path, capsys):
    """87 of 88 no_answer replies read "solve_none 22 (100%)" and nothing else: the summary
    must say that the replies had no answer to grade (a template or --fallback matter)."""
    problems = make_problems()[:3]
    inp = write_input(tmp_path / "in.jsonl", problems)
    with FakeOpenAIServer(lambda body: ["I think it is seven."] * int(body.get("n") or 1)) as srv:
        assert crl(["profile", "--model", "m", "--base-url", srv.url, "--input", str(inp), "-n", "2",
                    "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    said = capsys.readouterr()
    assert "no answer in 6 of 6 replies" in said.out + said.err and "--fallback" in said.out + said.err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert (summary["no_answer"], summary["replies"]) == (6, 6)


def test_keep_and_select_take_a_pass_rate_interval_and_the_old_band_names(server, verifier, tmp_path, capsys):
    """``--keep`` / ``--select`` share ``crl refresh --band``'s type: names as before, or LO,HI."""
    srv, problems = server
    inp = write_input(tmp_path / "in.jsonl", problems)
    out = tmp_path / "prof"
    assert crl(["profile", "--base-url", srv.url, "--model", "fake-model", "--input", str(inp), "-n", str(N),
                "--out", str(out), "--no-progress", "--keep", "0.5,0.75"]) == 0
    planned = {p.question: c for p, (*_, c) in zip(problems, CASES)}
    kept = [Problem.from_dict(d) for d in read_jsonl(out / "kept.jsonl")]
    assert sorted(p.question for p in kept) == sorted(q for q, c in planned.items() if c in (2, 3))
    assert select_from_profile(out, "(0,0.5]") == {p.id for p in problems if planned[p.question] in (1, 2)}
    assert select_from_profile(out, "informative") == select_from_profile(out, "(0,1)")
    assert select_from_profile(out, "solve_all,solve_none") == select_from_profile(out, "stale")
    capsys.readouterr()
    assert crl(["profile", "--base-url", srv.url, "--model", "fake-model", "--input", str(inp), "-n", str(N),
                "--out", str(tmp_path / "p2"), "--no-progress", "--keep", "0.8,0.2"]) == 2
    assert "LO must be <= HI" in capsys.readouterr().err
