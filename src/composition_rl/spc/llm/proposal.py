"""One link ``q_k -> q_{k+1}`` of the LLM engine, read and checked step by step.

The model's proposal (one JSON reply: v1, a definition, the constant, ``q_{k+1}`` rewritten
with ``<VAR>``) becomes a :class:`Draft`; each step below reads one part of it exactly (sympy,
no model) and returns a :class:`~composition_rl.spc.base.Rejection` or None. The
composer (:mod:`composition_rl.spc.llm.composer`) runs them in order and asks the model
the verification question only when :func:`needs_verification` says the exact checks
cannot decide.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sympy

from composition_rl.chat.base import ChatResponse
from composition_rl.records import Problem
from composition_rl.spc.base import Rejection
from composition_rl.spc.llm.answer_numbers import NUM_IN_TEXT, answer_numbers
from composition_rl.spc.llm.prompts import MARKER, PROPOSE_SCHEMA, parse_json_object
from composition_rl.spc.text import derived_phrase
from composition_rl.values import (
    exact_equal,
    in_math,
    parse_answer_value,
    parse_number,
    render_latex,
)
from composition_rl.values.derive import Derivation, derivations
from composition_rl.values.literals import mixed_value
from composition_rl.values.numwords import word_number

__all__ = ["Draft", "Usage", "LINK_STEPS", "MENU_SIZE", "menu", "menu_text", "needs_verification", "place_marker",
           "program_definition", "read_reply", "apply_verification"]

MENU_SIZE = 6  # derived numbers offered per answer (a 3x3 matrix alone would give eleven)


def menu(p: Problem) -> tuple[tuple[Derivation, sympy.Expr, str], ...]:
    """The derived numbers the symbolic engine would offer for ``p``'s answer: each
    derivation with its exact value and its definition phrase (``spc.derived_phrase``)."""
    return tuple((d, v, derived_phrase(d.kind, d.arg, d.name)) for d, v in derivations(p.answer, p.question)[:MENU_SIZE])


def menu_text(p: Problem) -> str:
    """The menu as the proposal prompt lists it, one "- v1 = ...; definition: ..." line each."""
    items = menu(p)
    if not items:
        return "(none: use the answer itself or a number written in it)"
    return "\n".join(f"- v1 = {render_latex(v)}; definition: {phrase}" for _, v, phrase in items)


@dataclass
class Usage:
    """What one candidate cost: requests it needed and the tokens of their replies."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, resp: ChatResponse) -> None:
        """Count one more request and its reply's prompt and completion tokens."""
        self.requests += 1
        self.prompt_tokens += resp.prompt_tokens
        self.completion_tokens += resp.completion_tokens


@dataclass
class Draft:
    """A link as the steps fill it in (the proposal's text fields in ``f``)."""

    earlier: Problem
    later: Problem
    f: dict[str, str]
    v1: Any = None
    v1_whole: bool = False
    definition: str = ""
    literal: str = ""
    rewritten: str = ""
    v2: Any = None
    v2_from_words: bool = False
    derivation: Derivation | None = None  # v1 is a derived number from the menu
    offsets: tuple[int, ...] = ()  # literal offsets in the original later text (exact round trip)
    rephrased: bool = False
    verified_by: str = "symbolic"
    defined_by: str = "model"  # or "program": a derived number's phrase, or a formula q1 asks for
    extra: dict[str, Any] = field(default_factory=dict)


def read_reply(resp: ChatResponse, schema: dict[str, Any], what: str) -> dict[str, Any] | Rejection:
    """The JSON object of a reply, or the rejection for a reply that has none (``what`` is
    "output" or "verification": the reason names which call failed)."""
    obj = parse_json_object(resp.text)
    if obj is None:
        cut = resp.choices[0].finish_reason == "length"
        reason = f"truncated_{what}" if cut else f"malformed_{what}"
        return Rejection("llm_output", reason, f"no JSON object in reply: {resp.text[:160]!r}")
    return obj


#: fields a usable proposal never leaves empty (``constant_value`` may be: a literal in digits
#: is read by program)
FILLED = ("v1", "definition", "constant", "rewritten")


def proposal_fields(obj: dict[str, Any], schema: dict[str, Any] = PROPOSE_SCHEMA,
                    filled: tuple[str, ...] = FILLED) -> dict[str, str] | Rejection:
    """The reply's required fields (of ``schema``; the proposal's by default) as stripped text
    (keys the schema does not name are ignored). A field of ``filled`` left empty is a
    ``malformed_output`` too: a grammar-constrained small model fills every key, some with
    ``""`` (qwen-0.5b, tests/fixtures/real_llm/replies)."""
    missing = [k for k in schema["required"]
               if not isinstance(obj.get(k), (str, int, float)) or isinstance(obj.get(k), bool)]
    if missing:
        return Rejection("llm_output", "malformed_output", f"missing or non-text field(s): {', '.join(missing)}")
    f = {k: str(obj[k]).strip() for k in schema["required"]}
    empty = [k for k in filled if k in f and not f[k].strip("$ ")]
    if empty:
        return Rejection("llm_output", "malformed_output", f"empty field(s): {', '.join(empty)}")
    return f


# -- sub-step 1: v1 must come from the answer, exactly ---------------------------------------
def read_v1(d: Draft, max_definition_chars: int) -> Rejection | None:
    """Sub-step 1: set ``d.v1`` to the exact value of the proposal's ``v1``, which must be the
    earlier answer (then ``d.v1_whole``), a number written in it, or a number of its
    :func:`menu`; else the ``check1_v1`` rejection. ``max_definition_chars`` is unused (every
    step of :data:`LINK_STEPS` takes it)."""
    f = d.f
    v1 = parse_number(f["v1"].strip("$ "))
    if v1 is None:  # "108 degrees", "\\$3.50": the number without its unit
        av = parse_answer_value(f["v1"])
        v1 = av.value if av is not None else None
    if v1 is None:
        return Rejection("check1_v1", "v1_unparsable", f"v1 {f['v1'][:80]!r} is not an exact number")
    parts: list[sympy.Expr] = []
    for a in d.earlier.answers:
        value, ps = answer_numbers(a)
        if value is not None and exact_equal(value, v1):
            d.v1_whole = True
            break
        parts.extend(ps)
    in_menu = any(exact_equal(v, v1) for _, v, _ in menu(d.earlier)) if not d.v1_whole else False
    if not d.v1_whole and not in_menu and not any(exact_equal(p, v1) for p in parts):
        return Rejection("check1_v1", "v1_not_in_answer",
                         f"v1 {f['v1'][:80]!r} is neither the answer {d.earlier.answer[:80]!r} nor a number in it "
                         "nor a derived number of the menu")
    d.v1 = v1
    return None


def read_definition(d: Draft, max_definition_chars: int) -> Rejection | None:
    """Set ``d.definition`` to the proposal's definition (a leading "let $x$ be" and the final
    stop cut); a menu phrase whose value is ``d.v1`` also sets ``d.derivation``. Rejects a
    definition that is empty, longer than ``max_definition_chars``, on several lines, holds
    ``<VAR>`` or an odd number of ``$`` (``definition_invalid``), or writes v1's value where the
    earlier question does not (``definition_leaks_value``)."""
    definition = (re.sub(r"^\s*let\s+\$?[A-Za-z]\$?\s+(?:be|denote)\s+", "", d.f["definition"], flags=re.I)
                  .strip().rstrip(".").strip())
    if (not definition or len(definition) > max_definition_chars or "\n" in definition
            or MARKER in definition or definition.replace("\\$", "").count("$") % 2):
        return Rejection("check1_v1", "definition_invalid", f"definition {definition[:120]!r}")
    for dv, v, phrase in menu(d.earlier) if not d.v1_whole else ():
        if definition == phrase and exact_equal(v, d.v1):  # a derived number, defined by its own words
            d.derivation, d.definition = dv, definition
            return None
    for m in NUM_IN_TEXT.finditer(definition):
        v = parse_number(m.group())
        if v is not None and exact_equal(v, d.v1) and m.group() not in d.earlier.question:
            return Rejection("check1_v1", "definition_leaks_value", f"definition states the value: {definition[:120]!r}")
    d.definition = definition
    return None


# what a problem asks for: its last question or order ("Find $a+b+c$.", "How many ... ?"),
# not an instruction on the form of the answer ("Express your answer as a common fraction.")
_FIGURE = re.compile(r"\[asy\].*?\[/asy\]", re.S)
_SENTENCE_END = re.compile(r"(?<=[.?!])\s+(?=[A-Z$\\(])|\n+")
_ASKS = re.compile(r"\?\s*$|^(?:Find|Compute|Determine|Evaluate|Calculate|Simplify|Solve|Give|List|Write)\b")
_FORM_ONLY = re.compile(r"^(?:Express|Enter|Give|Write)\s+(?:your|the|all|each)\s+(?:answer|solutions?|values?)\b", re.I)
# words any definition may use without naming anything (the frame "the value of ... found in
# the problem above"); every other word must come from what the problem asks
_FRAME_WORDS = frozenset("""the a an of in to and or that which this its is are be by for from with as at on
value values number found problem above answer answers asked given described obtained computed""".split())
_WORD = re.compile(r"[A-Za-z]+")
_MATH = re.compile(r"\$([^$]+)\$")


def asked_sentence(question: str) -> str:
    """The sentence of ``question`` that says what is asked: its last question or order
    ("Find ...", "What is ...?"), else its last sentence; figures left out.

    >>> asked_sentence("Suppose $d \\ne 0$.  We can write it in the form $ad+b+cd^2$.  Find $a+b+c$.")
    'Find $a+b+c$.'
    >>> asked_sentence("Alli rolls a die twice. What is the probability? Express your answer as a common fraction.")
    'What is the probability?'
    """
    parts = [p.strip() for p in _SENTENCE_END.split(_FIGURE.sub(" ", question)) if p and p.strip()]
    asks = [p for p in parts if _ASKS.search(p) and not _FORM_ONLY.match(p)]
    return (asks or parts or [question])[-1]


# an order or question whose whole object is one formula: "Find $a+b+c$.", "What is $3 \cdot 4 + 5$?"
_BARE_ORDER = re.compile(r"^(?:Find|Compute|Evaluate|Calculate|Determine|What is|What's)\s+(?:the value of\s+)?"
                         r"\$([^$]+?)[.?,]?\s*\$\s*[.?]?$")


def program_definition(question: str) -> str | None:
    """X's definition when what q1 asks is one formula and nothing else ("Find $a+b+c$."):
    "the value of $a+b+c$ found in the problem above", written by the program, no call. Any
    other asked sentence (words to turn into a noun phrase) is the model's.

    >>> program_definition("Suppose $d \\ne 0$.  Write it as $ad+b+cd^2$.  Find $a+b+c$.")
    'the value of $a+b+c$ found in the problem above'
    >>> program_definition("How many marbles are in the bag?") is None
    True
    """
    asked = asked_sentence(question)
    m = _BARE_ORDER.match(asked)
    if m is None or not asked.rstrip().endswith((".", "?", ".$", "?$")):  # a sentence cut at a display
        return None
    return f"the value of ${m.group(1).strip()}$ found in the problem above"


def read_grounded_definition(d: Draft, max_definition_chars: int) -> Rejection | None:
    """A definition the model wrote for X: read as a proposal's is, and it must name what q1
    asks for, in q1's own words: every word outside the frame ("the value of ... found in the
    problem above") occurs in the asked sentence, and every math span is one of its spans. A small model copies
    an example ("the number of ways counted in the problem above" for a three-digit number)
    or names a symbol the problem does not ask for ("the value of $d$" where it asks for $a+b+c$)."""
    rej = read_definition(d, max_definition_chars)
    if rej is not None:
        return rej
    asked = asked_sentence(d.earlier.question)
    words = {w.lower() for w in _WORD.findall(_MATH.sub(" ", asked))}
    spans = {m.replace(" ", "") for m in _MATH.findall(asked)}
    stray = [w for w in _WORD.findall(_MATH.sub(" ", d.definition)) if w.lower() not in _FRAME_WORDS | words]
    stray += [f"${m}$" for m in _MATH.findall(d.definition) if m.replace(" ", "") not in spans]
    if stray:
        return Rejection("check1_v1", "definition_not_asked",
                         f"{', '.join(stray[:4])} not in what the problem asks ({asked[:80]!r}): {d.definition[:120]!r}")
    named = [w for w in _WORD.findall(_MATH.sub(" ", d.definition)) if w.lower() not in _FRAME_WORDS] + _MATH.findall(d.definition)
    if not named and not re.search(r"\banswers?\b", d.definition):  # "the number in the problem above"
        return Rejection("check1_v1", "definition_not_asked", f"names nothing the problem asks for: {d.definition[:120]!r}")
    return None


# -- sub-step 2: the constant and the rewritten later problem ---------------------------------
def _occurrences(text: str, literal: str) -> list[int]:
    """Where ``literal`` stands as a token of its own in ``text``: not inside a word, a
    hyphenated compound ("three-digit") or a decimal (the 1 of 1.5)."""
    edge = r"(?<![A-Za-z0-9-])(?<!\d\.)" if literal[:1].isalnum() else ""
    tail = r"(?![A-Za-z0-9-])(?!\.\d)" if literal[-1:].isalnum() else ""
    return [m.start() for m in re.finditer(edge + re.escape(literal) + tail, text)]


def literal_of(f: dict[str, str]) -> str:
    """The constant of a reply as written in the problem: without the ``$`` a model may add."""
    return f.get("constant", "").strip().strip("$").strip()


def place_marker(d: Draft, allowed: dict[str, frozenset[int]] | None = None) -> Rejection | None:
    """A placement reply (a ``phrase`` copied from the later problem, the ``constant`` in it)
    turned into the later problem with ``<VAR>`` for that constant: the program writes the
    rewritten text, so a small model copies a few words instead of the whole problem.

    The phrase only says which occurrence: a constant written once as its own token (among
    the positions the rules allow, ``allowed[literal]``, when it stands at several) needs no phrase,
    and one written several times is placed where the phrase, found once in the problem
    (spacing aside), holds it. An empty constant is the model saying the problem has no
    number."""
    later = d.later.question
    literal = literal_of(d.f)
    phrase = d.f.get("phrase", "").strip()
    if not literal:
        return Rejection("constant", "no_constant", f"the model finds no number to replace in {d.later.id}")
    where = _occurrences(later, literal)
    if not where:
        return Rejection("constant", "constant_not_in_problem", f"constant {literal[:40]!r} does not occur in the problem")
    ok = (allowed or {}).get(literal, frozenset())
    if len(where) > 1 and sum(w in ok for w in where) == 1:
        where = [w for w in where if w in ok]
    at = where[0] if len(where) == 1 else None
    if at is None and phrase:
        spans = [m.span() for m in re.finditer(r"\s+".join(map(re.escape, phrase.split())), later)]
        inside = [w for a, b in spans for w in where if a <= w and w + len(literal) <= b]
        at = inside[0] if len(spans) == 1 and len(inside) == 1 else None
    if at is None:
        return Rejection("constant", "phrase_not_in_problem",
                         f"{literal!r} occurs {len(where)} times in the problem and the phrase {phrase[:60]!r} "
                         "is not found there once with it")
    d.f["constant"] = literal
    d.f["rewritten"] = later[:at] + MARKER + later[at + len(literal):]
    return None


def read_constant(d: Draft, max_definition_chars: int) -> Rejection | None:
    """Sub-step 2: set ``d.literal`` and the rational ``d.v2`` from the proposal's constant, which
    must occur in the later question (read as a mixed number, digits, a number word, else the
    model's ``constant_value``, marked ``d.v2_from_words``), and ``d.rewritten``, which must hold
    ``<VAR>``; else the rejection. ``max_definition_chars`` is unused."""
    literal = literal_of(d.f)
    d.rewritten = d.f["rewritten"]
    if not literal or literal not in d.later.question:
        return Rejection("constant", "constant_not_in_problem", f"constant {literal[:40]!r} does not occur in the problem")
    if MARKER not in d.rewritten:
        return Rejection("constant", "marker_missing", "the rewritten problem has no <VAR>")
    mixed = mixed_value(literal)  # 6\\frac{1}{4} is 25/4, not 6 times 1/4
    v2 = sympy.Rational(mixed.numerator, mixed.denominator) if mixed is not None else parse_number(literal)
    if v2 is None:
        w = word_number(literal)
        if w is not None:
            v2 = sympy.Integer(w)
        else:
            v2 = parse_number(d.f["constant_value"].strip("$ "))
            d.v2_from_words = True
    if v2 is None:
        return Rejection("constant", "v2_unparsable", f"constant {literal[:40]!r} has no readable value")
    if not v2.is_Rational:
        return Rejection("constant", "v2_not_rational", f"constant {literal[:40]!r} = {v2} is not rational")
    d.literal, d.v2 = literal, v2
    return None


LINK_STEPS: tuple[Callable[[Draft, int], Rejection | None], ...] = (read_v1, read_definition, read_constant)
"""The steps that need nothing but the draft, in order (the position check needs the later
problem's allowed offsets and the verify mode: :func:`check_position`)."""


def check_position(d: Draft, allowed: frozenset[int], verify: str) -> Rejection | None:
    """Putting the constant back must give the later problem at positions the symbolic rules
    allow; a rephrased problem is left to the verification call (unless ``verify`` never)."""
    later, literal = d.later.question, d.literal
    restored = d.rewritten.replace(MARKER, literal)
    d.rephrased = restored != later
    if d.rephrased:
        if verify == "never":
            return Rejection("check2_substitution", "substitution_mismatch",
                             "restoring the constant does not give the original text")
        ratio = len(restored) / max(1, len(later))
        if not 0.5 <= ratio <= 2.0:
            return Rejection("check2_substitution", "substitution_mismatch",
                             f"the rewritten problem is {ratio:.2f}x the original length")
        return None
    shift = len(literal) - len(MARKER)
    starts = [m.start() for m in re.finditer(re.escape(MARKER), d.rewritten)]
    d.offsets = tuple(s + i * shift for i, s in enumerate(starts))
    for off in d.offsets:
        if off in allowed:
            continue
        before = later[off - 1 : off] if off else " "
        after = later[off + len(literal) : off + len(literal) + 1] or " "
        is_word = parse_number(literal) is None and re.fullmatch(r"[A-Za-z][A-Za-z -]*", literal) is not None
        if is_word and not before.isalnum() and not after.isalnum() and not in_math(later, off):
            continue
        return Rejection("constant", "constant_not_allowed",
                         f"{literal!r} at offset {off} is in a figure, a subscript or label, a year, or part of a larger number")
    return None


# -- the verification sub-step ------------------------------------------------------------------
def needs_verification(d: Draft, verify: str) -> bool:
    """Whether the link needs the verification call: always, or where exact checks cannot
    decide (v1 from inside a compound answer, a rephrased problem, a constant in words)."""
    exact_v1 = d.v1_whole or d.derivation is not None  # a menu derivation is checked by program
    return verify == "always" or not exact_v1 or d.rephrased or d.v2_from_words


def unverifiable(d: Draft) -> Rejection:
    """Why a link that needs verification is dropped under ``--verify never``."""
    if not d.v1_whole and d.derivation is None:
        return Rejection("check1_v1", "definition_unverified", "v1 is part of a compound answer and --verify never")
    return Rejection("constant", "v2_unverified", f"{d.literal!r} cannot be read by program and --verify never")


def apply_verification(d: Draft, vobj: dict[str, Any], verify: str) -> Rejection | None:
    """Compare the values the model read off (definition, constant) with ours, in sympy."""
    always = verify == "always"
    if always or not (d.v1_whole or d.derivation is not None):
        dv = parse_number(str(vobj.get("definition_value", "")).strip("$ "))
        if dv is None or not exact_equal(dv, d.v1):
            return Rejection("check1_v1", "definition_rejected",
                             f"the definition reads as {str(vobj.get('definition_value'))[:40]!r}, not {d.f['v1'][:40]!r}")
    if always or d.rephrased:
        same = vobj.get("same_problem")
        if not (same is True or str(same).strip().lower() == "true"):
            return Rejection("check2_substitution", "rephrase_rejected", "the rewritten problem is not the same problem")
    if always or d.v2_from_words:
        cv = parse_number(str(vobj.get("constant_value", "")).strip("$ "))
        if cv is None or not exact_equal(cv, d.v2):
            return Rejection("check2_substitution", "v2_value_mismatch",
                             f"{d.literal!r} reads as {str(vobj.get('constant_value'))[:40]!r}, not {d.v2}")
    d.verified_by = "llm"
    return None
