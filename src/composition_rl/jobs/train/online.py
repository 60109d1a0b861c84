"""The online curriculum rule: retire what the policy has mastered, compose from it, keep the rest.

Seed 000, Section 4.3 switches the whole dataset to depth K+1 when the depth-K solve_all curve
saturates, chosen by eye. The online mode decides per prompt, from the groups sampled for it
during training:

- a prompt is **retired** when its last ``k`` visits were all solve_all and the Wilson interval
  (:func:`composition_rl.stats.wilson_interval`) of its pass rate over the last ``window`` visits
  has a lower bound of at least ``retire_lower``: it no longer gives GRPO a signal (Eq. 5 drops
  such groups) and the interval says that is not luck;
- a prompt whose latest visit was solve_none and whose interval's upper bound is below
  ``none_upper`` is **down-weighted** to ``low_weight``: it is still drawn now and then (it may
  become learnable) instead of being dropped, as the static curriculum's stage switch does;
- otherwise it is **kept** at full weight (a down-weighted prompt that scores again is restored).

A retired prompt becomes q1 of new compositions (its answer becomes X) with depth-1 partners,
composed in-process by the symbolic engine and checked like every other composition
(:func:`compose_from_retired`); lineage depth grows by one per retirement, up to ``max_depth``.

This module holds the rule (:class:`OnlineTracker`), that composition step and the one live pool
both trainers use (:class:`OnlinePool`: seeded weighted draws, injections, ``online.jsonl``,
metrics, a resumable state): the TRL trainer (``crl train``, ``curriculum.mode: online``,
jobs/train/grpo.py) and the verl dataset and replay buffer (:mod:`composition_rl.integrations.verl_online`).

>>> t = OnlineTracker(OnlineConfig(k=2, window=4))
>>> t.observe("a", correct=8, n=8, step=1).action
'keep'
>>> v = t.observe("a", correct=8, n=8, step=2)
>>> v.action, v.streak, round(v.interval[0], 3)
('retire', 2, 0.806)
>>> t.weight("a")
0.0
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Literal

from composition_rl.stats import band, wilson_interval

if TYPE_CHECKING:
    from composition_rl.records import Problem

__all__ = ["Action", "OnlineConfig", "OnlinePool", "OnlineTracker", "Verdict", "compose_from_retired",
           "weighted_draw"]

#: What the rule says about a prompt after a visit. ``retired`` means it was retired earlier (a
#: group still in flight at retirement time in an async trainer); the caller does nothing.
Action = Literal["keep", "retire", "down_weight", "retired"]

#: How :class:`OnlinePool` counts observed groups (goldilocks groups are the informative ones).
_KINDS = ("informative", "solve_all", "solve_none")


@dataclass(frozen=True)
class OnlineConfig:
    """Settings of the online curriculum.

    Args:
        k: consecutive solve_all visits (every sample of the group correct) before retirement.
        window: visits per prompt the pass rate and its interval are computed over.
        confidence: confidence level of the Wilson interval (0.95: z = 1.96).
        retire_lower: a prompt retires only if the interval's lower bound reaches this, so
            ``k`` visits of tiny groups (n = 1 or 2) are not enough evidence on their own.
        none_upper: a prompt whose latest visit was solve_none is down-weighted once the
            interval's upper bound is below this (with n = 8: two 0/8 visits, not one).
        low_weight: sampling weight of a down-weighted prompt (full weight is 1.0).
        max_depth: no composition deeper than this; a retired prompt at max_depth leaves
            the pool without successors.
        partners: compositions injected per retirement (fewer if the engine accepts fewer).
        partner_candidates: partners tried per retirement, as a multiple of ``partners``
            (the symbolic engine rejects some chains; this bounds the work per retirement).
        seed: every random choice (partners, draws) derives from it plus a stable id.
    """

    k: int = 3
    window: int = 8
    confidence: float = 0.95
    retire_lower: float = 0.5
    none_upper: float = 0.25
    low_weight: float = 0.1
    max_depth: int = 3
    partners: int = 2
    partner_candidates: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError(f"k={self.k}: retirement needs at least 1 solve_all visit")
        if self.window < self.k:
            raise ValueError(f"window={self.window} must be >= k={self.k}: the interval covers the streak")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"confidence={self.confidence} must be in (0, 1)")
        if not 0.0 <= self.retire_lower <= 1.0:
            raise ValueError(f"retire_lower={self.retire_lower} must be in [0, 1]")
        if not 0.0 <= self.none_upper <= 1.0:
            raise ValueError(f"none_upper={self.none_upper} must be in [0, 1]")
        if not 0.0 < self.low_weight <= 1.0:
            raise ValueError(f"low_weight={self.low_weight} must be in (0, 1]: 0 would drop solve_none "
                             "prompts, which the online mode keeps")
        if self.max_depth < 1:
            raise ValueError(f"max_depth={self.max_depth} must be >= 1")
        if self.partners < 1 or self.partner_candidates < 1:
            raise ValueError(f"partners={self.partners} and partner_candidates={self.partner_candidates} must be >= 1")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> OnlineConfig:
        """Build from a config mapping; an unknown key raises naming the known ones."""
        d = dict(d or {})
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ValueError(f"unknown online setting(s) {', '.join(unknown)}; known: {', '.join(known)}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        """The settings as a plain dict (what ``state_dict`` saves and ``from_dict`` reads)."""
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    """The rule's answer for one prompt after a visit, with the evidence it used."""

    id: str
    action: Action
    visits: int
    streak: int  # trailing solve_all visits
    successes: int  # over the window
    samples: int  # over the window
    interval: tuple[float, float]  # Wilson interval of the window pass rate
    reason: str

    @property
    def pass_rate(self) -> float:
        """``successes / samples`` over the window, NaN when there are no samples."""
        return self.successes / self.samples if self.samples else float("nan")


class OnlineTracker:
    """Per-prompt outcomes of sampled groups and the retire / down-weight / keep decisions.

    A visit is one group: ``correct`` of ``n`` rollouts of one prompt. Visits of a prompt are
    kept in order, the last ``window`` of them. The state is JSON-able (``state_dict``), so a
    trainer checkpoint restores the exact decisions.
    """

    def __init__(self, config: OnlineConfig | None = None) -> None:
        self.config = config or OnlineConfig()
        self.visits: dict[str, list[tuple[int, int]]] = {}  # id -> [(correct, n)], last `window`
        self.counts: dict[str, int] = {}  # id -> all visits ever (the window forgets)
        self.streaks: dict[str, int] = {}  # id -> trailing solve_all visits
        self.retired: dict[str, int | None] = {}  # id -> step of retirement
        self.down: set[str] = set()

    def observe(self, prompt_id: str, correct: int, n: int, step: int | None = None) -> Verdict:
        """Record one group of ``prompt_id`` and return the decision it leads to.

        Raises:
            ValueError: ``correct``/``n`` are not a group outcome (naming the prompt).
        """
        if n < 1 or not 0 <= correct <= n:
            raise ValueError(f"prompt {prompt_id!r}: a group needs 0 <= correct <= n and n >= 1; got {correct}/{n}")
        hist = self.visits.setdefault(prompt_id, [])
        hist.append((int(correct), int(n)))
        del hist[: -self.config.window]
        self.counts[prompt_id] = self.counts.get(prompt_id, 0) + 1
        kind = band(correct, n)
        self.streaks[prompt_id] = self.streaks.get(prompt_id, 0) + 1 if kind == "solve_all" else 0
        v = self.verdict(prompt_id)
        if v.action == "retire":
            self.retired[prompt_id] = step
            self.down.discard(prompt_id)
        elif v.action == "down_weight":
            self.down.add(prompt_id)
        elif v.action == "keep":
            self.down.discard(prompt_id)
        return v

    def verdict(self, prompt_id: str) -> Verdict:
        """The decision for ``prompt_id`` from the visits recorded so far (records nothing)."""
        c = self.config
        hist = self.visits.get(prompt_id, [])
        visits = self.counts.get(prompt_id, 0)
        streak = self.streaks.get(prompt_id, 0)
        succ, samples = sum(h[0] for h in hist), sum(h[1] for h in hist)
        if not hist:
            return Verdict(prompt_id, "keep", 0, 0, 0, 0, (0.0, 1.0), "no visit yet")
        lo, hi = wilson_interval(succ, samples, c.confidence)
        ci = f"{succ}/{samples} over {len(hist)} visit(s), {c.confidence:.0%} Wilson [{lo:.3f}, {hi:.3f}]"

        def out(action: Action, reason: str) -> Verdict:
            return Verdict(prompt_id, action, visits, streak, succ, samples, (lo, hi), reason)

        if prompt_id in self.retired:
            return out("retired", f"retired at step {self.retired[prompt_id]}")
        if streak >= c.k and lo >= c.retire_lower:
            return out("retire", f"solve_all {streak} visits in a row (k={c.k}); {ci} >= {c.retire_lower}")
        last_correct, last_n = hist[-1]
        if last_correct == 0 and hi < c.none_upper:
            return out("down_weight", f"solve_none; {ci} below {c.none_upper}: weight {c.low_weight}")
        if streak >= c.k:
            return out("keep", f"solve_all {streak} visits in a row, but {ci} is below {c.retire_lower}")
        return out("keep", ci)

    def weight(self, prompt_id: str) -> float:
        """Sampling weight: 0 when retired, ``low_weight`` when down-weighted, else 1."""
        if prompt_id in self.retired:
            return 0.0
        return self.config.low_weight if prompt_id in self.down else 1.0

    def state_dict(self) -> dict[str, Any]:
        """A JSON-able copy of everything the decisions depend on."""
        return {
            "config": self.config.to_dict(),
            "visits": {i: [list(v) for v in h] for i, h in self.visits.items()},
            "counts": dict(self.counts),
            "streaks": dict(self.streaks),
            "retired": dict(self.retired),
            "down": sorted(self.down),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict`; refuses a state written under different settings."""
        saved = OnlineConfig.from_dict(state["config"])
        if saved != self.config:
            diff = {k: (v, getattr(self.config, k)) for k, v in saved.to_dict().items() if getattr(self.config, k) != v}
            raise ValueError(f"online state was written with other settings (saved, now): {diff}")
        self.visits = {i: [(int(a), int(b)) for a, b in h] for i, h in state["visits"].items()}
        self.counts = {i: int(v) for i, v in state["counts"].items()}
        self.streaks = {i: int(v) for i, v in state["streaks"].items()}
        self.retired = {i: (None if s is None else int(s)) for i, s in state["retired"].items()}
        self.down = set(state["down"])


def weighted_draw(ids: Sequence[str], weights: Sequence[float], n: int, seed: int, salt: str | int) -> list[str]:
    """``n`` ids drawn in proportion to ``weights``, distinct while there are enough, from ``Random(f"{seed}:{salt}")``.

    Efraimidis and Spirakis (2006): each id with weight ``w > 0`` gets the key ``u ** (1 / w)``
    and the largest keys win, which is a weighted draw without replacement. When ``n`` exceeds
    the drawable ids, further rounds of keys from the same generator fill the rest. The salt is
    a stable counter (the draw number), so a resumed run repeats the same draws.

    >>> weighted_draw(["a", "b"], [1.0, 0.0], 3, seed=0, salt=1)
    ['a', 'a', 'a']
    >>> sorted(weighted_draw(["a", "b", "c"], [1.0, 0.1, 1.0], 3, seed=0, salt=1))
    ['a', 'b', 'c']
    """
    if len(ids) != len(weights):
        raise ValueError(f"{len(ids)} ids but {len(weights)} weights")
    drawable = [(i, w) for i, w in zip(ids, weights) if w > 0]
    if not drawable:
        raise ValueError("nothing to draw: every prompt is retired or has weight 0")
    rng = random.Random(f"{seed}:{salt}")
    out: list[str] = []
    while len(out) < n:
        keys = sorted(((rng.random() ** (1.0 / w), k) for k, (_, w) in enumerate(drawable)), reverse=True)
        out += [drawable[k][0] for _, k in keys[: n - len(out)]]
    return out


def compose_from_retired(q1: Problem, pool: Sequence[Problem], config: OnlineConfig,
                         exclude: Iterable[str] = (), partner_ids: Collection[str] | None = None) -> list[Problem]:
    """Compositions with the retired prompt ``q1`` first (its answer becomes X), checked.

    Partners are the depth-1 problems of ``pool``, tried in a seeded order that depends only on
    ``config.seed`` and ``q1.id`` (``config.partners * config.partner_candidates`` of them). The
    symbolic engine composes ``[q1, partner]`` and runs the four checks (Composition-RL, Section 3.4 /
    Appendix D). When ``q1`` is itself a composition, the result is written as the flat chain
    it is (q1's parents, then the partner; q1's links, then the new one; depth ``q1.depth + 1``)
    and the checks are run again on that chain, so the record is an ordinary depth-K SPC record
    that ``crl audit`` and :func:`composition_rl.spc.checks.run_checks` accept. The first
    ``config.partners`` accepted are returned; nothing when ``q1`` is at ``max_depth``.

    Args:
        q1: the retired prompt.
        pool: the depth-1 problems (partners, and every ancestor of ``q1``).
        config: the online settings.
        exclude: ids not to return (compositions already in the pool).
        partner_ids: when given, partners come only from these ids (a backfill composes a
            starving step's solve_all prompts with each other's depth-1 parts).

    Raises:
        ValueError: an ancestor of ``q1`` is not in ``pool`` (the flat chain cannot be checked).
    """
    from composition_rl.jobs.compose.pipeline import ComposeConfig, compose_problems
    from composition_rl.records import Problem as _Problem
    from composition_rl.spc.checks import run_checks

    if q1.depth >= config.max_depth:
        return []
    base = {p.id: p for p in pool if p.depth == 1}
    missing = [i for i in q1.parents if i not in base]
    if missing:
        raise ValueError(f"prompt {q1.id}: ancestor(s) {', '.join(missing)} are not in the depth-1 pool, "
                         "so its compositions cannot be checked as a flat chain")
    ancestors = [base[i] for i in q1.parents] if q1.depth > 1 else [q1]
    partners = sorted((p for i, p in base.items() if i != q1.id and i not in q1.parents
                       and (partner_ids is None or i in partner_ids)), key=lambda p: p.id)
    random.Random(f"{config.seed}:{q1.id}").shuffle(partners)
    partners = partners[: config.partners * config.partner_candidates]
    if not partners:
        return []
    cc = ComposeConfig(depth=2, pool_sizes=(1, None), seed=config.seed, workers=1)
    skip = set(exclude)
    out: list[Problem] = []
    for c in compose_problems(partners, cc, first_pool=[q1]).accepted:
        if q1.depth > 1:
            c = _Problem(id=c.id, question=c.question, answers=c.answers, source=c.source, depth=q1.depth + 1,
                         parents=(*q1.parents, c.parents[-1]), links=(*q1.links, *c.links), engine=c.engine,
                         metadata=c.metadata)
            if run_checks(c, [*ancestors, base[c.parents[-1]]]) is not None:
                continue
        if c.id in skip:
            continue
        out.append(c)
        if len(out) == config.partners:
            break
    return out


class OnlinePool:
    """The live prompt pool of an online run, shared by both trainers: draws, outcomes,
    retirements, injections, the ``online.jsonl`` log, metrics and a resumable state.

    TRL's ``crl train`` (``curriculum.mode: online``, jobs/train/grpo.py) draws ``n`` distinct
    prompts per dynamic-sampling round and observes that round's groups before the next draw;
    verl's ``OnlineDataset`` (integrations/verl_online.py) draws one prompt per item and its
    replay buffer observes every finished group. Both read :meth:`step_metrics` (or its flat
    form :meth:`metrics`) once per step.

    Args:
        problems: the starting pool.
        config: the rule and the seed.
        partners: problems whose depth-1 ones are the partners of retired prompts. The
            depth-1 problems of ``problems`` are always added: they are the ancestors of every
            composition, which is checked as a flat chain over them.
        log_path: ``online.jsonl``; each retirement appends one row: ``step``, ``retired`` (id),
            ``retired_depth``, ``new`` (the ids composed from it), ``depth`` (theirs; None when
            nothing was composed), ``visits``, ``pass_rate`` and the rule's ``reason``.
        accept: a trainer's own gate on new prompts (verl: its prompt-length filter).

    Draws are weighted by :meth:`OnlineTracker.weight` and seeded by a draw counter
    (:func:`weighted_draw`), so the same outcomes in the same order give the same prompts.
    :meth:`state_dict` holds everything (the injected problems included); :meth:`load_state_dict`
    also cuts the log back to the rows written before that state, so a resumed run neither
    loses nor repeats a row.

    >>> from composition_rl.jobs.train.arithmetic import arithmetic_problems
    >>> probs = arithmetic_problems(6, depth=1, seed=0)
    >>> pool = OnlinePool(probs[:2], OnlineConfig(k=1), partners=probs)
    >>> sorted(p.id for p in pool.draw(2)) == sorted(p.id for p in probs[:2])  # distinct within a draw
    True
    >>> [row] = pool.observe(1, [(probs[0].id, 8, 8)])
    >>> row["retired"] == probs[0].id, row["depth"], len(row["new"])
    (True, 2, 2)
    >>> pool.live_by_depth()
    {'1': 1, '2': 2}
    """

    def __init__(self, problems: Sequence[Problem], config: OnlineConfig | None = None, *,
                 partners: Sequence[Problem] = (), log_path: str | None = None,
                 accept: Callable[[Problem], bool] | None = None) -> None:
        if not problems:
            raise ValueError("an online pool needs at least one problem")
        self.config = config or OnlineConfig()
        self.tracker = OnlineTracker(self.config)
        self.start = list(problems)
        base: dict[str, Problem] = {}
        for p in [*partners, *problems]:
            if p.depth == 1:
                base.setdefault(p.id, p)
        self.base = list(base.values())
        self.log_path = log_path
        self.accept = accept
        self._reset()

    def _reset(self) -> None:
        self.problems: dict[str, Problem] = {}
        for p in self.start:
            self.problems.setdefault(p.id, p)
        self.live: list[str] = list(self.problems)
        self.injected: list[str] = []  # ids composed during the run, in order
        self.draws = 0
        self.log_rows = 0
        self.groups = dict.fromkeys(_KINDS, 0)  # observed groups by kind, over the run
        self.step_groups = dict.fromkeys(_KINDS, 0)  # the same since the last step_metrics()
        self.step_events: list[dict[str, Any]] = []  # online.jsonl rows since the last step_metrics()
        # backfill (see backfill()): compositions a starving step asked for
        self.backfilled: list[str] = []  # their ids over the run, in order (they are in `injected` too)
        self.backfill_rounds = 0  # backfill() calls that composed something: the seed salt of each
        self.queue: list[str] = []  # served by draw() before any weighted draw
        self.held: set[str] = set()  # this step's: kept out of its weighted draws (never generated twice)

    # ----------------------------------------------------------------------------- sampling

    @property
    def exhausted(self) -> bool:
        """True when no live prompt is left (every lineage retired at ``max_depth``)."""
        return not self.live

    @property
    def retired_total(self) -> int:
        """How many prompts have been retired so far."""
        return len(self.tracker.retired)

    def draw(self, n: int = 1, *, retired_if_exhausted: bool = False) -> list[Problem]:
        """``n`` live prompts, weighted, distinct while the pool has enough drawable prompts.

        Args:
            n: prompts to draw.
            retired_if_exhausted: when no live prompt is left, draw retired ones at equal weight
                instead of raising (the TRL trainer fills the step's refill rounds with them and
                ends the run at the step's end).

        Backfilled compositions waiting in :attr:`queue` come first, each once; the rest is a
        weighted draw over the live prompts, leaving out the ones the current step backfilled.

        Raises:
            ValueError: the pool is exhausted and ``retired_if_exhausted`` is off.
        """
        out = [self.problems[self.queue.pop(0)] for _ in range(min(n, len(self.queue)))]
        if len(out) == n:
            return out
        ids = [i for i in self.live if i not in self.held] or self.live
        weights = [self.tracker.weight(i) for i in ids]
        if self.exhausted:
            if not retired_if_exhausted:
                raise ValueError("every prompt of the online pool is retired (the lineages reached max_depth="
                                 f"{self.config.max_depth}); raise max_depth or add problems")
            ids = list(self.tracker.retired)
            weights = [1.0] * len(ids)
        self.draws += 1
        return out + [self.problems[i]
                      for i in weighted_draw(ids, weights, n - len(out), self.config.seed, f"online:{self.draws}")]

    def backfill(self, step: int | None, sources: Iterable[str], n: int, note: str = "") -> list[Problem]:
        """Compose up to ``n`` new prompts from a starving step's solve_all prompts; :meth:`draw` serves them next.

        q1 of each composition is one of ``sources``, its partner one of their depth-1 parts (a
        depth-1 source, or a depth-1 parent of a composed one), so everything in it is material the
        policy just solved. Sources are tried in an order seeded by ``config.seed`` and the backfill
        round, partners in :func:`compose_from_retired`'s seeded order, and passes over the sources
        repeat while they still yield new compositions. Each one is checked, passes ``accept``,
        joins the live pool and the injected ones (so the state keeps it), waits in :attr:`queue`
        and is :attr:`held` out of weighted draws until :meth:`release_backfill`. One
        ``online.jsonl`` row (``"event": "backfill"``) records them; nothing is logged when
        nothing could be composed.

        Args:
            step: the trainer's step, for the log.
            sources: record ids of the step's solve_all prompts.
            n: compositions wanted (verl's refill request beyond the step's budget).
            note: why, for the row's ``reason``.

        Returns:
            the new compositions (fewer than ``n`` when the sources allow no more).

        Raises:
            ValueError: a source is not in the pool.
        """
        src = sorted(set(sources))
        unknown = [i for i in src if i not in self.problems]
        if unknown:
            raise ValueError(f"step {step}: backfill source(s) {unknown[:3]} are not in the online pool")
        if n < 1 or not src:
            return []
        parts: set[str] = set()
        for i in src:
            p = self.problems[i]
            parts.update(p.parents if p.depth > 1 else (p.id,))
        order = list(src)
        random.Random(f"{self.config.seed}:backfill:{self.backfill_rounds + 1}").shuffle(order)
        skip, new, refused = set(self.problems), [], 0
        progress = True
        while progress and len(new) < n:
            progress = False
            for i in order:
                if len(new) >= n:
                    break
                cfg = replace(self.config, partners=min(self.config.partners, n - len(new)))
                try:
                    made = compose_from_retired(self.problems[i], self.base, cfg, exclude=skip, partner_ids=parts)
                except ValueError:  # an ancestor outside the depth-1 pool: no flat chain to check
                    continue
                for p in made:
                    skip.add(p.id)
                    progress = True
                    if self.accept is not None and not self.accept(p):
                        refused += 1
                    else:
                        new.append(p)
        if not new:
            return []
        self.backfill_rounds += 1
        for p in new:
            self.problems[p.id] = p
            self.live.append(p.id)
            self.injected.append(p.id)
            self.backfilled.append(p.id)
            self.queue.append(p.id)
            self.held.add(p.id)
        reason = f"backfill: {note + '; ' if note else ''}{len(new)} of {n} composed from {len(src)} solve_all prompt(s)"
        if refused:
            reason += f"; {refused} composition(s) refused by the trainer (prompt too long)"
        self._log({"step": step, "event": "backfill", "sources": src, "new": [p.id for p in new],
                   "depths": [p.depth for p in new], "requested": n, "reason": reason})
        return new

    def release_backfill(self) -> None:
        """The step's batch is chosen: unserved backfill leaves the queue (it stays live) and the
        step's backfilled compositions become ordinary draws."""
        self.queue.clear()
        self.held.clear()

    # ----------------------------------------------------------------------------- the rule

    def observe(self, step: int | None, groups: Iterable[tuple[str, int, int]]) -> list[dict[str, Any]]:
        """Record sampled groups ``(id, correct, n)`` in order; retire, inject and log.

        Returns:
            the ``online.jsonl`` rows of the retirements these groups led to.

        Raises:
            ValueError: a group names a prompt this pool never held, or is not a group outcome.
        """
        rows = []
        for pid, correct, n in groups:
            if pid not in self.problems:
                raise ValueError(f"step {step}: group for prompt {pid!r}, which is not in the online pool "
                                 f"({len(self.problems)} prompts)")
            v = self.tracker.observe(pid, correct, n, step)
            kind = band(correct, n).replace("goldilocks", "informative")
            self.groups[kind] += 1
            self.step_groups[kind] += 1
            if v.action == "retire":
                rows.append(self._retire(self.problems[pid], v, step))
        return rows

    def _retire(self, q1: Problem, v: Verdict, step: int | None) -> dict[str, Any]:
        reason = v.reason
        try:
            new = compose_from_retired(q1, self.base, self.config, exclude=self.problems)
        except ValueError as e:
            new, reason = [], f"{reason}; no successors: {e}"
        if self.accept is not None:
            kept = [p for p in new if self.accept(p)]
            if len(kept) < len(new):
                reason += f"; {len(new) - len(kept)} composition(s) refused by the trainer (prompt too long)"
            new = kept
        if not new and q1.depth >= self.config.max_depth:
            reason += f"; no successors (depth {q1.depth}, max_depth {self.config.max_depth})"
        for p in new:
            self.problems[p.id] = p
            self.live.append(p.id)
            self.injected.append(p.id)
        self.live.remove(q1.id)
        row = {"step": step, "retired": q1.id, "retired_depth": q1.depth, "new": [p.id for p in new],
               "depth": q1.depth + 1 if new else None, "visits": v.visits, "pass_rate": round(v.pass_rate, 4),
               "reason": reason}
        self._log(row)
        return row

    def _log(self, row: dict[str, Any]) -> None:
        if self.log_path is not None:
            import os

            from composition_rl.io.files import dumps

            os.makedirs(os.path.dirname(os.path.abspath(self.log_path)), exist_ok=True)
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(dumps(row) + "\n")
        self.log_rows += 1
        self.step_events.append(row)

    # ----------------------------------------------------------------------------- metrics

    def live_by_depth(self) -> dict[str, int]:
        """Live prompts (retired ones excluded) by depth, as a JSON-able dict."""
        from collections import Counter

        c = Counter(self.problems[i].depth for i in self.live)
        return {str(d): c[d] for d in sorted(c)}

    def step_metrics(self) -> dict[str, Any]:
        """The step's pool counts (the ``online`` block of TRL's metrics.jsonl); starts a new step.

        ``retired`` and ``injected`` count this step's retirements and the compositions that joined
        the pool (backfilled ones included), the ``_total`` ones the run's.
        """
        ev, self.step_events = self.step_events, []
        self.step_groups = dict.fromkeys(_KINDS, 0)
        return {
            "live": len(self.live),
            "live_by_depth": self.live_by_depth(),
            "down_weighted": sum(1 for i in self.live if i in self.tracker.down),
            "retired": sum(1 for e in ev if "retired" in e),
            "injected": sum(len(e["new"]) for e in ev),
            "retired_total": self.retired_total,
            "injected_total": len(self.injected),
        }

    def metrics(self) -> dict[str, float]:
        """:meth:`step_metrics` as flat ``online/...`` floats (verl's step metrics; starts a new step
        too), with ``live_depth_D`` per depth, the share of informative groups among the groups
        observed over the run and, when the step observed any, in this step; ``backfilled`` (this
        step) and ``backfilled_total`` count :meth:`backfill`'s compositions."""
        groups = self.step_groups
        backfilled = sum(len(e["new"]) for e in self.step_events if e.get("event") == "backfill")
        m = self.step_metrics()
        m.update(backfilled=backfilled, backfilled_total=len(self.backfilled))
        out = {f"online/live_depth_{d}": float(c) for d, c in m.pop("live_by_depth").items()}
        out.update({f"online/{k}": float(v) for k, v in m.items()})
        for prefix, g in (("", self.groups), ("step_", groups)):
            seen = sum(g.values())
            if seen:
                out[f"online/{prefix}informative_share"] = g["informative"] / seen
        out["online/step_groups"] = float(sum(groups.values()))
        return out

    # ----------------------------------------------------------------------------- state

    def state_dict(self) -> dict[str, Any]:
        """Everything the next draws and decisions depend on (JSON-able)."""
        return {
            "tracker": self.tracker.state_dict(),
            "start": [p.id for p in self.start],
            "live": list(self.live),
            "injected": [self.problems[i].to_dict() for i in self.injected],
            "draws": self.draws,
            "log_rows": self.log_rows,
            "groups": dict(self.groups),
            "backfill": {"ids": list(self.backfilled), "rounds": self.backfill_rounds, "queue": list(self.queue),
                         "held": sorted(self.held)},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`state_dict` onto a pool built from the same problems and partners.

        Raises:
            ValueError: the state was written for other starting problems or settings, or
                ``online.jsonl`` holds fewer rows than the state counts.
        """
        from composition_rl.records import Problem as _Problem

        lacking = [k for k in self.state_dict() if k not in state and k != "backfill"]  # older states have none
        if lacking:
            raise ValueError(f"online state lacks {', '.join(lacking)}: it was written by another version of the "
                             "pool (start the run over)")
        if list(state["start"]) != [p.id for p in self.start]:
            raise ValueError(f"online state was written for another starting pool ({len(state['start'])} prompts, "
                             f"this one has {len(self.start)})")
        self._reset()
        self.tracker.load_state_dict(state["tracker"])
        for d in state["injected"]:
            p = _Problem.from_dict(d)
            self.problems[p.id] = p
            self.injected.append(p.id)
        missing = [i for i in state["live"] if i not in self.problems]
        if missing:
            raise ValueError(f"online state names live prompt(s) {missing[:3]} that are neither starting problems "
                             "nor injected: it belongs to another run")
        self.live = list(state["live"])
        self.draws = int(state["draws"])
        self.groups = {k: int(state["groups"].get(k, 0)) for k in _KINDS}
        self.log_rows = int(state["log_rows"])
        bf = state.get("backfill") or {}
        self.backfilled = list(bf.get("ids", ()))
        self.backfill_rounds = int(bf.get("rounds", 0))
        self.queue = list(bf.get("queue", ()))
        self.held = set(bf.get("held", ()))
        strays = [i for i in [*self.backfilled, *self.queue, *self.held] if i not in self.problems]
        if strays:
            raise ValueError(f"online state names backfilled prompt(s) {strays[:3]} that were never injected: "
                             "it belongs to another run")
        if self.log_path is not None:
            import os

            from composition_rl.io.files import atomic_write_jsonl, read_jsonl

            if os.path.exists(self.log_path):
                rows = list(read_jsonl(self.log_path))
                if len(rows) < self.log_rows:
                    raise ValueError(f"{self.log_path} has {len(rows)} rows but the state counts {self.log_rows}")
                if len(rows) > self.log_rows:  # rows of steps after the checkpoint: they will be redone
                    atomic_write_jsonl(self.log_path, rows[: self.log_rows])
