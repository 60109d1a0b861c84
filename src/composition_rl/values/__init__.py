"""Exact numbers out of answers, and the constants in a problem's text that may become a variable.

One job per module, all exact (sympy / ``Fraction``, never floats):

* :mod:`.numbers`: the one reader of plain numbers (``64,\\!328``, ``0.75``, ``\\frac{7}{2}``),
  shared with the verifier; :mod:`.latex`: the one reader of LaTeX arithmetic (tokens, a
  tree, its value in a domain), shared by :mod:`.parse`, :mod:`.derive` and check 5
  (:mod:`composition_rl.spc.dependence`);
  :mod:`.numwords`: the one table of English number words;
* :mod:`.parse`: :func:`parse_number` and :func:`parse_answer_value` read exact values out of
  LaTeX (v1 from an answer, sub-step 1 of the paper's Section 3.4); :mod:`.derive`, the
  numbers an answer that is not one number determines (an interval's length, a set's sum),
  from the shapes :mod:`.derive_shapes` reads;
* :mod:`.exact`: arithmetic, the one equality (:func:`exact_equal`) and LaTeX rendering of
  values and offsets (sub-step 3);
* :mod:`.constants`: :func:`find_constants`, the literals of a question that may be replaced
  by a variable (sub-step 2), with their roles and flaws, and the symbols a text uses;
  :mod:`.literals`, the scanner that finds those literals and their values;
  :mod:`.regions`, where a text is math mode, figure code or text inside math;
  :mod:`.shortcuts`, the rules that flag literals the rest of the text reveals;
  :mod:`.shortcut_risks`, the constants replaced only last.

The verbs below are importable from ``composition_rl.values``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# The verbs are imported when first asked for, so that the sympy-free modules (``.numbers``,
# ``.latex``, ``.numwords``) stay cheap to import: the verifier's main process reads plain
# numbers with :mod:`.numbers` and never loads sympy (the workers do).
_EXPORTS = {
    **dict.fromkeys(
        ("FLAWS", "ROLES", "Constant", "find_constants", "symbols_used"),
        "composition_rl.values.constants",
    ),
    **dict.fromkeys(("MATH_ENVIRONMENTS", "in_math"), "composition_rl.values.regions"),
    "constant_value": "composition_rl.values.literals",
    **dict.fromkeys(
        ("Exact", "exact_equal", "exact_positive", "exact_sub", "exact_value", "irrational_parts",
         "render_fraction", "render_latex", "render_offset", "split_rational", "to_fraction"),
        "composition_rl.values.exact",
    ),
    **dict.fromkeys(
        ("AnswerValue", "Lin", "NotLinear", "parse_answer_value", "parse_number"),
        "composition_rl.values.parse",
    ),
}

if TYPE_CHECKING:
    from composition_rl.values.constants import FLAWS, ROLES, Constant, find_constants, symbols_used
    from composition_rl.values.exact import (
        Exact,
        exact_equal,
        exact_positive,
        exact_sub,
        exact_value,
        irrational_parts,
        render_fraction,
        render_latex,
        render_offset,
        split_rational,
        to_fraction,
    )
    from composition_rl.values.literals import constant_value
    from composition_rl.values.parse import (
        AnswerValue,
        Lin,
        NotLinear,
        parse_answer_value,
        parse_number,
    )
    from composition_rl.values.regions import MATH_ENVIRONMENTS, in_math


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'composition_rl.values' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access skips this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


__all__ = [
    "AnswerValue",
    "Constant",
    "Exact",
    "FLAWS",
    "Lin",
    "MATH_ENVIRONMENTS",
    "ROLES",
    "NotLinear",
    "constant_value",
    "exact_equal",
    "exact_positive",
    "exact_sub",
    "exact_value",
    "find_constants",
    "in_math",
    "irrational_parts",
    "parse_answer_value",
    "parse_number",
    "render_fraction",
    "render_latex",
    "render_offset",
    "split_rational",
    "symbols_used",
    "to_fraction",
]
