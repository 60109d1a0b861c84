"""The real-policy report's driver and report logic, on synthetic run folders (no model)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from composition_rl.records import Link, Problem

REPO = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("real_policy_report", REPO / "benchmarks" / "real_policy_report.py")
rpr = importlib.util.module_from_spec(_spec)
sys.modules["real_policy_report"] = rpr
_spec.loader.exec_module(rpr)


def _row(pid: str, correct: int, n: int = 8, responses=None) -> dict:
    from composition_rl.stats import band

    r = {"id": pid, "n": n, "correct": correct, "pass_rate": correct / n, "class": band(correct, n),
         "outcomes": {"correct": correct, "wrong": n - correct}, "mean_tokens": 50.0, "truncated": 1}
    if responses is not None:
        r["responses"] = responses
    return r


def test_pick_originals_keeps_one_level_with_integer_answers_in_a_seeded_order(tmp_path):
    rows = [{"problem": f"q{i}", "answer": a, "difficulty": lvl, "type": "Algebra"}
            for i, (a, lvl) in enumerate([("3", 1.0), ("-4", 1.0), ("\\frac{1}{2}", 1.0), ("5", 2.0),
                                          (" 7 ", 1.0), (None, 1.0), ("8", 1.0)])]
    src = tmp_path / "math.json"
    src.write_text(json.dumps(rows))
    picked = rpr.pick_originals(src, 10, 1.0, seed=0)
    assert sorted(r["answer"] for r in picked) == ["-4", "3", "7", "8"]
    assert picked == rpr.pick_originals(src, 10, 1.0, seed=0)
    assert len(rpr.pick_originals(src, 2, 1.0, seed=0)) == 2


def test_mastered_rule_falls_back_to_three_quarters_when_few_are_solved():
    rows = [_row("a", 8), _row("b", 6), _row("c", 7), _row("d", 5)]
    assert rpr.mastered_rule(rows, min_mastered=1) == ("solve_all", ["a"])
    assert rpr.mastered_rule(rows, min_mastered=2) == ("pass_rate>=0.75", ["a", "b", "c"])


def test_histogram_and_band_shares_with_wilson_intervals():
    from composition_rl.stats import wilson_interval

    rows = [_row("a", 8), _row("b", 8), _row("c", 3), _row("d", 0)]
    assert rpr.histogram(rows, 8) == {"0/8": 1, "1/8": 0, "2/8": 0, "3/8": 1, "4/8": 0, "5/8": 0,
                                      "6/8": 0, "7/8": 0, "8/8": 2}
    s = rpr.band_shares(rows)
    assert s["prompts"] == 4
    assert s["solve_all"]["count"] == 2 and s["solve_all"]["share"] == 0.5
    assert (s["solve_all"]["lo"], s["solve_all"]["hi"]) == wilson_interval(2, 4)
    assert s["goldilocks"]["count"] == 1 and s["solve_none"]["count"] == 1
    assert 0 < s["solve_none"]["lo"] < 0.25 < s["solve_none"]["hi"] < 1


def _composed(tmp_path: Path) -> tuple[Path, Problem]:
    link = Link.from_dict({"x": "X", "y": "Y", "v1": "7", "v1_expr": "7", "v2": "3", "v2_expr": "3",
                           "d": "4", "d_expr": "4", "v2_offset": 0})
    p = Problem(id="c1", question="Let X be ... Y = X - 4 ...", answers=("10",), depth=2,
                parents=("p", "q"), links=(link,), engine="symbolic")
    path = tmp_path / "composed.jsonl"
    path.write_text(json.dumps(p.to_dict()) + "\n")
    return path, p


def test_composed_analysis_splits_wrong_responses_by_the_first_broken_step(tmp_path):
    path, p = _composed(tmp_path)
    responses = [
        {"text": "X = 7, so Y = 3 and the answer is \\boxed{10}", "outcome": "correct"},
        {"text": "X = 6, so \\boxed{9}", "outcome": "wrong"},                 # q1
        {"text": "X = 7, then Y = 2, \\boxed{9}", "outcome": "wrong"},        # linkage
        {"text": "X = 7 and Y = 3, \\boxed{11}", "outcome": "wrong"},         # last
        {"text": "\\boxed{12}", "outcome": "no_answer"},                     # undecidable
    ]
    a = rpr.composed_analysis([_row(p.id, 1, n=5, responses=responses)], path)
    assert a["wrong_responses"] == 4
    assert a["error_counts"] == {"q1": 1, "linkage": 1, "middle": 0, "last": 1, "undecidable": 1}
    assert a["links_scored"] == 5 and a["v1_recovery"] == pytest.approx(3 / 5)
    assert rpr.composed_analysis([], path) is None


def test_steps_skip_a_finished_command_and_rerun_a_changed_or_failed_one(tmp_path, monkeypatch):
    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd[3:])
        return subprocess.CompletedProcess(cmd, 1 if "--fail" in cmd else 0)

    monkeypatch.setattr(rpr.subprocess, "run", fake_run)
    steps = rpr.Steps(tmp_path)
    rpr.run_crl(steps, "a", ["profile", "--x"], tmp_path)
    rpr.run_crl(rpr.Steps(tmp_path), "a", ["profile", "--x"], tmp_path)  # read back from steps.json
    assert calls == [["profile", "--x"]]
    rpr.run_crl(rpr.Steps(tmp_path), "a", ["profile", "--y"], tmp_path)
    assert calls[-1] == ["profile", "--y"]
    with pytest.raises(SystemExit):
        rpr.run_crl(rpr.Steps(tmp_path), "b", ["eval", "--fail"], tmp_path)
    assert "b" not in rpr.Steps(tmp_path).done
    with pytest.raises(SystemExit):
        rpr.run_crl(rpr.Steps(tmp_path), "b", ["eval", "--fail"], tmp_path)
    assert len(calls) == 4
    rec = rpr.run_crl(rpr.Steps(tmp_path), "c", ["compose", "--fail"], tmp_path, fatal=False)  # reported, run goes on
    assert rec["exit"] == 1 and "c" not in rpr.Steps(tmp_path).done


def test_report_from_run_folders_writes_tables_and_figures(tmp_path):
    out = tmp_path / "run"
    for name, rows in {"profile-originals": [_row("a", 8), _row("b", 8), _row("c", 4), _row("d", 0)],
                       "profile-d2": [_row("c1", 2), _row("c2", 0)]}.items():
        (out / name).mkdir(parents=True)
        (out / name / "profile.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rpr.Steps(out).record("profile-originals", {"argv": [], "exit": 0, "wall_s": 60.0,
                                                "load_start": 1.0, "load_end": 2.0})
    args = rpr.main.__globals__["argparse"].Namespace(model="m.gguf", n=8, max_tokens=160, template="brief")
    rep = rpr.build_report(out, args, "solve_all", ["a", "b"])
    assert rep["sets"]["originals"]["solve_all"]["count"] == 2
    assert rep["sets"]["mastered"]["prompts"] == 2 and rep["mastered"] == 2
    assert rep["sets"]["depth 2"]["goldilocks"]["count"] == 1
    assert rep["sets"]["depth 3"] == {"prompts": 0}
    md = (out / "report.md").read_text()
    assert "| originals | 4 | 2/4 = 50.0% [" in md
    assert "| depth 2 | 2 | 0/2 = 0.0% [0.0%, " in md
    assert "| total | 60 s (1.0 min) | |" in md
    for f in ("pass_rates.png", "bands_by_depth.png"):
        assert (out / f).read_bytes()[:4] == b"\x89PNG"


def test_pick_reasoning_gym_is_a_seeded_sample_of_crls_default_set():
    pytest.importorskip("reasoning_gym")
    a = rpr.pick_reasoning_gym(12, seed=0)
    assert a == rpr.pick_reasoning_gym(12, seed=0)
    assert len(a) == 12 and len({r["id"] for r in a}) == 12
    assert len({r["metadata"]["generator"] for r in a}) > 1  # shuffled across the generators
    assert [Problem.from_dict(r).id for r in a] == [r["id"] for r in a]
    assert a != rpr.pick_reasoning_gym(12, seed=1)


def test_parents_product_is_the_mean_over_compositions_of_the_parts_pass_rates(tmp_path):
    path, p = _composed(tmp_path)  # parents p and q
    originals = [_row("p", 6), _row("q", 4), _row("z", 2)]
    assert rpr.parents_product([_row(p.id, 3)], path, originals) == pytest.approx(0.75 * 0.5)
    assert rpr.parents_product([_row(p.id, 3)], path, originals[:1]) is None  # a parent not profiled
    assert rpr.parents_product([], path, originals) is None


@pytest.mark.real_llm
def test_the_driver_runs_its_steps_on_a_real_gguf_and_a_rerun_skips_them(smollm2_gguf, tmp_path, capsys):
    model = str(smollm2_gguf)
    argv = ["--model", model, "--out", str(tmp_path / "r"), "--problems", "3", "-n", "2", "--max-tokens", "8",
            "--d2", "2", "--d3", "1", "--eval-mastered", "1", "--eval-comp", "1", "--eval-n", "1",
            "--eval-max-tokens", "8"]
    assert rpr.main(argv) == 0
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["sets"]["originals"]["prompts"] == 3
    assert sum(report["sets"]["originals"]["histogram"].values()) == 3
    steps = json.loads((tmp_path / "r" / "steps.json").read_text())
    assert steps["profile-originals"]["exit"] == 0
    if report["mastered"] < 2:  # no depth-2 chain from fewer than two problems: reported, not fatal
        assert "compose-d2" not in steps and report["sets"]["depth 2"] == {"prompts": 0}
    capsys.readouterr()
    assert rpr.main(argv) == 0
    assert "[profile-originals] done earlier" in capsys.readouterr().out
