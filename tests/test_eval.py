"""``crl eval``: avg@k and pass@k from a controlled loopback server (true values known), the
compositional analyses on hand-made and engine-made chains, and real generation end to end
on the shared benchmark files with a tiny local model."""

from __future__ import annotations

import itertools
import json
from fractions import Fraction
from pathlib import Path

import pytest
from fakes.openai_server import FakeOpenAIServer
from fakes.rollout_tiny_qwen import build_tiny_qwen

from composition_rl.cli import main as crl
from composition_rl.grading import VerifyConfig, close_shared_verifiers, shared_verifier
from composition_rl.io.files import atomic_write_jsonl, read_jsonl
from composition_rl.jobs.evaluate import (
    EvalConfig,
    benchmark_metrics,
    composition_analysis,
    evaluate_benchmarks,
    link_errors,
)
from composition_rl.records import Link, Problem
from composition_rl.rollout.base import build_backend

N = 4


def brute_pass_at_k(n: int, c: int, k: int) -> float:
    subsets = list(itertools.combinations([True] * c + [False] * (n - c), k))
    return float(Fraction(sum(any(s) for s in subsets), len(subsets)))


@pytest.fixture(scope="module")
def verifier():
    # The process-wide pool the commands use too (their default config): started once here,
    # its workers released when the module is done.
    yield shared_verifier(VerifyConfig(timeout_s=5.0))
    close_shared_verifiers()


def bench(prefix: str, plan: list[int]) -> list[tuple[Problem, int]]:
    return [(Problem.new(f"{prefix} problem {i}: what is {i} + {i}?", str(2 * i), source=prefix), c)
            for i, c in enumerate(plan)]


def responder_for(planned: dict[str, tuple[str, int]]):
    def respond(body):
        content = body["messages"][-1]["content"]
        gold, c = next(v for q, v in planned.items() if content.startswith(q))
        return [f"... so $\\boxed{{{gold}}}$" if i < c else "... so $\\boxed{-1}$" for i in range(int(body["n"]))]

    return respond


def test_eval_metrics_match_the_planned_truth(verifier, tmp_path):
    a = bench("alpha", [0, 1, 2, 3, 4, 4])
    b = bench("beta", [1, 1, 0])
    planned = {p.question: (p.answer, c) for p, c in a + b}
    with FakeOpenAIServer(responder_for(planned)) as srv:
        backend = build_backend("openai", base_url=srv.url, model="fake-model")
        res = evaluate_benchmarks(
            {"alpha": [p for p, _ in a], "beta": [p for p, _ in b]},
            backend, verifier, tmp_path, EvalConfig(n=N, chunk=4), progress=False,
        )
        backend.close()
    for name, items in (("alpha", a), ("beta", b)):
        m = res["benchmarks"][name]
        cs = [c for _, c in items]
        assert m["problems"] == len(items) and m["samples"] == N * len(items)
        assert m[f"avg@{N}"] == pytest.approx(sum(cs) / (N * len(cs)))
        for k in range(1, N + 1):
            assert m["pass@k"][str(k)] == pytest.approx(sum(brute_pass_at_k(N, c, k) for c in cs) / len(cs))
        assert m["solve_all"] == pytest.approx(cs.count(N) / len(cs))
        assert m["solve_none"] == pytest.approx(cs.count(0) / len(cs))
    # Table 1 averages benchmark scores, not problems.
    o = res["overall"]
    assert o[f"avg@{N}"] == pytest.approx((res["benchmarks"]["alpha"][f"avg@{N}"] + res["benchmarks"]["beta"][f"avg@{N}"]) / 2)
    assert json.loads((tmp_path / "results.json").read_text()) == json.loads(json.dumps(res))
    table = (tmp_path / "results.md").read_text()
    assert "| alpha | 6 | 58.3 |" in table and "**average**" in table
    rows = list(read_jsonl(tmp_path / "samples" / "alpha.jsonl"))
    assert len(rows) == len(a)
    for r, (p, c) in zip(rows, a):
        assert r["id"] == p.id and r["correct"] == c
        assert [x["outcome"] for x in r["responses"]] == ["correct"] * c + ["incorrect"] * (N - c)


def test_benchmark_metrics_with_mixed_n():
    rows = [{"n": 3, "correct": 1, "responses": []}, {"n": 3, "correct": 3, "responses": []}]
    m = benchmark_metrics(rows, 3)
    assert m["avg@3"] == pytest.approx((1 / 3 + 1) / 2)
    assert m["pass@k"]["2"] == pytest.approx((brute_pass_at_k(3, 1, 2) + 1) / 2)


# --- compositional analyses -------------------------------------------------------------------

L1 = Link(x="X", y="Y", v1_latex="7", v1_expr="7", v2_literal="1", v2_expr="1", d_latex="6", d_expr="6", v2_offset=0)
L2 = Link(x="Z", y="W", v1_latex="\\frac{3}{4}", v1_expr="3/4", v2_literal="2", v2_expr="2",
          d_latex="-\\frac{5}{4}", d_expr="-5/4", v2_offset=0)

ANALYSIS_CASES = [
    # (name, response, links, recovered per link, error kind for a wrong final answer)
    ("q1 error", "Solving the first problem, $X = 8$. Then $Y = X - 6 = 2$.", (L1,), [False], "q1"),
    ("linkage error", "We find $X = 3 + 4 = 7$. Then Y is 13.", (L1,), [True], "linkage"),
    ("last error", "So X equals 7, and $Y = 7 - 6 = 1$. Final: \\boxed{5}", (L1,), [True], "last"),
    ("x never stated", "The answer is 7 and then 1.", (L1,), [None], "undecidable"),
    ("restated link is no value", "$Y$ is $6$ less than $X$. We get X = 7, Y = 2.", (L1,), [True], "linkage"),
    ("restated link only", "Since $Y$ is $6$ less than $X$ and X = 7 ...", (L1,), [True], "undecidable"),
    ("y never stated", "$X=7$.", (L1,), [True], "undecidable"),
    ("depth 3 middle error", "X = 7, so Y = 1. Then $Z = \\frac{1}{2}$ and W = 2.", (L1, L2), [True, False], "middle"),
    ("depth 3 second linkage", "X = 7, Y = 1. $Z = 0.75$; W = 3", (L1, L2), [True, True], "linkage"),
    ("depth 3 all links right", "X = 7, Y = 1, Z = \\dfrac{3}{4}, W = 2.", (L1, L2), [True, True], "last"),
]


# a mixed number replaced whole (MATH 6333's 6\\frac{1}{4}, 25/4; review of a8401d7): the link reads
# 25/4, not 6 times 1/4
L3 = Link(x="X", y="Y", v1_latex="7", v1_expr="7", v2_literal="6\\frac{1}{4}", v2_expr="25/4", d_latex="\\frac{3}{4}",
          d_expr="3/4", v2_offset=0)
ANALYSIS_CASES += [
    ("mixed number, right link", "X = 7, so $Y = \\frac{25}{4}$ and the root is 5/2.", (L3,), [True], "last"),
    ("mixed number read as a product", "X = 7, so $Y = \\frac{3}{2}$.", (L3,), [True], "linkage"),
]


@pytest.mark.parametrize("name,text,links,recovered,kind", ANALYSIS_CASES, ids=[c[0] for c in ANALYSIS_CASES])
def test_link_errors(name, text, links, recovered, kind):
    assert link_errors(text, links) == (recovered, kind)


def test_composition_analysis_counts_and_rates():
    p = Problem(id="c1", question="composed", answers=("5",), depth=3, links=(L1, L2))
    responses = [
        {"text": "X = 7, Y = 1, Z = 3/4, W = 2. \\boxed{5}", "score": 1.0},  # right, all links right
        {"text": "X = 8", "score": 0.0},  # q1
        {"text": "X = 7, Y = 1, Z = 1, W = 0", "score": 0.0},  # middle
        {"text": "nothing stated", "score": 0.0},  # undecidable
    ]
    a = composition_analysis([{"id": "c1", "responses": responses}], {"c1": p})
    assert a["links_scored"] == 8
    assert a["v1_recovery"] == pytest.approx(3 / 8)  # right x values: 2 + 0 + 1 + 0
    assert a["v1_stated"] == pytest.approx(5 / 8)  # stated x values: 2 + 1 + 2 + 0
    assert a["wrong_responses"] == 3
    assert a["error_counts"] == {"q1": 1, "linkage": 0, "middle": 1, "last": 0, "undecidable": 1}
    assert a["error_split"] == {"q1": 0.5, "linkage": 0.0, "middle": 0.5, "last": 0.0}


@pytest.mark.shared_data
def test_cli_eval_compositional_on_math500_with_a_controlled_server(shared_data, verifier, tmp_path, capsys):
    """Depth-2/3 sets from the real composition engine; the server's replies state the
    planned intermediate values, so the v1-recovery rate and error split are known."""
    from composition_rl.io.readers import load_problems
    from composition_rl.jobs.compose.pipeline import ComposeConfig, compose_problems

    path = shared_data / "eval" / "math500.parquet"
    base = load_problems(path).problems[:30]
    plan: dict[str, tuple[Problem, str]] = {p.question: (p, "right") for p in base}
    kinds = ["right", "q1", "linkage", "last"]
    for depth in (2, 3):
        cfg = ComposeConfig(depth=depth, pool_size=20, max_candidates=12, seed=0)
        for i, p in enumerate(compose_problems(base, cfg).accepted):
            plan[p.question] = (p, kinds[i % 4])

    def say(p: Problem, kind: str) -> str:
        if not p.links:
            return f"\\boxed{{{p.answer}}}"
        parts = []
        for j, lk in enumerate(p.links):
            x = lk.v1_latex if not (kind == "q1" and j == 0) else f"{lk.v1_latex} + 1"
            y = lk.v2_literal if kind != "linkage" else f"{lk.v2_literal} + 1"
            parts.append(f"${lk.x} = {x}$, so ${lk.y} = {y}$.")
        final = p.answer if kind == "right" else "\\text{wrong}"
        return " ".join(parts) + f" Final answer: $\\boxed{{{final}}}$"

    def respond(body):
        content = body["messages"][-1]["content"]
        # A composed prompt starts with its q1, itself a benchmark problem: take the longest match.
        q = max((q for q in plan if content.startswith(q.strip())), key=len)
        return say(*plan[q])

    with FakeOpenAIServer(respond) as srv:
        rc = crl(["eval", "--base-url", srv.url, "--model", "fake-model", "--benchmark", str(path),
                  "--limit", "30", "-n", "2", "--out", str(tmp_path), "--compositional", "2,3",
                  "--comp-max", "12", "--no-progress"])
    assert rc == 0
    res = json.loads((tmp_path / "results.json").read_text())
    comp = res["compositional"]["math500"]
    assert comp["1"]["avg@2"] == res["benchmarks"]["math500"]["avg@2"]
    for depth in ("2", "3"):
        m = comp[depth]
        k = m["problems"]
        assert k > 0
        counts = [sum(1 for i in range(k) if i % 4 == j) for j in range(4)]  # right, q1, linkage, last
        assert m["avg@2"] == pytest.approx(counts[0] / k)
        assert m["wrong_responses"] == 2 * (k - counts[0])
        assert m["error_counts"] == {"q1": 2 * counts[1], "linkage": 2 * counts[2], "middle": 0,
                                     "last": 2 * counts[3], "undecidable": 0}
        links = int(depth) - 1
        right_x = counts[0] * links + counts[1] * (links - 1) + (counts[2] + counts[3]) * links
        assert m["v1_recovery"] == pytest.approx(right_x / (k * links))
    table = (tmp_path / "results.md").read_text()
    assert "Compositional analyses" in table and "| math500 | 2 |" in table
    assert (tmp_path / "samples" / "math500.depth3.jsonl").exists()
    capsys.readouterr()


@pytest.mark.shared_data
def test_cli_eval_with_a_tiny_local_model_on_shared_benchmarks(shared_data, verifier, tmp_path_factory, capsys):
    """Real generation through the local backend on three shared files (json list answers,
    int answers, parquet): the run completes, resumes without resampling, and reports."""
    model = build_tiny_qwen(tmp_path_factory.mktemp("tiny-eval"))
    out = tmp_path_factory.mktemp("eval-out")
    files = [shared_data / "eval" / f for f in ("aime25.json", "minerva.json", "math500.parquet")]
    args = ["eval", "--model", str(model), "-n", "2", "--max-tokens", "6", "--limit", "3",
            "--out", str(out), "--no-progress", "--device", "cpu"]
    for f in files:
        args += ["--benchmark", str(f)]
    assert crl(args) == 0
    res = json.loads((out / "results.json").read_text())
    assert set(res["benchmarks"]) == {"aime25", "minerva", "math500"}
    for name, m in res["benchmarks"].items():
        assert m["problems"] == 3 and m["samples"] == 6
        rows = list(read_jsonl(out / "samples" / f"{name}.jsonl"))
        assert all(len(r["responses"]) == 2 and all(x["tokens"] <= 6 for x in r["responses"]) for r in rows)
    before = {p: p.read_bytes() for p in (out / "samples").iterdir()}
    assert crl(args) == 0  # resume: nothing left to sample, logs unchanged
    assert {p: p.read_bytes() for p in (out / "samples").iterdir()} == before
    capsys.readouterr()


def test_cli_eval_rejects_bad_depths(tmp_path, capsys):
    f = tmp_path / "b.jsonl"
    atomic_write_jsonl(f, [{"question": "1+1?", "answer": "2"}])
    assert crl(["eval", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--benchmark", str(f),
                "--out", str(tmp_path / "o"), "--compositional", "1"]) == 2
    assert "depths must be >= 2" in capsys.readouterr().err


def test_eval_config_is_validated():
    with pytest.raises(ValueError, match="n=0"):
        EvalConfig(n=0)
    assert Path(__file__).name.startswith("test_eval")
