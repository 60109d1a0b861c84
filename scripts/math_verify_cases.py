"""Regenerate ``tests/fixtures/math_verify_cases.py`` from Math-Verify's source.

    python scripts/math_verify_cases.py /path/to/Math-Verify [SOURCE] > tests/fixtures/math_verify_cases.py

The path is a git checkout of huggingface/Math-Verify or an unpacked sdist; SOURCE names
where it came from in the header when it is not a git work tree. The fixture is made from
the sdist of the version we pin (math-verify 0.9.0 on PyPI): its tests are the ones that
version passes, and GitHub's newest stored commit (5d148cf, 0.8.0) lacks six of its cases.

Reads the ``@pytest.mark.parametrize`` tables of its test files with :mod:`ast` (literals
only; nothing of Math-Verify is imported or run) and writes every labelled
(gold, prediction, expected) case with the file and line it comes from and the options its
test passes (``precision``, ``strict``, ``allow_set_relation_comp``). The one case built
with an f-string (``test_float_precision``) is evaluated the way the test builds it.
"""

from __future__ import annotations

import ast
import math
import subprocess
import sys
from pathlib import Path

FILES = ("test_all.py", "test_boxed.py", "test_numina_cases.py", "test_open_thoughts.py", "test_strict.py",
         "test_yujianll.py")
HEADER = '''"""Labelled cases from Math-Verify's own test suite (see ``scripts/math_verify_cases.py``).

Each case: the test file and line it comes from, the test function, Math-Verify's gold and
prediction strings as written there, the expected verdict (1 = equal), and the options the
test passes to ``verify``.
"""

# Copied from huggingface/Math-Verify (https://github.com/huggingface/Math-Verify),
# {commit}, files tests/{{{files}}}.
# Licensed under the Apache License, Version 2.0 (the repository's LICENCE); tests/test_all.py
# also carries "MIT License, Copyright (c) 2024 The HuggingFace Team". Only the case tables
# are copied, no code.
# ruff: noqa: E501

'''


def cases(root: Path):
    for name in FILES:
        tree = ast.parse((root / "tests" / name).read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                if not (isinstance(dec, ast.Call) and getattr(dec.func, "attr", "") == "parametrize"):
                    continue
                names = [n.strip() for n in ast.literal_eval(dec.args[0]).split(",")]
                for elt in dec.args[1].elts:
                    try:
                        values = ast.literal_eval(elt)
                    except ValueError:
                        if node.name != "test_float_precision":
                            raise
                        values = (f"{math.sqrt(17):.15f}", "$\\sqrt{17}$", 1)  # as the test's f-string builds it
                    row = dict(zip(names, values))
                    expected = row.pop("expected", row.pop("result", None))
                    opts = {k: row[k] for k in ("precision", "strict", "allow_set_relation_comp") if k in row}
                    yield f"tests/{name}", elt.lineno, node.name, row["gold"], row["pred"], int(expected), opts


def main(argv: list[str]) -> int:
    root = Path(argv[1])
    try:
        if len(argv) > 2:
            raise OSError
        commit = "commit " + subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = argv[2] if len(argv) > 2 else "(unknown)"
    out = [HEADER.format(commit=commit, files=",".join(FILES)), "CASES = ["]
    for c in cases(root):
        out.append(f"    {c!r},")
    out.append("]")
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
