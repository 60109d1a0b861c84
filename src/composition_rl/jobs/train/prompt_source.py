"""Where a dynamic-sampling step gets its prompts: the one seam ``crl train`` and a user's TRL
script share.

Dynamic sampling (Composition-RL, Equation 5) needs more prompts than one batch: the groups
that come back solve_all or solve_none are dropped and refilled. The trainer
(:class:`composition_rl.jobs.train.trl_adapter.DynamicSamplingGRPOTrainer`) asks a
:class:`PromptSource` for every round's prompts and shows it each round's groups before the
next draw. Three sources:

- :class:`DatasetSource` (the default in a user's script): the first round is the batch TRL's
  dataloader gave (the user's dataset, sampler and epochs, as plain GRPO would train on), and
  refills are drawn further from the same dataset, in a seeded order of their own;
- :class:`PoolSource`: every round is drawn from an :class:`composition_rl.jobs.train.online.OnlinePool`,
  which retires prompts the policy has mastered and injects compositions of them;
- ``crl train``'s curriculum (jobs/train/grpo.py), which ignores the dataloader's batch and draws
  from the current stage, as it always has.

Importing this module imports neither torch nor TRL.

>>> src = DatasetSource([{"prompt": f"q{i}", "answer": str(i)} for i in range(4)], seed=0)
>>> src.start_step([{"prompt": "q9", "answer": "9"}])      # the dataloader's batch comes first
>>> [r["prompt"] for r in src.draw(3)]
['q9', 'q1', 'q3']
>>> src.state_dict()
{'epoch': 0, 'cursor': 2}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from composition_rl.jobs.train.data import SeededCycle

if TYPE_CHECKING:  # pragma: no cover
    from composition_rl.jobs.train.dynamic_sampling import GroupRecord
    from composition_rl.jobs.train.online import OnlinePool

__all__ = ["DatasetSource", "PoolSource", "PromptSource"]


class PromptSource:
    """The prompts of one training step, round by round.

    The trainer calls, per step: :meth:`start_step` with the prompts TRL's dataloader gave
    (one row per group), then :meth:`draw` once per round and :meth:`observe` with that round's
    groups before the next draw, then :meth:`metrics` (logged with TRL's metrics).
    :meth:`state_dict` is saved with each checkpoint (``prompt_source.json``) and
    :meth:`load_state_dict` restores it when training resumes from one.

    Subclasses implement :meth:`draw`; the other methods default to doing nothing.
    """

    def start_step(self, rows: list[dict[str, Any]]) -> None:
        """The dataloader's prompts for this step (default: ignored)."""

    def draw(self, n: int) -> list[dict[str, Any]]:
        """``n`` dataset rows (a ``prompt`` plus the columns the reward reads)."""
        raise NotImplementedError

    def observe(self, step: int, groups: list[GroupRecord]) -> None:
        """One round's groups (pass rate, kind, kept), before the next draw (default: ignored)."""

    def metrics(self) -> dict[str, float]:
        """Flat metrics for this step, logged beside TRL's (default: none)."""
        return {}

    def state_dict(self) -> dict[str, Any] | None:
        """What a resumed run needs to continue the same draws; None: nothing to save."""
        return None

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`state_dict`."""


class DatasetSource(PromptSource):
    """The dataloader's batch first, then refills from the same dataset in a seeded order.

    The refill order is a permutation of the rows derived from ``(seed, epoch)``; every row is
    drawn once per epoch before the next permutation. A refill may repeat a prompt of the
    same step's dataloader batch (the two orders are independent), as over-sampling a dataset
    would.

    Args:
        dataset: anything with ``len`` and integer indexing that yields row dicts (a
            ``datasets.Dataset``, a list of dicts).
        seed: the refill order's seed.

    Raises:
        ValueError: the dataset is empty.
    """

    def __init__(self, dataset: Sequence[Mapping[str, Any]], seed: int = 0) -> None:
        if len(dataset) == 0:
            raise ValueError("dynamic sampling refills from the training dataset, which is empty")
        self.dataset = dataset
        self.seed = seed
        self.order = SeededCycle(len(dataset), "refill", seed)
        self._queued: list[dict[str, Any]] = []

    def start_step(self, rows: list[dict[str, Any]]) -> None:
        """Queue copies of the dataloader's rows; :meth:`draw` hands them out first."""
        self._queued = [dict(r) for r in rows]

    def draw(self, n: int) -> list[dict[str, Any]]:
        """``n`` rows (copies): the queued dataloader rows first, then refills in the seeded
        order."""
        out, self._queued = self._queued[:n], self._queued[n:]
        out += [dict(self.dataset[self.order.next_index()]) for _ in range(n - len(out))]
        return out

    def state_dict(self) -> dict[str, Any]:
        """The refill order's position (the queued rows are not saved)."""
        return self.order.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume the refill order at the position :meth:`state_dict` saved."""
        self.order.load_state_dict(state)


class PoolSource(PromptSource):
    """Every round drawn from an online pool, which sees each round's outcomes.

    A prompt retired by the pool (solve_all ``k`` visits running, with enough evidence; see
    :mod:`composition_rl.jobs.train.online`) is replaced by checked compositions of it, so the refills
    of later steps hold harder prompts instead of more solved ones. The dataloader's batch is
    ignored (it only paces the steps). When every lineage has retired at ``max_depth`` the
    pool hands out retired prompts, so a step still fills; :attr:`exhausted` says so.

    Args:
        pool: the pool (its own ``log_path`` appends ``online.jsonl``).
        instruction: append the exporters' boxed-answer instruction to each question, as
            ``crl export --format trl`` does (the rows then look like the exported ones).
    """

    def __init__(self, pool: OnlinePool, instruction: bool = True) -> None:
        self.pool = pool
        self.instruction = instruction

    @property
    def exhausted(self) -> bool:
        """True when every lineage has retired at ``max_depth`` (draws then hand out retired
        prompts)."""
        return self.pool.exhausted

    def draw(self, n: int) -> list[dict[str, Any]]:
        """``n`` rows drawn from the pool (retired prompts once it is exhausted), as ``online``
        stage rows."""
        from composition_rl.jobs.train.data import problem_row

        return [problem_row(p, "online", self.instruction) for p in self.pool.draw(n, retired_if_exhausted=True)]

    def observe(self, step: int, groups: list[GroupRecord]) -> None:
        """Report each group's correct count (scores of 1) and size to the pool, which retires and
        injects prompts from them."""
        self.pool.observe(step, [(g.id, sum(s >= 1.0 for s in g.scores), len(g.scores)) for g in groups])

    def metrics(self) -> dict[str, float]:
        """The pool's flat ``online/...`` metrics (:meth:`OnlinePool.metrics`, which also starts the
        pool's next step)."""
        return self.pool.metrics()

    def state_dict(self) -> dict[str, Any]:
        """The pool's state (:meth:`OnlinePool.state_dict`)."""
        return self.pool.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore the pool from :meth:`state_dict`."""
        self.pool.load_state_dict(state)
