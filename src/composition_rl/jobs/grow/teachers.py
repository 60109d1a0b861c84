"""Teachers: who writes traces, decompositions and synthetic problems (MagicBeanStalk, Methodology).

Every teacher offers the same five verbs, so the algorithm in :mod:`composition_rl.jobs.grow.run`
never asks which one it holds:

* ``solve(question, attempt)``: a worked trace and its final answer (stage 1);
* ``decompose(item, attempt, max_parts)``: at most K easier, self-contained subproblems,
  each with a trace and an answer; ``[]`` means the item cannot be split (stage 2);
* ``harder(leaf, trial)``: a harder variant of a leaf (stage 3, leaf synthesis);
* ``compose(children, blueprint, trial)``: a parent built from synthetic children, with the
  original parent and its children as the pattern B(G_n) (stage 3, recursive composition);
* ``vary(item, trial)``: "write a variation of this problem", the direct-synthesis baseline.

A reply that cannot be used raises :class:`TeacherError` with a short countable ``kind``;
the caller records it as a reject and goes on. Two teachers are registered:

* ``program``: exact, for the toy arithmetic chains of :mod:`composition_rl.jobs.train.arithmetic`
  (``X=5+3. Y=X-2. Y+4=?``). A depth-K chain decomposes exactly into contiguous sub-chains,
  harder leaves come from generator parameters (carries, more digits), parents are rebuilt
  from synthetic children by relinking them in the seed's order. No model, no randomness
  beyond ``(seed, id, trial)``, so the whole algorithm runs end to end on a CPU.
* ``openai``: any OpenAI-compatible chat model through :class:`~composition_rl.chat.openai.OpenAIChat`
  (retries, JSON-schema replies, the response cache); prompts are ``prompts/mbs_*.txt``.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Protocol

from composition_rl.jobs.train.arithmetic import render_chain
from composition_rl.records import content_id
from composition_rl.registry import Registry

__all__ = [
    "Blueprint",
    "Item",
    "OpenAITeacher",
    "ProgramTeacher",
    "TEACHERS",
    "Teacher",
    "TeacherError",
    "build_teacher",
    "parse_chain",
    "render_chain",
]


@dataclass(frozen=True)
class Item:
    """A problem with a worked trace and its final answer, as a teacher wrote it.

    ``spec`` is the teacher's own structure (the program teacher's chain steps); other
    modules carry it without reading it.
    """

    question: str
    trace: str
    answer: str
    spec: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``question``, ``trace``, ``answer`` and ``spec`` (as a plain dict)."""
        return {"question": self.question, "trace": self.trace, "answer": self.answer, "spec": dict(self.spec)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Item:
        """The item :meth:`to_dict` wrote (a missing or empty ``spec`` reads as ``{}``)."""
        return cls(str(d["question"]), str(d["trace"]), str(d["answer"]), dict(d.get("spec") or {}))


@dataclass(frozen=True)
class Blueprint:
    """B(G_n): an original parent and the children it was decomposed into."""

    parent: Item
    children: tuple[Item, ...]


class TeacherError(Exception):
    """A teacher reply that cannot be used; ``kind`` is a short countable reason."""

    def __init__(self, kind: str, detail: str = "") -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail


class Teacher(Protocol):
    name: str

    def solve(self, question: str, attempt: int) -> Item:
        """A worked trace of ``question`` and its final answer (stage 1); ``attempt`` numbers
        the retries."""

    def decompose(self, item: Item, attempt: int, max_parts: int) -> list[Item]:
        """At most ``max_parts`` easier, self-contained subproblems of ``item``, each with a
        trace and an answer; ``[]`` when it cannot be split (stage 2)."""

    def harder(self, leaf: Item, trial: int) -> Item:
        """A harder variant of ``leaf`` (stage 3, leaf synthesis)."""

    def compose(self, children: Sequence[Item], blueprint: Blueprint, trial: int) -> Item:
        """A parent built from the synthetic ``children`` on the pattern of ``blueprint``
        (stage 3, recursive composition)."""

    def vary(self, item: Item, trial: int) -> Item:
        """A variation of ``item``: the direct-synthesis baseline."""

    def cost(self) -> dict[str, int]:
        """What the teacher has spent so far (``calls`` and token counts), for the run's stats."""


#: name -> "module:Class" or a class; built by :func:`build_teacher`.
TEACHERS: Registry[Any] = Registry("teacher")


def build_teacher(name: str, **kwargs: Any) -> Teacher:
    """Construct the teacher registered as ``name``.

    >>> build_teacher("nope")
    Traceback (most recent call last):
    ...
    KeyError: "unknown teacher 'nope'; known: openai, program"
    """
    return TEACHERS.build(name, **kwargs)


# --------------------------------------------------------------------------- program teacher
# The chain format is jobs/train/arithmetic.py's (Composition-RL, Section 3.4 wording made terse):
# step 0 "X=a+b.", then per later step a link "Y=X-d." (d = previous value - a_k) and
# "Z=Y+b." or, last, "Y+b=?". A chain is stored as its steps [(a, op, b), ...] where a_k of
# a later step is the constant the link stands for. tests/test_mbs_program.py proves that
# render_chain(parse_chain(q)) == q on that module's own output. render_chain is that
# module's own writer (make_problem uses it), so the teacher writes chains as the family does.

Step = tuple[int, str, int]

_ONE = re.compile(r"^(\d+)([+-])(\d+)=\?$")
_FIRST = re.compile(r"^([A-Z])=(\d+)([+-])(\d+)\.$")
_LINK = re.compile(r"^([A-Z])=([A-Z])([+-])(\d+)\.$")
_FINAL = re.compile(r"^([A-Z])([+-])(\d+)=\?$")


def _apply(a: int, op: str, b: int) -> int:
    return a + b if op == "+" else a - b


def chain_values(steps: Sequence[Step]) -> list[int]:
    """The value of every step.

    >>> chain_values([(5, "+", 3), (6, "-", 4)])
    [8, 2]
    """
    return [_apply(a, op, b) for a, op, b in steps]


def parse_chain(question: str) -> list[Step] | None:
    """The steps of a chain question, or None when it is not one (exact round trip only).

    >>> parse_chain("X=5+3. Y=X-2. Y-4=?")
    [(5, '+', 3), (6, '-', 4)]
    >>> parse_chain("What is 2+2?") is None
    True
    """
    q = question.strip()
    m = _ONE.match(q)
    if m:
        steps = [(int(m.group(1)), m.group(2), int(m.group(3)))]
    else:
        parts = q.split()
        if len(parts) < 3 or len(parts) % 2 == 0:
            return None
        m0 = _FIRST.match(parts[0])
        if not m0:
            return None
        steps = [(int(m0.group(2)), m0.group(3), int(m0.group(4)))]
        prev = _apply(*steps[0])
        for k in range(1, len(parts), 2):
            ml = _LINK.match(parts[k])
            if not ml:
                return None
            d = int(ml.group(4))
            a = prev - d if ml.group(3) == "-" else prev + d
            last = k + 1 == len(parts) - 1
            ms = _FINAL.match(parts[k + 1]) if last else _LINK.match(parts[k + 1])
            if not ms:
                return None
            op, b = (ms.group(2), int(ms.group(3))) if last else (ms.group(3), int(ms.group(4)))
            steps.append((a, op, b))
            prev = _apply(a, op, b)
    try:
        if render_chain(steps)[0] != q:
            return None
    except ValueError:
        return None
    return steps


def _digits(n: int) -> int:
    return len(str(abs(n)))


def _operands(rng: random.Random, op: str, digits: int, carry: bool) -> tuple[int, int]:
    """Operands with ``digits`` digits and a non-negative result; ``carry`` asks for a carry
    (``+``) or a borrow (``-``, when the operands have two digits or more) in the units."""
    lo, hi = (1, 9) if digits == 1 else (10 ** (digits - 1), 10**digits - 1)
    for _ in range(200):
        a, b = rng.randint(lo, hi), rng.randint(lo, hi)
        if op == "-" and b > a:
            a, b = b, a
        if not carry:
            return a, b
        if op == "+" and a % 10 + b % 10 >= 10:
            return a, b
        if op == "-" and (digits == 1 or (a % 10 < b % 10 and a != b)):
            return a, b
    return a, b


class ProgramTeacher:
    """Exact teacher for arithmetic chains (see the module docstring).

    Args:
        seed: base of every random choice (with the item and the trial).
        max_digits: ceiling on operand digits of harder variants.

    >>> t = ProgramTeacher()
    >>> [c.question for c in t.decompose(t.solve("X=5+3. Y=X-2. Y-4=?", 0), 0, 3)]
    ['5+3=?', '6-4=?']
    """

    name = "program"

    def __init__(self, seed: int = 0, max_digits: int = 4, **_: Any) -> None:
        self.seed = seed
        self.max_digits = max_digits
        self.calls = 0

    def cost(self) -> dict[str, int]:
        """``calls`` made so far; no tokens (no model behind it)."""
        return {"calls": self.calls, "prompt_tokens": 0, "completion_tokens": 0}

    @staticmethod
    def unreadable(question: str) -> str:
        """Why this teacher cannot grow ``question`` ("" if it can): checked before any
        profiling, so a set of seeds it cannot read costs no rollout.

        >>> ProgramTeacher.unreadable("X=5+3. Y=X-2. Y-4=?"), ProgramTeacher.unreadable("Find $x$.")
        ('', 'not_a_chain')
        """
        return "" if parse_chain(question) is not None else "not_a_chain"

    def _item(self, steps: Sequence[Step]) -> Item:
        q, trace = render_chain(steps)
        return Item(q, trace, str(chain_values(steps)[-1]), {"steps": [list(s) for s in steps]})

    @staticmethod
    def _steps(item: Item) -> list[Step]:
        steps = item.spec.get("steps") if item.spec else None
        if steps:
            return [(int(a), str(op), int(b)) for a, op, b in steps]
        parsed = parse_chain(item.question)
        if parsed is None:
            raise TeacherError("not_a_chain", f"the program teacher cannot read {item.question[:60]!r}")
        return parsed

    def solve(self, question: str, attempt: int) -> Item:
        """The chain ``question``'s trace and exact final value (``attempt`` changes
        nothing); raises :class:`TeacherError` ``not_a_chain`` when it is not a chain."""
        self.calls += 1
        steps = parse_chain(question)
        if steps is None:
            raise TeacherError("not_a_chain", f"the program teacher cannot read {question[:60]!r}")
        return self._item(steps)

    def decompose(self, item: Item, attempt: int, max_parts: int) -> list[Item]:
        """Contiguous sub-chains; retry ``attempt`` takes the next split in a fixed order
        (the finest split first), so a retry is a genuinely different decomposition."""
        self.calls += 1
        steps = self._steps(item)
        if len(steps) < 2:
            return []
        splits = _splits(len(steps), max_parts)
        sizes = splits[attempt % len(splits)]
        out, i = [], 0
        for n in sizes:
            out.append(self._item(steps[i : i + n]))
            i += n
        return out

    def harder(self, leaf: Item, trial: int) -> Item:
        """Level 1 (trials 0, 1): same digits with a carry or borrow forced; level 2 (2, 3):
        one more digit; and so on, up to ``max_digits``. Operators are kept."""
        self.calls += 1
        steps = self._steps(leaf)
        rng = random.Random(f"mbs-harder:{self.seed}:{leaf.question}:{trial}")
        level = 1 + trial // 2
        base = max(_digits(x) for a, _, b in steps for x in (a, b))
        digits = min(self.max_digits, base + level - 1)
        new = []
        for _, op, _ in steps:
            a, b = _operands(rng, op, digits, carry=True)
            new.append((a, op, b))
        return self._item(new)

    def compose(self, children: Sequence[Item], blueprint: Blueprint, trial: int) -> Item:
        """Relink the children's steps in the blueprint's order: the seed's configuration."""
        self.calls += 1
        if len(children) != len(blueprint.children):
            raise TeacherError("blueprint_mismatch", f"{len(children)} children for a blueprint of {len(blueprint.children)}")
        steps: list[Step] = []
        for child, orig in zip(children, blueprint.children):
            cs, os_ = self._steps(child), self._steps(orig)
            if [op for _, op, _ in cs] != [op for _, op, _ in os_]:
                raise TeacherError("blueprint_mismatch", f"child {child.question!r} does not follow {orig.question!r}")
            steps.extend(cs)
        return self._item(steps)

    def vary(self, item: Item, trial: int) -> Item:
        """Same shape, operators and digits, new operands: a shallow variation."""
        self.calls += 1
        steps = self._steps(item)
        rng = random.Random(f"mbs-vary:{self.seed}:{item.question}:{trial}")
        digits = max(_digits(x) for a, _, b in steps for x in (a, b))
        new = []
        for _, op, _ in steps:
            a, b = _operands(rng, op, digits, carry=False)
            new.append((a, op, b))
        return self._item(new)


def _splits(k: int, max_parts: int) -> list[tuple[int, ...]]:
    """Ordered ways to cut k steps into 2..max_parts contiguous parts, most parts first.

    >>> _splits(3, 3)
    [(1, 1, 1), (1, 2), (2, 1)]
    """
    out: list[tuple[int, ...]] = []

    def rec(left: int, parts: int, acc: tuple[int, ...]) -> None:
        if parts == 1:
            out.append(acc + (left,))
            return
        for first in range(1, left - parts + 2):
            rec(left - first, parts - 1, acc + (first,))

    for parts in range(min(k, max_parts), 1, -1):
        rec(k, parts, ())
    return out


TEACHERS.register("program")(ProgramTeacher)


# --------------------------------------------------------------------------- LLM teacher

_ITEM = {
    "type": "object",
    "properties": {"question": {"type": "string"}, "solution": {"type": "string"}, "answer": {"type": "string"}},
    "required": ["question", "solution", "answer"],
    "additionalProperties": False,
}
_SOLVE = {
    "type": "object",
    "properties": {"solution": {"type": "string"}, "answer": {"type": "string"}},
    "required": ["solution", "answer"],
    "additionalProperties": False,
}


def _decompose_schema(k: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"subproblems": {"type": "array", "items": _ITEM, "minItems": 1, "maxItems": k}},
        "required": ["subproblems"],
        "additionalProperties": False,
    }


def load_prompt(name: str) -> str:
    """``prompts/mbs_<name>.txt`` (placeholders are ``{{name}}``, replaced literally)."""
    return (resources.files("composition_rl") / "prompts" / f"mbs_{name}.txt").read_text(encoding="utf-8")


def _fill(template: str, **values: str) -> str:
    for k, v in values.items():
        template = template.replace("{{" + k + "}}", v)
    return template


def _show(item: Item) -> str:
    return f"Problem: {item.question}\nSolution: {item.trace}\nAnswer: {item.answer}"


class OpenAITeacher:
    """A chat model as teacher, through the project's OpenAI-compatible client.

    Args:
        base_url: one or more endpoints (a list or comma-separated).
        model: the served model name.
        temperature: sampling temperature; each attempt or trial sends its own seed, so a
            retry asks again instead of hitting the cache.
        max_tokens: most tokens per reply.
        seed: base of the per-attempt seeds.
        cache: optional :class:`~composition_rl.chat.cache.ResponseCache`.
        chat_options: further :class:`OpenAIChat` settings (``max_retries``, ``timeout_s`` ...).
    """

    name = "openai"

    def __init__(self, base_url: str | Sequence[str], model: str, temperature: float = 0.7,
                 max_tokens: int = 4096, seed: int = 0, cache: Any | None = None, **chat_options: Any) -> None:
        from composition_rl.chat.openai import OpenAIChat

        urls = [u.strip() for u in base_url.split(",")] if isinstance(base_url, str) else list(base_url)
        self.chat = OpenAIChat(base_urls=[u for u in urls if u], model=model, cache=cache, **chat_options)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.seed = seed
        self.calls = 0
        self.system = load_prompt("system")

    def cost(self) -> dict[str, int]:
        """The calls asked of this teacher and, from its client, the requests sent, cache
        hits, and prompt and completion tokens."""
        s = self.chat.stats
        return {"calls": self.calls, "requests_sent": s.calls, "cache_hits": s.cache_hits,
                "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens}

    def _ask(self, task: str, user: str, schema: Mapping[str, Any], salt: str) -> dict[str, Any]:
        from composition_rl.chat.base import ChatError, ChatRequest, run_chat_batch

        self.calls += 1
        req = ChatRequest.user(
            user, system=self.system, temperature=self.temperature, max_tokens=self.max_tokens,
            seed=int(content_id(str(self.seed), task, salt, n=8), 16), json_schema=schema,
        )
        res = run_chat_batch(self.chat, [req])[0]
        if isinstance(res, ChatError):
            if res.transient:  # no answer at all: the run stops, the seed stays unfinished for a rerun
                raise res
            raise TeacherError(f"chat_{res.kind}", res.detail[:200])
        text = res.text.strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        try:
            reply = json.loads(text)
        except json.JSONDecodeError as e:
            raise TeacherError("bad_json", f"{task}: {e.msg} in {text[:80]!r}") from None
        if not isinstance(reply, dict):
            raise TeacherError("bad_reply", f"{task}: a JSON {type(reply).__name__}, not an object")
        return reply

    @staticmethod
    def _item(reply: Any, task: str, question: str | None = None) -> Item:
        if not isinstance(reply, dict):
            raise TeacherError("bad_reply", f"{task}: an item is a {type(reply).__name__}, not an object")
        q = question if question is not None else reply.get("question")
        sol, ans = reply.get("solution"), reply.get("answer")
        missing = [k for k, v in (("question", q), ("solution", sol), ("answer", ans))
                   if not isinstance(v, (str, int, float)) or not str(v).strip()]
        if missing:
            raise TeacherError("bad_reply", f"{task}: missing or empty {', '.join(missing)}")
        sol = str(sol).strip()
        if "\\boxed{" not in sol:  # the trace must end in its answer so the verifier can tie them
            sol = f"{sol}\n\\boxed{{{str(ans).strip()}}}"
        return Item(str(q).strip(), sol, str(ans).strip())

    def solve(self, question: str, attempt: int) -> Item:
        """The model's trace and answer for ``question`` (``prompts/mbs_solve.txt``), the
        question kept as given.

        Raises:
            TeacherError: the reply is not usable (a refusal, bad JSON, an empty field).
            ChatError: the endpoint gave no answer at all (transient; the seed stays unfinished)."""
        reply = self._ask("solve", _fill(load_prompt("solve"), question=question), _SOLVE, f"{question}:{attempt}")
        return self._item(reply, "solve", question=question)

    def decompose(self, item: Item, attempt: int, max_parts: int) -> list[Item]:
        """The model's subproblems of ``item`` (``prompts/mbs_decompose.txt``); raises
        :class:`TeacherError` ``too_many_subproblems`` when it returns more than ``max_parts``."""
        user = _fill(load_prompt("decompose"), item=_show(item), k=str(max_parts))
        reply = self._ask("decompose", user, _decompose_schema(max_parts), f"{item.question}:{attempt}")
        subs = reply.get("subproblems")
        if not isinstance(subs, list):
            raise TeacherError("bad_reply", "decompose: no subproblems list")
        if len(subs) > max_parts:
            raise TeacherError("too_many_subproblems", f"{len(subs)} > K={max_parts}")
        return [self._item(s, "decompose") for s in subs]

    def harder(self, leaf: Item, trial: int) -> Item:
        """The model's harder variant of ``leaf`` (``prompts/mbs_harder.txt``)."""
        reply = self._ask("harder", _fill(load_prompt("harder"), item=_show(leaf)), _ITEM, f"{leaf.question}:{trial}")
        return self._item(reply, "harder")

    def compose(self, children: Sequence[Item], blueprint: Blueprint, trial: int) -> Item:
        """The model's parent built from ``children``, shown the blueprint's original
        parent and children as the pattern (``prompts/mbs_compose.txt``)."""
        user = _fill(
            load_prompt("compose"),
            parent=_show(blueprint.parent),
            original_children="\n\n".join(_show(c) for c in blueprint.children),
            children="\n\n".join(_show(c) for c in children),
        )
        key = "|".join(c.question for c in children)
        return self._item(self._ask("compose", user, _ITEM, f"{key}:{trial}"), "compose")

    def vary(self, item: Item, trial: int) -> Item:
        """The model's variation of ``item`` (``prompts/mbs_vary.txt``): the
        direct-synthesis baseline."""
        reply = self._ask("vary", _fill(load_prompt("vary"), item=_show(item)), _ITEM, f"{item.question}:{trial}")
        return self._item(reply, "vary")


TEACHERS.register("openai")(OpenAITeacher)
