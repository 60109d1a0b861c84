"""Executors: ``--executor local`` (this process) and ``--executor ray`` (Ray Data) give the
same profile, rows and bytes, for the tiny trained policy through ``hf`` and for a loopback
OpenAI-compatible server through ``openai``; a replica killed with SIGKILL mid-run loses
nothing; a resumed run sends no finished prompt again.

The Ray tests (marker ``ray``) share one local Ray of 2 CPUs: two backend replicas at 0.5
CPU each and one grading actor at 1 CPU. The rest run without Ray.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
from fakes.openai_server import FakeOpenAIServer, Fault
from fakes.tiny_policy import arithmetic_set, tiny_policy_dir

from composition_rl.cli import main as crl
from composition_rl.executors import BackendSpec, ExecutorConfig, SampleJob, build_executor
from composition_rl.executors.ray_data import _regroup, sample_seed, vllm_requests, vllm_sample
from composition_rl.grading import VerifyConfig, close_shared_verifiers, shared_verifier
from composition_rl.io.files import atomic_write_jsonl, read_jsonl
from composition_rl.jobs.profile import ProfileConfig, profile_problems
from composition_rl.records import Problem
from composition_rl.rollout.base import Completion, SamplingConfig

RAY_EXECUTOR = ExecutorConfig("ray", replicas=2, replica_cpus=0.5, graders=1, grader_cpus=1.0)
RAY_FLAGS = ["--executor", "ray", "--replicas", "2", "--replica-cpus", "0.5"]


@pytest.fixture(scope="module")
def verifier():
    yield shared_verifier(VerifyConfig(timeout_s=5.0))
    close_shared_verifiers()


@pytest.fixture(scope="module")
def ray_cluster():
    """One local Ray of 2 CPUs for the module; executors join it instead of starting their own."""
    try:
        import ray
    except ImportError:
        pytest.skip("Ray is not installed: pip install -e '.[ray]'")
    started = time.perf_counter()
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    print(f"\nlocal Ray (2 CPUs) started in {time.perf_counter() - started:.1f} s")
    yield ray
    ray.shutdown()


def scripted(body: dict) -> list[str]:
    """A deterministic policy: which choices are right depends on the prompt and the request's
    seed only, as with a seeded server."""
    content = body["messages"][-1]["content"]
    q = content.split("\n")[0]
    gold = next(p.answer for p in PROBLEMS if p.question == q)
    out = []
    for j in range(int(body.get("n") or 1)):
        h = hashlib.sha256(f"{q}|{body.get('seed')}|{j}".encode()).digest()[0]
        out.append(f"so \\boxed{{{gold}}}" if h % 3 == 0 else f"so \\boxed{{{int(gold) + 1}}}")
    return out


PROBLEMS = arithmetic_set()


def descendants_named(word: str) -> list[int]:
    """Pids of this process's descendants whose command line holds ``word`` (Ray's workers
    are children of the raylet this test process started)."""
    parent: dict[int, int] = {}
    cmd: dict[int, str] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            cmd[int(d.name)] = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
    me = os.getpid()

    def mine(pid: int) -> bool:
        for _ in range(20):
            pid = parent.get(pid, 0)
            if pid == me:
                return True
            if pid <= 1:
                return False
        return False

    return sorted(p for p, c in cmd.items() if word in c and mine(p))


# ------------------------------------------------------------------ without Ray


def test_options_of_another_executor_are_refused(tmp_path, capsys):
    inp = tmp_path / "in.jsonl"
    atomic_write_jsonl(inp, [{"problem": "1+1=?", "answer": "2"}])
    base = ["profile", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--input", str(inp),
            "--out", str(tmp_path / "o"), "--no-progress"]
    assert crl([*base, "--replicas", "2"]) == 2
    assert "--replicas is not an option of the local executor" in capsys.readouterr().err
    assert crl([*base, "--executor", "ray", "--ray-address", "somewhere"]) == 2
    assert "ray_address='somewhere'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("kw,bad", [({"replicas": 0}, "replicas=0"), ({"graders": 0}, "graders=0"),
                                    ({"replica_cpus": 0}, "replica_cpus=0"),
                                    ({"ray_address": "x"}, "ray_address='x'")])
def test_executor_config_names_the_bad_value(kw, bad):
    with pytest.raises(ValueError, match=bad):
        ExecutorConfig("ray", **kw)
    assert ExecutorConfig("ray", ray_address="ray://head:10001").ray_address == "ray://head:10001"
    assert ExecutorConfig("ray", ray_address="10.0.0.1:6379").changed() == ["ray_address"]


def test_a_missing_ray_fails_with_the_command_that_installs_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError, as without it
    inp = tmp_path / "in.jsonl"
    atomic_write_jsonl(inp, [{"problem": "1+1=?", "answer": "2"}])
    rc = crl(["profile", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--input", str(inp),
              "--out", str(tmp_path / "o"), "--executor", "ray", "--no-progress"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "pip install -e '.[ray]'" in err and "ray[data]==2.60.0" in err


def test_vllm_requests_seed_each_sample_from_the_problem_id_and_index():
    job = SampleJob("{question}", 2, SamplingConfig(seed=3, max_tokens=7))
    a, b = Problem.new("1+1=?", "2"), Problem.new("2+2=?", "4")
    rows_ab = [r for row in _chunk_rows([[a, b]], job) for r in vllm_requests(row, 2, job.sampling)]
    rows_ba = [r for row in _chunk_rows([[b], [a]], job) for r in vllm_requests(row, 2, job.sampling)]
    seeds_ab = {(r["prompt"], r["k"]): r["sampling_params"]["seed"] for r in rows_ab}
    seeds_ba = {(r["prompt"], r["k"]): r["sampling_params"]["seed"] for r in rows_ba}
    assert seeds_ab == seeds_ba  # the same seed wherever and with whatever the sample runs
    assert len(set(seeds_ab.values())) == 4
    assert seeds_ab[("1+1=?", 1)] == sample_seed(3, a.id, 1)
    assert {r["sampling_params"]["n"] for r in rows_ab} == {1}
    out = {"generated_text": "ok", "num_generated_tokens": 7, **rows_ab[0]}
    assert vllm_sample(out, 7)["finish_reason"] == "length"
    assert vllm_sample({**out, "num_generated_tokens": 3}, 7)["finish_reason"] == "stop"


def _chunk_rows(chunks, job):
    from composition_rl.executors.ray_data import chunk_rows

    return chunk_rows(chunks, job)


def test_regroup_refuses_rows_out_of_order():
    p, q = Problem.new("a", "1"), Problem.new("b", "2")
    verdict = json.dumps({"outcome": "correct", "score": 1.0})
    row = {"i": 0, "k": 0, "text": "t", "tokens": 1, "finish_reason": "stop", "verdict": verdict}
    chunks = [[p], [q]]
    ok = list(_regroup(iter([{**row, "chunk": 0}, {**row, "chunk": 1}]), chunks, 1))
    assert [s[0].problem for s in ok] == [p, q] and ok[0][0].completions == (Completion("t", 1, "stop"),)
    with pytest.raises(RuntimeError, match="chunk 1 while chunk 0"):
        list(_regroup(iter([{**row, "chunk": 1}]), chunks, 1))
    with pytest.raises(RuntimeError, match="ended before chunk 1"):
        list(_regroup(iter([{**row, "chunk": 0}]), chunks, 1))


# ------------------------------------------------------------------ on a local Ray


@pytest.mark.ray
def test_scale_md_local_vs_ray_block_on_200_prompts_through_hf_gives_the_same_bytes(
    ray_cluster, pytestconfig, tmp_path, monkeypatch, capsys
):
    """docs/scale.md's one-machine block, run as written with the tests' tiny policy for
    `crl tiny-model`'s and 200 prompts of its task for MATH-500; sampling at temperature 1.0
    with 4 samples of at most 32 tokens (the policy's answers fit), responses kept, so the
    block's `cmp` compares completions too."""
    import torch
    from test_docs_commands import REPO, blocks, commands

    (block,) = [b for b in blocks(REPO / "docs" / "scale.md") if "--executor ray" in b and "cmp " in b]
    model = tiny_policy_dir(pytestconfig)
    monkeypatch.chdir(tmp_path)
    inp = tmp_path / "arithmetic200.jsonl"
    atomic_write_jsonl(inp, [{"problem": p.question, "answer": p.answer} for p in PROBLEMS])
    small = ["-n", "4", "--max-tokens", "32", "--temperature", "1.0", "--keep-responses", "--device", "cpu",
             "--no-progress"]
    ran, walls = [], {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the block's `export OMP_NUM_THREADS=1`, in this process
    try:
        for toks in commands(block):
            if toks[:2] == ["crl", "profile"]:
                argv = [str(model) if t == "runs/tiny" else str(inp) if t.endswith("math500.parquet") else t
                        for t in toks[1:]]
                for flag in ("-n", "--max-tokens", "--temperature", "--device"):  # `small` sets these
                    while flag in argv:
                        i = argv.index(flag)
                        del argv[i:i + 2]
                argv = [t for t in argv if t not in ("--keep-responses", "--no-progress")]
                t = time.perf_counter()
                assert crl([*argv, *small]) == 0, toks
                walls["ray" if "ray" in argv else "local"] = time.perf_counter() - t
                ran.append("profile")
            elif toks[0] == "cmp":
                assert Path(toks[1]).read_bytes() == Path(toks[2]).read_bytes(), "profile.jsonl differs"
                ran.append("cmp")
    finally:
        torch.set_num_threads(threads)
    assert ran == ["profile", "profile", "cmp"]
    out = capsys.readouterr().out
    print(f"\n200 prompts x 4 through hf: local {walls['local']:.1f} s, ray (2 replicas, joined) {walls['ray']:.1f} s")
    rows = list(read_jsonl(Path("runs/profile-ray/profile.jsonl")))
    assert len(rows) == 200 and {r["class"] for r in rows} == {"solve_all", "goldilocks", "solve_none"}
    assert [r["id"] for r in rows] == [p.id for p in PROBLEMS]  # the input's order
    assert Path("runs/profile-ray/summary.json").read_bytes() == Path("runs/profile-local/summary.json").read_bytes()
    assert out.count("profiled 200 prompts at n=4") == 2


@pytest.mark.ray
def test_openai_on_ray_resumes_and_survives_killed_replicas(ray_cluster, verifier, tmp_path):
    cfg = ProfileConfig(n=4, chunk=4, keep_responses=True)
    with FakeOpenAIServer(scripted) as srv:
        spec = BackendSpec("openai", {"base_url": srv.url, "model": "m"})
        local = build_executor(ExecutorConfig(), spec)
        # the server's answers depend on the request alone, so the chunk size is free here
        fast = dataclasses.replace(cfg, chunk=50)
        profile_problems(PROBLEMS, local, verifier, tmp_path / "ref", fast, progress=False)
        # a run killed after 150 prompts, resumed on Ray
        profile_problems(PROBLEMS[:150], local, verifier, tmp_path / "ray", fast, progress=False)
        local.close()
        srv.reset_counts()
        srv.latency_s = 0.3  # chunks of 4 that take 0.3 s each: the kill lands on work in flight
        log = tmp_path / "ray" / "profile.jsonl"
        remote = build_executor(RAY_EXECUTOR, spec)
        worker = threading.Thread(
            target=profile_problems, args=(PROBLEMS, remote, verifier, tmp_path / "ray", cfg), daemon=True,
            kwargs={"progress": False})
        worker.start()
        deadline = time.monotonic() + 120
        victims: list[int] = []
        while time.monotonic() < deadline and not victims:
            if len(srv.bodies) >= 4 and srv.in_flight:  # the replicas are at work, a request is open
                victims = descendants_named("BackendReplica")
            time.sleep(0.02)
        assert victims, "no replica process found to kill"
        rows_at_kill, asked_at_kill = len(log.read_text().splitlines()), len(srv.bodies)
        for pid in victims:  # every replica, so the one whose request is open is among them
            os.kill(pid, signal.SIGKILL)
        worker.join(timeout=180)
        assert not worker.is_alive(), "the run did not finish after the kill"
        remote.close()
        asked = {b["messages"][-1]["content"].split("\n")[0] for b in srv.bodies}
    assert rows_at_kill < 200 and asked_at_kill < 50, "the kill must land mid-run"
    assert asked == {p.question for p in PROBLEMS[150:]}  # finished prompts were not sent again
    assert len(srv.bodies) > len(asked)  # the killed replicas' chunks were asked again
    assert log.read_bytes() == (tmp_path / "ref" / "profile.jsonl").read_bytes()


@pytest.mark.ray
def test_eval_and_a_failing_endpoint_through_the_cli_on_ray(ray_cluster, verifier, tmp_path, capsys):
    a, b = tmp_path / "bench_a.jsonl", tmp_path / "bench_b.jsonl"
    atomic_write_jsonl(a, [{"problem": p.question, "answer": p.answer} for p in PROBLEMS[:30]])
    atomic_write_jsonl(b, [{"problem": p.question, "answer": p.answer} for p in PROBLEMS[30:50]])
    bad = {PROBLEMS[20].question}

    def faults(body, attempt):  # one prompt always gets a 400: its chunk fails for good
        return Fault("status", status=400) if body["messages"][-1]["content"].split("\n")[0] in bad else None

    with FakeOpenAIServer(scripted) as srv:
        common = ["--base-url", srv.url, "--model", "m", "-n", "4", "--chunk", "8", "--no-progress"]
        for name, extra in (("local", []), ("ray", RAY_FLAGS)):
            assert crl(["eval", *common, "--benchmark", str(a), "--benchmark", str(b),
                        "--out", str(tmp_path / name), *extra]) == 0
        capsys.readouterr()
    for rel in ("results.json", "samples/bench_a.jsonl", "samples/bench_b.jsonl"):
        assert (tmp_path / "ray" / rel).read_bytes() == (tmp_path / "local" / rel).read_bytes(), rel
    with FakeOpenAIServer(scripted, faults=faults) as srv:
        rc = crl(["profile", "--base-url", srv.url, "--model", "m", "-n", "4", "--chunk", "2", "--no-progress",
                  "--input", str(a), "--out", str(tmp_path / "failing"), *RAY_FLAGS])
    assert rc == 1
    err = capsys.readouterr().err
    assert "generation failed" in err and "400" in err and "rerun the same command to resume" in err
    kept = [r["id"] for r in read_jsonl(tmp_path / "failing" / "profile.jsonl")]
    # whole chunks before the failing one, in order; never the failing chunk or one after it
    assert kept == [p.id for p in PROBLEMS[: len(kept)]] and len(kept) % 2 == 0 and len(kept) <= 20


def test_the_executor_modules_doctests_pass():
    import doctest

    from composition_rl.executors import base, ray_data

    for mod in (base, ray_data):
        assert doctest.testmod(mod).failed == 0, mod.__name__


@pytest.mark.ray
def test_grow_seed_profile_on_ray_gives_the_local_trees(ray_cluster, verifier, tmp_path, capsys):
    from fakes.mbs_world import World

    world = World(acc={("weak", "leaf"): 2, ("strong", "leaf"): 8, ("weak", "parent"): 1, ("strong", "parent"): 6,
                       ("policy", "parent"): 4}, gain={"weak": 3})
    inp = tmp_path / "seeds.jsonl"
    atomic_write_jsonl(inp, [{"problem": f"seed:s{i}", "answer": "10"} for i in range(3)])
    with FakeOpenAIServer(world) as srv:
        for name, extra in (("local", []), ("ray", RAY_FLAGS)):
            assert crl(["grow", "--input", str(inp), "--out", str(tmp_path / name), "--policy", f"policy@{srv.url}",
                        "--students", f"weak@{srv.url}", "--students", f"strong@{srv.url}", "--teacher", "openai",
                        "--teacher-base-url", srv.url, "--teacher-model", "teacher", "--template", "plain",
                        "--max-tokens", "32", "--max-depth", "1", "--no-progress", *extra]) == 0, name
    for rel in ("seed_profile/profile.jsonl", "trees.jsonl", "qualified.jsonl"):
        assert (tmp_path / "ray" / rel).read_bytes() == (tmp_path / "local" / rel).read_bytes(), rel
    assert len((tmp_path / "local" / "qualified.jsonl").read_text().splitlines()) >= 3
    capsys.readouterr()
