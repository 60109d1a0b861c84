"""The README's and docs' command blocks, read at test time, against the real CLI.

Every ``crl`` line in a fenced block must name a known command and only flags its parser
knows; every ``make`` target must exist; the curriculum blocks of docs/training.md are run
on a small slice of MATH, so that each file they name is one a documented command makes.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from composition_rl.cli import COMMANDS, build_parser, main

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([a-z]*)\n(.*?)^```", re.S | re.M)


def blocks(path: Path, langs=("", "bash", "sh", "console")) -> list[str]:
    return [body for lang, body in FENCE.findall(path.read_text(encoding="utf-8")) if lang in langs]


def commands(body: str) -> list[list[str]]:
    """Shell lines of a block: continuations joined, comments and [optional] brackets dropped."""
    out = []
    for line in body.replace("\\\n", " ").splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if not line:
            continue
        try:
            out.append([t.strip("[]") for t in shlex.split(line) if t.strip("[]")])
        except ValueError:  # a quoted Python one-liner: not a command line
            continue
    return out


def crl_lines() -> list[tuple[str, list[str]]]:
    found = []
    for doc in DOCS:
        for body in blocks(doc):
            for toks in commands(body):
                for i, t in enumerate(toks):
                    if t == "crl" or t.endswith("/crl"):
                        found.append((f"{doc.name}: {' '.join(toks)}", toks[i + 1 :]))
                        break
    return found


def _options(cmd: str) -> set[str]:
    parser = build_parser(only=cmd)
    sub = next(a for a in parser._actions if a.dest == "command").choices[cmd]
    return {o for a in sub._actions for o in a.option_strings}


CRL = crl_lines()


def test_the_docs_have_crl_commands_to_check():
    assert len(CRL) >= 20, [c for c, _ in CRL]  # the parser above still finds them


@pytest.mark.parametrize("where,argv", CRL, ids=[c[:90] for c, _ in CRL])
def test_documented_crl_lines_use_known_commands_and_flags(where, argv):
    assert argv and argv[0] in COMMANDS, f"{where}: unknown command {argv[:1]}"
    known = _options(argv[0])
    flags = [t.split("=", 1)[0] for t in argv[1:] if t.startswith("-") and t not in ("-", "--")]
    unknown = [f for f in flags if f not in known]
    assert not unknown, f"{where}: {argv[0]} has no option {unknown}"


def test_documented_make_targets_and_scripts_exist():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    seen = 0
    for doc in [*DOCS, REPO / "CONTRIBUTING.md"]:
        for body in blocks(doc):
            for toks in commands(body):
                if toks[0] == "make":
                    for target in (t for t in toks[1:] if "=" not in t):
                        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"{doc.name}: make {target}"
                        seen += 1
                for t in toks:
                    if t.startswith(("scripts/", "benchmarks/")):
                        assert (REPO / t).is_file(), f"{doc.name}: {t} does not exist"
                        seen += 1
    assert seen >= 3


def test_verification_doc_configures_the_reward_keys_the_recipe_writes():
    from composition_rl.integrations.verl_recipe import PAPER

    (block,) = [b for b in blocks(REPO / "docs" / "verification.md") if "custom_reward_function" in b]
    pairs = dict(t.lstrip("+").split("=", 1) for toks in commands(block) for t in toks if "=" in t)
    for key in ("reward.custom_reward_function.path", "reward.custom_reward_function.name"):
        assert pairs[key] == str(PAPER[key]), key
    assert all(k.startswith(("reward.", "algorithm.")) for k in pairs), sorted(pairs)


def test_tiny_model_time_is_the_same_in_docs_and_help():
    doc = next(line for line in (REPO / "docs" / "training.md").read_text().splitlines()
               if line.startswith("crl tiny-model"))
    sub = next(a for a in build_parser(only="tiny-model")._actions if a.dest == "command").choices["tiny-model"]
    helps = " ".join(a.help or "" for a in sub._actions)
    figure = re.search(r"~[\d.]+ min", doc).group(0)
    assert figure in helps and not re.findall(r"~(?!" + re.escape(figure[1:]) + r")[\d.]+ min", helps)


@pytest.mark.shared_data
def test_training_doc_curriculum_blocks_run_and_make_the_files_they_name(shared_data, tmp_path, monkeypatch):
    """Run every crl export / compose / verl-recipe line of docs/training.md (MATH replaced by
    its first 60 problems), then check the YAML's stage files and the recipe's stages exist."""
    import yaml

    rows = json.loads((shared_data / "train" / "math_train.json").read_text())[:60]
    small = tmp_path / "math60.json"
    small.write_text(json.dumps(rows))
    monkeypatch.chdir(tmp_path)
    doc = REPO / "docs" / "training.md"
    ran = []
    for body in blocks(doc):
        for toks in commands(body):
            if toks[0] != "crl" or toks[1] not in ("export", "compose", "verl-recipe"):
                continue
            argv = [str(small) if t.endswith("math_train.json") else t for t in toks[1:]]
            if argv[0] == "compose":
                argv += ["--no-progress", "--workers", "1"]
            if argv[0] == "verl-recipe":
                argv += ["--no-python-check"]  # the interpreter is checked in tests/verl
            assert main(argv) == 0, f"docs/training.md: {' '.join(toks)}"
            ran.append(argv[0])
    assert {"export", "compose", "verl-recipe"} <= set(ran)
    # the online-mode block names its own pool files (tests/test_train_online.py validates it)
    (cfg,) = [yaml.safe_load(b) for b in blocks(doc, ("yaml",)) if "stages:" in b and "mode: online" not in b]
    for stage in cfg["stages"]:
        if "data" in stage:
            assert Path(stage["data"]).is_file(), f"the YAML reads {stage['data']}, which no documented command made"
    recipe = json.loads(next(Path("runs").rglob("recipe.json")).read_text())
    assert [s["depth"] for s in recipe["config"]["stages"]] == [1, 2, 3]


@pytest.mark.slow
def test_api_doc_examples_run(tmp_path, monkeypatch):
    """Every example of docs/api.md, run as a doctest in one session (a fresh folder as the
    working directory); the endpoint it names is a loopback stand-in that composes like a
    good model (tests/fakes/composer_script.py) and, as a policy, answers 20 to everything."""
    import doctest

    from fakes.composer_script import good_composer
    from fakes.openai_server import FakeOpenAIServer

    from composition_rl.grading import close_shared_verifiers

    def model(body: dict):
        reply = good_composer(body)
        if reply != "unrecognised request":
            return reply
        return ["Halving 30 gives 20, so the answer is $\\boxed{20}$."] * int(body.get("n") or 1)

    text = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    assert text.count("http://localhost:8000/v1") >= 2  # the placeholder the stand-in replaces
    monkeypatch.chdir(tmp_path)
    failures: list[str] = []
    try:
        with FakeOpenAIServer(model) as srv:
            test = doctest.DocTestParser().get_doctest(text.replace("http://localhost:8000/v1", srv.url), {},
                                                       "docs/api.md", str(REPO / "docs" / "api.md"), 0)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            runner.run(test, out=lambda s: failures.append(s))
    finally:
        close_shared_verifiers()
    assert len(test.examples) >= 20
    assert runner.failures == 0, "".join(failures)


def test_docs_show_how_to_build_the_toy_seeds(tmp_path):
    text = (REPO / "docs" / "mbs.md").read_text()
    start_ = text.index("```python\n# seeds.jsonl")
    code = text[start_ + len("```python\n"): text.index("```", start_ + 10)]
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    rows = [json.loads(x) for x in (tmp_path / "seeds.jsonl").read_text().splitlines()]
    from composition_rl.jobs.grow.teachers import ProgramTeacher

    assert len(rows) == 24 and all(ProgramTeacher.unreadable(r["question"]) == "" for r in rows)
