"""The LLM composition engine: the paper's SPC with any chat model, in 1-2 calls per link.

The Composition-RL paper (Section 3.4) has an LLM do the three sub-steps and three self-checks (about 11
chained calls per pair in the public release, with the arithmetic done by LLM-written,
executed Python). Here, per link ``q_k -> q_{k+1}``:

1. **One structured call** proposes everything the model is needed for: ``v1`` (a number
   from ``gt_k``, which may be an expression, a tuple, an interval ...), a natural
   definition of it, the constant in ``q_{k+1}`` and ``q_{k+1}`` rewritten with the marker
   ``<VAR>`` in its place (prompts: ``prompts/llm_propose*.txt``; JSON schema in
   :mod:`.prompts`).
2. **Exact checks in sympy, no model** (:mod:`.proposal`): v1 must be the exact value of
   ``gt_k`` or a number literally present in it; putting the constant back for ``<VAR>``
   must give ``q_{k+1}`` character for character, at a position the symbolic rules allow;
   ``d = v1 - v2`` is computed and rendered by program, and the rendered relation must
   parse back to ``d``; names and length.
3. **At most one verification call**, only when the exact checks cannot decide: v1 was taken
   from inside a compound answer (does the definition denote it?), the model rephrased
   ``q_{k+1}`` (is it the same problem?), or the constant is written in a form we cannot
   read (what number is it?). The model only reads values off; every comparison is sympy's.

Model-written code is never executed. Malformed output is a counted rejection with its
reason. A depth-K chain is ``SPC(q1..qK) = Compose(q1, SPC(q2..qK))``: K-1 links, each
proposed on the original problem texts (so a link's calls are shared, through the response
cache, by every chain that contains the pair). The record is then checked by the same
:func:`composition_rl.spc.checks.run_checks` as every engine's.

Modules, one job each: :mod:`.config` (settings, backend), :mod:`.prompts` (prompts, schemas,
lenient JSON), :mod:`.numbers` (numbers in replies), :mod:`.proposal` (one link, step by
step), :mod:`.composer` (the ``llm`` engine), :mod:`.auto` (the ``auto`` engine), :mod:`.answers`
(when a model's answer is the stated one). Runs go through the one
executor, :mod:`composition_rl.jobs.compose.run` (resumable journal:
:mod:`composition_rl.jobs.compose.journal`);
:mod:`composition_rl.jobs.compose.with_model` runs them over candidates, in a folder or in memory.
"""

from __future__ import annotations

from composition_rl.spc.base import LLM_STAGES
from composition_rl.spc.llm.auto import AutoComposer
from composition_rl.spc.llm.composer import LLMComposer
from composition_rl.spc.llm.config import LLMComposeConfig
from composition_rl.spc.llm.prompts import PROPOSE_SCHEMA, VERIFY_SCHEMA, parse_json_object

__all__ = [
    "LLM_STAGES",
    "AutoComposer",
    "LLMComposeConfig",
    "LLMComposer",
    "PROPOSE_SCHEMA",
    "VERIFY_SCHEMA",
    "parse_json_object",
]
