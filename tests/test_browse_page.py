"""The page crl browse writes, opened in a real headless Chromium (Debian's ``chromium``
driven by Playwright; no browser download, background networking off). `make test`
installs chromium when it is missing; elsewhere these tests skip with the reason."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

from composition_rl.io.readers import load_problems
from composition_rl.jobs.browse import build_report
from composition_rl.jobs.compose import ComposeConfig, run_compose

CHROMIUM = os.environ.get("CRL_CHROMIUM", "/usr/bin/chromium")
FIXTURES = Path(__file__).parent / "data" / "browse"
PAGE = 25  # records and rejects per page (browse.js PAGE)

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')")
    if not Path(CHROMIUM).is_file():
        pytest.skip(f"no Chromium at {CHROMIUM} (make test installs Debian's chromium; CRL_CHROMIUM=PATH for another)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                              args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield b
        b.close()


def _open(browser, path: Path):
    """Open ``path`` and wait for the script to finish; returns (page, requested URLs, errors)."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    requests, errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(path.resolve().as_uri())
    page.wait_for_selector("body[data-ready]", timeout=60_000)
    assert page.get_attribute("body", "data-ready") == "1", page.inner_text("#app")[:2000]
    return page, requests, errors


@pytest.fixture(scope="module")
def math_page(shared_data, tmp_path_factory, browser):
    """A real compose run on a MATH sample, its report, and the page open in Chromium."""
    res = load_problems(shared_data / "train/math_train.json")
    out = tmp_path_factory.mktemp("math_d2")
    run_compose(res.problems, ComposeConfig(depth=2, pool_size=20, seed=0, max_candidates=3000), out,
                input_rejects=res.rejects, progress=False)
    html = build_report(out, out / "report.html")
    page, requests, errors = _open(browser, html)
    yield out, page, requests, errors, {p.id: p for p in res.problems}
    page.close()


@pytest.mark.shared_data
def test_funnel_numbers_match_stats_json(math_page):
    out, page, *_ = math_page
    stats = json.loads((out / "stats.json").read_text())
    shown = {row.get_attribute("data-stage"): int(row.query_selector("td.kept").inner_text().replace(",", ""))
             for row in page.query_selector_all("table.funnel tr[data-stage]")}
    assert shown == {f["stage"]: f["kept"] for f in stats["funnel"]}
    assert page.query_selector(".funnel-chart canvas") is not None  # drawn by uPlot
    lead = page.inner_text(".view-compose .lead")
    assert f"{stats['accepted']:,} of {stats['candidates']:,} candidates accepted" in lead


@pytest.mark.shared_data
def test_filtering_by_a_reason_shows_exactly_that_many_rejects(math_page):
    out, page, *_ = math_page
    stats = json.loads((out / "stats.json").read_text())
    rows = [json.loads(line) for line in open(out / "rejected.jsonl", encoding="utf-8")]
    expected = {(next(r["stage"] for r in rows if r["reason"] == reason), reason): n
                for reason, n in stats["rejected_by_reason"].items()}
    # input rows set aside by the reader: one stage with several reasons
    inputs = [json.loads(line)["reason"] for line in open(out / "input_rejects.jsonl", encoding="utf-8")]
    assert len(inputs) == stats["input_rejects"] and len(set(inputs)) > 1
    expected.update({("input", reason): inputs.count(reason) for reason in set(inputs)})
    for (stage, reason), n in expected.items():
        page.select_option("select.rej-reason", f"{stage}\x1f{reason}")
        assert int(page.inner_text(".rej-count .n").replace(",", "")) == n
        seen = []
        for i in range(math.ceil(n / PAGE)):  # walk every page of the list
            seen += page.eval_on_selector_all("table.rejects tr.reject td.reason", "els => els.map(e => e.textContent)")
            if i + 1 < math.ceil(n / PAGE):
                page.click(".rejects-part .pager button:has-text('next')")
        assert seen == [reason] * n
    page.select_option("select.rej-reason", "")


@pytest.mark.shared_data
def test_search_finds_a_known_record_and_the_diff_marks_the_literal_at_its_offset(math_page):
    out, page, requests, errors, by_id = math_page
    rows = [json.loads(line) for line in open(out / "composed.jsonl", encoding="utf-8")]
    known = rows[len(rows) // 2]
    q2 = by_id[known["parents"][1]].question
    needle = max(q2.split("\n"), key=len)[:40]  # a phrase of its second problem
    page.fill("input.rec-search", needle)
    page.wait_for_function(
        "n => document.querySelector('.rec-count .n').textContent === String(n)",
        arg=sum(needle.lower() in r["question"].lower() for r in rows) or -1,
    )
    page.click(f".rec-list .rec[data-id='{known['id']}']")
    page.wait_for_selector(f".rec-detail[data-id='{known['id']}']")
    lk = known["links"][0]
    orig = page.query_selector(".rec-detail .diff[data-link='1'] pre.orig")
    # the left pane is the input problem as it was, the literal highlighted at v2_offset
    assert orig.inner_text() == q2
    mark = orig.query_selector("mark.lit")
    assert mark.inner_text() == lk["v2"]
    before = orig.evaluate("(pre) => { const r = document.createRange(); r.setStart(pre, 0);"
                           " r.setEndBefore(pre.querySelector('mark.lit')); return r.toString().length; }")
    assert before == lk["v2_offset"]
    # the right pane is the text as composed, the variable where the literal was
    subst = page.query_selector(".rec-detail .diff[data-link='1'] pre.subst")
    assert subst.query_selector("mark.tok").inner_text().strip() in (lk["y"], f"${lk['y']}$", f"{lk['y']} \\cdot")
    assert page.text_content(".rec-detail details pre.composed") == known["question"]  # collapsed: text_content
    page.fill("input.rec-search", "")


@pytest.mark.shared_data
def test_neighbours_link_to_records_of_the_same_pool_member(math_page):
    out, page, *_ = math_page
    rows = [json.loads(line) for line in open(out / "composed.jsonl", encoding="utf-8")]
    first = page.get_attribute(".rec-detail", "data-id")
    rec = next(r for r in rows if r["id"] == first)
    same_q1 = {r["id"] for r in rows if r["parents"][0] == rec["parents"][0]} - {first}
    links = page.eval_on_selector_all(".rec-detail .neighbours a.nb", "els => els.map(e => e.textContent)")
    assert links and set(links[: min(12, len(same_q1))]) <= same_q1
    page.click(".rec-detail .neighbours a.nb >> nth=0")
    assert page.get_attribute(".rec-detail", "data-id") == links[0]


@pytest.mark.shared_data
def test_the_page_makes_no_network_request_and_no_error(math_page, tmp_path):
    out, page, requests, errors, _ = math_page
    assert requests == [(out / "report.html").resolve().as_uri()]
    assert errors == []
    page.screenshot(path=str(tmp_path / "compose.png"))
    assert (tmp_path / "compose.png").stat().st_size > 10_000


def test_profile_eval_and_train_views_render_their_numbers(browser, tmp_path):
    run = tmp_path / "run"
    for name in ("profile", "eval", "train"):
        shutil.copytree(FIXTURES / name, run / name)
    page, requests, errors = _open(browser, build_report(run, tmp_path / "r.html"))
    assert requests == [(tmp_path / "r.html").resolve().as_uri()] and errors == []
    assert page.eval_on_selector_all("section.view", "els => els.map(e => e.dataset.view)") == ["eval", "profile", "train"]
    # profile: the band chips count the rows of profile.jsonl
    rows = [json.loads(line) for line in open(FIXTURES / "profile" / "profile.jsonl", encoding="utf-8")]
    chips = page.inner_text(".view-profile .bands")
    assert f"solve_all {sum(r['class'] == 'solve_all' for r in rows)} " in chips
    assert f"band {sum(r['class'] == 'goldilocks' for r in rows)} " in chips
    assert page.query_selector(".view-profile .chart canvas") is not None
    # eval: one table row per benchmark plus the average, avg@n as in results.json
    res = json.loads((FIXTURES / "eval" / "results.json").read_text())
    n = res["n"]
    cells = page.eval_on_selector_all(".view-eval table.bench tbody tr",
                                      "trs => trs.map(tr => [...tr.children].map(td => td.textContent))")
    assert [c[0] for c in cells] == [*res["benchmarks"], "average"]
    for c, m in zip(cells, res["benchmarks"].values()):
        assert c[2] == f"{100 * m[f'avg@{n}']:.1f}%"
    if "compositional" in res:
        assert page.query_selector_all(".view-eval table.comp tbody tr")
    # train: three charts, one row per transition
    trans = [json.loads(line) for line in open(FIXTURES / "train" / "transitions.jsonl", encoding="utf-8")]
    assert len(page.query_selector_all(".view-train .chart canvas")) == 3
    assert len(page.query_selector_all(".view-train table.transitions tbody tr")) == len(trans)
    page.screenshot(path=str(tmp_path / "views.png"), full_page=True)
    page.close()
