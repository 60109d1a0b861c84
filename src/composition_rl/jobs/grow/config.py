"""The settings of one MagicBeanStalk run (MagicBeanStalk, Methodology), declared once.

Every parameter the paper names has its value as the default; the ones the paper leaves
open (N_t, N_l, how many parents a node keeps) are marked "ours" with the value we chose.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["GrowConfig", "ON_INEFFECTIVE", "QUALIFY_LEVELS"]

#: What happens when no decomposition of a node passes the effectivity test.
ON_INEFFECTIVE = ("drop", "keep")
#: Which synthetic problems go to the target policy for qualification.
QUALIFY_LEVELS = ("root", "all")


@dataclass(frozen=True)
class GrowConfig:
    """One MBS run.

    Args:
        n_traces: N_t, traces drawn per teacher in stage 1 (ours: 4; the paper gives no value).
        max_subproblems: K, most subproblems per decomposition (paper: K <= 3).
        decompose_retries: N_d, re-prompts after a failed decomposition (paper: 3).
        max_depth: D, recursion depth of the decomposition tree (paper: 3).
        leaf_variants: N_l, harder variants drawn per leaf (ours: 4).
        alpha_leaf: a leaf variant is dropped when the weakest student's accuracy on it
            exceeds this (paper: 0.8).
        alpha_parent: a synthetic parent is dropped above this (paper: 0.625).
        compose_trials: N_c, most trials to synthesise the parents of one node (paper: 10).
        parents_per_node: synthetic parents kept per node before its trials stop (ours: 2).
        student_n: rollouts per student and problem for calibration and effectivity (8).
        on_ineffective: ``drop``: a node whose decompositions all fail the effectivity test
            is not decomposed (a root then drops its seed, reason ``ineffective``), as the
            paper does; ``keep``: the first valid decomposition is used anyway and the tree
            records that it failed. The test is always measured and reported.
        hide_parent_answer: leave out of the effectivity test's in-context examples every
            subproblem whose answer equals the node's answer (the last part of a chain does),
            so a student cannot pass the test by copying it (ours; the paper does not say).
        qualify: ``root``: only synthetic roots (the seed's whole blueprint) are profiled
            for qualification; ``all``: every kept synthetic problem is.
        direct_trials: variations asked per seed by the direct-synthesis baseline.
        seed: every random choice derives from it plus a stable id.
    """

    n_traces: int = 4
    max_subproblems: int = 3
    decompose_retries: int = 3
    max_depth: int = 3
    leaf_variants: int = 4
    alpha_leaf: float = 0.8
    alpha_parent: float = 0.625
    compose_trials: int = 10
    parents_per_node: int = 2
    student_n: int = 8
    on_ineffective: str = "drop"
    hide_parent_answer: bool = False
    qualify: str = "root"
    direct_trials: int = 10
    seed: int = 0

    def __post_init__(self) -> None:
        bad = []
        for name in ("n_traces", "max_subproblems", "max_depth", "leaf_variants", "compose_trials",
                     "parents_per_node", "student_n", "direct_trials"):
            if getattr(self, name) < 1:
                bad.append(f"{name}={getattr(self, name)} (must be >= 1)")
        if self.decompose_retries < 0:
            bad.append(f"decompose_retries={self.decompose_retries} (must be >= 0)")
        for name in ("alpha_leaf", "alpha_parent"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                bad.append(f"{name}={getattr(self, name)} (must be in [0, 1])")
        if self.on_ineffective not in ON_INEFFECTIVE:
            bad.append(f"on_ineffective={self.on_ineffective!r} (one of {', '.join(ON_INEFFECTIVE)})")
        if self.qualify not in QUALIFY_LEVELS:
            bad.append(f"qualify={self.qualify!r} (one of {', '.join(QUALIFY_LEVELS)})")
        if bad:
            raise ValueError("invalid grow config: " + "; ".join(bad))

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict (in the run's stats and in the identity a rerun is
        checked against)."""
        return asdict(self)
