"""The top-level API: a few names, each documented with an example, loaded on first use;
LLM composition in memory gives the records the file-writing executor writes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fakes.composer_script import good_composer
from fakes.openai_server import FakeOpenAIServer

import composition_rl as crl
from composition_rl.chat.openai import OpenAIChat
from composition_rl.jobs.compose import ComposeConfig, compose_problems
from composition_rl.jobs.compose.with_model import compose_candidates
from composition_rl.spc.llm import LLMComposeConfig

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"

# (question, answer) from MATH train
MATH = [
    ("One and one-half of what number is 30?", "20"),
    ("What is the degree measure of an interior angle of a regular pentagon?", "108"),
    ("In a particular right triangle, the two legs have lengths of 40 inches and 42 inches. "
     "What is the area of the triangle?", "840"),
    ("Find the area of a triangle with side lengths 8, 9, and 9.", "4\\sqrt{65}"),
    ("What is the distance, in units, between the points $(-3, -4)$ and $(4, -5)$? Express your answer "
     "in simplest radical form.", "5\\sqrt{2}"),
]
PROBLEMS = [crl.Problem.new(q, a, source="math_train") for q, a in MATH]


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})


def test_importing_the_package_loads_no_heavy_dependency():
    heavy = ["torch", "transformers", "openai", "trl", "httpx", "sympy", "math_verify", "pyarrow",
             "composition_rl.api", "composition_rl.spc"]
    r = _python("import sys, composition_rl as crl; crl.__all__; crl.__version__\n"
                f"print([m for m in {heavy!r} if m in sys.modules])")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_every_name_resolves_and_the_verbs_still_import_nothing_heavy():
    r = _python("import sys, composition_rl as crl\n"
                "objs = [getattr(crl, n) for n in crl.__all__]\n"
                "print([m for m in ('torch', 'transformers', 'openai', 'trl') if m in sys.modules])")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_the_names_are_few_and_each_has_a_docstring_with_an_example():
    assert len(crl.__all__) <= 20  # the verbs (compose ... probe, refresh), their configs, the record types
    assert set(crl.__all__) == set(crl._EXPORTS) | {"__version__"}
    for name in crl.__all__:
        if name == "__version__":
            continue
        obj = getattr(crl, name)
        doc = obj.__doc__ or ""
        assert doc.strip(), name
        if callable(obj) and not isinstance(obj, type):
            assert ">>>" in doc, f"{name}: no example in its docstring"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        crl.nope  # noqa: B018


def test_a_submodule_imported_first_does_not_replace_its_verb():
    r = _python("import composition_rl.jobs.compose.pipeline, composition_rl.grading.verifier, composition_rl.jobs.profile\n"
                "import composition_rl.jobs.probe\n"
                "import composition_rl as crl\n"
                "from composition_rl.jobs.compose import ComposeConfig\n"
                "print(callable(crl.compose), callable(crl.verify), callable(crl.profile), callable(crl.probe),\n"
                "      ComposeConfig.__name__)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "True", "True", "ComposeConfig"]


def test_py_typed_ships_with_the_package():
    assert (SRC / "composition_rl" / "py.typed").is_file()
    text = (REPO / "pyproject.toml").read_text()
    (line,) = [ln for ln in text.splitlines() if ln.startswith("composition_rl = [")]
    assert '"py.typed"' in line


def test_compose_symbolic_is_the_in_memory_pipeline():
    got = crl.compose(PROBLEMS, depth=2, seed=3)
    want = compose_problems(PROBLEMS, ComposeConfig(depth=2, seed=3))
    assert [p.to_dict() for p in got.accepted] == [p.to_dict() for p in want.accepted]
    assert got.accepted and got.candidates == want.candidates
    with pytest.raises(ValueError, match="uses no model"):
        crl.compose(PROBLEMS, llm=LLMComposeConfig(base_urls=("http://x",), model="m"))
    with pytest.raises(TypeError, match=r"\['detph'\].*'depth'"):
        crl.compose(PROBLEMS, detph=3)
    with pytest.raises(ValueError, match="depth=1"):
        crl.compose(PROBLEMS, depth=1)


@pytest.mark.parametrize("engine", ["llm", "auto"])
def test_compose_with_a_model_in_memory_gives_the_records_the_executor_writes(engine, tmp_path):
    with FakeOpenAIServer(good_composer) as srv:
        llm = LLMComposeConfig(base_urls=(srv.url,), model="fake-model", concurrency=4, no_cache=True)
        got = crl.compose(PROBLEMS, depth=2, engine=engine, llm=llm)
        calls = srv.requests
        backend = OpenAIChat([srv.url], "fake-model")
        from composition_rl.jobs.compose.pools import iter_candidates
        from composition_rl.jobs.compose.run import build_engine, engine_pools

        cfg = ComposeConfig(depth=2, engine=engine)
        pools = engine_pools(build_engine(cfg, llm_config=llm, backend=backend), PROBLEMS, None, cfg)
        compose_candidates(iter_candidates(pools, cfg.seed, None), tmp_path, llm, engine=engine, backend=backend,
                           progress=False)
    written = [json.loads(x) for x in (tmp_path / "composed.jsonl").read_text().splitlines()]
    rejected = [json.loads(x) for x in (tmp_path / "rejected.jsonl").read_text().splitlines()]
    assert [p.to_dict() for p in got.accepted] == written
    assert got.rejected == rejected
    assert got.candidates == len(written) + len(rejected) == 20
    assert len(got.accepted) >= 5 and calls > 0  # the two paths agree on sets that are not trivial


@pytest.mark.parametrize("engine", ["llm", "auto"])
def test_compose_with_a_model_works_where_an_event_loop_already_runs(engine):
    """A Jupyter cell runs inside an event loop: asyncio.run refuses there, so the sync API
    must not call it on the caller's thread."""
    import asyncio

    with FakeOpenAIServer(good_composer) as srv:
        llm = LLMComposeConfig(base_urls=(srv.url,), model="fake-model", concurrency=4, no_cache=True)
        plain = crl.compose(PROBLEMS, depth=2, engine=engine, llm=llm)

        async def cell():
            return crl.compose(PROBLEMS, depth=2, engine=engine, llm=llm)

        in_loop = asyncio.run(cell())
    assert [p.to_dict() for p in in_loop.accepted] == [p.to_dict() for p in plain.accepted]
    assert in_loop.rejected == plain.rejected and len(plain.accepted) >= 5


def test_compose_with_a_model_and_an_endpoint_that_is_down_raises_instead_of_rejecting():
    from composition_rl.chat.base import ChatError

    llm = LLMComposeConfig(base_urls=("http://127.0.0.1:9/v1",), model="m", max_retries=0, timeout_s=2.0)
    with pytest.raises(ChatError, match="candidates got no answer") as e:
        crl.compose(PROBLEMS[:2], depth=2, engine="llm", llm=llm)
    assert e.value.transient


def test_verify_and_score_read_problems_forms_and_conversations():
    minerva = crl.Problem.new("Preamble: ...", ["6630.65", "6630"])
    assert crl.verify("so $\\boxed{6630}$", minerva).correct
    assert crl.verify([{"role": "assistant", "content": "\\boxed{6630.65}"}], "6630.65").score == 1.0
    assert crl.score(["\\boxed{1}", "no answer", "\\boxed{2}"], [["1"], "1", None]) == [1.0, 0.0, None]
    with pytest.raises(ValueError, match="no accepted answer"):
        crl.verify("\\boxed{1}", [])
    with pytest.raises(ValueError, match="2 completions but 1"):
        crl.score(["a", "b"], ["1"])


def test_profile_through_an_openai_compatible_endpoint(tmp_path):
    def policy(body):  # a "model" that always answers 20
        return ["Halving 30 gives 20. \\boxed{20}"] * int(body.get("n") or 1)

    with FakeOpenAIServer(policy) as srv:
        summary = crl.profile(PROBLEMS, tmp_path / "p", base_url=srv.url, model="fake-model",
                              config=crl.ProfileConfig(n=2))
    assert summary["prompts"] == 5 and summary["counts"]["solve_all"] == 1 and summary["counts"]["solve_none"] == 4
    with pytest.raises(ValueError, match="go with a backend name"):
        crl.profile(PROBLEMS, tmp_path / "q", object(), model="m")


def test_profile_and_probe_pick_a_backend_alike_and_take_decoding_settings(tmp_path):
    """profile defaulted to the openai backend (a local model then failed asking for a URL),
    probe to auto; max_tokens= went to the backend, which ignored it; SamplingConfig, which
    ProfileConfig and ProbeConfig take, was not importable from the package."""
    import inspect

    from fakes.rollout_tiny_qwen import build_tiny_qwen

    assert crl.SamplingConfig(max_tokens=8).max_tokens == 8
    assert (inspect.signature(crl.profile).parameters["backend"].default
            == inspect.signature(crl.probe).parameters["backend"].default == "auto")
    tiny = build_tiny_qwen(tmp_path / "tiny")
    summary = crl.profile(PROBLEMS[:2], tmp_path / "p", model=str(tiny), max_tokens=6, device="cpu",
                          config=crl.ProfileConfig(n=2))
    assert summary["prompts"] == 2
    run = json.loads((tmp_path / "p" / "run.json").read_text())
    assert run["backend"] == "hf" and run["sampling"]["max_tokens"] == 6, run
    rows = [json.loads(x) for x in (tmp_path / "p" / "profile.jsonl").read_text().splitlines()]
    assert all(r["mean_tokens"] <= 6 for r in rows)
    with pytest.raises(TypeError, match="max_tokens"):
        crl.profile(PROBLEMS[:2], tmp_path / "q", model=str(tiny), max_tokens=6,
                    config=crl.ProfileConfig(sampling=crl.SamplingConfig(max_tokens=9)))


def test_probe_is_exported_with_its_config():
    from composition_rl.api import probe
    from composition_rl.jobs.probe import ProbeConfig

    assert {"probe", "ProbeConfig"} <= set(crl.__all__)
    assert crl.probe is probe and crl.ProbeConfig is ProbeConfig


class ScriptedSolver:
    """A rollout backend (as in test_probe.py) that answers each withheld problem with the
    planned answer, and counts the prompts it was asked."""

    name = "scripted"

    def __init__(self, plan: dict[str, str]):
        self.plan = plan  # withheld question -> the reply's boxed answer
        self.prompts: list[str] = []

    def generate(self, prompts, n, sampling):
        from composition_rl.rollout.base import Completion

        self.prompts += prompts
        return [[Completion(f"So the answer is $\\boxed{{{self.reply(p)}}}$.", tokens=8)] * n for p in prompts]

    def reply(self, prompt: str) -> str:
        return next(a for q, a in self.plan.items() if q.strip() in prompt)

    def close(self):
        pass


def test_probe_rejects_a_guessable_record_keeps_one_that_needs_q1_and_resumes(tmp_path):
    from composition_rl.io.identity import RunMismatch
    from composition_rl.jobs.probe import withheld_question

    seen: dict[str, crl.Problem] = {}  # one record per later problem: each withheld problem is one record's
    for rec in crl.compose(PROBLEMS, depth=2, seed=0).accepted:
        seen.setdefault(rec.parents[-1], rec)
    records = list(seen.values())
    assert len(records) >= 3
    guessable = records[0]  # the solver reaches its answer from the later problem alone
    plain = crl.Problem.new("What is $2+2$?", "4")  # not composed: kept, unprobed
    plan = {withheld_question(r): (r.answer if r is guessable else "-987654") for r in records}
    solver = ScriptedSolver(plan)

    def respond(body):
        return [f"So $\\boxed{{{solver.reply(body['messages'][-1]['content'])}}}$."] * int(body.get("n") or 1)

    out = tmp_path / "probe"
    with FakeOpenAIServer(respond) as srv:
        res = crl.probe([*records, plain], out, base_url=srv.url, model="fake-model", config=crl.ProbeConfig(k=2))
        asked = srv.requests
        again = crl.probe([*records, plain], out, base_url=[srv.url], model="fake-model",
                          config=crl.ProbeConfig(k=2, tau=1.0))
        assert srv.requests == asked  # the folder resumes: nothing asked twice
        with pytest.raises(RunMismatch):  # another k into the same folder
            crl.probe(records, out, base_url=srv.url, model="fake-model", config=crl.ProbeConfig(k=3))
    assert asked > 0
    assert [row["id"] for row in res.rejected] == [guessable.id]
    row = res.rejected[0]
    assert (row["stage"], row["reason"], row["pass_rate"], row["correct"], row["k"]) == (
        "probe", "guessable", 1.0, 2, 2)
    assert [p.id for p in res.kept] == [r.id for r in records[1:]] + [plain.id]  # the ones that need q1
    assert res.unprobed == [plain.id]
    assert len(res.kept) + len(res.rejected) == len(records) + 1
    s = res.summary
    assert (s["records"], s["probed"], s["unprobed"], s["rejected_guessable"], s["kept"]) == (
        len(records) + 1, len(records), 1, 1, len(records))
    assert json.loads((out / "probe_summary.json").read_text())["records"] == len(records) + 1
    # tau 1.0 re-splits the stored pass rates: the guessable record (2 of 2) is still rejected
    assert [row["id"] for row in again.rejected] == [guessable.id]
    # another solver (a ready backend) into the same folder is refused; into a fresh one it gives the same split
    with pytest.raises(RunMismatch):
        crl.probe(records, out, ScriptedSolver(plan), config=crl.ProbeConfig(k=2))
    ready = crl.probe(records, tmp_path / "ready", solver, config=crl.ProbeConfig(k=2))
    assert [row["id"] for row in ready.rejected] == [guessable.id] and len(solver.prompts) == len(records)


def test_probe_refuses_a_solver_it_cannot_build():
    with pytest.raises(ValueError, match="needs model="):
        crl.probe(PROBLEMS, "unused", base_url="http://x")
    with pytest.raises(ValueError, match=r"\['base_url', 'model'\] go with a backend name"):
        crl.probe(PROBLEMS, "unused", ScriptedSolver({}), model="m", base_url="http://x")
    with pytest.raises(TypeError, match="unknown backend options"):
        crl.probe(PROBLEMS, "unused", model="m", base_url="http://x", colour="red")  # temperature= is a decoding setting now
