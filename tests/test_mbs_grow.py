"""MagicBeanStalk end to end over a loopback OpenAI-compatible server: a scripted teacher,
scripted students and policy (tests/fakes/mbs_world.py), the real verifier, the real
profile machinery. Every branch of seed 002's algorithm has a test here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_run import crl, one_error_line
from fakes.mbs_world import World
from fakes.openai_server import FakeOpenAIServer

from composition_rl.grading import VerifyConfig, shared_verifier
from composition_rl.jobs.grow import GrowConfig, Students, grow
from composition_rl.jobs.grow.teachers import OpenAITeacher
from composition_rl.jobs.profile import ProfileConfig, load_profile, profile_problems
from composition_rl.records import Problem
from composition_rl.rollout.base import SamplingConfig
from composition_rl.rollout.openai import OpenAIRollout

REPO = Path(__file__).resolve().parents[1]
SAMPLING = SamplingConfig(max_tokens=32)


def seeds(*names: str) -> list[Problem]:
    return [Problem.new(f"seed:{n}", "10", source="test") for n in names]


def run_grow(world: World, tmp_path: Path, names=("a",), method="mbs", students=("weak", "strong"), **cfg):
    verifier = shared_verifier(VerifyConfig(timeout_s=5.0))
    with FakeOpenAIServer(world) as srv:
        teacher = OpenAITeacher(srv.url, "teacher", max_retries=0)
        panel = Students([(s, OpenAIRollout(srv.url, s, max_retries=0)) for s in students], verifier, n=8,
                         sampling=SAMPLING, template="plain")
        policy = OpenAIRollout(srv.url, "policy", max_retries=0)
        pcfg = ProfileConfig(n=8, sampling=SAMPLING, template="plain")

        def qualify(cands, qdir):
            profile_problems(cands, policy, verifier, qdir, pcfg, progress=False)
            return {r["id"]: r["class"] for r in load_profile(qdir)}

        res = grow(seeds(*names), [teacher], panel, verifier, tmp_path / "out", GrowConfig(**cfg), method=method,
                   qualify=qualify)
    rows = [json.loads(x) for x in (tmp_path / "out" / "trees.jsonl").read_text().splitlines()]
    return res, rows


def good_world(**kw) -> World:
    # students gain from the examples; leaves and parents are hard for the weak student;
    # the policy lands parents in the band (4/8)
    acc = {("weak", "leaf"): 2, ("strong", "leaf"): 8, ("weak", "parent"): 1, ("strong", "parent"): 6,
           ("policy", "parent"): 4, ("policy", "variation"): 4, ("weak", "variation"): 2}
    acc.update(kw.pop("acc", {}))
    return World(acc=acc, gain=kw.pop("gain", {"weak": 3}), **kw)


def test_happy_path_tree_funnel_and_counts(tmp_path):
    res, rows = run_grow(good_world(), tmp_path, names=("a", "b"), max_depth=1)
    st = res.stats
    assert st["hard_seeds"] == 2 and st["qualified_seeds"] == 2 and st["qualified_yield"] == 1.0
    assert [f["stage"] for f in st["funnel"]] == ["seeds_in", "hard", "traced", "decomposed", "effective",
                                                   "leaves_kept", "parents_kept", "qualified"]
    assert [f["seeds"] for f in st["funnel"]] == [2, 2, 2, 2, 2, 2, 2, 2]
    assert st["counts_add_up"] and st["dropped_by_reason"] == {}
    # tree records: a root and K=2 children with parent links
    nodes = rows[0]["nodes"]
    assert [n["level"] for n in nodes] == [0, 1, 1]
    assert nodes[1]["parent"] == nodes[0]["id"] and nodes[0]["children"] == [nodes[1]["id"], nodes[2]["id"]]
    # leaves kept because the *weakest* student (weak: 2/8) is under alpha_leaf, though strong is 8/8
    leaf = [s for s in rows[0]["synthetic"] if s["kind"] == "leaf"][0]
    assert leaf["acc"] == {"weak": 0.25, "strong": 1.0} and leaf["weakest"] == 0.25 and leaf["kept"]
    q = [json.loads(x) for x in (tmp_path / "out" / "qualified.jsonl").read_text().splitlines()]
    assert len(q) == st["qualified_problems"] == 4  # parents_per_node=2 per seed
    assert all(p["question"].startswith("P[") and p["metadata"]["mbs"]["kind"] == "root" for p in q)
    assert st["cost"]["student_rollouts"] > 0 and st["cost"]["teacher_calls"] > 0
    assert (tmp_path / "out" / "funnel.png").stat().st_size > 0


def test_no_verified_trace_drops_after_all_attempts(tmp_path):
    world = good_world(no_trace={"a"})
    res, rows = run_grow(world, tmp_path, names=("a", "b"), n_traces=3)
    assert world.calls["solve"] == 3 + 1  # three tries for a, the first verifies for b
    assert rows[0]["reason"] == "no_verified_trace" and rows[0]["stages"] == ["hard"]
    assert [r["reason"] for r in rows[0]["rejects"]] == ["trace_unverified"] * 3
    assert res.stats["dropped_by_reason"] == {"no_verified_trace": 1}
    assert res.stats["counts_add_up"]


def test_teacher_garbage_is_a_reject_with_reason_and_nothing_is_lost(tmp_path):
    res, rows = run_grow(good_world(garbage={"a"}), tmp_path, names=("a", "b"), n_traces=2)
    assert rows[0]["reason"] == "no_verified_trace"
    assert {r["reason"] for r in rows[0]["rejects"]} == {"bad_json"}
    rejects = [json.loads(x) for x in (tmp_path / "out" / "rejects.jsonl").read_text().splitlines()]
    assert len(rejects) == 2 and all(r["seed_id"] == rows[0]["seed_id"] for r in rejects)
    st = res.stats
    assert st["seeds_in"] == st["qualified_seeds"] + sum(st["dropped_by_reason"].values())


def test_failed_effectivity_is_retried_n_d_times_then_dropped(tmp_path):
    world = good_world(gain={})  # in-context examples never help
    res, rows = run_grow(world, tmp_path, decompose_retries=3)
    assert world.calls["decompose"] == 4  # the first try and N_d = 3 re-prompts
    assert [e["attempt"] for e in rows[0]["effectivity"]] == [0, 1, 2, 3]
    assert not any(e["passed"] for e in rows[0]["effectivity"])
    assert rows[0]["reason"] == "ineffective" and res.stats["dropped_by_reason"] == {"ineffective": 1}
    assert world.calls["harder"] == 0


def test_failed_effectivity_with_keep_goes_on_and_says_so(tmp_path):
    res, rows = run_grow(good_world(gain={}), tmp_path, on_ineffective="keep", max_depth=1)
    assert rows[0]["status"] == "ok" and rows[0]["nodes"][0]["effective"] is False
    assert res.stats["effectivity"]["passed"] == 0 and res.stats["effectivity"]["roots_passed"] == 0
    assert res.stats["qualified_seeds"] == 1


def test_effectivity_passes_when_one_student_gains(tmp_path):
    world = good_world(gain={"weak": 0, "strong": 1})
    res, rows = run_grow(world, tmp_path, max_depth=1)
    e = rows[0]["effectivity"][0]
    assert e["passed"] and e["acc_cond"]["strong"] > e["acc"]["strong"] and world.calls["decompose"] == 1


def test_depth_limit_stops_the_recursion(tmp_path):
    world = good_world()
    res, rows = run_grow(world, tmp_path, max_depth=2)
    levels = [n["level"] for n in rows[0]["nodes"]]
    assert max(levels) == 2 and levels.count(2) == 4
    assert {n["leaf_reason"] for n in rows[0]["nodes"] if n["level"] == 2} == {"depth_limit"}
    assert world.calls["decompose"] == 3  # the root and its two children; level-2 nodes are not split


def test_atomic_root_is_not_decomposable(tmp_path):
    res, rows = run_grow(good_world(atomic={"seed:a"}), tmp_path)
    assert rows[0]["reason"] == "not_decomposable"


def test_leaf_calibration_drop(tmp_path):
    # the weak student is as good as the strong one on leaves: 7/8 > alpha_leaf = 0.8
    world = good_world(acc={("weak", "leaf"): 7, ("strong", "leaf"): 8})
    res, rows = run_grow(world, tmp_path, max_depth=1, leaf_variants=3)
    leaves = [s for s in rows[0]["synthetic"] if s["kind"] == "leaf"]
    assert len(leaves) == 6 and not any(s["kept"] for s in leaves) and leaves[0]["weakest"] == 0.875
    assert rows[0]["reason"] == "leaf_calibration" and world.calls["compose"] == 0


def test_leaf_at_threshold_is_kept(tmp_path):
    # weakest 6/8 = alpha_leaf keeps: only accuracy that *exceeds* alpha drops, as the paper words it
    world = good_world(acc={("weak", "leaf"): 6, ("strong", "leaf"): 8})
    res, rows = run_grow(world, tmp_path, max_depth=1, leaf_variants=1, alpha_leaf=0.75)
    leaves = [s for s in rows[0]["synthetic"] if s["kind"] == "leaf"]
    assert [(s["weakest"], s["kept"]) for s in leaves] == [(0.75, True), (0.75, True)]  # one per child
    assert "leaves_kept" in rows[0]["stages"] and rows[0]["reason"] == ""


def test_parent_calibration_drop_and_the_n_c_limit(tmp_path):
    world = good_world(acc={("weak", "parent"): 6, ("strong", "parent"): 8})  # 0.75 > 0.625
    res, rows = run_grow(world, tmp_path, max_depth=1, leaf_variants=4, compose_trials=5)
    parents = [s for s in rows[0]["synthetic"] if s["kind"] == "parent"]
    assert world.calls["compose"] == len(parents) <= 5
    assert rows[0]["reason"] == "parent_calibration"
    assert res.stats["dropped_by_reason"] == {"parent_calibration": 1}


def test_parent_trials_stop_once_enough_are_kept(tmp_path):
    world = good_world()
    res, rows = run_grow(world, tmp_path, max_depth=1, leaf_variants=4, parents_per_node=1)
    assert world.calls["compose"] == 1


def test_not_in_band_is_a_counted_drop(tmp_path):
    world = good_world(acc={("policy", "parent"): 0})
    res, rows = run_grow(world, tmp_path, max_depth=1)
    assert res.stats["qualified_seeds"] == 0 and res.stats["dropped_by_reason"] == {"not_in_band": 1}
    assert res.stats["candidate_bands"] == {"solve_none": 2}


def test_direct_baseline_same_calibration(tmp_path):
    world = good_world()
    res, rows = run_grow(world, tmp_path, names=("a", "b"), method="direct", direct_trials=3)
    assert world.calls["vary"] == 6 and world.calls["decompose"] == 0
    assert [f["stage"] for f in res.stats["funnel"]] == ["seeds_in", "hard", "varied", "calibrated", "qualified"]
    assert res.stats["qualified_seeds"] == 2 and res.stats["qualified_problems"] == 6


def test_same_inputs_same_bytes(tmp_path):
    run_grow(good_world(), tmp_path / "1", names=("a", "b"), max_depth=1)
    run_grow(good_world(), tmp_path / "2", names=("a", "b"), max_depth=1)
    for name in ("trees.jsonl", "qualified.jsonl", "candidates.jsonl"):
        assert (tmp_path / "1" / "out" / name).read_bytes() == (tmp_path / "2" / "out" / name).read_bytes()


# --------------------------------------------------------------------------- the command


def _crl(url: str, inp: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "composition_rl.cli", "grow", "--input", str(inp), "--out", str(out),
            "--policy", f"policy@{url}", "--students", f"weak@{url}", "--students", f"strong@{url}",
            "--teacher", "openai", "--teacher-base-url", url, "--teacher-model", "teacher", "--template", "plain",
            "--max-tokens", "32", "--max-depth", "1", "--no-progress"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("OPENAI_API_KEY", None)
    return env


def _input(tmp_path: Path, n: int) -> Path:
    inp = tmp_path / "seeds.jsonl"
    rows = [{"problem": f"seed:s{i}", "answer": "10"} for i in range(n)]
    # and one seed without an answer, which the reader rejects with its reason
    rows.append({"problem": "seed:noanswer"})
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return inp


@pytest.mark.slow
def test_cli_bad_input_rows_and_seed_selection(tmp_path):
    world = good_world(acc={("policy", "seed"): 8})
    inp = _input(tmp_path, 2)
    with FakeOpenAIServer(world) as srv:
        r = subprocess.run(_crl(srv.url, inp, tmp_path / "out"), env=_env(), capture_output=True, text=True,
                           timeout=300)
    assert r.returncode == 0, r.stderr
    st = json.loads((tmp_path / "out" / "stats.json").read_text())
    # the policy solves every seed: none is hard, and the run says so instead of failing
    assert st["seeds_in"] == 2 and st["hard_seeds"] == 0 and st["dropped_by_reason"] == {"not_hard": 2}
    rej = [json.loads(x) for x in (tmp_path / "out" / "input_rejects.jsonl").read_text().splitlines()]
    assert len(rej) == 1 and rej[0]["reason"] == "missing_field" and rej[0]["row"] == 2


@pytest.mark.slow
def test_cli_resume_after_kill_9_loses_and_duplicates_nothing(tmp_path):
    n = 6
    inp = _input(tmp_path, n)
    with FakeOpenAIServer(good_world(), latency_s=0.02) as srv:
        # reference: one uninterrupted run
        r = subprocess.run(_crl(srv.url, inp, tmp_path / "ref"), env=_env(), capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr
        out = tmp_path / "killed"
        proc = subprocess.Popen(_crl(srv.url, inp, out), env=_env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        trees = out / "trees.jsonl"
        deadline = time.time() + 120
        while time.time() < deadline and (not trees.exists() or trees.read_text().count("\n") < 2):
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done_before = trees.read_text().count("\n")
        assert 2 <= done_before < n, "the kill must land mid-run"
        assert not (out / "stats.json").exists()
        r = subprocess.run(_crl(srv.url, inp, out), env=_env(), capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    ids = [json.loads(x)["seed_id"] for x in trees.read_text().splitlines()]
    assert len(ids) == len(set(ids)) == n
    for name in ("qualified.jsonl", "candidates.jsonl", "trees.jsonl"):
        assert (out / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name
    st = json.loads((out / "stats.json").read_text())
    assert st["qualified_seeds"] == n and st["counts_add_up"]
    assert (out / "verl.parquet").exists() and (out / "trl.parquet").exists()


def test_hide_parent_answer_removes_the_copyable_example(tmp_path):
    # every subproblem's answer is the seed's own answer: copying it would pass the test
    world = good_world(sub_answer="10")
    res, rows = run_grow(world, tmp_path / "open", max_depth=1, decompose_retries=0)
    assert rows[0]["effectivity"][0]["passed"] and rows[0]["effectivity"][0]["examples"] == 2
    res, rows = run_grow(good_world(sub_answer="10"), tmp_path / "hidden", max_depth=1, decompose_retries=0,
                         hide_parent_answer=True)
    assert rows[0]["effectivity"][0] == {**rows[0]["effectivity"][0], "examples": 0, "passed": False}
    assert rows[0]["reason"] == "ineffective"


def test_grow_with_the_program_teacher_on_math_is_refused_before_any_profiling(math300, tmp_path):
    r = crl("grow", "--input", str(math300["math300.jsonl"]), "--policy", "m@http://127.0.0.1:9/v1",
            "--teacher", "program", "--out", str(tmp_path / "g"), "--no-progress", timeout=120)
    assert r.returncode == 2
    line = one_error_line(r)
    assert "cannot read any of the 300 seeds" in line and "not_a_chain 300" in line
    assert not (tmp_path / "g" / "seed_profile").exists()


# --------------------------------------------------------------------------- prompts too long


class _CharTokenizer:
    """One token per character: a context of ``limit`` tokens is ``limit`` characters."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": list(text)}


class _Local:
    """A scripted model read as the local hf backend reads it: a prompt that fills its context
    (``limit`` characters or more) gets ``n`` empty ``prompt_too_long`` answers, unsampled."""

    def __init__(self, backend, limit=None):
        from composition_rl.chat.context import PromptFit

        self.backend = backend
        self.fit = PromptFit(_CharTokenizer(), limit, chat=False)

    def prompt_too_long(self, prompt):  # the local backends' own question
        return self.fit.reason(prompt)

    def generate(self, prompts, n, sampling):
        from composition_rl.chat.context import TOO_LONG
        from composition_rl.rollout.base import Completion

        ok = [i for i, p in enumerate(prompts) if self.fit.reason(p) is None]
        got = self.backend.generate([prompts[i] for i in ok], n, sampling) if ok else []
        out = [[Completion("", 0, TOO_LONG) for _ in range(n)] for _ in prompts]
        for i, comps in zip(ok, got):
            out[i] = comps
        return out

    def close(self):
        self.backend.close()


def run_too_long(tmp_path: Path, limits: dict, qualify_with=None, **cfg):
    """:func:`run_grow` with each model's context ``limits[name]`` characters (None: no limit).
    ``qualify_with(policy, verifier, pcfg)`` builds the qualify step (default: a plain profile)."""
    verifier = shared_verifier(VerifyConfig(timeout_s=5.0))
    with FakeOpenAIServer(good_world()) as srv:
        teacher = OpenAITeacher(srv.url, "teacher", max_retries=0)
        panel = Students([(s, _Local(OpenAIRollout(srv.url, s, max_retries=0), limits.get(s)))
                          for s in ("weak", "strong")], verifier, n=8, sampling=SAMPLING, template="plain")
        policy = _Local(OpenAIRollout(srv.url, "policy", max_retries=0), limits.get("policy"))
        pcfg = ProfileConfig(n=8, sampling=SAMPLING, template="plain")

        def qualify(cands, qdir):
            profile_problems(cands, policy, verifier, qdir, pcfg, progress=False)
            return {r["id"]: r["class"] for r in load_profile(qdir)}

        res = grow(seeds("a"), [teacher], panel, verifier, tmp_path / "out", GrowConfig(max_depth=1, **cfg),
                   qualify=qualify_with(policy, verifier, pcfg) if qualify_with else qualify)
    out = tmp_path / "out"
    rows = [json.loads(x) for x in (out / "trees.jsonl").read_text().splitlines()]
    rejects = [json.loads(x) for x in (out / "rejects.jsonl").read_text().splitlines()]
    return res, rows, rejects


def _too_long_rows(rejects, stage):
    rows = [r for r in rejects if r["reason"] == "prompt_too_long"]
    assert rows and {r["stage"] for r in rows} == {stage}
    assert all(set(r) == {"seed_id", "stage", "reason", "detail", "item"} for r in rows)
    return rows


def test_a_problem_a_student_cannot_read_is_rejected_not_kept_as_hard(tmp_path):
    # in this world (depth 1) the root is 6 characters, with its examples 46, a leaf 21-22, a parent 59
    res, rows, rejects = run_too_long(tmp_path / "parent", {"weak": 50})
    parents = [s for s in rows[0]["synthetic"] if s["kind"] == "parent"]
    assert parents and not any(s["kept"] for s in parents)  # the weak student's 0/8 made them "hard"
    assert all(set(s["prompt_too_long"]) == {"weak"} for s in parents)
    assert all(s["kept"] for s in rows[0]["synthetic"] if s["kind"] == "leaf")
    bad = _too_long_rows(rejects, "parent")
    assert len(bad) == len(parents)
    assert bad[0]["detail"] == ("student weak: the prompt is 59 tokens and the model's context 50 "
                                "(prompt and completion together): no room for an answer")
    st = res.stats
    assert rows[0]["reason"] == "prompt_too_long" and st["dropped_by_reason"] == {"prompt_too_long": 1}
    assert st["candidates"] == 0 and st["counts_add_up"] and st["rejects_by_reason"]["prompt_too_long"] == len(bad)
    assert [f["seeds"] for f in st["funnel"]] == [1, 1, 1, 1, 1, 1, 0, 0]

    # the effectivity test's prompt with its examples (46 characters) is too long for both
    res, rows, rejects = run_too_long(tmp_path / "test", {"weak": 40, "strong": 40}, decompose_retries=1)
    assert [e["passed"] for e in rows[0]["effectivity"]] == [False, False]
    assert all(set(e["prompt_too_long"]) == {"weak", "strong"} for e in rows[0]["effectivity"])
    bad = _too_long_rows(rejects, "decompose")
    assert len(bad) == 2 and "student weak: the prompt is 46 tokens and the model's context 40" in bad[0]["detail"]
    st = res.stats
    assert rows[0]["reason"] == "prompt_too_long" and rows[0]["stages"] == ["hard", "traced", "decomposed"]
    assert st["dropped_by_reason"] == {"prompt_too_long": 1} and st["counts_add_up"]


def test_a_candidate_the_policy_cannot_read_is_rejected_not_counted_not_in_band(tmp_path):
    from composition_rl.jobs.grow.run import profile_qualify

    res, rows, rejects = run_too_long(tmp_path, {"policy": 50}, qualify_with=profile_qualify)
    assert rows[0]["status"] == "ok" and len(rows[0]["candidates"]) == 2  # the students read every prompt
    bad = _too_long_rows(rejects, "qualify")
    assert len(bad) == 2 and {r["item"]["question"] for r in bad} == {c["question"] for c in rows[0]["candidates"]}
    assert bad[0]["detail"] == ("policy policy: the prompt is 59 tokens and the model's context 50 "
                                "(prompt and completion together): no room for an answer")
    st = res.stats
    assert st["dropped_by_reason"] == {"prompt_too_long": 1} and st["counts_add_up"]
    assert st["candidate_bands"] == {} and st["qualified_seeds"] == 0
    assert not (tmp_path / "out" / "qualify" / "profile.jsonl").exists()  # nothing was sampled for them


def test_grow_from_a_profile_folder_resumes_only_with_the_same_profile(tmp_path):
    """--from-profile is an input like --input: its folder is hashed by content, and a rerun
    with another profile in it is refused instead of mixing two profiles' hard seeds."""
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(json.dumps({"question": "X=5+3. Y=X-2. Y-4=?", "answer": "2"}) + "\n")
    seed = Problem.new("X=5+3. Y=X-2. Y-4=?", "2")
    prof = tmp_path / "prof"
    prof.mkdir()
    (prof / "profile.jsonl").write_text(json.dumps({"id": seed.id, "class": "solve_all", "pass_rate": 1.0}) + "\n")
    argv = ["grow", "--input", str(seeds), "--policy", "m@http://127.0.0.1:9/v1", "--teacher", "program",
            "--from-profile", str(prof), "--out", str(tmp_path / "g"), "--no-progress"]
    r = crl(*argv, timeout=300)
    assert r.returncode in (0, 1), r.stderr  # no hard seed: nothing to grow, but the folder is the run's
    assert json.loads((tmp_path / "g" / "run.json").read_text())["from_profile_sha256"] != "(not recorded)"
    assert crl(*argv, timeout=300).returncode == r.returncode  # the same profile resumes
    (prof / "profile.jsonl").write_text(json.dumps({"id": seed.id, "class": "solve_none", "pass_rate": 0.0}) + "\n")
    r = crl(*argv, timeout=300)
    assert r.returncode == 2 and "from_profile_sha256: '" in one_error_line(r)
