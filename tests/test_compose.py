"""Composition: the contract (every accepted composition passes every check against its own
record), the paper's Compose shape, depth K, pools, determinism, outputs and exports."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import subprocess
import sys
from fractions import Fraction

import pyarrow.parquet as pq
import pytest
import sympy

from composition_rl.io.files import dumps
from composition_rl.io.readers import load_problems, load_reasoning_gym
from composition_rl.jobs.compose import ComposeConfig, compose_problems, run_compose
from composition_rl.jobs.compose import run as executor
from composition_rl.jobs.compose.pools import (
    build_pools,
    count_candidates,
    iter_candidates,
    iter_index_chains,
    iter_index_range,
)
from composition_rl.records import Link, Problem
from composition_rl.spc.checks import run_checks
from composition_rl.spc.text import find_glue, restore_instructions
from composition_rl.values import parse_answer_value
from composition_rl.values.derive import Derivation, derive

Q1 = Problem.new("What is the sum of the value(s) of $n$ for which $|2n - 7| = 3$?", "7")
Q2 = Problem.new(
    "Simplify $2((5p + 1) - 2p \\cdot 4) + (4 - 1 \\div 3)(6p - 9)$ to the form $ap - b$, "
    "where $a$ and $b$ are positive integers.",
    "22p-7",
)
Q3 = Problem.new("A box holds 12 apples. How many apples do $3$ boxes hold?", "36")


def _by_id(*sets):
    return {p.id: p for s in sets for p in s}


def test_compose_follows_section_3_4():
    res = compose_problems([Q1, Q2], ComposeConfig(depth=2, pool_size=1, seed=0), first_pool=[Q1])
    ok = [c for c in res.accepted if c.parents == (Q1.id, Q2.id)]
    assert len(ok) == 1
    c = ok[0]
    (lk,) = c.links
    assert c.answers == Q2.answers and c.depth == 2
    assert c.question.startswith(Q1.question + "\n\n")
    # "Y is (v1 - v2) less than X": the stated offset is exactly v1 - v2
    v2 = sympy.Rational(lk.v2_expr)
    assert sympy.Integer(7) - v2 == sympy.sympify(lk.d_expr)
    assert f"${lk.y}$ is" in c.question and f"than ${lk.x}$." in c.question or f"${lk.y}$ is equal to ${lk.x}$." in c.question
    # the variable names clash with nothing (n, p, a, b are used)
    assert {lk.x, lk.y}.isdisjoint({"N", "P", "A", "B"})
    assert run_checks(c, [Q1, Q2]) is None


def test_checks_catch_each_kind_of_broken_record():
    c = compose_problems([Q1, Q3], ComposeConfig(depth=2, pool_size=1), first_pool=[Q1]).accepted[0]
    (lk,) = c.links
    parents = [Q1, Q3]

    def broken(**kw):
        return dataclasses.replace(c, **kw)

    wrong_v1 = broken(links=(dataclasses.replace(lk, v1_latex="8", v1_expr="8"),))
    assert run_checks(wrong_v1, parents).stage == "check1_v1"
    moved = broken(links=(dataclasses.replace(lk, v2_offset=lk.v2_offset + 1),))
    assert run_checks(moved, parents).reason == "variable_not_found"
    other_literal = broken(links=(dataclasses.replace(lk, v2_literal=lk.v2_literal + "0"),))
    assert run_checks(other_literal, parents).reason == "substitution_mismatch"
    assert run_checks(broken(question="  " + c.question), parents).reason == "q1_modified"
    assert run_checks(broken(question=c.question.replace("sum", "max", 1)), parents).reason == "q1_modified"
    # Q1 uses n as a symbol: a record that names v1 N (consistently) clashes with it
    renamed = broken(question=c.question.replace(f"${lk.x}$", "$N$"), links=(dataclasses.replace(lk, x="N"),))
    why = run_checks(renamed, parents)
    assert (why.reason, why.detail) == ("name_collision", "['N'] already used as symbols")
    wrong_d = broken(question=c.question.replace(f"${lk.d_latex.lstrip('-')}$", "$1000$"))
    assert run_checks(wrong_d, parents).reason == "relation_mismatch"
    # the value checks are memoized on their strings: the good record's (v1, v2) is cached
    # by now, and a record that changes any of those strings is still caught
    wrong_v2 = broken(links=(dataclasses.replace(lk, v2_expr=str(int(lk.v2_expr) + 1)),))
    assert run_checks(wrong_v2, parents).reason == "v2_mismatch"
    d = int(lk.d_latex)
    assert d != 0
    d2 = d + 1 if d > 0 else d - 1  # same direction, text and record agree, v1 - d2 != v2
    both = broken(
        question=c.question.replace(f"${abs(d)}$", f"${abs(d2)}$", 1),
        links=(dataclasses.replace(lk, d_latex=str(d2), d_expr=str(d2)),),
    )
    assert run_checks(both, parents).reason == "arithmetic_mismatch"
    assert run_checks(c, parents) is None
    # q2 uses X: a record that names v1 X in its glue and its link (checks 1-3 pass) is
    # caught by check 4 alone
    clash = Problem.new("Let $X = 3$. What is $X + 4$?", "7")
    c2 = compose_problems([Q1, clash], ComposeConfig(depth=2, pool_size=1), first_pool=[Q1]).accepted[0]
    (lk2,) = c2.links
    assert lk2.x != "X" and f"${lk2.x}$" not in clash.question
    glue_start = len(Q1.question)
    forced = dataclasses.replace(
        c2,
        question=c2.question[:glue_start] + c2.question[glue_start:].replace(f"${lk2.x}$", "$X$"),
        links=(dataclasses.replace(lk2, x="X"),),
    )
    why = run_checks(forced, [Q1, clash])
    assert (why.stage, why.reason, why.detail) == ("check4_names_length", "name_collision",
                                                   "['X'] already used as symbols")
    assert run_checks(c, parents, max_chars=len(c.question) - 1).reason == "too_long"


def test_depth_three_chains_and_unique_names():
    res = compose_problems([Q1, Q3, Q2], ComposeConfig(depth=3, pool_sizes=(None, None, None), seed=0))
    by = _by_id([Q1, Q2, Q3])
    assert res.accepted
    for c in res.accepted:
        parents = [by[i] for i in c.parents]
        assert run_checks(c, parents) is None
        names = [n for lk in c.links for n in (lk.x, lk.y)]
        assert len(names) == len(set(names)) == 4
        assert c.answers == parents[-1].answers


def test_pools_small_first_full_last_and_no_repeats():
    probs = load_reasoning_gym(seed=0, scale=60).problems
    pools = build_pools([probs, probs, probs], [5, 5, None], seed=1)
    assert [len(p) for p in pools] == [5, 5, len(probs)]
    chains = list(iter_candidates(pools, seed=1))
    assert all(len({p.id for p in ch}) == 3 for ch in chains)
    assert len(chains) == len(set(tuple(p.id for p in ch) for ch in chains))
    sample = list(iter_candidates(pools, seed=1, max_candidates=50))
    assert len(sample) == 50 and set(map(tuple, sample)) <= set(map(tuple, chains))


def test_a_problem_listed_twice_is_drawn_once():
    """An API caller's list may hold one problem twice (the readers drop repeated questions):
    a sampled pool holds it at most once, so no chain meets the same problem twice over."""
    probs = load_reasoning_gym(seed=0, scale=60).problems
    for seed in range(20):
        pool = build_pools([probs + probs, probs], [20, None], seed=seed)[0]
        assert len({p.id for p in pool}) == 20


def test_index_ranges_tile_the_candidate_order():
    # workers enumerate their share from (start, stop): the pieces must join into exactly the
    # candidate order, last position slowest, with every repeated-problem chain left out
    probs = load_reasoning_gym(seed=0, scale=30).problems
    for pools in (build_pools([probs, probs], [4, None], seed=2), build_pools([probs, probs, probs], [3, 5, None], seed=2),
                  [probs[:6], probs[3:9], probs[:7]]):
        want = [
            rev[::-1] for rev in itertools.product(*(range(len(p)) for p in reversed(pools)))
            if len({pools[k][i].id for k, i in enumerate(rev[::-1])}) == len(pools)
        ]
        assert list(iter_index_chains(pools, seed=0)) == want
        total = count_candidates(pools)
        for step in (1, 5, 7, total):
            pieces = [ix for a in range(0, total, step) for ix in iter_index_range(pools, a, a + step)]
            assert pieces == want


def _read(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def test_outputs_counts_and_byte_identical_reruns(tmp_path):
    probs = load_reasoning_gym(seed=0, scale=120).problems
    cfg = ComposeConfig(depth=2, pool_size=10, seed=3)
    s1 = run_compose(probs, cfg, tmp_path / "a", progress=False)
    s2 = run_compose(probs, dataclasses.replace(cfg, workers=2), tmp_path / "b", progress=False)
    for name in ("composed.jsonl", "rejected.jsonl"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    strip = {"elapsed_s", "candidates_per_s"}
    assert {k: v for k, v in s1.items() if k not in strip} == {k: v for k, v in s2.items() if k not in strip}
    composed, rejected = _read(tmp_path / "a/composed.jsonl"), _read(tmp_path / "a/rejected.jsonl")
    assert s1["candidates"] == len(composed) + len(rejected) == s1["accepted"] + s1["rejected"]
    assert sum(s1["rejected_by_reason"].values()) == len(rejected)
    assert s1["funnel"][0]["kept"] == s1["candidates"] and s1["funnel"][-1]["kept"] == s1["accepted"]
    assert json.loads((tmp_path / "a/stats.json").read_text())["accepted"] == s1["accepted"]
    other = run_compose(probs, dataclasses.replace(cfg, seed=4), tmp_path / "c", progress=False)
    assert other["candidates"] == s1["candidates"]
    assert (tmp_path / "c/composed.jsonl").read_bytes() != (tmp_path / "a/composed.jsonl").read_bytes()


def _lines_are_records(path, problems, cfg, first_pool=None):
    """composed.jsonl holds exactly ``dumps(to_dict())`` of each in-memory record, in order, and
    rejected.jsonl ``dumps(row)`` of each rejection (the pipeline writes both through
    hand-spliced serializers, not ``dumps``)."""
    res = compose_problems(problems, cfg, first_pool=first_pool)
    want = "".join(dumps(p.to_dict()) + "\n" for p in res.accepted)
    assert res.accepted and open(path, encoding="utf-8").read() == want
    want = "".join(dumps(r) + "\n" for r in res.rejected)
    assert (path.parent / "rejected.jsonl").read_text(encoding="utf-8") == want
    return res


def test_written_lines_are_the_records_json(tmp_path):
    # reasoning-gym metadata is nested (dicts in dicts): the hardest case for the splicing
    # (plus a problem with no number to replace, so that chains ending on it are rejected)
    probs = load_reasoning_gym(seed=0, scale=120).problems + [Problem.new("Name the capital of France.", "Paris")]
    for cfg in (ComposeConfig(depth=2, pool_size=10, seed=3), ComposeConfig(depth=3, pool_size=4, seed=1)):
        run_compose(probs, cfg, tmp_path / str(cfg.depth), progress=False)
        res = _lines_are_records(tmp_path / str(cfg.depth) / "composed.jsonl", probs, cfg)
        assert res.rejected


def test_worker_pool_output_equals_one_process(tmp_path):
    # > 4 chunks of candidates, so that workers=2 really forks; their accepted lines travel
    # through each worker's spill file and are read back in output order by the parent
    probs = load_reasoning_gym(seed=0, scale=500).problems
    cfg = ComposeConfig(depth=2, pool_size=20, seed=5)
    one = run_compose(probs, dataclasses.replace(cfg, workers=1), tmp_path / "one", progress=False)
    two = run_compose(probs, dataclasses.replace(cfg, workers=2), tmp_path / "two", progress=False)
    assert one["candidates"] > 4 * executor._CHUNK and executor._worker_count(2, one["candidates"]) == 2
    for name in ("composed.jsonl", "rejected.jsonl"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    assert one["accepted"] == two["accepted"] > 0
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == [
        ".crl.lock", "composed.jsonl", "input_rejects.jsonl", "rejected.jsonl", "run.json", "stats.json"]  # no spill left


@pytest.mark.shared_data
@pytest.mark.parametrize("depth,first", [(2, None), (3, None), (2, "eval/minerva.json")])
def test_pool_facts_from_workers_give_the_same_run(shared_data, tmp_path, monkeypatch, depth, first):
    # the q1 facts of the pools (v1 and flaw of every problem) are computed in forked
    # workers and learnt by the parent; the pools, their report and every output line must be
    # those of the one-process run, which asks each problem itself. Real MATH rows, so that
    # derived, irrational, large and inexact answers all come by
    from composition_rl.jobs.compose import run as run_mod
    from composition_rl.spc.symbolic import SymbolicComposer

    math = load_problems(shared_data / "train/math_train.json").problems[:1500]
    sci = load_problems(shared_data / first).problems if first else None
    cfg = ComposeConfig(depth=depth, seed=2, max_candidates=4000)
    one = run_compose(math, dataclasses.replace(cfg, workers=1), tmp_path / "one", first_pool=sci, progress=False)
    monkeypatch.setattr(run_mod, "_FACTS_MIN", 1)
    monkeypatch.setattr(run_mod, "_FACTS_CHUNK", 97)  # many tasks, out of step with everything else
    learnt = []
    real = SymbolicComposer.learn_pool_facts
    monkeypatch.setattr(SymbolicComposer, "learn_pool_facts",
                        lambda self, ps, facts: (learnt.extend(facts), real(self, ps, facts))[1])
    two = run_compose(math, dataclasses.replace(cfg, workers=2), tmp_path / "two", first_pool=sci, progress=False)
    assert len(learnt) == len(sci or math)  # asked once per problem of position 1's set, in the workers
    assert sum(not leads for leads, _, _ in learnt) > 0 and sum(bool(flaw) for _, _, flaw in learnt) > 0
    for name in ("composed.jsonl", "rejected.jsonl"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    strip = {"elapsed_s", "candidates_per_s"}
    assert {k: v for k, v in one.items() if k not in strip} == {k: v for k, v in two.items() if k not in strip}
    assert one["accepted"] > 0 and one["pool_preference"]["position_1"]["eligible"] > 0


@pytest.mark.slow
@pytest.mark.shared_data
def test_throughput_benchmark_composes_in_a_fresh_process(shared_data, tmp_path):
    # measured in the benchmark's own process, a compose's RSS was the parent's (probe, floor,
    # caches, the previous pair's problems); each compose runs in a child that reports its own
    # figures
    import re
    from pathlib import Path

    rows = json.loads((shared_data / "train/math_train.json").read_text())[:400]
    data = tmp_path / "math400.json"
    data.write_text(json.dumps(rows))
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "compose_throughput.py"
    r = subprocess.run([sys.executable, str(script), "--input", str(data), "--repeat", "2", "--workers", "1"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    pairs = re.findall(r"peak RSS parent (\d+) MB, largest worker (\d+) MB", r.stdout)
    assert len(pairs) == 2 and all(int(p) > 20 and int(w) == 0 for p, w in pairs), r.stdout  # one worker: no fork
    one = subprocess.run([sys.executable, str(script), "--input", str(data), "--workers", "1", "--one",
                          str(tmp_path / "one")], capture_output=True, text=True, timeout=600)
    child = json.loads(one.stdout.splitlines()[-1])
    stats = json.loads((tmp_path / "one" / "stats.json").read_text())
    assert child["candidates"] == stats["candidates"] > 0 and child["pools"] == stats["pools"]
    assert child["cpu_parent"] > 0 and child["rss_parent_mb"] > 20


def test_cross_domain_records_carry_each_parents_own_source(tmp_path):
    # the same question and answer in both files share an id but not source and metadata
    a = tmp_path / "setA.json"
    a.write_text(json.dumps([{"problem": "What is $2 + 3$?", "answer": "5"},
                             {"problem": "What is $10 - 4$?", "answer": "6"}]))
    b = tmp_path / "setB.json"
    b.write_text(json.dumps([{"problem": "What is $10 - 4$?", "answer": "6", "level": "B-level"},
                             {"problem": "Tom has $12$ apples and eats $5$. How many are left?", "answer": "7"}]))
    first, main = load_problems(a).problems, load_problems(b).problems
    cfg = ComposeConfig(depth=2, workers=1)
    run_compose(main, cfg, tmp_path / "out", first_pool=first, progress=False)
    rows = _read(tmp_path / "out/composed.jsonl")
    assert rows and all(r["metadata"]["parent_sources"] == ["setA", "setB"] for r in rows)
    _lines_are_records(tmp_path / "out/composed.jsonl", main, cfg, first)


def test_config_rejects_impossible_values():
    for bad in (dict(depth=1), dict(pool_size=0), dict(pool_sizes=(20,)), dict(max_candidates=0), dict(engine="magic")):
        with pytest.raises(ValueError):
            ComposeConfig(**bad)


def _contract(composed_rows, by_id, max_chars=8000):
    """Every accepted composition checks out against its own record and answer."""
    for row in composed_rows:
        c = Problem.from_dict(row)
        parents = [by_id[i] for i in c.parents]
        assert run_checks(c, parents, max_chars) is None, row["id"]
        # the answer of the chain follows: X is q1's answer (or the number its derivation reads
        # off it), Y = X - d equals the literal
        for lk, earlier in zip(c.links, parents):
            if lk.v1_derivation:
                v1 = derive(earlier.answer, earlier.question, Derivation.from_dict(dict(lk.v1_derivation)))
            else:
                v1 = parse_answer_value(earlier.answer).value
            assert sympy.simplify(v1 - sympy.sympify(lk.d_expr) - sympy.Rational(lk.v2_expr)) == 0


@pytest.mark.shared_data
def test_contract_on_real_math_depth2_sample(shared_data, tmp_path):
    res = load_problems(shared_data / "train/math_train.json")
    stats = run_compose(res.problems, ComposeConfig(depth=2, seed=0, max_candidates=3000), tmp_path, progress=False)
    assert stats["acceptance"] >= 0.55
    _contract(_read(tmp_path / "composed.jsonl"), _by_id(res.problems))


@pytest.mark.slow
@pytest.mark.shared_data
def test_contract_depth3_and_cross_domain(shared_data, tmp_path):
    math = load_problems(shared_data / "train/math_train.json").problems
    sci = load_problems(shared_data / "eval/minerva.json").problems
    s3 = run_compose(math, ComposeConfig(depth=3, seed=0, max_candidates=600), tmp_path / "d3", progress=False)
    assert s3["accepted"] > 300
    _contract(_read(tmp_path / "d3/composed.jsonl"), _by_id(math))
    sx = run_compose(math, ComposeConfig(depth=2, seed=0, max_candidates=600), tmp_path / "x", first_pool=sci, progress=False)
    rows = _read(tmp_path / "x/composed.jsonl")
    assert sx["accepted"] > 300
    sci_ids = {p.id for p in sci}
    assert all(r["parents"][0] in sci_ids and r["metadata"]["parent_sources"] == ["minerva", "math_train"] for r in rows)
    _contract(rows, _by_id(math, sci))
    _lines_are_records(tmp_path / "d3/composed.jsonl", math, ComposeConfig(depth=3, seed=0, max_candidates=600))
    _lines_are_records(tmp_path / "x/composed.jsonl", math, ComposeConfig(depth=2, seed=0, max_candidates=600), sci)


def test_exports_match_verl_and_trl_schemas(tmp_path):
    from composition_rl.jobs.export import export, instruction

    c = compose_problems([Q1, Q3], ComposeConfig(depth=2, pool_size=1), first_pool=[Q1]).accepted
    verl = pq.read_table(export(c + [Q2], "verl", tmp_path)).to_pylist()
    assert set(verl[0]) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    assert verl[0]["prompt"][0]["role"] == "user" and verl[0]["prompt"][0]["content"].endswith(instruction())
    assert "\\boxed{}" in instruction()
    from composition_rl.rollout.base import load_template, render_prompt

    # trainers see exactly the prompt that profiling and evaluation send
    assert verl[0]["prompt"][0]["content"] == render_prompt(load_template("boxed"), c[0].question)
    assert verl[0]["reward_model"] == {"style": "rule", "ground_truth": Q3.answer}
    assert verl[0]["extra_info"]["depth"] == 2 and verl[1]["extra_info"]["depth"] == 1
    trl = pq.read_table(export(c, "trl", tmp_path)).to_pylist()
    assert {"prompt", "answer"} <= set(trl[0]) and trl[0]["answer"] == "36"


def test_record_roundtrip():
    c = compose_problems([Q1, Q3], ComposeConfig(depth=2, pool_size=1), first_pool=[Q1]).accepted[0]
    assert Problem.from_dict(json.loads(json.dumps(c.to_dict()))) == c
    assert isinstance(c.links[0], Link)


def _crl(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "composition_rl.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_cli_compose_default_source_with_exports(tmp_path):
    r = _crl("compose", "--out", str(tmp_path / "o"), "--rg-size", "80", "--export", "verl,trl", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "accepted" in r.stdout
    for name in ("composed.jsonl", "rejected.jsonl", "input_rejects.jsonl", "stats.json", "verl.parquet", "trl.parquet"):
        assert (tmp_path / "o" / name).exists(), name
    stats = json.loads((tmp_path / "o/stats.json").read_text())
    assert {"candidates", "accepted", "rejected_by_reason", "elapsed_s", "funnel"} <= set(stats)


def test_cli_errors_say_what_and_where(tmp_path):
    r = _crl("compose", "--input", str(tmp_path / "nope.json"), "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "nope.json" in r.stderr and "no such file" in r.stderr
    r = _crl("compose", "--out", str(tmp_path / "o"), "--depth", "1")
    assert r.returncode == 2 and "depth=1" in r.stderr
    r = _crl("compose", "--out", str(tmp_path / "o"), "--pool-sizes", "20,abc")
    assert r.returncode == 2 and "abc" in r.stderr
    r = _crl("compose", "--out", str(tmp_path / "o"), "--export", "parquet-of-doom")
    assert r.returncode == 2 and "verl" in r.stderr


def test_compose_command_does_not_import_torch():
    code = (
        "import sys, argparse; from composition_rl.commands import compose as c; "
        "c.add_arguments(argparse.ArgumentParser()); import composition_rl.spc; "
        "print(sorted(m for m in ('torch', 'transformers', 'trl') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_pool_ablations_from_the_command_line(tmp_path):
    from composition_rl.jobs.compose.pipeline import parse_pool_sizes

    assert parse_pool_sizes("500,500") == (500, 500) and parse_pool_sizes("full,20") == (None, 20)
    probs = load_reasoning_gym(seed=0, scale=120).problems
    a = run_compose(probs, ComposeConfig(depth=2, pool_sizes=(30, 30), seed=0), tmp_path / "a", progress=False)
    b = run_compose(probs, ComposeConfig(depth=2, pool_sizes=(None, 5), seed=0), tmp_path / "b", progress=False)
    assert a["pools"] == [30, 30] and b["pools"] == [len(probs), 5]
    last = {json.loads(x)["parents"][-1] for x in open(tmp_path / "b/composed.jsonl")}
    assert len(last) <= 5  # full-first: only 5 distinct final problems, hence 5 distinct answers


# -- one composition, written once ---------------------------------------------------------
def test_the_composition_key_ignores_the_wording_and_names_but_not_the_place_or_offset():
    """Two records are one composition when they have the parents, replaced places, offsets
    (and v1 derivations) in common: the MATH depth-2 output held three pairs that differed only
    in the relation sentence ("Let $X$ denote the value you obtain above." against "Call the
    answer to this problem $X$.")."""
    from composition_rl.spc.base import composition_key

    rec = next(c for c in compose_problems([Q1, Q3], ComposeConfig(depth=2, pool_size=1), first_pool=[Q1]).accepted
               if c.parents == (Q1.id, Q3.id))
    link = rec.links[0]
    renamed = dataclasses.replace(link, x="U", y="W")
    reworded = dataclasses.replace(rec, links=(renamed,), question=rec.question.replace("$X$", "$U$")
                                   .replace("$Y$", "$W$") + " ")
    assert composition_key(reworded) == composition_key(rec)
    moved = dataclasses.replace(rec, links=(dataclasses.replace(link, v2_offset=link.v2_offset + 4),))
    other_d = dataclasses.replace(rec, links=(dataclasses.replace(link, d_expr="-3"),))
    swapped = dataclasses.replace(rec, parents=rec.parents[::-1])
    assert len({composition_key(r) for r in (rec, moved, other_d, swapped)}) == 4


def test_only_a_record_that_took_a_partner_is_keyed():
    """A record of its own drawn chain cannot repeat another (see took_partner); one whose
    q1 is a reserve partner can, and is keyed."""
    from composition_rl.spc.base import took_partner
    from composition_rl.spc.natural import Naturalness
    from composition_rl.spc.symbolic import SymbolicComposer

    own = next(c for c in compose_problems([Q1, Q3], ComposeConfig(depth=2, pool_size=1), first_pool=[Q1]).accepted
               if c.parents == (Q1.id, Q3.id))
    assert not took_partner(own, (Q1, Q3))
    q2 = Problem.new("How many positive divisors does $2400$ have?", "36")
    far = Problem.new("What is $1 + 1$?", "2")
    eng = SymbolicComposer(natural=Naturalness(max_q1=10_000))
    # 2403 gives 2400 an offset of 3 (a partner at 2400 itself would state a zero offset, never taken)
    eng.partners[0] = [Problem.new("What is $2402 + 1$?", "2403")]
    rec = eng.compose((far, q2), "c")
    assert rec.parents[0] != far.id and took_partner(rec, (far, q2))


@pytest.mark.shared_data
@pytest.mark.parametrize("sample", [None, 2500], ids=["product", "sample"])
def test_a_repeated_composition_is_rejected_in_its_candidates_place(shared_data, tmp_path, monkeypatch, sample):
    """The parent keeps the first record of each composition in candidate order and rejects
    the rest as ``duplicate`` rows placed where their candidates stand in rejected.jsonl; the
    counts add up and the link statistics count the kept records only. Made to bite: the key
    is coarsened to the later problem alone, so every later problem keeps one record. Run
    over the whole product (ranges in the workers) and a sample (chains from the parent),
    in-process and in two forked workers."""
    from composition_rl.jobs.compose import run as run_mod
    from composition_rl.jobs.compose.pools import candidate_id
    from composition_rl.jobs.compose.run import build_engine, engine_pools

    probs = load_problems(shared_data / "train/math_train.json").problems[:300]
    cfg = ComposeConfig(depth=2, pool_size=20, seed=0, workers=1, max_candidates=sample)
    plain = run_compose(probs, cfg, tmp_path / "plain", progress=False)
    assert plain["rejected_by_reason"].get("duplicate", 0) == 0
    plain_rows = [json.loads(x) for x in (tmp_path / "plain/composed.jsonl").read_text().splitlines()]

    from composition_rl.spc.base import composition_key

    partnered = sum(1 for r in plain_rows if "candidate_parents" in r["metadata"])
    keys = [composition_key(Problem.from_dict(r)) for r in plain_rows]
    assert len(set(keys)) == len(keys) and partnered > 0  # no repeat among 300 problems, and partners taken

    # coarsened: the key is the later problem alone, and every record is checked
    monkeypatch.setattr(run_mod, "repeat_key", lambda rec, chain: hash(rec.parents[-1]) & (2**64 - 1) or 1)
    # chunks small enough that these few thousand candidates go to two forked workers: the
    # parent, which composed nothing itself, then reads each repeat back from a worker's
    # spill file and composes it again
    monkeypatch.setattr(run_mod, "_CHUNK", 256)
    assert run_mod._worker_count(2, plain["candidates"]) == 2
    outs = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        stats = run_compose(probs, dataclasses.replace(cfg, workers=workers), out, progress=False)
        stats = {k: v for k, v in stats.items() if k not in ("elapsed_s", "candidates_per_s")}
        outs[workers] = ((out / "composed.jsonl").read_bytes(), (out / "rejected.jsonl").read_bytes(), stats)
    assert outs[1] == outs[2]
    composed, rejected, stats = outs[2]
    rows = [json.loads(x) for x in composed.decode().splitlines()]
    rej = [json.loads(x) for x in rejected.decode().splitlines()]

    # the candidates in order, and the first accepted one of each later problem
    pools = engine_pools(build_engine(cfg), probs, None, cfg)
    order = [candidate_id(ch) for ch in iter_candidates(pools, cfg.seed, sample)]
    at = {cid: i for i, cid in enumerate(order)}
    first: dict[str, dict] = {}
    for r in sorted(plain_rows, key=lambda r: at[r["metadata"]["candidate"]]):
        first.setdefault(r["parents"][-1], r)
    assert sorted(r["id"] for r in rows) == sorted(r["id"] for r in first.values())
    repeats = [r for r in rej if r["reason"] == "duplicate"]
    assert len(repeats) == len(plain_rows) - len(rows) > 100
    by_candidate = {r["metadata"]["candidate"]: r for r in plain_rows}
    assert all(r["stage"] == "duplicate" and r["detail"].endswith(f"parents {', '.join(by_candidate[r['id']]['parents'])}")
               for r in repeats)  # the record's own parents (a partner's, where one took a place)
    assert [at[r["id"]] for r in rej] == sorted(at[r["id"]] for r in rej)  # candidate order
    assert stats["accepted"] == len(rows) and stats["rejected"] == len(rej) == stats["candidates"] - len(rows)
    assert stats["rejected_by_reason"]["duplicate"] == stats["rejected_by_stage"]["duplicate"] == len(repeats)
    assert stats["funnel"][-1] == {"stage": "duplicate", "kept": len(rows)}
    kinds = stats["links"]["offset_kinds"]
    assert sum(v["count"] for v in kinds.values()) == len(rows)  # depth 2: one link a record
    assert sum(stats["links"]["dependence"].values()) == len(rows)


def test_every_engine_keeps_an_inexact_q1_out_of_the_lead_with_its_reason():
    from composition_rl.jobs.compose.run import build_engine
    from composition_rl.records import Problem
    from composition_rl.spc.llm import LLMComposeConfig

    two = Problem.new("What is the angular resolution of a single dish, in radians?", ["0.01", "0.02"])
    asked = Problem.new("Give the wavelength to two significant figures.", "9.6", metadata={"solution": "\\log 2"})
    q2 = Problem.new("What is $2+3$?", "5")
    from composition_rl.jobs.compose.pipeline import ComposeConfig

    llm = LLMComposeConfig(model="m", base_urls=("http://unused",))
    sym = build_engine(ComposeConfig(depth=2))
    engines = [sym] + [build_engine(ComposeConfig(depth=2, engine=n), llm_config=llm) for n in ("llm", "auto")]
    for eng in engines:
        assert not eng.eligible(two, 0, 2), eng
        assert eng.eligible(asked, 0, 2), eng  # the question asks for the rounding: X is defined
    rej = sym.compose([two, q2], "c")
    assert rej.reason == "q1_answers_disagree" and "['0.01', '0.02']" in rej.detail


def test_a_compose_holds_its_records_in_memory_only_in_export_batches(tmp_path, monkeypatch):
    """The executor streams: without exports no record is read back into a Problem (MATH depth
    2's 124,753 read back took the parent from ~100 MB to 552 MB), and with exports the
    exporter gets one batch at a time, never the whole set."""
    from composition_rl.jobs import export as exporters

    probs = load_reasoning_gym(seed=0, scale=120).problems
    cfg = ComposeConfig(depth=2, pool_size=10, seed=3)
    made = []
    real = Problem.from_dict.__func__
    monkeypatch.setattr(Problem, "from_dict", classmethod(lambda cls, d: made.append(1) or real(cls, d)))
    stats = run_compose(probs, cfg, tmp_path / "a", progress=False)
    assert stats["accepted"] > 10 and made == []
    sizes = []
    for name in ("verl", "trl"):
        fn = exporters.EXPORTERS.get(name)
        monkeypatch.setitem(exporters.EXPORTERS._items, name,
                            lambda ps, split="train", start=0, fn=fn: sizes.append(len(ps)) or fn(ps, split, start=start))
    monkeypatch.setattr(exporters.export, "__defaults__", ("train", 4))  # batches of 4 problems
    stats = run_compose(probs, cfg, tmp_path / "b", progress=False, exports=("verl", "trl"))
    assert sum(sizes) == 2 * stats["accepted"] and max(sizes) == 4
    rows = pq.read_table(tmp_path / "b" / "verl.parquet").to_pylist()
    composed = _read(tmp_path / "b" / "composed.jsonl")
    assert [r["extra_info"]["index"] for r in rows] == list(range(len(composed)))
    assert [r["extra_info"]["id"] for r in rows] == [c["id"] for c in composed]


# -- compositions of the default data that read as one problem ----------------------

_INSTRUCTION = re.compile(r"final answer|give only the result|do not include units|\\boxed", re.I)


def _plain(text: str) -> bool:
    """A problem that writes no LaTeX (read here by a rule of the test's own: no backslash, and
    every dollar a price before a digit)."""
    return "\\" not in text and all(text[i + 1 : i + 2].isdigit() for i, ch in enumerate(text) if ch == "$")


@pytest.fixture(scope="module")
def default_depth2():
    problems = load_reasoning_gym().problems
    res = compose_problems(problems, ComposeConfig(depth=2, pool_size=20, seed=0))
    return problems, res


def test_default_data_depth2_reads_as_one_problem(default_depth2):
    """Over the default depth-2 set: one answer instruction, at the end; the variable written as
    its problem writes numbers; no zero-offset link; no part whose answer is read off its text."""
    problems, res = default_depth2
    by_id = {p.id: p for p in problems}
    assert len(res.accepted) > 5000
    before, latex_y, zero, degenerate_parts, removed = [], [], [], [], 0
    for c in res.accepted:
        (lk,) = c.links
        q1, q2 = by_id[c.parents[0]], by_id[c.parents[1]]
        glue = find_glue(c.question, lk.x, lk.y)
        if _INSTRUCTION.search(c.question[: glue.start]):
            before.append(c.question)
        if _plain(q2.question) and f"${lk.y}$" in c.question[glue.end :]:
            latex_y.append(c.question)
        if Fraction(lk.d_expr) == 0:
            zero.append(c.question)
        if any(re.search(r"(?<![\d.])1 \* \d|\d \* 1(?![\d.])|[+-] 0(?![\d.])|numbers: (\d+), \1$", p.question)
               and p.answer in re.findall(r"-?\d+", p.question) for p in (q1, q2)):
            degenerate_parts.append(c.question)
        # what was taken out is recorded, and putting it back gives q1 byte for byte
        rows = c.metadata.get("instructions_removed", [])
        removed += bool(rows)
        assert restore_instructions(c.question[: glue.start], [r[1:] for r in rows]) == q1.question
        # the last part keeps its own instruction, at the end
        assert c.question.endswith(q2.question[-20:]) or lk.v2_offset + len(lk.v2_literal) > len(q2.question) - 20
    assert before == [], f"{len(before)} records ask for a final answer before the link, e.g. {before[:1]}"
    assert latex_y == [], f"{len(latex_y)} records write $Y$ in a plain-text problem, e.g. {latex_y[:1]}"
    assert zero == [], f"{len(zero)} records state a zero offset, e.g. {zero[:1]}"
    assert degenerate_parts == [], f"{len(degenerate_parts)} records have a part read off its text, e.g. {degenerate_parts[:1]}"
    assert removed > 1000  # products, chain_sum and gsm_symbolic q1s lose their instructions
    # the drops are counted with their reasons: the degenerate later problems among them
    assert res.by_reason().get("degenerate", 0) > 0
    assert len(res.accepted) + len(res.rejected) == res.candidates


def test_default_data_depth3_every_record_checks_out_with_middle_instructions_removed():
    problems = load_reasoning_gym(scale=120).problems
    res = compose_problems(problems, ComposeConfig(depth=3, pool_size=8, seed=0))
    by_id = {p.id: p for p in problems}
    middles = 0
    assert res.accepted
    for c in res.accepted:
        chain = [by_id[i] for i in c.parents]
        assert run_checks(c, chain) is None
        g1 = find_glue(c.question, c.links[0].x, c.links[0].y)
        g2 = find_glue(c.question, c.links[1].x, c.links[1].y, g1.end)
        assert not _INSTRUCTION.search(c.question[: g2.start]), c.question
        middles += any(r[0] == 2 for r in c.metadata.get("instructions_removed", []))
    assert middles > 0


def test_checks_refuse_an_unrecorded_or_false_instruction_removal(default_depth2):
    problems, res = default_depth2
    by_id = {p.id: p for p in problems}
    c = next(r for r in res.accepted if len(r.metadata.get("instructions_removed", [])) == 2)
    chain = [by_id[i] for i in c.parents]
    assert run_checks(c, chain) is None
    md = dict(c.metadata)
    # the removal not recorded: q1 reads as changed
    bare = dataclasses.replace(c, metadata={k: v for k, v in md.items() if k != "instructions_removed"})
    assert run_checks(bare, chain).reason == "q1_modified"
    # a sentence of the problem itself recorded as an instruction: refused by name
    q1 = chain[0].question
    cut = q1.index("?") + 1
    forged = c.question.replace(q1[:cut], "", 1)
    fake = dataclasses.replace(c, question=forged, metadata={**md, "instructions_removed": [[1, 0, q1[:cut], ""]]})
    assert run_checks(fake, chain).reason == "instructions_invalid"


def test_the_fast_writer_writes_the_removed_instructions_as_dumps_does():
    from composition_rl.spc.symbolic import SymbolicComposer

    q1 = Problem.new("Solve the following multiplication: 3 * 4. Give only the result as your final answer.", "12")
    q2 = Problem.new("A box holds 10 pens. How many pens do 3 boxes hold? Give the result as your final answer.", "30")
    eng = SymbolicComposer()
    rec = eng.compose((q1, q2), "c")
    assert rec.metadata["instructions_removed"] == [[1, 42, " Give only the result as your final answer.", ""]]
    assert rec.question.startswith("Solve the following multiplication: 3 * 4.\n\n")
    assert rec.question.endswith("Give the result as your final answer.")  # the last part keeps its own
    assert eng.record_json(rec, (q1, q2)) == dumps(rec.to_dict())
    assert Problem.from_dict(json.loads(eng.record_json(rec, (q1, q2)))) == rec


def test_leftovers_of_a_dead_run_are_removed_and_said_through_logging(tmp_path, caplog):
    from composition_rl.jobs.compose.run import lock_output

    out = tmp_path / "o"
    out.mkdir()
    (out / ".composed.jsonl.x.tmp").write_text("dead")
    with caplog.at_level("INFO", logger="composition_rl.jobs.compose.run"), lock_output(out):
        pass
    assert not (out / ".composed.jsonl.x.tmp").exists()
    said = [r.getMessage() for r in caplog.records if r.name == "composition_rl.jobs.compose.run"]
    assert said == [f"note: removed 1 leftover(s) of an interrupted run in {out}: .composed.jsonl.x.tmp"]
