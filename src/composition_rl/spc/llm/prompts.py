"""What the LLM engine says to its model and how it reads the reply: the packaged prompt
files, the JSON schemas of the two calls, and a lenient JSON reader for chat output
(code fences, chatter, trailing commas, LaTeX backslashes left unescaped)."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["DEFINE_SCHEMA", "MARKER", "PLACE_SCHEMA", "PROPOSE_SCHEMA", "PROMPT_NAMES", "SOLVE_SCHEMA",
           "VERIFY_SCHEMA", "fill", "load_prompt", "parse_json_object"]

MARKER = "<VAR>"
#: the packaged prompt files of the engine, in the order their hash is taken (llm_run.json)
PROMPT_NAMES = ("llm_propose_system", "llm_propose", "llm_verify_system", "llm_verify", "llm_solve_system",
                "llm_solve", "llm_define_system", "llm_define", "llm_place_system", "llm_place",
                "llm_feedback")


def _reply_schema(**fields: str) -> dict[str, Any]:
    """The JSON schema of a reply: an object with exactly these fields (name -> JSON type),
    every one required, nothing else."""
    return {"type": "object", "properties": {k: {"type": t} for k, t in fields.items()},
            "required": list(fields), "additionalProperties": False}


PROPOSE_SCHEMA = _reply_schema(v1="string", definition="string", constant="string", constant_value="string",
                               rewritten="string")
#: the program has v1 and the constant: the model only names what q1's answer is the value of
DEFINE_SCHEMA = _reply_schema(definition="string")
#: the program has v1 but no constant it may replace: the model points at one (a number in
#: words) by copying the few words around it; the program writes the rewritten problem
PLACE_SCHEMA = _reply_schema(phrase="string", constant="string", constant_value="string")
VERIFY_SCHEMA = _reply_schema(definition_value="string", same_problem="boolean", constant_value="string")
#: check 5 by the model: the later problem solved at v2 and at another value
SOLVE_SCHEMA = _reply_schema(answer="string")


@cache
def load_prompt(name: str) -> str:
    """A packaged prompt file ``prompts/<name>.txt``."""
    return (
        (resources.files("composition_rl") / "prompts" / f"{name}.txt")
        .read_text(encoding="utf-8")
        .strip()
    )


def fill(template: str, **values: str) -> str:
    """``template`` with each ``<<NAME>>`` slot replaced by the value of keyword ``NAME``."""
    # <<NAME>> slots: LaTeX braces in problems and prompts are never interpreted
    for k, v in values.items():
        template = template.replace(f"<<{k}>>", v)
    return template


_N_COMMANDS = {
    "neq",
    "ne",
    "nu",
    "not",
    "nabla",
    "newline",
    "ngeq",
    "nleq",
    "nmid",
    "neg",
    "ni",
    "notin",
    "nolimits",
    "nparallel",
}


def _repair_escapes(s: str) -> str:
    """Double the backslashes of LaTeX commands written unescaped inside JSON strings.

    ``"\\frac"`` is valid JSON (a form feed + "rac"), so strict parsing silently corrupts
    LaTeX; a backslash that starts a command (``\\frac``, ``\\theta``, ``\\neq``, ``\\sqrt``,
    ``\\(``) is taken as LaTeX, while ``\\n`` before a non-command, ``\\"``, ``\\\\`` and
    ``\\uXXXX`` stay JSON escapes.
    """
    out: list[str] = []
    i, n, in_str = 0, len(s), False
    while i < n:
        c = s[i]
        if not in_str:
            in_str = c == '"'
            out.append(c)
            i += 1
            continue
        if c == '"':
            in_str = False
            out.append(c)
            i += 1
            continue
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = s[i + 1]
        word = re.match(r"[A-Za-z]+", s[i + 1 :])
        run = word.group() if word else ""
        if nxt in '\\"/':
            out.append(s[i : i + 2])
            i += 2
        elif nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2 : i + 6] or ""):
            out.append(s[i : i + 6])
            i += 6
        elif nxt in "bfrt" and len(run) > 1:
            out.append("\\\\")
            i += 1
        elif nxt == "n" and run in _N_COMMANDS:
            out.append("\\\\")
            i += 1
        elif nxt in "bfnrt":
            out.append(s[i : i + 2])
            i += 2
        else:  # an invalid JSON escape: \( \{ \sqrt \cdot \$ ...
            out.append("\\\\")
            i += 1
    return "".join(out)


def _outer_object(text: str) -> str | None:
    start = text.find("{")
    if start < 0:
        return None
    depth, in_str, esc = 0, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


_CONTROL = re.compile(r"[\x08\x0c\t\r]")


def _damaged(obj: Any) -> bool:
    return any(isinstance(v, str) and _CONTROL.search(v) for v in obj.values())


def parse_json_object(text: str) -> dict[str, Any] | None:
    r"""The first JSON object in ``text``, tolerating code fences, chatter and raw LaTeX.

    >>> parse_json_object('Sure! ```json\n{"v1": "7", "x": 1,}\n```')
    {'v1': '7', 'x': 1}
    >>> print(parse_json_object(r'{"d": "the \theta of \frac{1}{2}"}')["d"])
    the \theta of \frac{1}{2}
    >>> parse_json_object("no json here") is None
    True
    """
    body = _outer_object(text)
    if body is None:
        return None
    for repaired in (False, True):
        cand = _repair_escapes(body) if repaired else body
        for variant in (cand, re.sub(r",\s*([}\]])", r"\1", cand)):
            try:
                obj = json.loads(variant, strict=False)  # raw newlines/tabs inside strings
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) and (repaired or not _damaged(obj)):
                return obj
    return None

