"""Every public function and method of the package says what it does, read from the source
itself (an AST scan of src/composition_rl; issue 55 counted 273 of 778 without a docstring)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "composition_rl"


def missing_docstrings(root: Path) -> list[str]:
    """``path:line:name`` of each public function, and each public method of a public class
    (nested classes too), without a docstring; public is a name without a leading underscore."""
    out: list[str] = []

    def visit(path: Path, body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not node.name.startswith("_") and not ast.get_docstring(node):
                    out.append(f"{path.relative_to(root)}:{node.lineno}:{prefix}{node.name}")
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                visit(path, node.body, f"{prefix}{node.name}.")

    for path in sorted(root.rglob("*.py")):
        visit(path, ast.parse(path.read_text(encoding="utf-8"), str(path)).body, "")
    return out


def test_every_public_function_and_method_has_a_docstring():
    missing = missing_docstrings(PACKAGE)
    assert not missing, f"{len(missing)} public functions without a docstring:\n" + "\n".join(missing)


def test_the_check_sees_a_missing_docstring(tmp_path):
    (tmp_path / "a.py").write_text(
        'def f():\n    """Doc."""\n\n\ndef g():\n    pass\n\n\ndef _h():\n    pass\n\n\n'
        "class C:\n    def m(self):\n        pass\n\n    def _p(self):\n        pass\n\n\n"
        "class _D:\n    def m(self):\n        pass\n"
    )
    assert missing_docstrings(tmp_path) == ["a.py:5:g", "a.py:14:C.m"]
