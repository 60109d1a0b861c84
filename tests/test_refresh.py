"""``crl refresh`` and ``composition_rl.jobs.refresh``: the stages, their resume, the refusals.

The policy is scripted: it knows every original problem's answer and answers a planned
number of its samples correctly, per prompt, per composition depth and per sampling seed
(the profile draws at seed s, the confirmation at s + 1, the re-profile at s + 2), so the
bands of every stage are known and the refresh must land exactly on them. Grading goes
through the project's real verifier; composition through the real symbolic engine.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from pathlib import Path

import pytest
from fakes.openai_server import FakeOpenAIServer

import composition_rl as crl
from composition_rl.cli import main as cli
from composition_rl.grading import VerifyConfig, close_shared_verifiers, shared_verifier
from composition_rl.io.files import atomic_write_jsonl, read_jsonl
from composition_rl.io.identity import RunMismatch
from composition_rl.jobs.grow import GrowConfig
from composition_rl.jobs.grow.teachers import (
    ProgramTeacher,
    chain_values,
    parse_chain,
    render_chain,
)
from composition_rl.jobs.profile import ProfileConfig
from composition_rl.jobs.refresh import RefreshConfig, refresh_problems
from composition_rl.records import Problem
from composition_rl.rollout.base import Completion, SamplingConfig
from composition_rl.stats import wilson_interval

N = 4

# name, object, a, b, then the planned correct of N: {seed: k} for the original (seed 0 the
# profile, 1 the confirmation, 2 the re-profile), and for its compositions at depth 2 and 3
PLAN = {
    "Alice": ("apples", 3, 4, {0: 4, 1: 4}, {0: 2, 2: 2}, {}),            # mastered; d2 informative
    "Bruno": ("pears", 5, 6, {0: 4, 1: 3, 2: 4}, {}, {}),                 # a near miss: 4/4 then 3/4
    "Chen": ("plums", 7, 2, {0: 2, 2: 2}, {}, {}),                        # informative as it is
    "Dara": ("figs", 9, 8, {0: 0}, {}, {}),                               # solve_none
    "Emil": ("limes", 10, 11, {0: 4, 1: 4}, {0: 4}, {0: 1, 2: 0}),        # d2 still solve_all -> d3
    "Fay": ("dates", 12, 5, {0: 4, 1: 4}, {0: 0}, {}),                    # d2 solve_none
    "Gus": ("kiwis", 6, 13, {0: 4, 1: 4}, {0: 3, 2: 1}, {}),              # d2 informative
}


def originals() -> list[Problem]:
    return [Problem.new(f"{name} has {a} {obj} and buys {b} more {obj}. How many {obj} does {name} have now?",
                        str(a + b), source="scripted") for name, (obj, a, b, *_) in PLAN.items()]


class ScriptedPolicy:
    """A rollout backend answering by the plan; records every (prompt, seed) it samples."""

    name = "scripted"
    model = "scripted-policy"

    def __init__(self, stop_at: int | None = None):
        self.answers = {name: str(a + b) for name, (_, a, b, *_) in PLAN.items()}
        self.asked: list[tuple[str, int]] = []
        self.calls = 0
        self.stop_at = stop_at

    def who(self, prompt: str) -> tuple[str, int]:
        """(the prompt's last problem's name, depth): the names it holds, the last one last."""
        found = {name: prompt.rfind(f"{name} has") for name in PLAN if f"{name} has" in prompt}
        return max(found, key=found.get), len(found)

    def correct(self, prompt: str, seed: int) -> int:
        name, depth = self.who(prompt)
        return PLAN[name][2 + depth].get(seed, PLAN[name][2 + depth].get(0, 0))

    def replies(self, prompt: str, n: int, seed: int) -> list[str]:
        name, _ = self.who(prompt)
        k = self.correct(prompt, seed)
        return [f"So the answer is $\\boxed{{{self.answers[name] if i < k else -999}}}$." for i in range(n)]

    def generate(self, prompts, n, sampling):
        self.calls += 1
        if self.stop_at is not None and self.calls == self.stop_at:
            raise KeyboardInterrupt  # a kill in the middle of a stage
        self.asked += [(p, sampling.seed) for p in prompts]
        return [[Completion(t, tokens=8) for t in self.replies(p, n, sampling.seed)] for p in prompts]

    def close(self):
        pass


@pytest.fixture(scope="module")
def verifier():
    yield shared_verifier(VerifyConfig(timeout_s=5.0))
    close_shared_verifiers()


def config(**kw) -> RefreshConfig:
    return RefreshConfig(confirm=N, pool_size=20, per_prompt=2,
                         profile=ProfileConfig(n=N, chunk=2, sampling=SamplingConfig(seed=0)), **kw)


def by_name(problems, policy) -> dict[str, list]:
    out: dict[str, list] = {}
    for p in problems:
        out.setdefault(policy.who(p.question if isinstance(p, Problem) else p["problem"]["question"]), []).append(p)
    return out


def test_refresh_lands_every_prompt_in_its_planned_place(verifier, tmp_path):
    pol = ScriptedPolicy()
    res = refresh_problems(originals(), pol, verifier, tmp_path, config(), identity={"model": "scripted-policy"},
                           exports=("verl", "trl"))
    got = sorted((pol.who(p.question), p.metadata["refresh"]["source"]) for p in res.refreshed)
    # originals: the near miss and the informative one; compositions (2 per prompt): Alice's
    # and Gus's at depth 2, Emil's at depth 3 (his depth-2 ones stayed solve_all)
    assert got == sorted([
        (("Bruno", 1), "original"), (("Chen", 1), "original"),
        *[(("Alice", 2), "composed depth 2"), (("Gus", 2), "composed depth 2"), (("Emil", 3), "composed depth 3")] * 2])
    bruno = next(p for p in res.refreshed if pol.who(p.question) == ("Bruno", 1)).metadata["refresh"]
    assert (bruno["correct"], bruno["n"], bruno["class"]) == (7, 8, "goldilocks")  # 4/4, then 3/4 of 4 more
    assert bruno["wilson"] == pytest.approx(list(wilson_interval(7, 8)))
    assert bruno["model"] == {"model": "scripted-policy"} and bruno["sampling"]["seed"] == 0
    assert bruno["verifier"]["timeout_s"] == 5.0 and bruno["template"] == "boxed"
    assert bruno["confirm"] == {"correct": 3, "n": 4, "seed": 1}
    comp = next(p for p in res.refreshed if pol.who(p.question) == ("Emil", 3))
    assert comp.metadata["refresh"]["parents"] == list(comp.parents) and len(comp.parents) == 3
    # the confirmation asked only the n/n prompts, at its own seed: new draws
    confirm = {pol.who(p)[0] for p, s in pol.asked if s == 1}
    assert confirm == {"Alice", "Bruno", "Emil", "Fay", "Gus"}
    # every original is refreshed or set aside, with its reason; every profiled composition too
    reasons = {(pol.who(r["problem"]["question"]), r["reason"]) for r in res.set_aside}
    assert {(w[0], r) for w, r in reasons if w[1] == 1} == {
        ("Alice", "solve_all"), ("Emil", "solve_all"), ("Fay", "solve_all"), ("Gus", "solve_all"),
        ("Dara", "band:solve_none")}
    assert {(w, r) for w, r in reasons if w[1] > 1} == {(("Emil", 2), "band:solve_all"),
                                                         (("Fay", 2), "band:solve_none")}
    add = res.report["set_aside"]["counts_add_up"]
    assert add["originals"] == {"in": 7, "refreshed": 2, "set_aside": 5, "ok": True}
    assert add["compositions"]["ok"] and add["compositions"]["kept"] == 6
    # the re-profile at seed 2: Bruno's near miss is 4/4 again, Emil's compositions 0/4
    s = res.report["informative_share"]
    assert (s["stale"]["count"], s["stale"]["of"]) == (1, 7)  # only Chen at the first n samples
    assert (s["refreshed_as_selected"]["count"], s["refreshed_as_selected"]["of"]) == (8, 8)
    assert (s["refreshed_reprofiled"]["count"], s["refreshed_reprofiled"]["of"]) == (5, 8)
    assert {pol.who(p)[0] for p, seed in pol.asked if seed == 2} == {"Alice", "Bruno", "Chen", "Emil", "Gus"}
    gain = res.report["gain"]
    assert gain["informative_prompts_gained"] == 6 and gain["rollouts"] == len([a for a in pol.asked if a[1] < 2]) * N
    for name in ("refreshed.jsonl", "set_aside.jsonl", "report.md", "report.json", "bands.png", "verl.parquet",
                 "trl.parquet"):
        assert (tmp_path / name).is_file(), name
    assert [r["id"] for r in read_jsonl(tmp_path / "refreshed.jsonl")] == [p.id for p in res.refreshed]
    assert "re-profiled with another seed | 62.5%" in (tmp_path / "report.md").read_text()


@pytest.mark.parametrize("stop_at", [3, 6, 9, 12])
def test_a_killed_refresh_resumes_without_repeating_a_sample(verifier, tmp_path, stop_at):
    """Killed at the k-th generate call (chunks of 2 prompts: in the profile, the
    confirmation, the depth-2 profile, the re-profile), then rerun: every (prompt, seed) is
    sampled once over both runs, and the outputs are those of an uninterrupted run."""
    whole = ScriptedPolicy()
    refresh_problems(originals(), whole, verifier, tmp_path / "whole", config(), identity={"model": "m"})
    killed = ScriptedPolicy(stop_at=stop_at)
    with pytest.raises(KeyboardInterrupt):
        refresh_problems(originals(), killed, verifier, tmp_path / "run", config(), identity={"model": "m"})
    again = ScriptedPolicy()
    refresh_problems(originals(), again, verifier, tmp_path / "run", config(), identity={"model": "m"})
    both = killed.asked + again.asked
    assert len(both) == len(set(both))  # nothing sampled twice
    assert sorted(both) == sorted(whole.asked)  # nothing lost
    for name in ("refreshed.jsonl", "set_aside.jsonl"):
        assert (tmp_path / "run" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()


def test_a_rerun_with_other_settings_or_another_model_is_refused(verifier, tmp_path):
    refresh_problems(originals(), ScriptedPolicy(), verifier, tmp_path, config(), identity={"model": "m"})
    with pytest.raises(RunMismatch, match="confirm"):
        refresh_problems(originals(), ScriptedPolicy(), verifier, tmp_path, config().__class__(
            confirm=2, per_prompt=2, profile=config().profile), identity={"model": "m"})
    with pytest.raises(RunMismatch, match="model"):
        refresh_problems(originals(), ScriptedPolicy(), verifier, tmp_path, config(), identity={"model": "other"})
    pol = ScriptedPolicy()  # the same settings resume: nothing is sampled again
    refresh_problems(originals(), pol, verifier, tmp_path, config(), identity={"model": "m"})
    assert pol.asked == []


def test_band_interval_keeps_only_its_pass_rates(verifier, tmp_path):
    pol = ScriptedPolicy()
    res = refresh_problems(originals(), pol, verifier, tmp_path, config(band="0.5,0.75", reprofile=False),
                           identity={"model": "m"})
    # Chen 2/4, Alice's compositions 2/4 and Gus's 3/4 are in [0.5, 0.75]; Bruno's 7/8 is not
    kept = sorted(pol.who(p.question) for p in res.refreshed)
    assert kept == [("Alice", 2), ("Alice", 2), ("Chen", 1), ("Gus", 2), ("Gus", 2)]
    assert any(r["reason"] == "outside_band" and pol.who(r["problem"]["question"]) == ("Bruno", 1)
               for r in res.set_aside)


def test_decontamination_sets_aside_an_original_and_a_composition_with_the_row_they_match(verifier, tmp_path):
    probs = originals()
    chen = next(p for p in probs if p.question.startswith("Chen"))
    alice = next(p for p in probs if p.question.startswith("Alice"))
    bench = [Problem.new("Totally unrelated: find the area of a circle of radius 3.", "9\\pi"),
             Problem.new(chen.question.upper().replace(" ", "  "), "9"),  # near duplicate of Chen
             Problem.new(alice.question, "7")]  # Alice's text is in every composition she is part of
    pol = ScriptedPolicy()
    res = refresh_problems(probs, pol, verifier, tmp_path, config(reprofile=False),
                           benchmarks=[("bench.jsonl", bench)], identity={"model": "m"})
    hits = [r for r in res.set_aside if r["reason"] == "benchmark_overlap"]
    assert {(pol.who(r["problem"]["question"]), r["match"]["row"]) for r in hits} == {(("Chen", 1), 1),
                                                                                     (("Alice", 1), 2)}
    assert all(pol.who(p)[0] not in ("Chen", "Alice") for p, _ in pol.asked)  # never profiled
    assert all("Alice has" not in p.question for p in res.refreshed)


# --------------------------------------------------------------------------------------
# the command
# --------------------------------------------------------------------------------------
def serving(pol: ScriptedPolicy, **options) -> FakeOpenAIServer:
    """A loopback OpenAI stand-in that answers each request as ``pol`` would (its last message,
    ``n`` and ``seed``): the endpoint of every `crl refresh` run below."""
    def respond(body):
        return pol.replies(body["messages"][-1]["content"], int(body.get("n") or 1), int(body.get("seed") or 0))

    return FakeOpenAIServer(respond, **options)


@pytest.fixture
def server():
    with serving(ScriptedPolicy()) as srv:
        yield srv


def write_input(path: Path) -> Path:
    atomic_write_jsonl(path, [{"problem": p.question, "answer": p.answer} for p in originals()])
    return path


def cmd(srv, inp, out, *extra) -> list[str]:
    return ["refresh", "--base-url", srv.url, "--model", "fake", "--input", str(inp), "--out", str(out),
            "-n", str(N), "--confirm", str(N), "--per-prompt", "2", "--no-progress", *extra]


def test_cli_refresh_writes_the_set_the_report_and_the_exports(server, tmp_path, capsys):
    inp = write_input(tmp_path / "in.jsonl")
    out = tmp_path / "r"
    assert cli(cmd(server, inp, out)) == 0
    text = capsys.readouterr().out
    assert "refreshed 7 prompts -> 8 (2 informative originals, 6 compositions)" in text
    assert json.loads((out / "run.json").read_text())["command"] == "refresh"
    asked = server.requests
    assert cli(cmd(server, inp, out)) == 0  # a rerun resumes: nothing asked again
    assert server.requests == asked


def test_cli_refresh_refuses_what_the_other_commands_refuse(server, tmp_path, capsys):
    inp = write_input(tmp_path / "in.jsonl")
    out = tmp_path / "r"
    assert cli(cmd(server, inp, out)) == 0
    capsys.readouterr()
    args = cmd(server, inp, out)
    args[args.index("--confirm") + 1] = "2"
    assert cli(args) == 2  # other settings
    err = capsys.readouterr().err
    assert "other settings" in err and "confirm: 4 -> 2" in err
    prof = tmp_path / "prof"  # another command's folder
    assert cli(["profile", "--base-url", server.url, "--model", "fake", "--input", str(inp), "-n", "2",
                "--out", str(prof), "--no-progress"]) == 0
    capsys.readouterr()
    assert cli(cmd(server, inp, prof)) == 2
    assert "holds a `crl profile` run" in capsys.readouterr().err
    assert cli(cmd(server, inp, tmp_path / "x", "--band", "0.9,0.2")) == 2
    assert "LO must be <= HI" in capsys.readouterr().err
    assert cli(cmd(server, inp, tmp_path / "x", "--engine", "llm")) == 2
    assert "batch engine" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()  # a refused run leaves no folder


def test_refresh_is_a_verb_of_the_package():
    assert {"refresh", "RefreshConfig"} <= set(crl.__all__)
    assert crl.RefreshConfig is RefreshConfig


# --------------------------------------------------------------------------------------
# a real model (the real-model job): SmolLM2-135M through the in-process llama backend
# --------------------------------------------------------------------------------------
@pytest.mark.real_llm
def test_crl_refresh_on_a_real_model_writes_a_consistent_run_and_resumes(smollm2_gguf, tmp_path):
    """A 135M model answers arithmetic now and then: the assertions are about what refresh
    does with real replies (every prompt accounted for, provenance, a rerun samples nothing),
    not about the model's skill."""
    import subprocess
    import sys

    qs = [("What is 2 + 3?", "5"), ("What is 10 - 4?", "6"), ("What is 3 * 3?", "9"), ("What is 7 + 1?", "8"),
          ("What is 12 / 4?", "3"), ("What is 6 + 6?", "12")]
    inp = tmp_path / "in.jsonl"
    atomic_write_jsonl(inp, [{"question": q, "answer": a} for q, a in qs])
    out = tmp_path / "r"
    argv = [sys.executable, "-m", "composition_rl.cli", "refresh", "--model", str(smollm2_gguf), "--backend", "llama",
            "--input", str(inp), "--out", str(out), "-n", "4", "--confirm", "4", "--max-tokens", "12",
            "--template", "answer", "--fallback", "prose", "--no-progress", "--export", ""]
    first = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert first.returncode in (0, 1), first.stderr[-2000:]  # 1: nothing landed in the band (said so)
    report = json.loads((out / "report.json").read_text())
    add = report["set_aside"]["counts_add_up"]
    assert add["originals"]["ok"] and add["originals"]["in"] == 6 and add["compositions"]["ok"]
    refreshed = list(read_jsonl(out / "refreshed.jsonl"))
    assert all(0 < r["metadata"]["refresh"]["pass_rate"] < 1 for r in refreshed)
    assert all("GGUF sha256" in r["metadata"]["refresh"]["model"]["model"] for r in refreshed)
    rows = {p.name: (p / "profile.jsonl").read_bytes() for p in out.iterdir() if (p / "profile.jsonl").is_file()}
    again = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert again.returncode == first.returncode, again.stderr[-2000:]
    assert {p.name: (p / "profile.jsonl").read_bytes() for p in out.iterdir()
            if (p / "profile.jsonl").is_file()} == rows  # resumed: no sample drawn again
    print(f"\nsmollm2 refresh: {report['informative_share']}, {report['refreshed']}")


def test_the_refresh_subpackage_imported_first_does_not_replace_the_verb():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", "import composition_rl.jobs.refresh\nimport composition_rl as crl\n"
                        "print(callable(crl.refresh), crl.RefreshConfig.__name__)"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "RefreshConfig"]


@pytest.mark.slow  # two crl processes and a verifier pool: ~50 s on the 2 shared cores at load 14
def test_a_sigkilled_crl_refresh_resumes_with_the_outcome_of_an_unbroken_run(tmp_path):
    """SIGKILL a real `crl refresh` process in its confirmation stage, rerun the command: no
    finished sample is asked again (only the one chunk in flight at the kill), and the run ends
    with the prompts of an unbroken one (the library run of the first test, same plan)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from collections import Counter

    inp = write_input(tmp_path / "in.jsonl")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    with serving(ScriptedPolicy(), latency_s=0.05) as srv:
        def argv(out):
            return [sys.executable, "-m", "composition_rl.cli", *cmd(srv, inp, out), "--chunk", "1",
                    "--concurrency", "1", "--export", ""]

        out = tmp_path / "run"
        proc = subprocess.Popen(argv(out), env=env, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        log = out / "confirm" / "profile.jsonl"
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not (log.exists() and len(log.read_text().splitlines()) >= 2):
                time.sleep(0.02)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the process and its verifier workers
            proc.wait()
        assert 2 <= len(log.read_text().splitlines()) < 5  # killed inside the confirmation
        again = subprocess.run(argv(out), env=env, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        asked = Counter((b["messages"][-1]["content"], b.get("seed")) for b in srv.bodies)
    assert sum(k - 1 for k in asked.values()) <= 1  # at most the request in flight at the kill, asked again
    whole = refresh_problems(originals(), ScriptedPolicy(), shared_verifier(VerifyConfig(timeout_s=5.0)),
                             tmp_path / "whole", config(), identity={"model": "m"})
    got = [(r["question"], r["metadata"]["refresh"]["correct"]) for r in read_jsonl(out / "refreshed.jsonl")]
    assert got == [(p.question, p.metadata["refresh"]["correct"]) for p in whole.refreshed]
    assert [(r["id"], r["reason"]) for r in read_jsonl(out / "set_aside.jsonl")] == [
        (r["id"], r["reason"]) for r in whole.set_aside]


# --------------------------------------------------------------------------------------
# the grow stage (--grow --teacher): MagicBeanStalk on the solve_none prompts
# --------------------------------------------------------------------------------------
# two arithmetic chains the policy never solves alone (the program teacher grows them), beside
# Dara, a solve_none prompt the program teacher cannot read (dropped: not_a_chain)
CHAIN_SEEDS = [render_chain([(5, "+", 3), (6, "-", 4)])[0], render_chain([(7, "+", 2), (4, "+", 5)])[0]]
CHAIN = re.compile(r"(?:[A-Z]=\S+\. )*\S+=\?")


def grow_inputs() -> list[Problem]:
    chains = [Problem.new(q, str(chain_values(parse_chain(q))[-1]), source="scripted") for q in CHAIN_SEEDS]
    return originals() + chains


class GrowPolicy(ScriptedPolicy):
    """The scripted policy, and on the arithmetic chains: a seed alone 0/n, a seed with worked
    examples before it n/2 (the effectivity test passes), any grown problem n/2 as a student
    (n = 8), and at the profile's n (qualification, re-profile) n/2 when its answer is at most
    10, n/n above (a grown problem outside the band). Records (prompt, n, seed) of each sample."""

    def __init__(self, stop_at: int | None = None):
        super().__init__(stop_at)
        self.sampled: list[tuple[str, int, int]] = []

    def replies(self, prompt: str, n: int, seed: int) -> list[str]:
        qs = CHAIN.findall(prompt)
        if not qs:
            return super().replies(prompt, n, seed)
        q = qs[-1]
        answer = chain_values(parse_chain(q))[-1]
        if q in CHAIN_SEEDS:
            k = n // 2 if len(qs) > 1 else 0
        else:
            k = n if (n == N and answer > 10) else n // 2
        return [f"So the answer is $\\boxed{{{answer if i < k else -999}}}$." for i in range(n)]

    def generate(self, prompts, n, sampling):
        out = super().generate(prompts, n, sampling)
        self.sampled += [(p, n, sampling.seed) for p in prompts]
        return out


class LoggedTeacher(ProgramTeacher):
    """The program teacher, logging every finished call; ``stop_at``: a kill at that call."""

    def __init__(self, stop_at: int | None = None, name: str = "program", **kw):
        super().__init__(**kw)
        self.log: list[tuple] = []
        self.stop_at = stop_at
        self.name = name

    def _logged(self, verb, args, fn):
        if self.stop_at is not None and len(self.log) + 1 == self.stop_at:
            raise KeyboardInterrupt  # a kill in the middle of a seed
        got = fn()
        self.log.append((verb, repr(args)))
        return got

    def solve(self, question, attempt):
        return self._logged("solve", (question, attempt), lambda: super(LoggedTeacher, self).solve(question, attempt))

    def decompose(self, item, attempt, max_parts):
        return self._logged("decompose", (item.question, attempt),
                            lambda: super(LoggedTeacher, self).decompose(item, attempt, max_parts))

    def harder(self, leaf, trial):
        return self._logged("harder", (leaf.question, trial), lambda: super(LoggedTeacher, self).harder(leaf, trial))

    def compose(self, children, blueprint, trial):
        return self._logged("compose", (tuple(c.question for c in children), trial),
                            lambda: super(LoggedTeacher, self).compose(children, blueprint, trial))


def grow_config(**kw) -> RefreshConfig:
    return config(grow=True, max_depth=2, mbs=GrowConfig(n_traces=1, decompose_retries=0, leaf_variants=2,
                                                         compose_trials=3, parents_per_node=2, student_n=8), **kw)


def test_grow_adds_the_grown_problems_with_their_provenance_and_the_counts_add_up(verifier, tmp_path):
    pol, teacher = GrowPolicy(), LoggedTeacher()
    res = refresh_problems(grow_inputs(), pol, verifier, tmp_path, grow_config(), identity={"model": "scripted-policy"},
                           teacher=teacher)
    seeds = {p.question: p.id for p in grow_inputs() if p.question in CHAIN_SEEDS}
    grown = [p for p in res.refreshed if p.metadata["refresh"]["source"] == "grown"]
    assert grown, "nothing grown"
    for p in grown:
        prov = p.metadata["refresh"]
        assert prov["parents"] == [p.metadata["mbs"]["seed_id"]] and prov["parents"][0] in seeds.values()
        assert (prov["correct"], prov["n"], prov["class"]) == (N // 2, N, "goldilocks")  # its answer <= 10
        assert prov["wilson"] == pytest.approx(list(wilson_interval(N // 2, N)))
        assert prov["model"] == {"model": "scripted-policy"} and prov["sampling"]["seed"] == 0
        assert prov["verifier"]["timeout_s"] == 5.0 and prov["template"] == "boxed"
        assert prov["grow"] == {"kind": "root", "teacher": {"name": "program", "model": None}, "method": "mbs"}
        assert chain_values(parse_chain(p.question))[-1] <= 10 and p.question not in CHAIN_SEEDS
    on_disk = {r["id"]: r for r in read_jsonl(tmp_path / "refreshed.jsonl")}
    assert all(on_disk[p.id]["metadata"]["refresh"]["source"] == "grown" for p in grown)
    # the grown ones outside the band (answers > 10: n/n at the profile's n) are set aside, with their counts
    odd = [r for r in res.set_aside if r["stage"] == "grow"]
    assert odd and all(r["reason"] == "band:solve_all" and r["correct"] == r["n"] == N for r in odd)
    # the originals are as without grow; the solve_none seeds say what growing them gave
    assert sorted(pol.who(p.question) for p in res.refreshed if p.metadata["refresh"]["source"] != "grown") == sorted(
        [("Bruno", 1), ("Chen", 1), *[("Alice", 2), ("Gus", 2)] * 2])
    seed_rows = {r["problem"]["question"]: r for r in res.set_aside if r["reason"] == "band:solve_none"
                 and r["stage"] == "profile"}
    assert {q: r["grow"]["status"] for q, r in seed_rows.items() if q in CHAIN_SEEDS} == dict.fromkeys(CHAIN_SEEDS, "ok")
    dara = next(r for q, r in seed_rows.items() if q.startswith("Dara"))
    assert dara["grow"] == {"status": "dropped", "reason": "not_a_chain", "candidates": 0}
    r = res.report
    g = r["grow"]
    # one chain seed grew only problems outside the band (answers 17): the grow funnel says so
    assert g["seeds"] == 3 and g["seeds_dropped_by_reason"] == {"not_a_chain": 1, "not_in_band": 1}
    assert g["seeds_with_a_kept_problem"] == 1
    assert g["kept"] == len(grown) and g["set_aside"] == len(odd) and g["candidates"] == len(grown) + len(odd)
    assert g["teacher_calls"] == len(teacher.log) > 0
    # the grow's samples: all the chain prompts' at the profile's seed but the seeds' own profile
    assert g["policy_samples"] == sum(n for p, n, s in pol.sampled if s == 0 and CHAIN.findall(p) and not (
        p.count("=?") == 1 and CHAIN.findall(p)[-1] in CHAIN_SEEDS and n == N))
    assert g["per_1000_rollouts"] == pytest.approx(1000 * len(grown) / g["policy_samples"])
    add = r["set_aside"]["counts_add_up"]
    assert add["grown"]["ok"] and add["grown"]["seeds"]["counts_add_up"]
    assert add["originals"] == {"in": 9, "refreshed": 2, "set_aside": 7, "ok": True}
    assert add["compositions"]["ok"] and add["compositions"]["kept"] == 4
    assert r["refreshed"]["grown"] == len(grown) and r["refreshed"]["composed"] == 4
    assert r["gain"]["informative_prompts_gained"] == 4 + len(grown)
    text = (tmp_path / "report.md").read_text()
    assert "## Grown (MagicBeanStalk on the solve_none prompts)" in text and "not_a_chain 1, not_in_band 1" in text
    assert f"Grown: {g['candidates']} candidates = {len(grown)} kept + {len(odd)} set aside." in text
    # the grown ones are re-profiled with the others (n/2 at seed 2)
    assert (r["informative_share"]["refreshed_reprofiled"]["of"]) == len(res.refreshed)


@pytest.mark.parametrize("kill", [("teacher", 3), ("teacher", 9), ("policy", 5)])
def test_a_grow_killed_mid_seed_resumes_without_asking_a_finished_call_or_sample_again(verifier, tmp_path, kill):
    """Killed at a teacher call or at a policy call of the grow stage (counted from the grow's
    first teacher call), then rerun: over both runs every teacher call and every sample is made
    as often as in an unbroken run (never twice), and the outputs are the unbroken run's."""
    whole_pol, whole_t = GrowPolicy(), LoggedTeacher()
    refresh_problems(grow_inputs(), whole_pol, verifier, tmp_path / "whole", grow_config(), identity={"model": "m"},
                     teacher=whole_t)
    who, k = kill
    if who == "teacher":
        pol, t = GrowPolicy(), LoggedTeacher(stop_at=k)
    else:  # the policy calls before the grow stage: those of an unbroken run before its first teacher call
        probe_pol = GrowPolicy()
        first = []

        class Probe(LoggedTeacher):
            def solve(self, question, attempt):
                first.append(probe_pol.calls)
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            refresh_problems(grow_inputs(), probe_pol, verifier, tmp_path / "probe", grow_config(),
                             identity={"model": "m"}, teacher=Probe())
        pol, t = GrowPolicy(stop_at=first[0] + k), LoggedTeacher()
    with pytest.raises(KeyboardInterrupt):
        refresh_problems(grow_inputs(), pol, verifier, tmp_path / "run", grow_config(), identity={"model": "m"},
                         teacher=t)
    assert (tmp_path / "run" / "grow").is_dir()  # killed inside the grow stage
    again_pol, again_t = GrowPolicy(), LoggedTeacher()
    refresh_problems(grow_inputs(), again_pol, verifier, tmp_path / "run", grow_config(), identity={"model": "m"},
                     teacher=again_t)
    assert Counter(t.log + again_t.log) == Counter(whole_t.log)
    assert Counter(pol.sampled + again_pol.sampled) == Counter(whole_pol.sampled)
    for name in ("refreshed.jsonl", "set_aside.jsonl"):
        assert (tmp_path / "run" / name).read_bytes() == (tmp_path / "whole" / name).read_bytes()
    assert json.loads((tmp_path / "run" / "report.json").read_text())["grow"]["teacher_calls"] == len(whole_t.log)


def test_grow_needs_a_teacher_and_a_rerun_with_another_teacher_or_grow_setting_is_refused(verifier, tmp_path):
    with pytest.raises(ValueError, match="grow=True needs a teacher"):
        refresh_problems(grow_inputs(), GrowPolicy(), verifier, tmp_path / "x", grow_config(), identity={"model": "m"})
    assert not (tmp_path / "x").exists()
    refresh_problems(grow_inputs(), GrowPolicy(), verifier, tmp_path, grow_config(reprofile=False),
                     identity={"model": "m"}, teacher=LoggedTeacher())
    with pytest.raises(RunMismatch, match="teacher"):
        refresh_problems(grow_inputs(), GrowPolicy(), verifier, tmp_path, grow_config(reprofile=False),
                         identity={"model": "m"}, teacher=LoggedTeacher(name="another"))
    other = dataclasses.replace(grow_config(reprofile=False), mbs=GrowConfig(student_n=4))
    with pytest.raises(RunMismatch, match="student_n"):
        refresh_problems(grow_inputs(), GrowPolicy(), verifier, tmp_path, other, identity={"model": "m"},
                         teacher=LoggedTeacher())
    with pytest.raises(RunMismatch, match="grow"):  # and a rerun without the grow stage
        refresh_problems(grow_inputs(), GrowPolicy(), verifier, tmp_path, config(max_depth=2, reprofile=False),
                         identity={"model": "m"})


@pytest.fixture
def grow_server():
    with serving(GrowPolicy()) as srv:
        yield srv


def test_cli_refresh_grow_needs_teacher_and_grows_with_the_program_teacher(grow_server, tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    atomic_write_jsonl(inp, [{"problem": p.question, "answer": p.answer} for p in grow_inputs()])
    out = tmp_path / "r"
    grow_flags = ["--max-depth", "2", "--grow-n-traces", "1", "--grow-decompose-retries", "0",
                  "--grow-leaf-variants", "2", "--grow-compose-trials", "3", "--no-reprofile", "--export", ""]
    assert cli(cmd(grow_server, inp, out, "--grow", *grow_flags)) == 2
    assert "--grow needs --teacher" in capsys.readouterr().err
    assert cli(cmd(grow_server, inp, out, "--teacher", "program", *grow_flags)) == 2
    assert "--teacher goes with --grow" in capsys.readouterr().err
    assert not out.exists()
    assert cli(cmd(grow_server, inp, out, "--grow", "--teacher", "program", *grow_flags)) == 0
    text = capsys.readouterr().out
    grown = [r for r in read_jsonl(out / "refreshed.jsonl") if r["metadata"]["refresh"]["source"] == "grown"]
    assert grown and f"{len(grown)} grown" in text
    assert all(r["metadata"]["refresh"]["model"]["model"] == "fake" for r in grown)
    assert json.loads((out / "run.json").read_text())["grow.teacher"] == {"name": "program", "model": None}
    asked = grow_server.requests
    assert cli(cmd(grow_server, inp, out, "--grow", "--teacher", "program", *grow_flags)) == 0
    assert grow_server.requests == asked  # the rerun resumes: nothing asked again
    args = cmd(grow_server, inp, out, "--grow", "--teacher", "program", *grow_flags)
    args[args.index("--grow-leaf-variants") + 1] = "3"
    assert cli(args) == 2 and "grow.leaf_variants: 2 -> 3" in capsys.readouterr().err


def test_cli_refresh_grow_with_an_openai_teacher_counts_its_unusable_replies_and_names_its_model(
        grow_server, tmp_path, capsys):
    """An endpoint teacher whose replies are not the JSON asked for (the fake answers as the
    policy does): every seed is dropped with its reason, the counts add up, the run records the
    served model, and a rerun with another teacher model is refused."""
    inp = tmp_path / "in.jsonl"
    atomic_write_jsonl(inp, [{"problem": p.question, "answer": p.answer} for p in grow_inputs()])
    out = tmp_path / "r"
    args = cmd(grow_server, inp, out, "--grow", "--teacher", "openai", "--teacher-base-url", grow_server.url,
               "--teacher-model", "teacher-x", "--grow-n-traces", "1", "--no-reprofile", "--export", "")
    assert cli(args) == 0
    assert "0 grown" in capsys.readouterr().out
    g = json.loads((out / "report.json").read_text())["grow"]
    assert g["seeds"] == 3 and g["seeds_dropped_by_reason"] == {"no_verified_trace": 3} and g["candidates"] == 0
    assert g["teacher_calls"] == 3  # n_traces 1 per seed
    assert json.loads((out / "run.json").read_text())["grow.teacher"] == {"name": "openai", "model": "teacher-x"}
    args[args.index("--teacher-model") + 1] = "teacher-y"
    assert cli(args) == 2 and "teacher-x" in capsys.readouterr().err
