"""The LLM composer: chains composed by a chat model plus exact checks, registered as the
``llm`` engine (the ``auto`` engine, symbolic where it can and this one elsewhere, is in
:mod:`composition_rl.spc.llm.auto`; how a model's answer is compared with the stated
one, in :mod:`composition_rl.spc.llm.answers`).

Both are async inside (many chains' calls in flight at once). :meth:`LLMComposer.acompose`
is what the executor (:mod:`composition_rl.jobs.compose.run`) awaits; :meth:`LLMComposer.compose`
is the same contract as every other engine, ``compose(chain, candidate_id) -> Problem |
Rejection``, run on the composer's own event loop for callers that compose one chain at a
time.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import sympy

from composition_rl.chat.base import (
    ChatBackend,
    ChatError,
    ChatRequest,
    ChatResponse,
    RequestRefused,
    run_sync,
)
from composition_rl.records import Link, Problem
from composition_rl.spc import text as spc
from composition_rl.spc.base import COMPOSERS, Rejection
from composition_rl.spc.checks import run_checks
from composition_rl.spc.dependence import decide
from composition_rl.spc.llm import proposal as steps
from composition_rl.spc.llm.answer_numbers import (
    expr_str,
    has_constant,
    has_number,
    rat_str,
    relation,
)
from composition_rl.spc.llm.answers import same_answer
from composition_rl.spc.llm.config import LLMComposeConfig, build_backend
from composition_rl.spc.llm.prompts import (
    DEFINE_SCHEMA,
    MARKER,
    PLACE_SCHEMA,
    PROPOSE_SCHEMA,
    SOLVE_SCHEMA,
    VERIFY_SCHEMA,
    fill,
    load_prompt,
)
from composition_rl.spc.llm.proposal import Draft, Usage
from composition_rl.spc.natural import incomplete_answer, inexact_q1, missing_figure
from composition_rl.spc.symbolic_partners import choice_hash
from composition_rl.spc.text import VARIABLE_NAMES
from composition_rl.values import (
    constant_value,
    exact_equal,
    find_constants,
    in_math,
    parse_number,
    render_latex,
    symbols_used,
)

__all__ = ["LLMComposer"]

T = TypeVar("T")

# literals the finder reads as values but no engine may replace: a year or a word
# inside a compound, one TeX token of \frac 49 or \sqrt2, an exponent, a radix
_NEVER = frozenset(("named", "tex_token", "exponent", "base_notation"))

# rejections of a definition or a placement the model can mend when told why: words or
# symbols not in the problem, a constant not written there, a reply without its JSON object
MENDABLE = frozenset(("definition_not_asked", "definition_invalid", "definition_leaks_value",
                      "constant_not_in_problem", "phrase_not_in_problem", "constant_not_allowed",
                      "malformed_output", "v2_unparsable"))


@dataclass
class LLMComposer:
    """Compose chains with a chat model plus exact checks (see :mod:`composition_rl.spc.llm`).

    Args:
        backend: any :class:`~composition_rl.chat.base.ChatBackend` (None until
            :meth:`open`: pools are built from eligibility alone, before any model is reached).
        config: sampling and verification settings.
        seed: sampling seed sent with every request.
        max_chars: length limit of a composed prompt.
    """

    backend: ChatBackend | None
    config: LLMComposeConfig
    seed: int = 0
    max_chars: int = 8000
    risks: str = "last"  # "reject": the model may not pick a constant with a risk (ComposeConfig.risks)
    name: str = "llm"
    # the symbolic engine whose v1 (the exact answer or a derived number) and constant
    # choice the program plan uses (``config.plan``); built from the defaults when None
    finder: Any = None
    resumable: ClassVar[bool] = True  # the executor journals every finished candidate
    _inflight: dict[tuple[str, ...], asyncio.Future] = field(default_factory=dict, repr=False)
    _memo: dict[tuple, Any] = field(default_factory=dict, repr=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)

    @classmethod
    def from_config(cls, config: Any, llm_config: LLMComposeConfig | None = None,
                    backend: ChatBackend | None = None, finder: Any = None) -> LLMComposer:
        """The engine for a ``ComposeConfig``; the backend is attached by :meth:`open`.
        ``finder``: the symbolic engine to share (``auto`` passes its own, so a constant its
        model set aside stays aside here too)."""
        if llm_config is None:
            if backend is None:
                raise ValueError("engine llm/auto needs a model: pass --base-url URL and --model NAME")
            llm_config = LLMComposeConfig(model=backend.model)
        if finder is None:
            finder = COMPOSERS.get("symbolic")(seed=config.seed, max_chars=config.max_chars,
                                               derive_q1=config.derive_q1, risks=getattr(config, "risks", "last"))
        return cls(backend=backend, config=llm_config, seed=config.seed, max_chars=config.max_chars,
                   risks=getattr(config, "risks", "last"), finder=finder)

    def __post_init__(self) -> None:
        if self.finder is None:
            self.finder = COMPOSERS.get("symbolic")(seed=self.seed, max_chars=self.max_chars, risks=self.risks)

    def open(self, out: Path) -> tuple[ChatBackend, Any]:
        """Attach the backend (built from the config, response cache in ``out``, unless one
        was given); returns it and the cache to close (None when none was opened here)."""
        if self.backend is not None:
            return self.backend, None
        cache = None
        if not self.config.no_cache:
            from composition_rl.chat.cache import ResponseCache

            cache = ResponseCache(self.config.cache or out / "llm_cache.jsonl")
        self.backend = build_backend(self.config, cache)
        return self.backend, cache

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
        # a number in the answer, or one derived from it (an option letter, "x + y")
        return self._fact("anum", p, lambda p: any(has_number(a) for a in p.answers) or bool(steps.menu(p)))

    def _inexact(self, p: Problem) -> str:
        """Why ``p``'s answer cannot be X's exact value, or "" (the rule every engine shares)."""
        return self._fact("inexact", p, lambda p: inexact_q1(p.answers, p.question,
                                                              str(p.metadata.get("solution") or "")))

    def _has_constant(self, p: Problem) -> bool:
        return self._fact("const", p, lambda p: has_constant(p.question))

    def _allowed(self, p: Problem) -> dict[str, frozenset[int]]:
        def build(p: Problem) -> dict[str, frozenset[int]]:
            by: dict[str, set[int]] = {}
            reject = self.risks == "reject"
            for c in find_constants(p.question, p.answer):
                if c.flaw not in _NEVER and not (reject and c.risk):
                    by.setdefault(c.literal, set()).add(c.offset)
            return {k: frozenset(v) for k, v in by.items()}

        return self._fact("allowed", p, build)

    # -- cheap eligibility (no calls) ---------------------------------------------------
    def eligible(self, p: Problem, position: int, depth: int) -> bool:
        """Whether ``p`` can stand at ``position`` (0-based): a number in the answer of every
        non-last problem, a constant in the text of every non-first one."""
        if position < depth - 1 and (not self._answer_has_number(p) or self._inexact(p)):
            return False
        if position > 0 and not self._has_constant(p):
            return False
        return True

    def _prefilter(self, chain: Sequence[Problem]) -> Rejection | None:
        K = len(chain)
        for k, p in enumerate(chain):  # nobody can solve it from its text (natural.missing_figure)
            if missing_figure(p.question):
                stage = "check1_v1" if k < K - 1 else "constant"
                return Rejection(stage, "missing_figure", f"position {k + 1}: problem {p.id} points at a figure it does not hold")
        for k in range(K - 1):
            if not self._answer_has_number(chain[k]):
                return Rejection("check1_v1", "q1_no_number", f"position {k + 1}: answer {chain[k].answer!r} has no number")
            why = self._inexact(chain[k])
            if why:
                return Rejection("check1_v1", f"q1_{why}", f"position {k + 1}: answer {list(chain[k].answers)!r} "
                                 f"cannot be an exact value ({why})")
        # the record's answer (the earlier ones: _inexact), after the q1 checks as in the symbolic engine
        if incomplete_answer(chain[-1].question, chain[-1].answer):
            return Rejection("constant", "incomplete_answer", f"position {K}: answer {chain[-1].answer!r} of "
                             f"{chain[-1].id} lists fewer items than its question asks for")
        for k in range(1, K):
            if not self._has_constant(chain[k]):
                return Rejection("constant", "no_constant", f"position {k + 1}: problem {chain[k].id} has no number to replace")
        used = frozenset().union(*(self._symbols(p) for p in chain))
        if len([n for n in VARIABLE_NAMES if n not in used]) < 2 * (K - 1):
            return Rejection("check4_names_length", "name_collision", "not enough free variable names")
        if sum(len(p.question) for p in chain) + 160 * (K - 1) > self.max_chars:
            return Rejection("check4_names_length", "too_long", f"the problems alone exceed {self.max_chars} chars")
        return None

    # -- model calls ------------------------------------------------------------------------
    def _request(self, system: str, user: str, schema: dict[str, Any], turns: tuple[dict[str, str], ...] = ()) -> ChatRequest:
        c = self.config
        req = ChatRequest.user(user, system=system, temperature=c.temperature, top_p=c.top_p,
                               max_tokens=c.max_tokens, seed=self.seed, json_schema=schema)
        return replace(req, messages=(*req.messages, *turns)) if turns else req

    async def _ask(self, req: ChatRequest) -> tuple[ChatResponse | ChatError, bool]:
        """The reply (or the error that ended the call), and whether this caller made the
        call: identical requests in flight at once share one call, which the candidate that
        started it pays for."""
        key = tuple(m["content"] for m in req.messages)  # all other fields are fixed per composer
        fut = self._inflight.get(key)
        mine = fut is None
        if mine:
            fut = asyncio.ensure_future(self.backend.chat(req))
            self._inflight[key] = fut
            fut.add_done_callback(lambda _f, k=key: self._inflight.pop(k, None))
        try:
            return await asyncio.shield(fut), mine
        except RequestRefused:
            raise  # every candidate would fail alike: the executor stops the run
        except ChatError as e:
            return e, mine

    async def _call(self, req: ChatRequest, usage: Usage) -> ChatResponse | Rejection:
        resp, mine = await self._ask(req)
        if isinstance(resp, ChatError):
            if resp.transient:
                raise resp  # no answer: the executor leaves the candidate for the next run, never a reject
            usage.requests += mine
            return Rejection("llm_call", f"llm_{resp.kind}", resp.detail[:300])
        if mine:
            usage.add(resp)
        return resp

    async def _ask_json(self, name: str, schema: dict[str, Any], what: str, usage: Usage,
                        **slots: str) -> dict[str, Any] | Rejection:
        """One call with prompt ``name`` (and its ``_system`` prompt); its JSON object."""
        user = fill(load_prompt(name), **slots)
        resp = await self._call(self._request(load_prompt(name + "_system"), user, schema), usage)
        if isinstance(resp, Rejection):
            return resp
        return steps.read_reply(resp, schema, what)

    async def _ask_checked(self, name: str, schema: dict[str, Any], usage: Usage,
                           check: Callable[[dict[str, Any]], Rejection | None], **slots: str) -> dict[str, Any] | Rejection:
        """The model's reply to prompt ``name`` once ``check`` (the exact reading of its fields)
        accepts it. A reply rejected for something the model can mend (words that are not in
        the problem, no JSON object) goes back to it with the rejection's detail, as the next
        turn of the same conversation, up to ``config.feedback_tries`` times; the last
        rejection is the candidate's. Each turn is one cached request, so a rerun repeats it."""
        system, user = load_prompt(name + "_system"), fill(load_prompt(name), **slots)
        turns: tuple[dict[str, str], ...] = ()
        rej: Rejection | None = None
        for attempt in range(self.config.feedback_tries + 1):
            resp = await self._call(self._request(system, user, schema, turns), usage)
            if isinstance(resp, Rejection):  # a feedback turn that fails for good: the reply's own rejection stands
                return rej or resp
            obj = steps.read_reply(resp, schema, "output")
            rej = obj if isinstance(obj, Rejection) else check(obj)
            if rej is None:
                return obj
            if rej.reason not in MENDABLE or attempt == self.config.feedback_tries:
                return rej
            turns += ({"role": "assistant", "content": resp.text},
                      {"role": "user", "content": fill(load_prompt("llm_feedback"), REASON=rej.detail)})
        raise AssertionError("unreachable")  # the loop returns on its last attempt

    # -- one link: the program's plan, else the model's proposal; read exactly, verify where needed
    async def _link(self, earlier: Problem, later: Problem, usage: Usage, h: int = 0) -> Draft | Rejection:
        """One link. Under the program plan v1 is the finder's (q1's exact answer, or the number
        the symbolic engine derives from it) and so is the constant where the later problem has
        a safe one with a natural offset (the pick ``h`` among equals); the model only writes
        X's definition (:meth:`_define`), or places a constant the finder has none for
        (:meth:`_place`). Without a v1 of the program's the model proposes the whole link."""
        lead = self.finder.lead(earlier) if self.config.plan == "program" else None
        if lead is None:
            return await self._propose(earlier, later, usage)
        d = Draft(earlier, later, {"v1": lead.latex}, v1=lead.value, v1_whole=lead.derivation is None,
                  derivation=lead.derivation)
        safe = self.finder.safe_constants(later)
        if not safe:
            return await self._place(d, usage)
        picked = self.finder.choose(lead, safe, h, later)
        if picked is None and all(self.finder.dependence(later, c) == "independent" for _, c, _ in safe):
            # every constant is one the answer does not depend on: proved by exact reading, or
            # set aside on the model's word by the auto engine (which shares this finder)
            proved = all(decide(later.question, tuple(sorted((c.offset, *(o for o, _ in c.also)))), c.literal)
                         == "independent" for _, c, _ in safe)
            return Rejection("check5_dependence", "independent" if proved else "independent_model",
                             f"the answer of {later.id} depends on none of its constants")
        if picked is None:
            # the later problem has constants, but none gives this v1 an offset the naturalness
            # limits allow ("$Y$ is $\\sqrt{2} - 3$ less than $X$"): a constant the model placed
            # would give one just as unnatural, so no call
            return Rejection("constant", "unnatural_offset", f"no constant of {later.id} gives an offset from "
                             f"v1 = {lead.latex} within the naturalness limits")
        rej = await self._define(d, lead, usage)
        if rej is not None:
            return rej
        c = picked[0]
        d.literal, d.v2 = c.literal, sympy.Rational(c.value.numerator, c.value.denominator)
        d.offsets = tuple(sorted((c.offset, *(o for o, _ in c.also))))
        d.rewritten = _fill(later.question, d.offsets, c.literal, MARKER)
        return d

    async def _define(self, d: Draft, lead: Any, usage: Usage) -> Rejection | None:
        """X's definition: a derived number's own phrase (the symbolic engine's wording, exact
        by construction, no call), else the model's noun phrase for what q1's answer is the
        value of, read as a proposal's definition is (``definition_invalid``,
        ``definition_leaks_value``)."""
        if lead.derivation is not None:
            d.definition, d.defined_by = lead.phrase, "program"
            return None
        phrase = steps.program_definition(d.earlier.question)
        if phrase is not None and len(phrase) <= self.config.max_definition_chars:
            # q1 asks for one formula: "the value of $a+b+c$", no model needed
            d.definition, d.defined_by = phrase, "program"
            return None
        f = await self._once(("define", d.earlier.question, d.earlier.answer),
                             self._ask_definition(d.earlier, lead.value, usage))
        if isinstance(f, Rejection):
            return f
        d.f.update(f)
        return steps.read_grounded_definition(d, self.config.max_definition_chars)

    async def _ask_definition(self, earlier: Problem, v1: Any, usage: Usage) -> dict[str, str] | Rejection:
        def check(obj: dict[str, Any]) -> Rejection | None:
            f = steps.proposal_fields(obj, DEFINE_SCHEMA, ("definition",))
            if isinstance(f, Rejection):
                return f
            return steps.read_grounded_definition(Draft(earlier, earlier, f, v1=v1, v1_whole=True),
                                                  self.config.max_definition_chars)

        obj = await self._ask_checked("llm_define", DEFINE_SCHEMA, usage, check, Q1=earlier.question,
                                      GT1=earlier.answer, ASKED=steps.asked_sentence(earlier.question))
        if isinstance(obj, Rejection):
            return obj
        return steps.proposal_fields(obj, DEFINE_SCHEMA, ("definition",))

    async def _once(self, key: tuple, coro) -> Any:
        """``coro``'s result, awaited once per ``key`` and event loop: a q1 leads many chains,
        and the chain that asks first pays for the call (so a run's request count does not
        depend on which chains happen to be in flight together). A failed call (a Rejection
        of stage ``llm_call``, or a transient error) is asked again by the next chain."""
        key = (*key, id(asyncio.get_running_loop()))
        fut = self._memo.get(key)
        if fut is None:
            fut = self._memo[key] = asyncio.ensure_future(coro)
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        else:
            coro.close()
        try:
            res = await asyncio.shield(fut)
        except ChatError:
            if self._memo.get(key) is fut:
                self._memo.pop(key, None)
            raise
        if isinstance(res, Rejection) and res.stage == "llm_call" and self._memo.get(key) is fut:
            self._memo.pop(key, None)
        return res

    async def _place(self, d: Draft, usage: Usage) -> Draft | Rejection:
        """A link whose later problem has no constant the finder may replace: the model places
        one (a number in words, an ordinal), read and verified as a proposal's constant is."""

        placed: list[Draft] = []  # the draft of the reply the checks accepted: read once, kept

        def check(obj: dict[str, Any]) -> Rejection | None:
            f = steps.proposal_fields(obj, PLACE_SCHEMA, ())
            if isinstance(f, Rejection):
                return f
            trial = Draft(d.earlier, d.later, {**d.f, **f}, v1=d.v1, v1_whole=d.v1_whole, derivation=d.derivation)
            rej = (steps.place_marker(trial, self._allowed(d.later))
                   or steps.read_constant(trial, self.config.max_definition_chars)
                   or steps.check_position(trial, self._allowed(d.later).get(trial.literal, frozenset()),
                                           self.config.verify))
            if rej is None:
                placed.append(trial)
            return rej

        obj = await self._ask_checked("llm_place", PLACE_SCHEMA, usage, check, Q2=d.later.question)
        if isinstance(obj, Rejection):
            return obj
        d = placed[-1]
        if not self.finder.natural.allows(_fraction(d.v1 - d.v2)):
            return Rejection("constant", "unnatural_offset", f"{d.literal!r} gives the offset {d.v1 - d.v2} from "
                             "v1, outside the naturalness limits")
        rej = await self._define(d, self.finder.lead(d.earlier), usage)  # only a placed constant costs it
        if rej is not None:
            return rej
        return await self._verified(d, usage)

    async def _propose(self, earlier: Problem, later: Problem, usage: Usage) -> Draft | Rejection:
        obj = await self._ask_json("llm_propose", PROPOSE_SCHEMA, "output", usage,
                                   Q1=earlier.question, GT1=earlier.answer, Q2=later.question,
                                   MENU=steps.menu_text(earlier))
        if isinstance(obj, Rejection):
            return obj
        f = steps.proposal_fields(obj)
        if isinstance(f, Rejection):
            return f
        d = Draft(earlier, later, f)
        for step in steps.LINK_STEPS:
            rej = step(d, self.config.max_definition_chars)
            if rej is not None:
                return rej
        rej = steps.check_position(d, self._allowed(later).get(d.literal, frozenset()), self.config.verify)
        if rej is not None:
            return rej
        return await self._verified(d, usage)

    async def _verified(self, d: Draft, usage: Usage) -> Draft | Rejection:
        """The draft once the verification call (where the exact checks cannot decide) agrees."""
        if not steps.needs_verification(d, self.config.verify):
            return d
        if self.config.verify == "never":  # only what exact checks decide is kept
            return steps.unverifiable(d)
        earlier, later = d.earlier, d.later
        vobj = await self._ask_json("llm_verify", VERIFY_SCHEMA, "verification", usage,
                                    Q1=earlier.question, GT1=earlier.answer, DEFINITION=d.definition,
                                    Q2=later.question, REWRITTEN=d.rewritten, LITERAL=d.literal)
        if isinstance(vobj, Rejection):
            return vobj
        return steps.apply_verification(d, vobj, self.config.verify) or d

    # -- check 5 by the model -------------------------------------------------------------
    async def _solve(self, problem: str, usage: Usage) -> str | None | Rejection:
        """The model's final answer to ``problem`` (None when its reply holds none; a
        Rejection when the call itself failed, so the chain is retried next run). One call
        per text and event loop: a later problem at v2 is asked once however many chains end
        in it, and the chain that asks first pays for it."""
        key = ("solve", id(asyncio.get_running_loop()), problem)
        fut = self._memo.get(key)
        if fut is None:
            fut = self._memo[key] = asyncio.ensure_future(self._solve_once(problem, usage))
            # its error reaches every chain that awaits it; when an early stop (a refused request)
            # has cancelled them all, it is read here, so asyncio reports no lost exception
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
        try:
            res = await asyncio.shield(fut)
        except ChatError:  # transient (no answer): the next chain asks again, not this failure
            if self._memo.get(key) is fut:
                self._memo.pop(key, None)
            raise
        if isinstance(res, Rejection):
            self._memo.pop(key, None)  # the call failed: the next chain (or run) asks again
        return res

    async def _solve_once(self, problem: str, usage: Usage) -> str | None | Rejection:
        obj = await self._ask_json("llm_solve", SOLVE_SCHEMA, "solution", usage, PROBLEM=problem)
        if isinstance(obj, Rejection):
            return obj if obj.stage == "llm_call" else None
        ans = obj.get("answer")
        return None if isinstance(ans, bool) or not isinstance(ans, (str, int, float)) else str(ans).strip()

    async def dependence(self, later: Problem, literal: str, offsets: Sequence[int],
                         usage: Usage) -> tuple[str, str] | Rejection:
        """Check 5 for one link: (outcome, who decided it). Exact first
        (:func:`composition_rl.spc.dependence.decide`); where that says "unknown" and
        ``dependence == "model"``, the model solves the later problem at v2 and at v2 + 1. It
        must get q2's own answer at v2 (else it decides nothing); the same answer at v2 + 1
        and again at v2 + 2 (asked only after the first) means the answer does not depend on
        the variable. With ``dependence == "blind"`` a
        dependent link gets one more call: the later problem with a variable name it does not
        use in every replaced place, and its value withheld. Reaching q2's answer that way
        means the rest of the problem gives the value away (or the answer needs none):
        "revealed", a shortcut the probe at v2 + 1 cannot see (in blind audits: values a
        figure, a count or a constraint forces)."""
        if not offsets:
            return "unknown", "none"  # a rephrased problem: no places to vary
        places = tuple(sorted(offsets))
        exact = decide(later.question, places, literal)
        if exact != "unknown":
            return exact, "exact"
        v2 = constant_value(literal)
        if self.config.dependence == "exact" or v2 is None:
            return "unknown", "none"
        text = _fill(later.question, places, literal, _value_text(v2 + 1))
        at_v2 = await self._solve(later.question, usage)
        if isinstance(at_v2, Rejection):
            return at_v2
        if at_v2 is None or not same_answer(at_v2, later.answers):
            return "unknown", "none"  # the model does not solve q2 itself: its word decides nothing
        at_other = await self._solve(text, usage)
        if isinstance(at_other, Rejection):
            return at_other
        if at_other is None:
            return "unknown", "none"
        if same_answer(at_other, (at_v2,)):
            # a second point: an answer that moves in steps (the primes between 30 and 40 or
            # 41) is the same at v2 + 1 and still depends on the value; an answer that ignores it
            # is the same at v2 + 2 too (on audited items: 38 of 38 shortcuts stay flagged,
            # 4 of 14 false flags go)
            at_two = await self._solve(_fill(later.question, places, literal, _value_text(v2 + 2)), usage)
            if isinstance(at_two, Rejection):
                return at_two
            if at_two is None:
                return "unknown", "none"  # no answer at the second point: nothing is decided
            if same_answer(at_two, (at_v2,)):
                return "independent", "model"
        if self.config.dependence == "blind":
            used = symbols_used(later.question)
            y = next((n for n in VARIABLE_NAMES if n not in used), "Y")
            at_blind = await self._solve(f"{spc.withheld_note(y)}\n\n{_fill(later.question, places, literal, y)}", usage)
            if isinstance(at_blind, Rejection):
                return at_blind
            if at_blind is not None and same_answer(at_blind, later.answers):
                return "revealed", "model"
        return "dependent", "model"

    async def link_dependences(self, links: Sequence[tuple[Problem, str, Sequence[int]]],
                               usage: Usage) -> list[tuple[str, str]] | Rejection:
        """:meth:`dependence` for each (later problem, literal, offsets) of a chain; the
        Rejection of the first link that is independent or revealed (or whose call failed)."""
        out = []
        for k, (later, literal, offsets) in enumerate(links):
            res = await self.dependence(later, literal, offsets, usage)
            if isinstance(res, Rejection):
                return Rejection(res.stage, res.reason, f"link {k + 1} (dependence): {res.detail}")
            if res[0] in ("revealed", "independent"):
                return _model_rejection(k, literal, res)
            out.append(res)
        return out

    # -- one chain ----------------------------------------------------------------------
    async def acompose(self, chain: Sequence[Problem], candidate_id: str, usage: Usage | None = None) -> Problem | Rejection:
        """``SPC(q1..qK) = Compose(q1, SPC(q2..qK))`` for one candidate chain; ``usage``
        receives the requests and tokens it cost."""
        usage = usage if usage is not None else Usage()
        pre = self._prefilter(chain)
        if pre is not None:
            return pre
        K = len(chain)
        props: list[Draft] = [None] * (K - 1)  # type: ignore[list-item]
        for k in reversed(range(K - 1)):  # innermost link first; stop at the first failure
            res = await self._link(chain[k], chain[k + 1], usage, choice_hash(self.seed, candidate_id, k))
            if isinstance(res, Rejection):
                return Rejection(res.stage, res.reason, f"link {k + 1}: {res.detail}")
            props[k] = res
            # a middle problem has a definition (link k+1) and a replaced constant (link k):
            # a definition that restates the constant would give the variable away
            if k + 1 <= K - 2 and re.search(r"(?<![\w.])" + re.escape(res.literal) + r"(?![\w.])", props[k + 1].definition):
                return Rejection("check1_v1", "definition_reveals_constant",
                                 f"link {k + 2}: the definition restates {res.literal!r}, which link {k + 1} replaced")
        deps = await self.link_dependences(
            [(p.later, p.literal, () if p.rephrased else p.offsets) for p in props], usage)
        if isinstance(deps, Rejection):
            return deps
        return self._assemble(chain, candidate_id, props, deps)

    def compose(self, chain: Sequence[Problem], candidate_id: str) -> Problem | Rejection:
        """The engine contract, synchronously: one chain on the composer's own event loop
        (kept between calls, so answers already asked are reused; :meth:`close` ends it).
        Callable where the thread already runs a loop (Jupyter): see :func:`run_sync`."""
        return self.on_own_loop(self.acompose(chain, candidate_id))

    def on_own_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` to its end on the composer's own event loop (made when there is none;
        ``auto`` runs its chains on it too, so both halves reuse the same answers)."""
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        return run_sync(coro, loop=self._loop)

    def close(self) -> None:
        """End the loop of the synchronous :meth:`compose` (its backend's connections on it
        first); the backend itself stays the caller's. A later ``compose`` starts a new loop."""
        loop, self._loop = self._loop, None
        if loop is None or loop.is_closed():
            return
        try:
            if self.backend is not None:
                run_sync(self.backend.end_loop(), loop=loop)
        finally:
            loop.close()

    def _assemble(self, chain: Sequence[Problem], cid: str, props: Sequence[Draft],
                  deps: Sequence[tuple[str, str]] = ()) -> Problem | Rejection:
        K = len(chain)
        used = frozenset().union(*(self._symbols(p) for p in chain), *(symbols_used(p.definition) for p in props))
        free = [n for n in VARIABLE_NAMES if n not in used]
        if len(free) < 2 * (K - 1):
            return Rejection("check4_names_length", "name_collision", f"only {len(free)} free variable names for {K - 1} links")
        segments = [chain[0].question]
        glues, links = [], []
        for k, p in enumerate(props):
            x, y = free[2 * k], free[2 * k + 1]
            segments.append(_substitute(p, y))
            d, direction, d_abs_latex, d_latex = relation(p.v1, p.v2)
            # check 3 by a second path: the written relation parses back to d, v1 - d == v2
            written = sympy.Integer(0) if direction == "equal" else parse_number(d_abs_latex)
            if written is None:
                return Rejection("check3_relation", "relation_unparsable", f"link {k + 1}: cannot read d from {d_abs_latex!r}")
            written = written if direction != "more" else -written
            if not exact_equal(written, d) or not exact_equal(p.v1 - written, p.v2):
                return Rejection("check3_relation", "relation_mismatch", f"link {k + 1}: written {written}, d {d}")
            glues.append(spc.definition_glue(x, y, p.definition, d_abs_latex, direction))
            links.append(Link(x=x, y=y, v1_latex=render_latex(p.v1), v1_expr=expr_str(p.v1), v2_literal=p.literal,
                              v2_expr=rat_str(p.v2), d_latex=d_latex, d_expr=expr_str(d),
                              v2_offset=p.offsets[0] if p.offsets else -1, v2_also=tuple(p.offsets[1:]),
                              v1_derivation=() if p.derivation is None else tuple(sorted(p.derivation.to_dict().items()))))
        text = segments[0]
        for g, seg in zip(glues, segments[1:]):
            text = spc.join(text, g, seg)
        if len(text) > self.max_chars:
            return Rejection("check4_names_length", "too_long", f"{len(text)} chars > {self.max_chars}")
        backend = self.backend
        composed = Problem.new(
            text, chain[-1].answers, source="compose:llm", depth=sum(p.depth for p in chain),  # originals counted
            parents=tuple(p.id for p in chain),
            links=tuple(links), engine="llm",
            metadata={
                "candidate": cid,
                "parent_sources": [p.source for p in chain],
                "parent_metadata": [dict(p.metadata) for p in chain],
                "definitions": [p.definition for p in props],
                "v1_from": ["answer" if p.v1_whole else "derived" if p.derivation else "part_of_answer" for p in props],
                "defined_by": [p.defined_by for p in props],
                "rephrased": [p.rephrased for p in props],
                "verified_by": [p.verified_by for p in props],
                # check 5: "dependent" when every link is shown to matter, else "unknown"; who
                # decided each link (exact reading, the model, or none)
                "dependence": "dependent" if deps and all(d == "dependent" for d, _ in deps) else "unknown",
                "dependence_by": [by for _, by in deps] if deps else ["none"] * len(props),
                "llm_model": backend.model if backend.name != "local_hf" else Path(backend.model).name,
            },
        )
        return run_checks(composed, chain, self.max_chars) or composed


# how many constants of one chain the auto engine may set aside on the model's word before the
# chain goes to the LLM engine (each costs a symbolic compose and the model's calls for the next)
def _fraction(v) -> Fraction | None:
    """An exact sympy number as a Fraction; None when it is irrational."""
    return Fraction(int(v.p), int(v.q)) if v.is_Rational else None


def _value_text(v) -> str:
    """A value as the probe writes it in place of the literal: an integer, else a decimal."""
    return str(v) if v.denominator == 1 else str(float(v))


def _model_rejection(k: int, literal: str, res: tuple[str, str]) -> Rejection:
    """The rejection of link ``k`` whose check 5 came out ``res`` ("independent" or "revealed",
    and who decided it)."""
    if res[0] == "revealed":
        return Rejection("check5_dependence", "revealed_model",
                         f"link {k + 1}: the model reaches the answer with the value of {literal} withheld")
    if res[1] == "exact":
        return Rejection("check5_dependence", "independent", f"link {k + 1}: the answer is the same for every value of {literal}")
    return Rejection("check5_dependence", "independent_model",
                     f"link {k + 1}: the model's answer is the same at {literal} and at the next two values")


def _fill(text: str, places: Sequence[int], literal: str, token: str) -> str:
    """``text`` with ``token`` written over ``literal`` at each of the sorted ``places``."""
    for off in reversed(places):
        text = text[:off] + token + text[off + len(literal):]
    return text


def _substitute(p: Draft, y: str) -> str:
    """The rewritten later problem with each ``<VAR>`` replaced by Y's token (right to left,
    so earlier positions stay valid)."""
    restored = p.rewritten.replace(MARKER, p.literal)
    text = p.rewritten
    starts = [m.start() for m in re.finditer(re.escape(MARKER), text)]
    shift = len(p.literal) - len(MARKER)
    for i in reversed(range(len(starts))):
        s = starts[i]
        tail = text[s + len(MARKER) : s + len(MARKER) + 12]
        token = spc.variable_token(y, in_math(restored, s + i * shift), tail)
        text = text[:s] + token + text[s + len(MARKER) :]
    return text
