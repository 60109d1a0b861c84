"""crl browse without a browser: view detection, the diff split on real MATH compositions,
sampling, determinism and errors. The page itself is tested in Chromium in
tests/test_browse_page.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from composition_rl.io.readers import load_problems
from composition_rl.jobs.browse import BrowseConfig, build_report, collect_report, detect, find_runs
from composition_rl.jobs.browse.views import _token_at, split_composed
from composition_rl.jobs.compose import ComposeConfig, run_compose

FIXTURES = Path(__file__).parent / "data" / "browse"


@pytest.fixture(scope="module")
def math_run(shared_data, tmp_path_factory):
    """A real compose run on a MATH sample (the first 3000 candidates of the paper's setting)."""
    res = load_problems(shared_data / "train/math_train.json")
    out = tmp_path_factory.mktemp("math_d2")
    run_compose(res.problems, ComposeConfig(depth=2, pool_size=20, seed=0, max_candidates=3000), out,
                input_rejects=res.rejects, progress=False)
    return out, {p.id: p for p in res.problems}


def _rows(path):
    return [json.loads(line) for line in open(path, encoding="utf-8")]


@pytest.mark.shared_data
def test_every_math_record_splits_into_its_parents_exact_texts(math_run):
    """The page rebuilds each prompt from parent texts and glues; the parents it shows must be
    the input problems themselves, the literal at the link's offset."""
    out, by_id = math_run
    data = collect_report(out)["sections"][0]["data"]
    rows = {r["id"]: r for r in _rows(out / "composed.jsonl")}
    assert data["records_total"] == len(rows) == data["stats"]["accepted"]
    # a value replaced in several places (Link.v2_also) is shown whole; every other record splits
    multi = sum(1 for r in rows.values() if any(lk.get("v2_also") for lk in r["links"]))
    assert data["records_whole"] == multi
    P, G = data["problems"], data["glues"]
    for rec in data["records"]:
        row = rows[rec["id"]]
        if "text" in rec:  # shown whole: the composed question itself, verbatim
            assert any(lk.get("v2_also") for lk in row["links"]) and rec["text"] == row["question"]
            continue
        texts = [P[i][0] for i in rec["p"]]
        assert [P[i][1] for i in rec["p"]] == row["parents"]
        assert texts == [by_id[pid].question for pid in row["parents"]]
        # the page's rebuild (browse.js composeModel.text), done here in Python
        lk = row["links"][0]
        orig, off = texts[1], lk["v2_offset"]
        assert orig[off:off + len(lk["v2"])] == lk["v2"]
        rebuilt = f"{texts[0]}\n\n{G[rec['g'][0]]}\n\n{orig[:off]}{rec['t'][0]}{orig[off + len(lk['v2']):]}"
        assert rebuilt == row["question"]


@pytest.mark.parametrize(
    "seg, off, expected",
    [
        # prose literal: "costs 6 euros" -> "costs $Y$ euros"
        ("If the cake costs $Y$ euros", 18, "$Y$"),
        # math mode before a bracket: "3(x+1)" -> "Y \cdot (x+1)" (spc.variable_token)
        ("Solve $Y \\cdot (x+1) = 4$.", 7, "Y \\cdot "),
        # math mode, a plain token even though " \cdot " follows (no bracket after it)
        ("Find $Y \\cdot 4$.", 6, "Y"),
        ("Find $x^2 - 6x + y^2 = Y$.", 23, "Y"),
        ("Find $x = 2$.", 6, None),
    ],
)
def test_token_at_follows_the_composer_token_rule(seg, off, expected):
    assert _token_at(seg, off, "Y") == expected


def test_split_refuses_a_text_without_the_spc_shape():
    q = "What is $2+3$?\n\nSo X is that. Y is 2 less.\n\nWhat is $Y+1$?"
    assert split_composed(q, [{"x": "X", "y": "Y", "v2": "3", "v2_offset": 9}]) is None


@pytest.mark.shared_data
def test_a_large_run_is_sampled_by_id_whatever_the_file_order(math_run, tmp_path):
    out, _ = math_run
    rev = tmp_path / "rev"
    shutil.copytree(out, rev)
    lines = (out / "composed.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    (rev / "composed.jsonl").write_text("".join(reversed(lines)), encoding="utf-8")
    cfg = BrowseConfig(max_records=100, max_rejects=7)
    a = collect_report(out, cfg)["sections"][0]["data"]
    b = collect_report(rev, cfg)["sections"][0]["data"]
    assert len(a["records"]) == 100 and a["records_total"] == len(lines)
    assert {r["id"] for r in a["records"]} == {r["id"] for r in b["records"]}
    assert len(a["rejects"]) == 7 and a["rejects_total"] == a["stats"]["rejected"] + a["stats"]["input_rejects"]
    # the reason counts are over every reject, not the sample
    assert sum(n for _, _, n in a["rejects_by"]) == a["rejects_total"]
    # the tables hold only what the sampled records use
    used = {i for r in a["records"] for i in r["p"]}
    assert used == set(range(len(a["problems"])))


@pytest.mark.shared_data
def test_same_run_same_bytes(math_run, tmp_path):
    out, _ = math_run
    a = build_report(out, tmp_path / "a.html").read_bytes()
    b = build_report(out, tmp_path / "b.html").read_bytes()
    assert a == b
    assert len(a) < 2_000_000


def test_views_are_found_by_their_files_nested_as_in_demo(tmp_path):
    for name in ("profile", "eval", "train"):
        shutil.copytree(FIXTURES / name, tmp_path / "run" / name)
    (tmp_path / "run" / "train" / "checkpoints" / "checkpoint-1").mkdir(parents=True)
    shutil.copy(FIXTURES / "train" / "metrics.jsonl", tmp_path / "run" / "train" / "checkpoints" / "checkpoint-1")
    found = find_runs(tmp_path / "run")
    assert [(p.name, v) for p, v in found] == [("eval", ["eval"]), ("profile", ["profile"]), ("train", ["train"])]
    assert detect(tmp_path) == []


def test_profile_eval_train_data_match_their_files():
    prof = collect_report(FIXTURES / "profile")["sections"][0]["data"]
    rows = _rows(FIXTURES / "profile" / "profile.jsonl")
    assert prof["prompts"] == len(rows)
    for band in ("solve_all", "solve_none", "goldilocks"):
        assert prof["bands"].get(band, 0) == sum(r["class"] == band for r in rows)
    ev = collect_report(FIXTURES / "eval")["sections"][0]["data"]
    results = json.loads((FIXTURES / "eval" / "results.json").read_text())
    assert ev["results"] == results
    for name, m in results["benchmarks"].items():
        h = ev["hists"][name]
        assert h["prompts"] == m["problems"]
        assert h["bands"].get("solve_all", 0) / h["prompts"] == pytest.approx(m["solve_all"])
    tr = collect_report(FIXTURES / "train")["sections"][0]["data"]
    assert [s["step"] for s in tr["steps"]] == [r["step"] for r in _rows(FIXTURES / "train" / "metrics.jsonl")]
    assert tr["transitions"] == _rows(FIXTURES / "train" / "transitions.jsonl")


def test_errors_name_the_folder_file_and_line(tmp_path):
    with pytest.raises(ValueError, match="no run found.*compose: stats.json, composed.jsonl"):
        collect_report(tmp_path)
    with pytest.raises(FileNotFoundError):
        collect_report(tmp_path / "missing")
    run = tmp_path / "t"
    shutil.copytree(FIXTURES / "train", run)
    good = (run / "metrics.jsonl").read_text()
    (run / "metrics.jsonl").write_text(good + '{"step": 99, "solve_al')  # torn last line: a run still writing
    assert len(collect_report(run)["sections"][0]["data"]["steps"]) == len(good.splitlines())
    (run / "metrics.jsonl").write_text("not json\n" + good)
    with pytest.raises(ValueError, match=r"metrics.jsonl:1: not a JSON line"):
        collect_report(run)
    with pytest.raises(ValueError, match="max_records"):
        BrowseConfig(max_records=-1)


def test_cli_writes_the_page_and_refuses_a_non_run(tmp_path):
    env_py = [sys.executable, "-m", "composition_rl.cli", "browse"]
    r = subprocess.run([*env_py, str(FIXTURES / "train"), "--out", str(tmp_path / "t.html")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    html = (tmp_path / "t.html").read_text()
    assert html.startswith("<!doctype html>") and "uPlot" in html and 'id="crl-data"' in html
    r = subprocess.run([*env_py, str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 2 and "no run found" in r.stderr


def test_browse_command_does_not_import_torch():
    code = ("import sys, composition_rl.commands.browse, composition_rl.jobs.browse; "
            "sys.exit(int('torch' in sys.modules or 'transformers' in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.shared_data
def test_a_record_without_the_spc_shape_is_embedded_whole(math_run, tmp_path):
    """An LLM rephrase (v2_offset -1) has no diff: the page gets its text as is."""
    out, _ = math_run
    run = tmp_path / "llm"
    run.mkdir()
    shutil.copy(out / "stats.json", run)
    row = _rows(out / "composed.jsonl")[0]
    row["links"][0]["v2_offset"] = -1
    row["engine"] = "llm"
    (run / "composed.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    data = collect_report(run)["sections"][0]["data"]
    assert data["records_whole"] == 1
    (rec,) = data["records"]
    assert rec["text"] == row["question"] and "g" not in rec
    assert [data["problems"][i][1] for i in rec["p"]] == row["parents"]


def test_browse_and_the_plots_give_each_band_one_colour():
    """browse.js drew solve_all green, the training plot red, the profile histogram blue."""
    import re

    from composition_rl.colours import COLOURS

    js = (Path(__file__).resolve().parents[1] / "src" / "composition_rl" / "jobs" / "browse" / "assets" / "browse.js").read_text()
    table = re.search(r"const COLORS = \{(.*?)\};", js, re.S).group(1)
    assert dict(re.findall(r"(\w+): \"(#[0-9a-f]{6})\"", table)) == COLOURS


def test_the_solve_rate_plot_keeps_its_legend_off_the_curves_in_the_browse_colours(tmp_path):
    """The legend sat at the right of the panel, over the depth-2 stage's curves."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.colors import to_hex

    from composition_rl.colours import COLOURS
    from composition_rl.io.files import atomic_write_jsonl
    from composition_rl.jobs.train.metrics import solve_rates_figure

    rows = [{"step": s, "depth": 1 + s // 10, "solve_all": s / 20, "solve_none": 1 - s / 20, "informative": 0.5,
             "reward_mean": s / 20} for s in range(20)]
    atomic_write_jsonl(tmp_path / "m.jsonl", rows)
    fig = solve_rates_figure(tmp_path / "m.jsonl", [{"step": 9, "to_stage": "depth 2"}])
    ax = fig.axes[0]
    fig.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    assert not legend.overlaps(ax.get_window_extent())
    assert {ln.get_label(): to_hex(ln.get_color()) for ln in ax.get_lines() if not ln.get_label().startswith("_")} == {
        k: COLOURS[k] for k in ("solve_all", "solve_none", "informative")}
