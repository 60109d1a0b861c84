"""The package's import contract, read from the source itself (an AST scan of src/): a module
imports only public names of another, and the audit's scanner none of the rules it checks."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"


def _imports(path: Path):
    """(line, module, name) of every ``from composition_rl... import name`` in ``path``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("composition_rl"):
            for alias in node.names:
                yield node.lineno, node.module, alias.name


def private_imports(root: Path) -> list[str]:
    """``file:line module.name`` for each private name (``_x``) imported from another module."""
    return [f"{p.relative_to(root)}:{line} {module}.{name}"
            for p in sorted(root.rglob("*.py")) for line, module, name in _imports(p)
            if name.startswith("_") and not name.startswith("__")]


def test_no_module_imports_a_private_name_of_another():
    # a private name is free to change with its module; importing it elsewhere ties two
    # modules to one implementation detail (three LaTeX readers grew that way)
    assert private_imports(SRC) == []


def test_the_check_sees_a_private_import(tmp_path):
    (tmp_path / "a.py").write_text("from composition_rl.values.parse import _clean\nfrom composition_rl import values\n")
    assert private_imports(tmp_path) == ["a.py:1 composition_rl.values.parse._clean"]


@pytest.mark.parametrize("module", ["values.shortcuts", "values.constants"])
def test_the_quality_scanner_imports_none_of_the_rules_it_checks(module):
    # its counts of standard_constant, answer_range, grammar and default_value are a second
    # opinion on the rules of values/shortcuts.py only while it reads those classes itself
    scanner = [SRC / "composition_rl" / "spc" / f for f in ("quality.py", "quality_shortcuts.py", "quality_text.py")]
    names = [name for path in scanner for _, mod, name in _imports(path) if mod == f"composition_rl.{module}"]
    allowed = {"values.constants": {"UNGROUPED_ROLES"}}.get(module, set())
    assert set(names) <= allowed, names
