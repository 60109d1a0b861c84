"""Answer verification: bounded Math-Verify, a worker pool, and group statistics.

>>> from composition_rl.grading import Verifier, VerifyConfig
>>> with Verifier(VerifyConfig(timeout_s=2.0)) as v:
...     [r.outcome.value for r in v.score_batch([(r"\\boxed{1/2}", r"\\frac12"), ("no idea", "3")])]
['correct', 'no_answer']

Importing this package is light (no sympy, no Math-Verify): those load in the worker
processes only.
"""

from composition_rl.grading.extract import extract_answer, gold_forms
from composition_rl.grading.verifier import (
    Outcome,
    Verifier,
    VerifyConfig,
    VerifyResult,
    close_shared_verifiers,
    shared_verifier,
    summarize,
)

__all__ = [
    "Outcome",
    "Verifier",
    "VerifyConfig",
    "VerifyResult",
    "close_shared_verifiers",
    "extract_answer",
    "gold_forms",
    "shared_verifier",
    "summarize",
]
