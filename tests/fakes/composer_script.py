"""A scripted "model" for the LLM composition engine: reads the engine's own prompts and
answers them the way a good composition model would, with switches for bad behaviour.

Used by the loopback server in tests and in ``benchmarks/llm_compose_throughput.py``. It is
deliberately simple (first number of the answer, first replaceable constant of the problem)
and never looks at anything but the request it is sent.
"""

from __future__ import annotations

import json
import re

from composition_rl.values import find_constants, parse_answer_value
from composition_rl.values.numwords import CARDINALS, word_number

_PROPOSE = re.compile(
    r"Problem 1:\n(?P<q1>.*)\n\nFinal answer of problem 1:\n(?P<gt1>.*)\n\nProblem 2:\n(?P<q2>.*)\n\nFill in these fields:",
    re.S,
)
_VERIFY = re.compile(
    r'Final answer of problem A:\n(?P<gt1>.*)\n\nQuestion 1\. Someone wrote: "Let X be (?P<d>.*)\." .*'
    r"Problem B:\n(?P<q2>.*)\n\nProblem B rewritten with a marker:\n(?P<rw>.*)\n\nQuestion 2\. If <VAR> is replaced by (?P<lit>.*?), is",
    re.S,
)


# the program plan's two calls: X's definition for a q1, and a constant placed in a q2
_DEFINE = re.compile(r"^Problem:\n(?P<q1>.*)\n\nFinal answer of the problem:\n(?P<gt1>.*)\n\nWhat the problem asks:\n(?P<asked>.*?)\n\n", re.S)
_ASK_VERB = re.compile(r"^(?:find|compute|evaluate|determine|calculate|simplify|what is|what's|how many|how much)\s+", re.I)


def asked_phrase(asked: str) -> str:
    """What a good model writes for X: the asked sentence as a noun phrase, in its own words."""
    phrase = _ASK_VERB.sub("", asked.strip()).rstrip("?.! ")
    if not phrase.lower().startswith(("the ", "a ", "an ")):
        phrase = f"the value of {phrase}"
    return f"{phrase} found in the problem above"
_PLACE = re.compile(r"^Problem 2:\n(?P<q2>.*)\n\nPoint at one number", re.S)
_MENU = re.compile(r"^- v1 = (?P<v>.+?); definition: (?P<d>.+)$", re.M)


def _around(q2: str, start: int, end: int) -> str:
    """The words of ``q2`` around ``q2[start:end]``: three on each side, as a model copies them."""
    left = re.findall(r"\S+\s*$|\S+\s+", q2[:start])[-3:]
    right = re.findall(r"^\s*\S+|\s+\S+", q2[end:])[:3]
    return ("".join(left) + q2[start:end] + "".join(right)).strip()


def place(q2: str) -> dict:
    """A good model's placement: the first number written in words, else the first numeral,
    pointed at by the words around it; empty fields where problem 2 has none."""
    for w in re.finditer(r"[A-Za-z]+(?:-[A-Za-z]+)?", q2):
        n = word_number(w.group()) if w.group().lower() in CARDINALS or "-" in w.group() else None
        if n is not None:
            return {"phrase": _around(q2, w.start(), w.end()), "constant": w.group(), "constant_value": str(n)}
    out = propose("", "1", q2)
    if out is None:
        return {"phrase": "", "constant": "", "constant_value": ""}
    at = out["rewritten"].index("<VAR>")
    return {"phrase": _around(q2, at, at + len(out["constant"])), "constant": out["constant"],
            "constant_value": out["constant_value"]}


def _user(body: dict) -> str:
    """The request's first user message (a feedback turn is answered as the prompt was)."""
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


def propose(q1: str, gt1: str, q2: str, menu: list[tuple[str, str]] | None = None) -> dict | None:
    av = parse_answer_value(gt1)
    if av is not None:
        v1, definition = gt1, "the answer to the problem above"
    elif menu:  # the first derived number the prompt offers, with its own definition
        v1, definition = menu[0]
    else:
        m = re.search(r"-?\d+", gt1)
        if m is None:
            return None
        v1, definition = m.group(), "the first number in the answer to the problem above"
    # a good model follows the prompt: a constant without a flaw where there is one, and
    # never an exponent, a radix, a year or one TeX token of a shorthand
    consts = [c for c in find_constants(q2, "") if c.flaw not in ("named", "tex_token", "exponent", "base_notation")]
    if not consts:
        return None
    c = min(consts, key=lambda c: (bool(c.flaw), c.rank, c.offset))
    rewritten = q2[: c.offset] + "<VAR>" + q2[c.offset + len(c.literal) :]
    return {
        "v1": v1,
        "definition": definition,
        "constant": c.literal,
        "constant_value": c.literal,
        "rewritten": rewritten,
    }


def good_composer(body: dict) -> str:
    """A well-behaved composition model (proposal and verification prompts)."""
    text = _user(body)
    m = _PROPOSE.search(text)
    if m is not None:
        menu = [(x.group("v"), x.group("d")) for x in _MENU.finditer(text)]
        out = propose(m.group("q1"), m.group("gt1"), m.group("q2"), menu)
        return json.dumps(out) if out is not None else "I cannot find a suitable constant."
    m = _DEFINE.search(text)
    if m is not None:
        return json.dumps({"definition": asked_phrase(m.group("asked"))})
    m = _PLACE.search(text)
    if m is not None:
        return json.dumps(place(m.group("q2")))
    m = _VERIFY.search(text)
    if m is not None:
        num = re.search(r"-?\d+", m.group("gt1"))
        return json.dumps(
            {
                "definition_value": num.group() if num else "0",
                "same_problem": True,
                "constant_value": m.group("lit"),
            }
        )
    return "unrecognised request"


def sloppy_composer(body: dict) -> str:
    """Like :func:`good_composer`, but some problems get typical model mistakes."""
    text = _user(body)
    m = _PROPOSE.search(text)
    if m is None:
        return good_composer(body)
    out = propose(m.group("q1"), m.group("gt1"), m.group("q2"))
    if out is None:
        return "no"
    h = sum(map(ord, m.group("q1") + m.group("q2"))) % 7
    if h == 0:
        out["v1"] = "12345"  # not from the answer
    elif h == 1:
        out["rewritten"] = out["rewritten"].replace("<VAR>", "<VAR> ", 1) + " Thanks!"  # rephrased
    elif h == 2:
        return "```json\n" + json.dumps(out)[:-20]  # cut off
    return json.dumps(out)
