"""The package layout that CONTRIBUTING.md's map describes: every module importable by its
path, the verbs unchanged by any import, module names that repeat only in parallel roles,
and imports that only point down the floors of the map."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "composition_rl"

# engines this environment may lack: the modules that import them are checked in their own
# venvs (make test-verl / test-vllm) and by Ray's tests
OPTIONAL = {"vllm", "verl", "ray", "transfer_queue", "playwright"}

_WALK = r"""
import importlib, json, pkgutil, sys
import composition_rl
out = {"modules": 0, "failed": {}, "optional": {}}
for m in pkgutil.walk_packages(composition_rl.__path__, "composition_rl."):
    out["modules"] += 1
    try:
        importlib.import_module(m.name)
    except ModuleNotFoundError as e:
        top = (e.name or "").split(".")[0]
        if top in OPTIONAL:
            out["optional"][m.name] = top
        else:
            out["failed"][m.name] = repr(e)
    except Exception as e:
        out["failed"][m.name] = repr(e)
import composition_rl.jobs.profile as P
import composition_rl.jobs.compose.run
out["profile_is_module"] = type(P).__name__ == "module"
out["verbs"] = {v: type(getattr(composition_rl, v)).__name__
                for v in ("compose", "verify", "score", "profile", "probe", "refresh", "export")}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def walk():
    code = f"OPTIONAL = {sorted(OPTIONAL)!r}\n" + _WALK
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_every_module_imports_by_its_path(walk):
    assert walk["modules"] == len(_modules()) - 1, "walk_packages missed a module"  # - the package
    assert walk["failed"] == {}
    # only the adapters of engines installed elsewhere may be left out here
    assert set(walk["optional"]) <= {"composition_rl.integrations.verl_online"}, walk["optional"]


def test_importing_modules_never_replaces_a_verb(walk):
    # the verbs stay functions after every module (jobs.compose.run included) is imported
    assert walk["profile_is_module"]
    assert set(walk["verbs"].values()) == {"function"}, walk["verbs"]


def _modules() -> dict[str, Path]:
    out = {}
    for f in sorted(SRC.rglob("*.py")):
        parts = list(f.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["composition_rl", *parts])] = f
    return out


# a module name may repeat only where it plays the same role in parallel packages
PARALLEL = {
    "base": "the interface of its package (chat, rollout, spc, executors)",
    "config": "the settings of a job or engine package (jobs/train, jobs/grow, jobs/reproduce, spc/llm)",
    "run": "the entry of a job package (jobs/compose, jobs/grow, jobs/refresh, jobs/reproduce)",
    "report": "the report of a job package (jobs/refresh, jobs/reproduce)",
    "job": "a job package's job from a command's parsed flags (jobs/compose, jobs/grow)",
    "hf": "the transformers backend of chat/ and of rollout/",
    "openai": "the OpenAI-compatible backend of chat/ and of rollout/",
}


def test_module_names_repeat_only_in_parallel_roles():
    by_name = defaultdict(list)
    for dotted, f in _modules().items():
        parent = dotted.rsplit(".", 1)[0]
        if f.name == "__init__.py" or parent == "composition_rl.commands":
            continue  # a package, or commands/<name>: the command of jobs/<name>
        by_name[dotted.rsplit(".", 1)[1]].append(dotted)
    repeated = {n: m for n, m in by_name.items() if len(m) > 1}
    assert set(repeated) <= set(PARALLEL), {n: m for n, m in repeated.items() if n not in PARALLEL}


def test_every_command_calls_a_job_of_its_name_or_says_where():
    jobs = {d.rsplit(".", 1)[1] for d in _modules() if d.startswith("composition_rl.jobs.")}
    commands = {f.stem for f in (SRC / "commands").glob("*.py") if f.stem != "__init__"}
    # a verl launch recipe is verl's adapter, which the other verl adapters use
    elsewhere = {"verl_recipe": "integrations/verl_recipe.py"}
    missing = commands - jobs - set(elsewhere)
    assert not missing, f"commands without a job of their name in jobs/: {sorted(missing)}"


# the floors of CONTRIBUTING.md's map: a package imports only from lower floors (or its own)
FLOORS = [
    {"records", "registry", "stats", "colours", "progress", "flags", "logs"},
    {"values"},
    {"grading"},
    {"io"},
    {"chat"},
    {"rollout"},
    {"executors", "spc"},
    {"jobs"},
    {"integrations"},
    {"api", "commands", "cli", "__init__"},
]


def _room(dotted: str) -> str:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_imports_point_down_the_floors():
    floor = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}
    up = []
    for dotted, f in _modules().items():
        me = _room(dotted)
        assert me in floor, f"{dotted}: package {me!r} is not on the map (add it to FLOORS and CONTRIBUTING.md)"
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("composition_rl"):
                targets = ([f"{node.module}.{a.name}" for a in node.names]
                           if node.module == "composition_rl" else [node.module])
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith("composition_rl")]
            else:
                continue
            for t in targets:
                room = _room(t)
                if room == "__version__" or room == me:
                    continue
                if floor.get(room, -1) > floor[me]:
                    up.append(f"{dotted} (floor {floor[me]}) imports {t} (floor {floor.get(room)})")
    assert not up, "\n".join(up)
