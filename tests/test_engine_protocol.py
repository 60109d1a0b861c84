"""Every registered composition engine has the shape it declares (spc/protocols.py): at run
time, as the executor builds it, and statically, with mypy over the engines' classes and over
the executor's code that uses them."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import composition_rl
from composition_rl.jobs.compose.pipeline import ComposeConfig
from composition_rl.jobs.compose.run import build_engine, is_resumable
from composition_rl.spc.base import COMPOSERS
from composition_rl.spc.llm import LLMComposeConfig
from composition_rl.spc.protocols import (
    BatchComposer,
    Composer,
    PrefetchesPoolFacts,
    RanksPoolPartners,
    ResumableComposer,
    TakesPartners,
    WritesRecordJson,
    missing_members,
)

CAPABILITIES = (RanksPoolPartners, TakesPartners, PrefetchesPoolFacts, WritesRecordJson)
# what each engine of the package offers beyond its way of running: losing one would silently
# change the output (the pools, the partners) or the speed, so it is a table, not a loop
EXPECTED = {
    "symbolic": {RanksPoolPartners, TakesPartners, PrefetchesPoolFacts, WritesRecordJson},
    "llm": set(),
    "auto": set(),
}


def _built(name: str) -> Composer:
    """The engine as the executor builds it (no model is reached: the backend comes with open())."""
    llm = LLMComposeConfig(base_urls=("http://unused",), model="fake-model")
    return build_engine(ComposeConfig(engine=name), llm_config=llm)


@pytest.mark.parametrize("name", COMPOSERS.names())
def test_every_registered_engine_has_the_shape_it_declares(name):
    engine = _built(name)  # build_engine raises TypeError naming what a declared shape lacks
    way = ResumableComposer if is_resumable(name) else BatchComposer
    assert isinstance(engine, Composer) and missing_members(engine, Composer) == []
    assert isinstance(engine, way), missing_members(engine, way)
    assert not isinstance(engine, BatchComposer if way is ResumableComposer else ResumableComposer)
    if name in EXPECTED:
        assert {c for c in CAPABILITIES if isinstance(engine, c)} == EXPECTED[name]


class _Cfg:
    """Only what build_engine reads of a ComposeConfig."""

    def __init__(self, engine: str) -> None:
        self.engine = engine


def test_an_engine_without_a_declared_member_is_refused_with_its_name(monkeypatch):
    class NoTally:
        name = "no-tally"
        resumable = False
        pool_report: dict = {}

        @classmethod
        def from_config(cls, config):
            return cls()

        def eligible(self, p, position, depth):
            return True

        def compose(self, chain, candidate_id):
            raise AssertionError("never composed")

        @staticmethod
        def link_stats(tally):
            return {}

    class Undeclared:
        name = "undeclared"

    classes = {"no-tally": NoTally, "undeclared": Undeclared}
    monkeypatch.setattr(COMPOSERS, "load", classes.__getitem__)
    said = r"'no-tally' \(NoTally\) is no BatchComposer: it lacks take_tally"
    with pytest.raises(TypeError, match=said):
        build_engine(_Cfg("no-tally"))
    with pytest.raises(TypeError, match="'undeclared' .* declares no 'resumable'"):
        is_resumable("undeclared")


# ---------------------------------------------------------------------------------------------
# statically: mypy holds each engine class to its protocols, and the executor to them
# ---------------------------------------------------------------------------------------------
# only the package's compose modules and records are read; every other import is Any, which
# keeps a run near a second (following everything, sympy and torch included, takes minutes)
MYPY_INI = """\
[mypy]
follow_imports = skip
ignore_missing_imports = True
incremental = False
[mypy-composition_rl.spc.*]
follow_imports = silent
[mypy-composition_rl.jobs.compose.*]
follow_imports = silent
[mypy-composition_rl.records]
follow_imports = silent
"""

CONFORMING = """\
from composition_rl.spc.llm.auto import AutoComposer
from composition_rl.spc.llm.composer import LLMComposer
from composition_rl.spc.protocols import (
    BatchComposer, PrefetchesPoolFacts, RanksPoolPartners, ResumableComposer, TakesPartners,
    WritesRecordJson,
)
from composition_rl.spc.symbolic import SymbolicComposer


def symbolic(e: SymbolicComposer) -> tuple[object, ...]:
    b: BatchComposer = e
    r: RanksPoolPartners = e
    t: TakesPartners = e
    f: PrefetchesPoolFacts = e
    w: WritesRecordJson = e
    return b, r, t, f, w


def model_backed(e: LLMComposer, a: AutoComposer) -> tuple[ResumableComposer, ResumableComposer]:
    return e, a
"""

# the control: an engine whose compose() lost its candidate_id must fail, or the check above
# could pass by checking nothing
BROKEN = """\
from collections.abc import Sequence
from typing import ClassVar

from composition_rl.spc.base import Rejection
from composition_rl.spc.protocols import Composer
from composition_rl.records import Problem


class Broken:
    name: str = "broken"
    resumable: ClassVar[bool] = False

    def eligible(self, p: Problem, position: int, depth: int) -> bool:
        return True

    def compose(self, chain: Sequence[Problem]) -> Problem | Rejection:
        return Rejection("internal", "broken", "")


engine: Composer = Broken()
"""

SRC = Path(composition_rl.__file__).resolve().parent.parent
SPC = SRC / "composition_rl" / "spc"
JOB = SRC / "composition_rl" / "jobs" / "compose"


def _mypy(tmp_path: Path, *targets: str | Path) -> subprocess.CompletedProcess:
    ini = tmp_path / "mypy.ini"
    ini.write_text(MYPY_INI)
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ini), "--cache-dir",
         str(tmp_path / "cache"), "--no-error-summary", *map(str, targets)],
        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "MYPYPATH": str(SRC)},
        timeout=300)


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (pip install -e '.[dev]'; "
                    "constraints/ci.txt pins the version CI runs)")
def test_mypy_holds_the_engines_and_the_executor_to_the_protocols(tmp_path):
    (tmp_path / "conforming.py").write_text(CONFORMING)
    (tmp_path / "broken.py").write_text(BROKEN)
    ok = _mypy(tmp_path, tmp_path / "conforming.py", SPC / "protocols.py", JOB / "run.py",
               JOB / "journal.py")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    bad = _mypy(tmp_path, tmp_path / "broken.py")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert 'variable has type "Composer"' in bad.stdout, bad.stdout
    assert "def compose(self, chain: Sequence[Problem]) -> " in bad.stdout, bad.stdout
