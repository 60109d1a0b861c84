"""``crl reproduce --quick`` end to end on a minimal budget: every job runs in real worker
processes (tiny model, GRPO, profile, evaluation), results.json has the documented keys,
a rerun resumes without redoing a job, and other settings are refused. The pool of 6 is
smaller than one step's 8 prompts: it once made training end after 0 steps without a word."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

TINY = ["--sft-steps", "8", "--d1-steps", "2", "--arm-steps", "2", "--snapshot-every", "1", "--curve-every", "1",
        "--arms", "continue,depth2,skip", "--profile-n", "2", "--profile-composed", "3", "--test-composed", "3",
        "--train-probe", "24", "--eval-n", "2", "--eval-max-tokens", "48", "--pool-size", "6", "--no-progress"]
JOBS = 11  # sft, d1, tests, profile, 3 arms, 4 evaluations


def _crl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "composition_rl.cli", "reproduce", *args],
                          capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_quick_reproduction_wiring_resume_and_refusal(tmp_path):
    out = tmp_path / "repro"
    r = _crl("--quick", "--out", str(out), *TINY)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    for key in ("seeds", "solve_all_climb", "composition_drop", "arms", "diff_vs_continue", "matched_compute",
                "wall_s", "tests", "curves"):
        assert key in res, key
    assert res["seeds"] == [0]
    assert set(res["solve_all_climb"]) >= {"first", "last"}
    assert set(res["composition_drop"]) >= {"pool_solve_all", "composed_solve_all"}
    assert set(res["arms"]) == {"start", "continue", "depth2", "skip"}
    for arm in res["arms"].values():
        assert all(0.0 <= arm[k] <= 1.0 for k in ("depth1", "depth2", "depth3", "new_depth2", "new_depth3",
                                                   "train_depth1"))
    # every test set says what it is, its size and the start checkpoint's accuracy on it
    assert set(res["tests"]) == {"depth1", "train_depth1", "new_depth2", "new_depth3", "depth2", "depth3"}
    for t in res["tests"].values():
        assert t["kind"] and 1 <= t["size"] <= 3 and 0.0 <= t["start_accuracy"] <= 1.0
    assert res["tests"]["new_depth2"]["start_accuracy"] == res["arms"]["start"]["new_depth2"]
    # the curve: step 0, the snapshot at step 1, the model at step 2 (continue runs on)
    assert res["curves"]["depth2"]["steps"] == [0, 1, 2] and res["curves"]["continue"]["steps"][:3] == [0, 1, 2]
    assert res["curves"]["depth2"]["tokens"][0] == 0 < res["curves"]["depth2"]["tokens"][-1]
    assert res["training_signal"]["skip"]["skipped"][0]["drawn"] >= 2 * 8
    d = res["diff_vs_continue"]["depth2"]["depth2"]
    assert d["ci95"] is None and len(d["per_seed"]) == 1  # one seed: no interval is claimed
    assert d["mean"] == pytest.approx(res["arms"]["depth2"]["depth2"] - res["arms"]["continue"]["depth2"])
    mc = res["matched_compute"]["arms"]["depth2"]
    assert mc["arm_tokens"] > 0 and mc["continue_steps"][0] >= 2
    for fig in res["figures"]:
        assert (out / fig).stat().st_size > 1000
    assert "Figure 2 left" in (out / "report.md").read_text()
    # the held-out test sets share no problem with anything trained on
    data = out / "seed_0" / "data"
    ids = lambda name: {json.loads(line)["id"] for line in open(data / f"{name}.jsonl")}  # noqa: E731
    parents = lambda name: {p for line in open(data / f"{name}.jsonl")  # noqa: E731
                            for p in json.loads(line).get("parents") or []}
    trained = ids("pool") | parents("depth2") | parents("depth3")
    assert not (ids("test1") | parents("test2") | parents("test3")) & (trained | ids("train"))
    # the new-pairs tests compose train-side problems outside the pool, in pairs RL never composes
    assert parents("new2") | parents("new3") <= ids("train1") <= ids("train")
    assert not (parents("new2") | parents("new3")) & trained
    # rerun: every job is done, nothing is retrained
    again = _crl("--quick", "--out", str(out), *TINY)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((out / "results.json").read_text())["resumed_jobs"] == JOBS
    # other settings into the same folder are refused, not mixed
    n_at = TINY.index("--eval-n") + 1
    other = _crl("--quick", "--out", str(out), *TINY[:n_at], "3", *TINY[n_at + 1:])
    assert other.returncode == 2 and "eval_n" in other.stderr
    # adding the curriculum and online arms reuses every finished job, reruns the continue
    # arm's evaluation for its matched-token snapshots, and reports online vs curriculum
    arms = TINY.index("--arms") + 1
    added = _crl("--quick", "--out", str(out), *TINY[:arms], "continue,depth2,skip,curriculum,online",
                 *TINY[arms + 1:])
    assert added.returncode == 0, added.stderr[-3000:]
    res = json.loads((out / "results.json").read_text())
    assert res["resumed_jobs"] == JOBS - 1  # all but the continue evaluation
    assert set(res["arms"]) == {"start", "continue", "depth2", "skip", "curriculum", "online"}
    o = res["online_vs_curriculum"]
    assert len(o["informative_per_step"]["online"]) == 2 and o["tokens"]["online"]["mean"] > 0
    # the report's pool is the online arm's own log: its last step's totals, each step's
    # retirements adding up to the total, and the live prompts by depth summing to the live count
    logged = [json.loads(x) for x in open(out / "seed_0" / "arms" / "online" / "metrics.jsonl")]
    steps = [row["online"] for row in logged if "online" in row]
    assert len(steps) == len(o["informative_per_step"]["online"])  # one row per step
    assert o["pool"][0] == {"retired": steps[-1]["retired_total"], "injected": steps[-1]["injected_total"],
                            "live_by_depth": steps[-1]["live_by_depth"]}
    assert sum(s["retired"] for s in steps) == steps[-1]["retired_total"]
    assert sum(s["injected"] for s in steps) == steps[-1]["injected_total"]
    assert sum(o["pool"][0]["live_by_depth"].values()) == steps[-1]["live"] >= 1
    assert (out / "seed_0" / "arms" / "online" / "metrics.jsonl").exists()
    assert "Online composition vs the static curriculum" in (out / "report.md").read_text()
