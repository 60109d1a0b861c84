"""The LLM composition engine: the paper's SPC with any chat model, in 1-2 calls per link.

Seed 000, Section 3.4 has an LLM do the three sub-steps and three self-checks (about 11
chained calls per pair in the public release, with the arithmetic done by LLM-written,
executed Python). Here, per link ``q_k -> q_{k+1}``:

1. **One structured call** proposes everything the model is needed for: ``v1`` (a number
   from ``gt_k``, which may be an expression, a tuple, an interval ...), a natural
   definition of it, the constant in ``q_{k+1}`` and ``q_{k+1}`` rewritten with the marker
   ``<VAR>`` in its place (prompts: ``prompts/llm_propose*.txt``; JSON schema below).
2. **Exact checks in sympy, no model:** v1 must be the exact value of ``gt_k`` or a number
   literally present in it; putting the constant back for ``<VAR>`` must give ``q_{k+1}``
   character for character, at a position the symbolic rules allow (not in a figure, a
   subscript, a year, part of a larger number); ``d = v1 - v2`` is computed and rendered by
   program, and the rendered relation must parse back to ``d``; names and length.
3. **At most one verification call**, only when the exact checks cannot decide: v1 was taken
   from inside a compound answer (does the definition denote it?), the model rephrased
   ``q_{k+1}`` (is it the same problem?), or the constant is written in a form we cannot
   read (what number is it?). The model only reads values off; every comparison is sympy's.

Model-written code is never executed. Malformed output is a counted rejection with its
reason. A depth-K chain is ``SPC(q1..qK) = Compose(q1, SPC(q2..qK))``: K-1 links, each
proposed on the original problem texts (so a link's calls are shared, through the response
cache, by every chain that contains the pair).

Runs are resumable: every finished candidate is one line of an append-only journal keyed by
the candidate's content id; a rerun skips what is there, and the final ``composed.jsonl`` /
``rejected.jsonl`` are written from the journal in candidate order, so an interrupted and
resumed run writes the same bytes as an uninterrupted one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import sympy

from composition_rl.backends.base import (
    ChatBackend,
    ChatError,
    ChatRequest,
    ChatResponse,
    RequestRefused,
)
from composition_rl.compose import spc
from composition_rl.compose.base import Rejection
from composition_rl.compose.pools import (
    build_pools,
    candidate_id,
    count_candidates,
    iter_candidates,
)
from composition_rl.io.files import (
    JsonlLog,
    atomic_open,
    atomic_write_json,
    atomic_write_jsonl,
    dumps,
)
from composition_rl.records import Link, Problem
from composition_rl.values import (
    find_constants,
    parse_answer_value,
    parse_number,
    render_latex,
    symbols_used,
)

__all__ = [
    "LLM_STAGES",
    "LLMComposeConfig",
    "LLMComposer",
    "PROPOSE_SCHEMA",
    "VERIFY_SCHEMA",
    "add_llm_arguments",
    "check_llm_record",
    "compose_candidates",
    "llm_config_from_args",
    "parse_json_object",
    "run_llm_compose",
]

log = logging.getLogger(__name__)

MARKER = "<VAR>"
#: Where a candidate can be dropped, in funnel order (Appendix D's yield after each check).
LLM_STAGES = (
    "llm_call",
    "llm_output",
    "check1_v1",
    "constant",
    "check2_substitution",
    "check3_relation",
    "check4_names_length",
    "internal",
)
VARIABLE_NAMES: tuple[str, ...] = tuple("XYZWUVPQRSTMNKLGHJ")
VERIFY_MODES = ("auto", "always", "never")
STRUCTURED = ("auto", "json_schema", "json_object", "none")

PROPOSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "v1": {"type": "string"},
        "definition": {"type": "string"},
        "constant": {"type": "string"},
        "constant_value": {"type": "string"},
        "rewritten": {"type": "string"},
    },
    "required": ["v1", "definition", "constant", "constant_value", "rewritten"],
    "additionalProperties": False,
}
VERIFY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "definition_value": {"type": "string"},
        "same_problem": {"type": "boolean"},
        "constant_value": {"type": "string"},
    },
    "required": ["definition_value", "same_problem", "constant_value"],
    "additionalProperties": False,
}


# ---------------------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LLMComposeConfig:
    """How the LLM engine talks to its model.

    Args:
        backend: chat backend name (``openai`` for any OpenAI-compatible endpoint,
            ``local_hf`` for a local transformers model directory).
        base_urls: endpoint base URLs (``openai``); requests go to the least loaded one.
        model: served model name (``openai``) or model directory (``local_hf``).
        concurrency: most requests in flight.
        timeout_s: hard limit on one request attempt.
        max_retries: retries on timeouts, 5xx, 429 and connection errors.
        temperature, top_p: sampling (paper, Section 3.4: 0.1 and 0.7).
        max_tokens: most tokens per reply; a reply cut off there is a counted rejection.
        structured: ``auto`` (the first the server accepts of the next three),
            ``json_schema`` (strict schema), ``json_object`` (JSON mode with a ``schema``
            field, llama.cpp) or ``none`` (the prompt alone).
        verify: ``auto`` (a verification call only where exact checks cannot decide),
            ``always`` (one per link, the paper's stricter self-check) or ``never``.
        cache: response cache file; default ``<out>/llm_cache.jsonl``.
        no_cache: disable the response cache.
        device: for ``local_hf``.
        max_definition_chars: longest accepted definition.
    """

    backend: str = "openai"
    base_urls: tuple[str, ...] = ()
    model: str = ""
    concurrency: int = 64
    timeout_s: float = 120.0
    max_retries: int = 6
    temperature: float = 0.1
    top_p: float = 0.7
    max_tokens: int = 2048
    structured: str = "auto"
    verify: str = "auto"
    cache: str | None = None
    no_cache: bool = False
    device: str = "auto"
    max_definition_chars: int = 300

    def __post_init__(self) -> None:
        bad = []
        if self.backend not in ("openai", "local_hf"):
            bad.append(f"backend={self.backend!r} (openai or local_hf)")
        if not self.model:
            bad.append("model is empty (pass --model)")
        if self.concurrency < 1:
            bad.append(f"concurrency={self.concurrency} (must be >= 1)")
        if self.timeout_s <= 0:
            bad.append(f"timeout_s={self.timeout_s} (must be > 0)")
        if self.max_retries < 0:
            bad.append(f"max_retries={self.max_retries} (must be >= 0)")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            bad.append(f"temperature={self.temperature}, top_p={self.top_p} (need >= 0 and (0, 1])")
        if self.max_tokens < 16:
            bad.append(f"max_tokens={self.max_tokens} (must be >= 16)")
        if self.structured not in STRUCTURED:
            bad.append(f"structured={self.structured!r} (one of {', '.join(STRUCTURED)})")
        if self.verify not in VERIFY_MODES:
            bad.append(f"verify={self.verify!r} (one of {', '.join(VERIFY_MODES)})")
        if bad:
            raise ValueError("invalid LLM engine settings: " + "; ".join(bad))

    def public(self) -> dict[str, Any]:
        """Settings for stats.json (the key is never part of the config)."""
        d = asdict(self)
        d["base_urls"] = [re.sub(r"//[^/@]*@", "//", u) for u in self.base_urls]
        return d


def build_backend(cfg: LLMComposeConfig, cache: Any | None) -> ChatBackend:
    """The chat backend ``cfg`` names, with ``cache`` attached."""
    from composition_rl.backends.base import build_chat_backend

    if cfg.backend == "openai":
        if not cfg.base_urls:
            raise ValueError(
                "the openai backend needs an endpoint: pass --base-url URL (repeatable)"
            )
        return build_chat_backend(
            "openai",
            base_urls=list(cfg.base_urls),
            model=cfg.model,
            concurrency=cfg.concurrency,
            timeout_s=cfg.timeout_s,
            max_retries=cfg.max_retries,
            structured=cfg.structured,
            cache=cache,
        )
    return build_chat_backend("local_hf", model=cfg.model, device=cfg.device, cache=cache)


# ---------------------------------------------------------------------------------------
# prompts and tolerant JSON
# ---------------------------------------------------------------------------------------
@cache
def load_prompt(name: str) -> str:
    """A packaged prompt file ``prompts/<name>.txt``."""
    return (
        (resources.files("composition_rl") / "prompts" / f"{name}.txt")
        .read_text(encoding="utf-8")
        .strip()
    )


def _fill(template: str, **values: str) -> str:
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


# ---------------------------------------------------------------------------------------
# exact number helpers
# ---------------------------------------------------------------------------------------
_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = {
    w: 10 * (i + 2)
    for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())
}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}


def word_number(text: str) -> int | None:
    """A cardinal written in English words.

    >>> word_number("five"), word_number("Twenty-three"), word_number("two hundred five"), word_number("lots")
    (5, 23, 205, None)
    """
    words = re.split(r"[\s-]+", text.strip().lower().replace(" and ", " "))
    if not words or words == [""]:
        return None
    total = cur = 0
    seen = False
    for w in words:
        if w in _ONES:
            cur += _ONES.index(w)
        elif w in _TENS:
            cur += _TENS[w]
        elif w in _SCALES and seen:
            scale = _SCALES[w]
            if scale == 100:
                cur *= 100
            else:
                total += cur * scale
                cur = 0
        else:
            return None
        seen = True
    return total + cur


def _equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    if a.is_Rational and b.is_Rational:
        return a == b
    diff = sympy.nsimplify(a - b) if (a.has(sympy.Float) or b.has(sympy.Float)) else a - b
    if diff == 0:
        return True
    if diff.is_Rational:
        return False
    try:
        return sympy.simplify(diff) == 0
    except Exception:  # sympy can fail on odd input; unequal is the safe answer
        return False


_NUM_IN_TEXT = re.compile(r"\\[dt]?frac\s*\{\s*-?\d+\s*\}\s*\{\s*\d+\s*\}|\d+(?:\.\d+)?")


@lru_cache(maxsize=65536)
def answer_numbers(answer: str) -> tuple[sympy.Expr | None, tuple[sympy.Expr, ...]]:
    """(exact value of the whole answer or None, the numbers written inside it, with signs).

    >>> answer_numbers("(3,-1)")
    (None, (3, -1, 1))
    >>> answer_numbers("7x+10")[1]
    (7, 10)
    """
    av = parse_answer_value(answer)
    parts: list[sympy.Expr] = []
    for m in _NUM_IN_TEXT.finditer(answer):
        v = parse_number(m.group())
        if v is None:
            continue
        neg = answer[: m.start()].rstrip().endswith("-")
        for x in (-v, v) if neg else (v,):
            if x not in parts:
                parts.append(x)
    return (av.value if av is not None else None), tuple(parts)


def _has_number(text: str) -> bool:
    return bool(re.search(r"\d", text))


_WORD_RE = re.compile(
    r"\b(?:" + "|".join(sorted(_ONES + list(_TENS), key=len, reverse=True)) + r")\b", re.I
)


def _has_constant(text: str) -> bool:
    return _has_number(text) or bool(_WORD_RE.search(text))


def _in_math(text: str, pos: int) -> bool:
    """Whether ``pos`` lies inside $...$, $$...$$, \\(...\\) or \\[...\\]."""
    inside: str | None = None
    i = 0
    while i < pos:
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            pair = text[i : i + 2]
            if inside is None and pair in ("\\(", "\\["):
                inside = "\\)" if pair == "\\(" else "\\]"
            elif inside is not None and pair == inside:
                inside = None
            i += 2
            continue
        if c == "$":
            tok = "$$" if text.startswith("$$", i) else "$"
            if inside is None:
                inside = tok
            elif inside == tok:
                inside = None
            i += len(tok)
            continue
        i += 1
    return inside is not None


def exact(expr: str) -> sympy.Expr:
    """Exact value of a stored expression string ("7/2", "7*sqrt(2)", "14*pi")."""
    try:
        return sympy.Rational(expr)
    except (TypeError, ValueError):
        return sympy.sympify(expr, rational=True)


def relation(v1: sympy.Expr, v2: sympy.Rational) -> tuple[sympy.Expr, str, str, str]:
    r"""Sub-step 3 exactly: ``d = v1 - v2`` with (d, direction, |d| LaTeX, d LaTeX).

    >>> relation(sympy.Integer(7), sympy.Integer(1))
    (6, 'less', '6', '6')
    >>> print(*relation(sympy.Rational(1, 2), sympy.Integer(2))[1:])
    more \frac{3}{2} -\frac{3}{2}
    """
    d = sympy.nsimplify(v1 - v2) if v1.has(sympy.Float) else v1 - v2
    if d == 0:
        return d, "equal", "0", "0"
    if d.is_Rational:  # the common case, without sympy's assumption system
        pos = d > 0
        return d, ("less" if pos else "more"), render_latex(d if pos else -d), render_latex(d)
    pos = d.is_positive
    if pos is None:  # sympy could not decide symbolically: decide numerically at high precision
        pos = bool(d.evalf(60) > 0)
    return d, ("less" if pos else "more"), render_latex(d if pos else -d), render_latex(d)


def _rat_str(v: sympy.Rational) -> str:
    return str(v.p) if v.q == 1 else f"{v.p}/{v.q}"


def _expr_str(v: sympy.Expr) -> str:
    return _rat_str(v) if v.is_Rational else sympy.sstr(v)


# ---------------------------------------------------------------------------------------
# the composer
# ---------------------------------------------------------------------------------------
@dataclass
class Usage:
    """What one candidate cost: requests it needed and the tokens of their replies."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, resp: ChatResponse) -> None:
        self.requests += 1
        self.prompt_tokens += resp.prompt_tokens
        self.completion_tokens += resp.completion_tokens


@dataclass
class _LinkProposal:
    v1: sympy.Expr
    v1_whole: bool
    definition: str
    literal: str
    v2: sympy.Rational
    rewritten: str
    offsets: tuple[int, ...]  # literal offsets in the original later text (exact round trip)
    rephrased: bool
    verified_by: str = "symbolic"


@dataclass
class LLMComposer:
    """Compose chains with a chat model plus exact checks (see the module docstring).

    Args:
        backend: any :class:`~composition_rl.backends.base.ChatBackend`.
        config: sampling and verification settings.
        seed: sampling seed sent with every request.
        max_chars: length limit of a composed prompt.
    """

    backend: ChatBackend
    config: LLMComposeConfig
    seed: int = 0
    max_chars: int = 8000
    name: str = "llm"
    _inflight: dict[tuple[str, ...], asyncio.Future] = field(default_factory=dict, repr=False)
    _memo: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)

    # -- per-problem facts, computed once per problem id (pools reuse problems heavily) --------
    def _fact(self, kind: str, p: Problem, fn) -> Any:
        key = (kind, p.id)
        v = self._memo.get(key)
        if v is None:
            v = self._memo[key] = fn(p)
        return v

    def _symbols(self, p: Problem) -> frozenset[str]:
        return self._fact("sym", p, lambda p: symbols_used(p.question))

    def _answer_has_number(self, p: Problem) -> bool:
        return self._fact("anum", p, lambda p: any(_has_number(a) for a in p.answers))

    def _has_constant(self, p: Problem) -> bool:
        return self._fact("const", p, lambda p: _has_constant(p.question))

    def _allowed(self, p: Problem) -> dict[str, frozenset[int]]:
        def build(p: Problem) -> dict[str, frozenset[int]]:
            by: dict[str, set[int]] = {}
            for c in find_constants(p.question, p.answer):
                by.setdefault(c.literal, set()).add(c.offset)
            return {k: frozenset(v) for k, v in by.items()}

        return self._fact("allowed", p, build)

    # -- cheap eligibility (no calls) ---------------------------------------------------
    def eligible(self, p: Problem, position: int, depth: int) -> bool:
        """Whether ``p`` can stand at ``position`` (0-based): a number in the answer of every
        non-last problem, a constant in the text of every non-first one."""
        if position < depth - 1 and not self._answer_has_number(p):
            return False
        if position > 0 and not self._has_constant(p):
            return False
        return True

    def _prefilter(self, chain: Sequence[Problem]) -> Rejection | None:
        K = len(chain)
        for k in range(K - 1):
            if not self._answer_has_number(chain[k]):
                return Rejection(
                    "check1_v1",
                    "q1_no_number",
                    f"position {k + 1}: answer {chain[k].answer!r} has no number",
                )
        for k in range(1, K):
            if not self._has_constant(chain[k]):
                return Rejection(
                    "constant",
                    "no_constant",
                    f"position {k + 1}: problem {chain[k].id} has no number to replace",
                )
        used = frozenset().union(*(self._symbols(p) for p in chain))
        if len([n for n in VARIABLE_NAMES if n not in used]) < 2 * (K - 1):
            return Rejection(
                "check4_names_length", "name_collision", "not enough free variable names"
            )
        if sum(len(p.question) for p in chain) + 160 * (K - 1) > self.max_chars:
            return Rejection(
                "check4_names_length",
                "too_long",
                f"the problems alone exceed {self.max_chars} chars",
            )
        return None

    # -- model calls ------------------------------------------------------------------------
    def _request(self, system: str, user: str, schema: dict[str, Any]) -> ChatRequest:
        c = self.config
        return ChatRequest.user(
            user,
            system=system,
            temperature=c.temperature,
            top_p=c.top_p,
            max_tokens=c.max_tokens,
            seed=self.seed,
            json_schema=schema,
        )

    async def _ask(self, req: ChatRequest) -> ChatResponse:
        # identical requests in flight at once share one call
        key = tuple(m["content"] for m in req.messages)  # all other fields are fixed per composer
        fut = self._inflight.get(key)
        if fut is None:
            fut = asyncio.ensure_future(self.backend.chat(req))
            self._inflight[key] = fut
            fut.add_done_callback(lambda _f, k=key: self._inflight.pop(k, None))
        return await asyncio.shield(fut)

    async def _call(self, req: ChatRequest, usage: Usage) -> ChatResponse | Rejection:
        try:
            resp = await self._ask(req)
        except RequestRefused:
            raise  # every candidate would fail alike: the driver stops the run
        except ChatError as e:
            usage.requests += 1
            return Rejection("llm_call", f"llm_{e.kind}", e.detail[:300])
        usage.add(resp)
        return resp

    # -- one link -----------------------------------------------------------------------
    async def _link(
        self, earlier: Problem, later: Problem, usage: Usage
    ) -> _LinkProposal | Rejection:
        user = _fill(
            load_prompt("llm_propose"), Q1=earlier.question, GT1=earlier.answer, Q2=later.question
        )
        resp = await self._call(
            self._request(load_prompt("llm_propose_system"), user, PROPOSE_SCHEMA), usage
        )
        if isinstance(resp, Rejection):
            return resp
        obj = parse_json_object(resp.text)
        if obj is None:
            reason = (
                "truncated_output"
                if resp.choices[0].finish_reason == "length"
                else "malformed_output"
            )
            return Rejection("llm_output", reason, f"no JSON object in reply: {resp.text[:160]!r}")
        missing = [
            k
            for k in PROPOSE_SCHEMA["required"]
            if not isinstance(obj.get(k), (str, int, float)) or isinstance(obj.get(k), bool)
        ]
        if missing:
            return Rejection(
                "llm_output",
                "malformed_output",
                f"missing or non-text field(s): {', '.join(missing)}",
            )
        f = {k: str(obj[k]).strip() for k in PROPOSE_SCHEMA["required"]}

        # sub-step 1: v1 must come from the answer, exactly
        v1 = parse_number(f["v1"].strip("$ "))
        if v1 is None:  # "108 degrees", "\\$3.50": the number without its unit
            av = parse_answer_value(f["v1"])
            v1 = av.value if av is not None else None
        if v1 is None:
            return Rejection(
                "check1_v1", "v1_unparsable", f"v1 {f['v1'][:80]!r} is not an exact number"
            )
        whole = False
        parts: list[sympy.Expr] = []
        for a in earlier.answers:
            value, ps = answer_numbers(a)
            if value is not None and _equal(value, v1):
                whole = True
                break
            parts.extend(ps)
        if not whole and not any(_equal(p, v1) for p in parts):
            return Rejection(
                "check1_v1",
                "v1_not_in_answer",
                f"v1 {f['v1'][:80]!r} is neither the answer {earlier.answer[:80]!r} nor a number in it",
            )
        definition = (
            re.sub(r"^\s*let\s+\$?[A-Za-z]\$?\s+(?:be|denote)\s+", "", f["definition"], flags=re.I)
            .strip()
            .rstrip(".")
            .strip()
        )
        if (
            not definition
            or len(definition) > self.config.max_definition_chars
            or "\n" in definition
            or MARKER in definition
            or definition.replace("\\$", "").count("$") % 2
        ):
            return Rejection("check1_v1", "definition_invalid", f"definition {definition[:120]!r}")
        for m in _NUM_IN_TEXT.finditer(definition):
            v = parse_number(m.group())
            if v is not None and _equal(v, v1) and m.group() not in earlier.question:
                return Rejection(
                    "check1_v1",
                    "definition_leaks_value",
                    f"definition states the value: {definition[:120]!r}",
                )

        # sub-step 2: the constant and the rewritten later problem
        literal = f["constant"].strip().strip("$").strip()
        rewritten = f["rewritten"]
        if not literal or literal not in later.question:
            return Rejection(
                "constant",
                "constant_not_in_problem",
                f"constant {literal[:40]!r} does not occur in the problem",
            )
        if MARKER not in rewritten:
            return Rejection("constant", "marker_missing", "the rewritten problem has no <VAR>")
        v2 = parse_number(literal)
        v2_from_words = False
        if v2 is None:
            w = word_number(literal)
            if w is not None:
                v2 = sympy.Integer(w)
            else:
                v2 = parse_number(f["constant_value"].strip("$ "))
                v2_from_words = True
        if v2 is None:
            return Rejection(
                "constant", "v2_unparsable", f"constant {literal[:40]!r} has no readable value"
            )
        if not v2.is_Rational:
            return Rejection(
                "constant", "v2_not_rational", f"constant {literal[:40]!r} = {v2} is not rational"
            )
        restored = rewritten.replace(MARKER, literal)
        rephrased = restored != later.question
        offsets: tuple[int, ...] = ()
        if not rephrased:
            shift = len(literal) - len(MARKER)
            starts = [m.start() for m in re.finditer(re.escape(MARKER), rewritten)]
            offsets = tuple(s + i * shift for i, s in enumerate(starts))
            allowed = self._allowed(later).get(literal, frozenset())
            for off in offsets:
                if off in allowed:
                    continue
                before = later.question[off - 1 : off] if off else " "
                after = later.question[off + len(literal) : off + len(literal) + 1] or " "
                is_word = (
                    parse_number(literal) is None
                    and re.fullmatch(r"[A-Za-z][A-Za-z -]*", literal) is not None
                )
                if (
                    is_word
                    and not before.isalnum()
                    and not after.isalnum()
                    and not _in_math(later.question, off)
                ):
                    continue
                return Rejection(
                    "constant",
                    "constant_not_allowed",
                    f"{literal!r} at offset {off} is in a figure, a subscript or label, a year, or part of a larger number",
                )
        else:
            if self.config.verify == "never":
                return Rejection(
                    "check2_substitution",
                    "substitution_mismatch",
                    "restoring the constant does not give the original text",
                )
            ratio = len(restored) / max(1, len(later.question))
            if not 0.5 <= ratio <= 2.0:
                return Rejection(
                    "check2_substitution",
                    "substitution_mismatch",
                    f"the rewritten problem is {ratio:.2f}x the original length",
                )

        prop = _LinkProposal(v1, whole, definition, literal, v2, rewritten, offsets, rephrased)

        # sub-step "verify": one call, only when the exact checks cannot decide
        need = self.config.verify == "always" or not whole or rephrased or v2_from_words
        if need and self.config.verify == "never":  # only what exact checks decide is kept
            if not whole:
                return Rejection(
                    "check1_v1",
                    "definition_unverified",
                    "v1 is part of a compound answer and --verify never",
                )
            return Rejection(
                "constant",
                "v2_unverified",
                f"{literal!r} cannot be read by program and --verify never",
            )
        if need:
            user = _fill(
                load_prompt("llm_verify"),
                Q1=earlier.question,
                GT1=earlier.answer,
                DEFINITION=definition,
                Q2=later.question,
                REWRITTEN=rewritten,
                LITERAL=literal,
            )
            resp = await self._call(
                self._request(load_prompt("llm_verify_system"), user, VERIFY_SCHEMA), usage
            )
            if isinstance(resp, Rejection):
                return resp
            vobj = parse_json_object(resp.text)
            if vobj is None:
                reason = (
                    "truncated_verification"
                    if resp.choices[0].finish_reason == "length"
                    else "malformed_verification"
                )
                return Rejection(
                    "llm_output", reason, f"no JSON object in reply: {resp.text[:160]!r}"
                )
            always = self.config.verify == "always"
            if always or not whole:
                dv = parse_number(str(vobj.get("definition_value", "")).strip("$ "))
                if dv is None or not _equal(dv, v1):
                    return Rejection(
                        "check1_v1",
                        "definition_rejected",
                        f"the definition reads as {str(vobj.get('definition_value'))[:40]!r}, not {f['v1'][:40]!r}",
                    )
            if always or rephrased:
                same = vobj.get("same_problem")
                if not (same is True or str(same).strip().lower() == "true"):
                    return Rejection(
                        "check2_substitution",
                        "rephrase_rejected",
                        "the rewritten problem is not the same problem",
                    )
            if always or v2_from_words:
                cv = parse_number(str(vobj.get("constant_value", "")).strip("$ "))
                if cv is None or not _equal(cv, v2):
                    return Rejection(
                        "check2_substitution",
                        "v2_value_mismatch",
                        f"{literal!r} reads as {str(vobj.get('constant_value'))[:40]!r}, not {v2}",
                    )
            prop.verified_by = "llm"
        return prop

    # -- one chain ----------------------------------------------------------------------
    async def compose(
        self, chain: Sequence[Problem], cid: str, usage: Usage | None = None
    ) -> tuple[Problem | Rejection, Usage]:
        """``SPC(q1..qK) = Compose(q1, SPC(q2..qK))`` for one candidate chain."""
        usage = usage if usage is not None else Usage()
        pre = self._prefilter(chain)
        if pre is not None:
            return pre, usage
        K = len(chain)
        props: list[_LinkProposal] = [None] * (K - 1)  # type: ignore[list-item]
        for k in reversed(range(K - 1)):  # innermost link first; stop at the first failure
            res = await self._link(chain[k], chain[k + 1], usage)
            if isinstance(res, Rejection):
                return Rejection(res.stage, res.reason, f"link {k + 1}: {res.detail}"), usage
            props[k] = res
            # a middle problem has a definition (link k+1) and a replaced constant (link k):
            # a definition that restates the constant would give the variable away
            if k + 1 <= K - 2 and re.search(
                r"(?<![\w.])" + re.escape(res.literal) + r"(?![\w.])", props[k + 1].definition
            ):
                return Rejection(
                    "check1_v1",
                    "definition_reveals_constant",
                    f"link {k + 2}: the definition restates {res.literal!r}, which link {k + 1} replaced",
                ), usage
        return self._assemble(chain, cid, props), usage

    def _assemble(
        self, chain: Sequence[Problem], cid: str, props: Sequence[_LinkProposal]
    ) -> Problem | Rejection:
        K = len(chain)
        used = frozenset().union(
            *(self._symbols(p) for p in chain), *(symbols_used(p.definition) for p in props)
        )
        free = [n for n in VARIABLE_NAMES if n not in used]
        if len(free) < 2 * (K - 1):
            return Rejection(
                "check4_names_length",
                "name_collision",
                f"only {len(free)} free variable names for {K - 1} links",
            )
        segments = [chain[0].question]
        glues, links = [], []
        for k, p in enumerate(props):
            x, y = free[2 * k], free[2 * k + 1]
            restored = p.rewritten.replace(MARKER, p.literal)
            text = p.rewritten
            # substitute right to left so earlier positions stay valid
            starts = [m.start() for m in re.finditer(re.escape(MARKER), text)]
            shift = len(p.literal) - len(MARKER)
            for i in reversed(range(len(starts))):
                s = starts[i]
                pos_restored = s + i * shift
                tail = text[s + len(MARKER) : s + len(MARKER) + 12]
                token = spc.variable_token(y, _in_math(restored, pos_restored), tail)
                text = text[:s] + token + text[s + len(MARKER) :]
            segments.append(text)
            d, direction, d_abs_latex, d_latex = relation(p.v1, p.v2)
            # check 3 by a second path: the written relation parses back to d, v1 - d == v2
            written = sympy.Integer(0) if direction == "equal" else parse_number(d_abs_latex)
            if written is None:
                return Rejection(
                    "check3_relation",
                    "relation_unparsable",
                    f"link {k + 1}: cannot read d from {d_abs_latex!r}",
                )
            written = written if direction != "more" else -written
            if not _equal(written, d) or not _equal(p.v1 - written, p.v2):
                return Rejection(
                    "check3_relation",
                    "relation_mismatch",
                    f"link {k + 1}: written {written}, d {d}",
                )
            glues.append(
                f"Let ${x}$ be {p.definition}. {spc.relation_sentence(x, y, d_abs_latex, direction)}"
            )
            links.append(
                Link(
                    x=x,
                    y=y,
                    v1_latex=render_latex(p.v1),
                    v1_expr=_expr_str(p.v1),
                    v2_literal=p.literal,
                    v2_expr=_rat_str(p.v2),
                    d_latex=d_latex,
                    d_expr=_expr_str(d),
                    v2_offset=p.offsets[0] if p.offsets else -1,
                )
            )
        text = segments[0]
        for g, seg in zip(glues, segments[1:]):
            text = spc.join(text, g, seg)
        if len(text) > self.max_chars:
            return Rejection(
                "check4_names_length", "too_long", f"{len(text)} chars > {self.max_chars}"
            )
        composed = Problem.new(
            text,
            chain[-1].answers,
            source="compose:llm",
            depth=K,
            parents=tuple(p.id for p in chain),
            links=tuple(links),
            engine="llm",
            metadata={
                "candidate": cid,
                "parent_sources": [p.source for p in chain],
                "parent_metadata": [dict(p.metadata) for p in chain],
                "definitions": [p.definition for p in props],
                "v1_from": ["answer" if p.v1_whole else "part_of_answer" for p in props],
                "rephrased": [p.rephrased for p in props],
                "verified_by": [p.verified_by for p in props],
                "llm_model": self.backend.model
                if self.backend.name != "local_hf"
                else Path(self.backend.model).name,
            },
        )
        failure = check_llm_record(composed, chain, self.max_chars)
        if failure is not None:
            return failure
        return composed


# ---------------------------------------------------------------------------------------
# the contract check, on the record alone
# ---------------------------------------------------------------------------------------
def _glue_re(x: str, y: str) -> re.Pattern[str]:
    return re.compile(
        r"\n\nLet \$" + re.escape(x) + r"\$ be (?P<def>[^\n]+?)\. "
        r"\$"
        + re.escape(y)
        + r"\$ is (?:\$(?P<d>[^$\n]+)\$ (?P<dir>less|more) than|(?P<eq>equal to)) "
        r"\$" + re.escape(x) + r"\$\.\n\n"
    )


def check_llm_record(
    c: Problem, parents: Sequence[Problem], max_chars: int = 8000
) -> Rejection | None:
    """Re-derive an LLM composition from its record and parents; None when it checks out.

    1. v1 is the exact value of the earlier answer or a number written in it.
    2. Putting the literal back for the variable gives the later problem character for
       character (links whose problem the model rephrased, ``v2_offset == -1``, were
       confirmed by the verification call instead and are marked in ``metadata``).
    3. The relation in the text parses back to d, and v1 - d == v2 exactly.
    4. Distinct names that clash with no symbol of any parent; the length limit.
    """
    K = len(parents)
    if c.depth != K or len(c.links) != K - 1 or tuple(p.id for p in parents) != c.parents:
        return Rejection(
            "check1_v1", "bad_record", "depth, links and parents do not match the chain"
        )
    if tuple(c.answers) != tuple(parents[-1].answers):
        return Rejection(
            "check1_v1", "answer_mismatch", "the composed answer is not the last problem's answer"
        )
    text = c.question
    glues, pos = [], 0
    for k, lk in enumerate(c.links):
        m = _glue_re(lk.x, lk.y).search(text, pos)
        if m is None:
            return Rejection(
                "check3_relation",
                "relation_missing",
                f"link {k + 1}: no definition/relation paragraph",
            )
        glues.append(m)
        pos = m.end()
    segments = [text[: glues[0].start()]]
    for k in range(K - 1):
        segments.append(text[glues[k].end() : glues[k + 1].start() if k + 2 < K else len(text)])
    if segments[0] != parents[0].question:
        return Rejection("check1_v1", "q1_modified", "the first problem's text was changed")
    rephrased = list(c.metadata.get("rephrased", [False] * (K - 1)))
    for k, lk in enumerate(c.links):
        v1 = parse_number(lk.v1_latex)
        if v1 is None or not _equal(v1, exact(lk.v1_expr)):
            return Rejection(
                "check1_v1", "v1_mismatch", f"link {k + 1}: v1 {lk.v1_latex!r} != {lk.v1_expr!r}"
            )
        ok = False
        for a in parents[k].answers:
            whole, parts = answer_numbers(a)
            if (whole is not None and _equal(whole, v1)) or any(_equal(p, v1) for p in parts):
                ok = True
                break
        if not ok:
            return Rejection(
                "check1_v1",
                "v1_not_in_answer",
                f"link {k + 1}: {lk.v1_latex} is not in {parents[k].answer!r}",
            )
        v2 = exact(lk.v2_expr)
        lit = parse_number(lk.v2_literal)
        if lit is None and word_number(lk.v2_literal) is not None:
            lit = sympy.Integer(word_number(lk.v2_literal))
        if lit is not None and lit != v2:
            return Rejection(
                "check2_substitution",
                "v2_mismatch",
                f"link {k + 1}: {lk.v2_literal!r} is not {lk.v2_expr}",
            )
        seg, original = segments[k + 1], parents[k + 1].question
        if lk.v2_offset >= 0:
            pat = re.compile(
                r"(?<![A-Za-z\\])(?:\$"
                + lk.y
                + r"\$|"
                + lk.y
                + r" \\cdot |"
                + lk.y
                + r")(?![A-Za-z])"
            )
            back = pat.sub(lambda _m, s=lk.v2_literal: s, seg)
            if back != original or not original.startswith(lk.v2_literal, lk.v2_offset):
                return Rejection(
                    "check2_substitution",
                    "substitution_mismatch",
                    f"link {k + 1}: restoring {lk.v2_literal!r} does not give the original",
                )
        elif not (k < len(rephrased) and rephrased[k]):
            return Rejection(
                "check2_substitution",
                "substitution_mismatch",
                f"link {k + 1}: no offset and not marked as verified rephrase",
            )
        g = glues[k]
        if g.group("eq"):
            written = sympy.Integer(0)
        else:
            mag = parse_number(g.group("d"))
            if mag is None or not mag.is_positive:
                return Rejection(
                    "check3_relation",
                    "relation_unparsable",
                    f"link {k + 1}: cannot read d from {g.group('d')!r}",
                )
            written = mag if g.group("dir") == "less" else -mag
        d = parse_number(lk.d_latex)
        if d is None or not _equal(written, d) or not _equal(v1 - written, v2):
            return Rejection(
                "check3_relation",
                "relation_mismatch",
                f"link {k + 1}: text says {written}, record says {lk.d_latex}",
            )
    names = [n for lk in c.links for n in (lk.x, lk.y)]
    if len(set(names)) != len(names):
        return Rejection("check4_names_length", "name_collision", f"variable names repeat: {names}")
    used = frozenset().union(*(symbols_used(p.question) for p in parents))
    clash = sorted(set(n.upper() for n in names) & used)
    if clash:
        return Rejection(
            "check4_names_length", "name_collision", f"{clash} already used as symbols"
        )
    if len(text) > max_chars:
        return Rejection("check4_names_length", "too_long", f"{len(text)} chars > {max_chars}")
    return None


# ---------------------------------------------------------------------------------------
# the resumable, concurrent driver
# ---------------------------------------------------------------------------------------
class _Bar:
    """Progress: candidates, acceptance, calls/s and tokens (rich; free when disabled)."""

    def __init__(self, total: int | None, enabled: bool) -> None:
        self._p = None
        if not enabled:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._p = Progress(
            TextColumn("llm compose"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("acc {task.fields[acc]}"),
            TextColumn("{task.fields[cps]} calls/s"),
            TextColumn("{task.fields[tok]} tok"),
            TimeElapsedColumn(),
            transient=True,
        )
        self._p.start()
        self._t = self._p.add_task("llm", total=total, acc="-", cps="0.0", tok="0")

    def update(self, done: int, accepted: int, calls: int, tokens: int, elapsed: float) -> None:
        if self._p is None:
            return
        acc = f"{accepted / done:.0%}" if done else "-"
        cps = f"{calls / elapsed:.1f}" if elapsed > 0 else "0.0"
        self._p.update(self._t, completed=done, acc=acc, cps=cps, tok=f"{tokens:,}")

    def close(self) -> None:
        if self._p is not None:
            self._p.stop()


JOURNAL = "llm_journal.jsonl"
RUN_FILE = "llm_run.json"


def _claim_run(
    out: Path, engine: str, cfg: LLMComposeConfig, seed: int, max_chars: int, backend: Any
) -> None:
    """Record what the journal in ``out`` was made with; refuse to resume it with other
    settings (a rerun would otherwise mix two models' compositions in one output)."""
    import hashlib

    prompts = "".join(
        load_prompt(n)
        for n in ("llm_propose_system", "llm_propose", "llm_verify_system", "llm_verify")
    )
    mine = {
        "engine": engine,
        "backend": backend.name if backend is not None else cfg.backend,
        "model": backend.model if backend is not None else cfg.model,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "max_tokens": cfg.max_tokens,
        "verify": cfg.verify,
        "seed": seed,
        "max_chars": max_chars,
        "prompts_sha256": hashlib.sha256(prompts.encode()).hexdigest()[:16],
    }
    path = out / RUN_FILE
    if path.exists() and (out / JOURNAL).exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        diff = {k: (old.get(k), v) for k, v in mine.items() if old.get(k) != v}
        if diff:
            shown = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in sorted(diff.items()))
            raise ValueError(
                f"{out} holds an LLM compose run made with other settings ({shown}); use a new --out or delete {out / JOURNAL}"
            )
    atomic_write_json(path, mine)


def compose_candidates(
    candidates: Iterable[Sequence[Problem]],
    out_dir: str | os.PathLike,
    llm_config: LLMComposeConfig,
    engine: str = "llm",
    seed: int = 0,
    max_chars: int = 8000,
    backend: ChatBackend | None = None,
    total: int | None = None,
    progress: bool = True,
    extra_stats: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Compose candidate chains with the LLM engine (or ``auto``: symbolic first) and write
    ``composed.jsonl``, ``rejected.jsonl`` and ``stats.json`` into ``out_dir``.

    Resumable: rerun with the same ``out_dir`` after a crash or ``kill -9``; finished
    candidates are read from the journal and never composed (or called for) again.

    Args:
        candidates: chains (q1..qK) in a deterministic order.
        backend: a ready chat backend (tests, benchmarks); by default built from
            ``llm_config`` with the response cache attached.
        total: number of candidates, for the progress bar.
    Returns:
        The stats written to ``stats.json``.
    """
    if engine not in ("llm", "auto"):
        raise ValueError(f"engine={engine!r}; the LLM driver runs 'llm' or 'auto'")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _claim_run(out, engine, llm_config, seed, max_chars, backend)
    cache = None
    own_backend = backend is None
    if own_backend:
        if not llm_config.no_cache:
            from composition_rl.backends.cache import ResponseCache

            cache = ResponseCache(llm_config.cache or out / "llm_cache.jsonl")
        backend = build_backend(llm_config, cache)
    assert backend is not None
    composer = LLMComposer(backend, llm_config, seed=seed, max_chars=max_chars)
    symbolic = None
    if engine == "auto":
        from composition_rl.compose.base import COMPOSERS

        symbolic = COMPOSERS.get("symbolic")(seed=seed, max_chars=max_chars)
    t0 = time.perf_counter()
    try:
        order, journal_path = asyncio.run(
            _drive(
                candidates,
                out,
                composer,
                symbolic,
                backend,
                llm_config.concurrency,
                total,
                progress,
                own_backend,
            )
        )
    except RequestRefused as e:
        e.args = (
            f"{e}. Candidates finished so far are kept in {out / JOURNAL}; rerun with the "
            "setting changed to go on",
        )
        raise
    finally:
        if cache is not None:
            cache.close()
    elapsed = time.perf_counter() - t0
    return _finalize(
        out, order, journal_path, engine, backend, llm_config, elapsed, extra_stats or {}
    )


async def _drive(
    candidates, out, composer, symbolic, backend, concurrency, total, progress, own_backend
):
    journal = JsonlLog(out / JOURNAL, key="cid")
    order: list[str] = []
    seen: set[str] = set()
    done_before = len(journal.done)
    counters = {"done": 0, "accepted": 0, "tokens": 0}
    bar = _Bar(total, progress)
    t0 = time.perf_counter()
    slots = asyncio.Semaphore(max(2 * concurrency, 4))
    tasks: set[asyncio.Task] = set()

    def tick() -> None:
        s = backend.stats
        bar.update(
            counters["done"],
            counters["accepted"],
            s.calls,
            s.prompt_tokens + s.completion_tokens,
            time.perf_counter() - t0,
        )

    refused: list[RequestRefused] = []

    async def one(chain: Sequence[Problem], cid: str) -> None:
        usage = Usage()
        try:
            used_engine = "llm"
            res: Problem | Rejection | None = None
            if symbolic is not None and all(
                symbolic.eligible(p, k, len(chain)) for k, p in enumerate(chain)
            ):
                sres = symbolic.compose(chain, cid)
                if isinstance(sres, Problem):
                    res, used_engine = sres, "symbolic"
            if res is None:
                res, _ = await composer.compose(chain, cid, usage)
        except RequestRefused as e:
            refused.append(e)  # not journaled: a rerun with the option changed redoes it
            return
        except Exception as e:  # a bug must not sink a day-long run: count it, loudly
            log.exception("candidate %s failed", cid)
            res, used_engine = (
                Rejection("internal", "internal_error", f"{type(e).__name__}: {e}"[:300]),
                "llm",
            )
        ok = isinstance(res, Problem)
        row = {
            "cid": cid,
            "ok": ok,
            "engine": used_engine,
            "requests": usage.requests,
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "row": res.to_dict() if ok else res.row(cid, chain),
        }
        journal.append(row)
        counters["done"] += 1
        counters["accepted"] += int(ok)
        tick()

    try:
        for chain in candidates:
            if refused:
                break
            chain = tuple(chain)
            cid = candidate_id(chain)
            if cid in seen:
                continue  # the same chain twice in the input: composed once
            seen.add(cid)
            order.append(cid)
            if cid in journal.done:
                counters["done"] += 1
                continue
            await slots.acquire()
            t = asyncio.create_task(one(chain, cid))
            tasks.add(t)
            t.add_done_callback(lambda t: (tasks.discard(t), slots.release()))
        if refused:
            for t in list(tasks):
                t.cancel()
        if tasks:
            await asyncio.gather(*list(tasks), return_exceptions=bool(refused))
        tick()
        if refused:
            raise refused[0]
    finally:
        bar.close()
        journal.close()
        if own_backend:
            await backend.aclose()
        else:
            await backend.end_loop()
    log.info("llm compose: %d candidates, %d already done before this run", len(order), done_before)
    return order, out / JOURNAL


def _index_journal(path: Path) -> dict[str, int]:
    offsets: dict[str, int] = {}
    pos = 0
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break
            offsets.setdefault(json.loads(raw)["cid"], pos)
            pos += len(raw)
    return offsets


def _finalize(
    out, order, journal_path, engine, backend, llm_config, elapsed, extra
) -> dict[str, Any]:
    offsets = _index_journal(journal_path)
    reasons: Counter[str] = Counter()
    stages: Counter[str] = Counter()
    by_engine: Counter[str] = Counter()
    requests = ptoks = ctoks = accepted = missing = 0
    with (
        open(journal_path, "rb") as j,
        atomic_open(out / "composed.jsonl") as fa,
        atomic_open(out / "rejected.jsonl") as fr,
    ):
        for cid in order:
            off = offsets.get(cid)
            if off is None:
                missing += 1  # only possible if a task died without a journal line
                continue
            j.seek(off)
            e = json.loads(j.readline())
            requests += e["requests"]
            ptoks += e["prompt_tokens"]
            ctoks += e["completion_tokens"]
            if e["ok"]:
                accepted += 1
                by_engine[e["engine"]] += 1
                fa.write(dumps(e["row"]) + "\n")
            else:
                reasons[e["row"]["reason"]] += 1
                stages[e["row"]["stage"]] += 1
                fr.write(dumps(e["row"]) + "\n")
    n = len(order) - missing
    funnel = [{"stage": "candidates", "kept": n}]
    kept = n
    for s in LLM_STAGES:
        kept -= stages.get(s, 0)
        funnel.append({"stage": s, "kept": kept})
    s = backend.stats
    llm_acc = by_engine.get("llm", 0)
    stats = {
        **extra,
        "engine": engine,
        "llm_config": llm_config.public(),
        "backend": backend.describe(),
        "candidates": n,
        "accepted": accepted,
        "rejected": n - accepted,
        "acceptance": round(accepted / n, 6) if n else 0.0,
        "accepted_by_engine": dict(sorted(by_engine.items())),
        "rejected_by_reason": dict(sorted(reasons.items())),
        "rejected_by_stage": {st: stages.get(st, 0) for st in LLM_STAGES},
        "funnel": funnel,
        "llm": {
            "requests": requests,
            "prompt_tokens": ptoks,
            "completion_tokens": ctoks,
            "requests_per_accepted": round(requests / accepted, 4) if accepted else None,
            "requests_per_llm_accepted": round(requests / llm_acc, 4) if llm_acc else None,
        },
        "this_run": {
            **s.to_dict(),
            "calls_per_s": round(s.calls / elapsed, 2) if elapsed > 0 else None,
            **_bound(s, llm_config.concurrency, elapsed),
        },
        "elapsed_s": round(elapsed, 3),
    }
    atomic_write_json(out / "stats.json", stats)
    return stats


def _bound(s: Any, concurrency: int, elapsed: float) -> dict[str, Any]:
    """The concurrency/latency bound on calls/s and the fraction of it this run reached.

    With ``concurrency`` requests in flight and a mean latency L per successful call (as the
    client saw it, queueing at the server included), no client can exceed concurrency / L
    calls/s; the fraction says how well the engine kept its slots busy.
    """
    if not s.ok or s.latency_s <= 0 or elapsed <= 0:
        return {"mean_latency_s": None, "bound_calls_per_s": None, "fraction_of_bound": None}
    lat = s.latency_s / s.ok
    bound = concurrency / lat
    return {
        "mean_latency_s": round(lat, 3),
        "bound_calls_per_s": round(bound, 3),
        "fraction_of_bound": round(s.ok / elapsed / bound, 3),
    }


def run_llm_compose(
    problems: Sequence[Problem],
    config: Any,
    out_dir: str | os.PathLike,
    first_pool: Sequence[Problem] | None = None,
    inputs: dict[str, Any] | None = None,
    input_rejects: Sequence[dict[str, Any]] = (),
    progress: bool = True,
    llm_config: LLMComposeConfig | None = None,
    backend: ChatBackend | None = None,
) -> dict[str, Any]:
    """``crl compose --engine llm|auto``: pools and candidates as the symbolic pipeline builds
    them (Section 3.4; cross-domain with ``first_pool``), composed by the LLM engine.

    Args:
        config: the pipeline's ``ComposeConfig`` (depth, pools, seed, max_chars, engine).
        llm_config: the model settings; required unless ``backend`` is given.
    """
    if llm_config is None:
        if backend is None:
            raise ValueError("engine llm/auto needs a model: pass --base-url URL and --model NAME")
        llm_config = LLMComposeConfig(model=backend.model)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    probe = LLMComposer(backend=None, config=llm_config)  # type: ignore[arg-type]  # eligibility only
    symbolic = None
    if config.engine == "auto":
        from composition_rl.compose.base import COMPOSERS

        symbolic = COMPOSERS.get("symbolic")(seed=config.seed, max_chars=config.max_chars)

    def eligible(p: Problem, k: int) -> bool:
        ok = probe.eligible(p, k, config.depth)
        return ok or (symbolic is not None and symbolic.eligible(p, k, config.depth))

    first = first_pool if first_pool is not None else problems
    sets = [first] + [problems] * (config.depth - 1)
    pools = build_pools(sets, config.sizes, config.seed, eligible)
    upper = count_candidates(pools)
    total = min(upper, config.max_candidates) if config.max_candidates else upper
    atomic_write_jsonl(out / "input_rejects.jsonl", input_rejects)
    extra = {
        "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(config).items()},
        "pools": [len(p) for p in pools],
        "inputs": inputs or {},
        "input_rejects": len(input_rejects),
    }
    return compose_candidates(
        iter_candidates(pools, config.seed, config.max_candidates),
        out,
        llm_config,
        engine=config.engine,
        seed=config.seed,
        max_chars=config.max_chars,
        backend=backend,
        total=total,
        progress=progress,
        extra_stats=extra,
    )


# ---------------------------------------------------------------------------------------
# command-line options (used by `crl compose`)
# ---------------------------------------------------------------------------------------
def add_llm_arguments(parser: Any) -> None:
    """The ``--engine llm|auto`` options of ``crl compose``."""
    g = parser.add_argument_group(
        "LLM engine (--engine llm|auto); the API key is read from OPENAI_API_KEY only"
    )
    g.add_argument(
        "--llm-backend",
        default="openai",
        choices=["openai", "local_hf"],
        help="chat backend (default openai)",
    )
    g.add_argument(
        "--base-url",
        action="append",
        default=[],
        metavar="URL",
        help="OpenAI-compatible base URL, e.g. http://host:8000/v1 (repeatable; least-loaded balancing)",
    )
    g.add_argument(
        "--model",
        default="",
        help="served model name, or a model directory for --llm-backend local_hf",
    )
    g.add_argument("--concurrency", type=int, default=64, help="requests in flight (default 64)")
    g.add_argument(
        "--timeout", type=float, default=120.0, help="per-request timeout in seconds (default 120)"
    )
    g.add_argument(
        "--max-retries",
        type=int,
        default=6,
        help="retries on timeouts, 5xx, 429, connection errors (default 6)",
    )
    g.add_argument(
        "--temperature", type=float, default=0.1, help="sampling temperature (paper: 0.1)"
    )
    g.add_argument("--top-p", type=float, default=0.7, help="nucleus mass (paper: 0.7)")
    g.add_argument(
        "--max-tokens", type=int, default=2048, help="most tokens per reply (default 2048)"
    )
    g.add_argument(
        "--structured",
        default="auto",
        choices=list(STRUCTURED),
        help="how JSON output is requested: auto (json_schema, else json_object with a schema, "
        "else the prompt alone, as the server accepts), or one of them",
    )
    g.add_argument(
        "--verify",
        default="auto",
        choices=list(VERIFY_MODES),
        help="verification calls: auto (only where exact checks cannot decide), always, never",
    )
    g.add_argument(
        "--cache", default=None, help="response cache file (default OUT/llm_cache.jsonl)"
    )
    g.add_argument("--no-cache", action="store_true", help="do not cache responses")
    g.add_argument("--device", default="auto", help="device for --llm-backend local_hf")


def llm_config_from_args(args: Any) -> LLMComposeConfig:
    """An :class:`LLMComposeConfig` from parsed ``crl compose`` arguments (ValueError if bad)."""
    if args.llm_backend == "openai" and not args.base_url:
        raise ValueError(
            "--engine llm/auto needs an endpoint: pass --base-url URL (repeatable) and --model NAME"
        )
    return LLMComposeConfig(
        backend=args.llm_backend,
        base_urls=tuple(args.base_url),
        model=args.model,
        concurrency=args.concurrency,
        timeout_s=args.timeout,
        max_retries=args.max_retries,
        temperature=args.temperature,
        top_p=args.top_p,
        max_tokens=args.max_tokens,
        structured=args.structured,
        verify=args.verify,
        cache=args.cache,
        no_cache=args.no_cache,
        device=args.device,
    )
