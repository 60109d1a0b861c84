"""composition-rl: compose stale RLVR prompts into harder verifiable ones.

The verbs, their config classes and the record type, importable from here:

>>> import composition_rl as crl
>>> q1 = crl.Problem.new("What is $3+4$?", "7")
>>> q2 = crl.Problem.new("Compute $2 + 5$.", "7")
>>> composed = crl.compose([q1, q2], depth=2).accepted[0]
>>> crl.verify(r"So the total is $\\boxed{7}$.", composed).correct
True

- :func:`compose` (symbolic, ``llm`` or ``auto`` engine; in memory), with
  :class:`ComposeConfig` and :class:`LLMComposeConfig`;
- :func:`verify` one completion, :func:`score` many (the reward), with :class:`VerifyConfig`;
- :func:`export` problems as TRL or verl parquet; :func:`make_reward_fn` for TRL's
  ``GRPOTrainer`` and :func:`compute_score` for verl: the same reward as :func:`score` and
  ``crl train``;
- :func:`profile` a policy's pass rates, with :class:`ProfileConfig`;
- :func:`probe` composed records with a solver and reject the guessable ones, with
  :class:`ProbeConfig`;
- :func:`refresh` a stale prompt set for a checkpoint (profile, confirm, compose, keep the
  informative, decontaminate, re-profile), with :class:`RefreshConfig`;
- :func:`load_problems` from JSON, JSONL or parquet, and the record types :class:`Problem`
  and :class:`Link`.

Every name loads on first use: importing the package imports neither torch, transformers
nor openai (docs/api.md has an example of each verb).

No module or subpackage shares a name with a verb (the jobs live in
``composition_rl.jobs``, the engines in ``composition_rl.spc``, the verifier in
``composition_rl.grading``), so importing any module by its path never changes what
``composition_rl.compose`` is. CONTRIBUTING.md has the map of the package.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())  # silent unless the user (or crl) attaches one

# name -> the module that defines it (loaded on first access, PEP 562)
_EXPORTS = {
    "Problem": "composition_rl.records",
    "Link": "composition_rl.records",
    "load_problems": "composition_rl.io.readers",
    "compose": "composition_rl.api",
    "ComposeConfig": "composition_rl.jobs.compose.pipeline",
    "LLMComposeConfig": "composition_rl.spc.llm.config",
    "verify": "composition_rl.api",
    "score": "composition_rl.api",
    "VerifyConfig": "composition_rl.grading.verifier",
    "export": "composition_rl.jobs.export",
    "make_reward_fn": "composition_rl.integrations.trl",
    "compute_score": "composition_rl.integrations.verl",
    "profile": "composition_rl.api",
    "ProfileConfig": "composition_rl.jobs.profile",
    "probe": "composition_rl.api",
    "ProbeConfig": "composition_rl.jobs.probe",
    "SamplingConfig": "composition_rl.rollout.base",
    "refresh": "composition_rl.api",
    "RefreshConfig": "composition_rl.jobs.refresh.run",
}

__all__ = [
    "ComposeConfig",
    "LLMComposeConfig",
    "Link",
    "ProbeConfig",
    "Problem",
    "ProfileConfig",
    "RefreshConfig",
    "SamplingConfig",
    "VerifyConfig",
    "__version__",
    "compose",
    "compute_score",
    "export",
    "load_problems",
    "make_reward_fn",
    "probe",
    "profile",
    "refresh",
    "score",
    "verify",
]

if TYPE_CHECKING:  # pragma: no cover
    from composition_rl.api import compose, probe, profile, refresh, score, verify
    from composition_rl.grading.verifier import VerifyConfig
    from composition_rl.integrations.trl import make_reward_fn
    from composition_rl.integrations.verl import compute_score
    from composition_rl.io.readers import load_problems
    from composition_rl.jobs.compose.pipeline import ComposeConfig
    from composition_rl.jobs.export import export
    from composition_rl.jobs.probe import ProbeConfig
    from composition_rl.jobs.profile import ProfileConfig
    from composition_rl.jobs.refresh.run import RefreshConfig
    from composition_rl.records import Link, Problem
    from composition_rl.rollout.base import SamplingConfig
    from composition_rl.spc.llm.config import LLMComposeConfig


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'composition_rl' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access skips this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
