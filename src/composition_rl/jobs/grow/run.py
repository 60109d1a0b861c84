"""MagicBeanStalk: grow hard (solve_none) seeds into problems calibrated to a policy.

Seed 002, Methodology. Per seed (p, a*):

1. **Teacher traces**: each teacher in the pool gets up to N_t tries; the first trace whose
   answer the verifier accepts against a* is kept; a seed with none is dropped
   (``no_verified_trace``; ``not_a_chain`` when no teacher could read it at all).
2. **Top-down decomposition**: the teacher splits a node into K <= 3 subproblems, each with
   a trace that the verifier ties to its answer. The *effectivity test* rolls every student
   out on the node's question with and without the subproblems as in-context worked
   examples; it passes when one student's accuracy rises. A failed decomposition is
   re-prompted up to N_d times. Recursion stops at depth D or at a node that cannot be
   split. What a failed test does is :attr:`GrowConfig.on_ineffective`.
3. **Bottom-up synthesis**: N_l harder variants per leaf, dropped when the weakest student
   scores above alpha_leaf; parents rebuilt from synthetic children with the original
   parent and children as the pattern B(G_n), dropped above alpha_parent, at most N_c
   trials per node.
4. **Qualification**: the synthetic roots are profiled with the target policy by
   ``crl profile``'s machinery (same verifier, same bands); those in the Goldilocks band
   (0 < pass rate < 1) are *qualified*.

The direct-synthesis baseline (``method="direct"``) asks the teacher for variations of the
seed instead, calibrates them like parents, and qualifies them the same way.

Every seed's whole tree is one line of ``trees.jsonl`` (append-only, keyed by seed id), so a
killed run resumes at the seed it was working on; qualification is a resumable profile.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composition_rl.chat.context import TOO_LONG
from composition_rl.io.files import JsonlLog, atomic_write_json, atomic_write_jsonl, read_jsonl
from composition_rl.jobs.grow.config import GrowConfig
from composition_rl.jobs.grow.students import Students, incontext_question, too_long
from composition_rl.jobs.grow.teachers import Blueprint, Item, Teacher, TeacherError
from composition_rl.records import Problem, content_id

__all__ = ["FUNNEL_STAGES", "DIRECT_STAGES", "GrowResult", "grow", "grow_seed", "profile_qualify"]

TREES_FILE = "trees.jsonl"
#: Seed-level stages, in order; a seed that stops before the next stage is dropped with a reason.
FUNNEL_STAGES = ("seeds_in", "hard", "traced", "decomposed", "effective", "leaves_kept", "parents_kept", "qualified")
DIRECT_STAGES = ("seeds_in", "hard", "varied", "calibrated", "qualified")


@dataclass
class _Ctx:
    teachers: Sequence[Teacher]
    students: Students
    verifier: Any
    config: GrowConfig
    rejects: list[dict[str, Any]] = field(default_factory=list)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    synthetic: list[dict[str, Any]] = field(default_factory=list)
    effectivity: list[dict[str, Any]] = field(default_factory=list)
    seed_id: str = ""
    #: decomposition and synthesis use the teacher whose trace was accepted in stage 1
    teacher: Any = None

    def reject(self, stage: str, err: TeacherError | str, detail: str = "", item: Item | None = None) -> None:
        kind = err.kind if isinstance(err, TeacherError) else err
        det = err.detail if isinstance(err, TeacherError) else detail
        row = {"seed_id": self.seed_id, "stage": stage, "reason": kind, "detail": det}
        if item is not None:
            row["item"] = item.to_dict()
        self.rejects.append(row)

    def verified(self, items: Sequence[Item], golds: Sequence[Sequence[str]] | None = None) -> list[bool]:
        """Does each trace end in the answer (or in ``golds``)? One verifier batch."""
        if not items:
            return []
        pairs = [(it.trace, list(g) if golds else [it.answer]) for it, g in zip(items, golds or [None] * len(items))]
        return [r.score == 1.0 for r in self.verifier.score_batch(pairs)]


def _node_id(seed_id: str, path: str) -> str:
    return content_id(seed_id, path)


def grow_seed(seed: Problem, teachers: Sequence[Teacher], students: Students, verifier: Any,
              config: GrowConfig, method: str = "mbs") -> dict[str, Any]:
    """Run MBS (or the direct baseline) on one seed; returns its ``trees.jsonl`` row.

    The row holds ``status`` (``ok`` or ``dropped``), ``reason``, the seed-level ``stages``
    reached, every tree node with its parent link, every synthetic problem with its student
    accuracies, the ``candidates`` sent to qualification, the ``rejects`` and the ``cost``.
    """
    if method not in ("mbs", "direct"):
        raise ValueError(f"method={method!r} (one of mbs, direct)")
    ctx = _Ctx(teachers, students, verifier, config, seed_id=seed.id)
    cost0 = [t.cost() for t in teachers]
    roll0 = students.rollouts
    if method == "mbs":
        stages, reason, cands = _grow_mbs(seed, ctx)
    else:
        stages, reason, cands = _grow_direct(seed, ctx)
    cost: dict[str, int] = Counter()
    for t, c0 in zip(teachers, cost0):
        for k, v in t.cost().items():
            cost[f"teacher_{k}"] += v - c0.get(k, 0)
    cost["student_rollouts"] = students.rollouts - roll0
    return {
        "seed_id": seed.id,
        "method": method,
        "status": "dropped" if reason else "ok",
        "reason": reason,
        "stages": list(stages),
        "seed": seed.to_dict(),
        "nodes": ctx.nodes,
        "synthetic": ctx.synthetic,
        "effectivity": ctx.effectivity,
        "candidates": [p.to_dict() for p in cands],
        "rejects": ctx.rejects,
        "cost": dict(sorted(cost.items())),
    }


# --------------------------------------------------------------------------- stage 1


def _trace(seed: Problem, ctx: _Ctx) -> tuple[Item | None, str]:
    """The seed's verified trace, or None and why: ``not_a_chain`` when no teacher could even
    read the seed (every attempt said so), else ``no_verified_trace``."""
    kinds: set[str] = set()
    for teacher in ctx.teachers:
        for attempt in range(ctx.config.n_traces):
            try:
                item = teacher.solve(seed.question, attempt)
            except TeacherError as e:
                ctx.reject("trace", e)
                kinds.add(e.kind)
                continue
            if ctx.verified([item], [seed.answers])[0]:
                ctx.teacher = teacher
                return Item(seed.question, item.trace, seed.answer, item.spec), ""
            kinds.add("trace_unverified")
            ctx.reject("trace", "trace_unverified", f"teacher {teacher.name} answered {item.answer!r}, gold {seed.answer!r}",
                       item)
    return None, ("not_a_chain" if kinds == {"not_a_chain"} else "no_verified_trace")


# --------------------------------------------------------------------------- stage 2


@dataclass
class _Node:
    id: str
    item: Item
    level: int
    parent: str | None
    children: list[_Node] = field(default_factory=list)
    leaf_reason: str = ""  # why it was not decomposed: atomic, depth_limit, ineffective, invalid
    effective: bool | None = None

    def record(self) -> dict[str, Any]:
        return {"id": self.id, "parent": self.parent, "level": self.level, "item": self.item.to_dict(),
                "children": [c.id for c in self.children], "leaf_reason": self.leaf_reason,
                "effective": self.effective}


def _unread_detail(unread: dict[str, str]) -> str:
    return "; ".join(f"student {s}: {why}" for s, why in unread.items())


def _effectivity(node: _Node, subs: Sequence[Item], ctx: _Ctx, attempt: int) -> tuple[bool, bool]:
    """Seed 002's test: exists S with acc_cond(S, p | subproblems) > acc(S, p).

    Returns (passed, too long): a test that fails while a student could not read the
    question (alone or with its examples) is a ``prompt_too_long`` reject, not a verdict
    on the decomposition."""
    q = node.item.question
    examples = list(subs)
    if ctx.config.hide_parent_answer:
        boxed = [Item(s.question, f"\\boxed{{{s.answer}}}", s.answer) for s in subs]
        same = ctx.verified(boxed, [[node.item.answer]] * len(subs))
        examples = [s for s, eq in zip(subs, same) if not eq]
    if not examples:
        ctx.effectivity.append({"node": node.id, "level": node.level, "attempt": attempt, "examples": 0,
                                "acc": {}, "acc_cond": {}, "passed": False})
        return False, False
    (plain, cond), (un_plain, un_cond) = ctx.students.measure([q, incontext_question(q, examples)],
                                                              [[node.item.answer]] * 2)
    # a student that could not read a prompt has no accuracy to compare: the shorter prompt's reason first
    unread = {s: un_plain.get(s) or un_cond[s] for s in plain if s in un_plain or s in un_cond}
    passed = any(cond[s] > plain[s] for s in plain if s not in unread)
    rec = {"node": node.id, "level": node.level, "attempt": attempt, "examples": len(examples),
           "acc": plain, "acc_cond": cond, "passed": passed}
    if unread:
        rec[TOO_LONG] = unread
    ctx.effectivity.append(rec)
    if unread and not passed:
        ctx.reject("decompose", TOO_LONG, f"effectivity test, attempt {attempt}: {_unread_detail(unread)}", node.item)
    return passed, bool(unread) and not passed


def _decompose(node: _Node, ctx: _Ctx) -> None:
    cfg = ctx.config
    if node.level >= cfg.max_depth:
        node.leaf_reason = "depth_limit"
        return
    first_valid: list[Item] | None = None
    tested = unreadable = 0  # tests made, and those failed because a student could not read the prompt
    for attempt in range(1 + cfg.decompose_retries):
        try:
            subs = ctx.teacher.decompose(node.item, attempt, cfg.max_subproblems)
        except TeacherError as e:
            ctx.reject("decompose", e)
            continue
        if not subs:
            node.leaf_reason = "atomic"
            return
        if len(subs) > cfg.max_subproblems:
            ctx.reject("decompose", "too_many_subproblems", f"{len(subs)} > K={cfg.max_subproblems}")
            continue
        ok = ctx.verified(subs)
        if not all(ok):
            for s, good in zip(subs, ok):
                if not good:
                    ctx.reject("decompose", "sub_answer_unverified", f"trace does not end in {s.answer!r}", s)
            continue
        first_valid = first_valid or list(subs)
        passed, unread = _effectivity(node, subs, ctx, attempt)
        tested += 1
        unreadable += unread
        if passed:
            node.effective = True
            break
    else:
        if first_valid is None:
            node.leaf_reason = "invalid"
            return
        node.effective = False
        if cfg.on_ineffective == "drop":
            node.leaf_reason = TOO_LONG if unreadable == tested else "ineffective"
            return
        subs = first_valid
    for k, s in enumerate(subs):
        child = _Node(_node_id(ctx.seed_id, f"{node.id}/{k}"), s, node.level + 1, node.id)
        node.children.append(child)
        _decompose(child, ctx)


# --------------------------------------------------------------------------- stage 3


def _calibrate(items: Sequence[Item], alpha: float, kind: str, node: _Node, ctx: _Ctx) -> list[Item]:
    """Verify each candidate's trace, measure the students, keep those the weakest student
    scores at most ``alpha`` on. Every candidate is recorded with its accuracies; one that a
    student could not read (``prompt_too_long``) is not kept, whatever its accuracies."""
    ok = ctx.verified(items)
    good = [it for it, v in zip(items, ok) if v]
    for it, v in zip(items, ok):
        if not v:
            ctx.reject(kind, "answer_unverified", f"trace does not end in {it.answer!r}", it)
    accs, unreads = ctx.students.measure([it.question for it in good], [[it.answer] for it in good])
    kept = []
    for it, acc, unread in zip(good, accs, unreads):
        weakest = Students.weakest(acc)
        keep = weakest <= alpha and not unread
        rec = {"id": content_id(it.question, it.answer), "kind": kind, "node": node.id,
               "level": node.level, "item": it.to_dict(), "acc": acc, "weakest": weakest, "kept": keep}
        if unread:
            rec[TOO_LONG] = unread
            ctx.reject(kind, TOO_LONG, _unread_detail(unread), it)
        ctx.synthetic.append(rec)
        if keep:
            kept.append(it)
    return kept


def _calibration_reason(records: Sequence[dict[str, Any]], reason: str) -> str:
    """``reason``, or ``prompt_too_long`` when every candidate the stage dropped was one a
    student could not read."""
    dropped = [r for r in records if not r["kept"]]
    return TOO_LONG if dropped and all(TOO_LONG in r for r in dropped) else reason


def _synthesise(node: _Node, ctx: _Ctx) -> list[Item]:
    cfg = ctx.config
    if not node.children:
        cands = []
        for s in range(cfg.leaf_variants):
            try:
                cands.append(ctx.teacher.harder(node.item, s))
            except TeacherError as e:
                ctx.reject("leaf", e)
        return _calibrate(cands, cfg.alpha_leaf, "leaf", node, ctx)
    variants = [_synthesise(c, ctx) for c in node.children]
    if not all(variants):
        return []
    blueprint = Blueprint(node.item, tuple(c.item for c in node.children))
    kept: list[Item] = []
    seen: set[tuple[str, ...]] = set()
    trial = 0
    while trial < cfg.compose_trials and len(kept) < cfg.parents_per_node:
        batch = []
        # one batch of as many trials as parents are still wanted, so the students see them together
        while trial < cfg.compose_trials and len(batch) < cfg.parents_per_node - len(kept):
            rng = random.Random(f"mbs-compose:{cfg.seed}:{node.id}:{trial}")
            chosen = [rng.choice(v) for v in variants]
            key = tuple(c.question for c in chosen)
            if key not in seen:  # the same children twice would repeat a trial: it is spent unasked
                seen.add(key)
                try:
                    batch.append(ctx.teacher.compose(chosen, blueprint, trial))
                except TeacherError as e:
                    ctx.reject("parent", e)
            trial += 1
        kept.extend(_calibrate(batch, cfg.alpha_parent, "parent", node, ctx))
    return kept[: cfg.parents_per_node]


def _problem(item: Item, seed: Problem, kind: str, extra: dict[str, Any]) -> Problem:
    meta = {"mbs": {"kind": kind, "seed_id": seed.id, "trace": item.trace, **extra}}
    return Problem.new(item.question, (item.answer,), source=f"mbs:{kind}", metadata=meta)


def _grow_mbs(seed: Problem, ctx: _Ctx) -> tuple[list[str], str, list[Problem]]:
    stages = ["hard"]
    root_item, why = _trace(seed, ctx)
    if root_item is None:
        return stages, why, []
    stages.append("traced")
    root = _Node(_node_id(seed.id, "root"), root_item, 0, None)
    _decompose(root, ctx)
    _walk(root, ctx.nodes)
    if not root.children:
        reason = {"atomic": "not_decomposable", "invalid": "no_valid_decomposition",
                  "ineffective": "ineffective"}.get(root.leaf_reason, root.leaf_reason)
        if root.leaf_reason in ("ineffective", TOO_LONG):
            stages.append("decomposed")
        return stages, reason, []
    stages.append("decomposed")
    # with on_ineffective="keep" a root whose test failed goes on; the row and the stats say so
    stages.append("effective")
    return _finish_mbs(root, seed, ctx, stages)


def _finish_mbs(root: _Node, seed: Problem, ctx: _Ctx, stages: list[str]) -> tuple[list[str], str, list[Problem]]:
    roots = _synthesise(root, ctx)
    failed = [n["id"] for n in ctx.nodes if not n["children"]
              and not any(r["kept"] for r in ctx.synthetic if r["node"] == n["id"] and r["kind"] == "leaf")]
    if failed:
        return stages, _calibration_reason([r for r in ctx.synthetic if r["node"] in failed and r["kind"] == "leaf"],
                                           "leaf_calibration"), []
    stages.append("leaves_kept")
    if not roots:
        return stages, _calibration_reason([r for r in ctx.synthetic if r["kind"] == "parent"],
                                           "parent_calibration"), []
    stages.append("parents_kept")
    if ctx.config.qualify == "root":
        chosen = [(it, "root") for it in roots]
    else:
        chosen = [(Item.from_dict(r["item"]), r["kind"]) for r in ctx.synthetic if r["kept"]]
    out, seen = [], set()
    for it, kind in chosen:
        p = _problem(it, seed, kind, {"tree": root.id})
        if p.id not in seen:
            seen.add(p.id)
            out.append(p)
    return stages, "", out


def _walk(node: _Node, out: list[dict[str, Any]]) -> None:
    out.append(node.record())
    for c in node.children:
        _walk(c, out)


def _grow_direct(seed: Problem, ctx: _Ctx) -> tuple[list[str], str, list[Problem]]:
    stages = ["hard"]
    item = Item(seed.question, "", seed.answer)
    teacher = ctx.teachers[0]
    ctx.teacher = teacher
    node = _Node(_node_id(seed.id, "root"), item, 0, None)
    ctx.nodes.append(node.record())
    cands = []
    for t in range(ctx.config.direct_trials):
        try:
            cands.append(teacher.vary(item, t))
        except TeacherError as e:
            ctx.reject("vary", e)
    if not cands:
        return stages, "no_variation", []
    stages.append("varied")
    kept = _calibrate(cands, ctx.config.alpha_parent, "variation", node, ctx)
    if not kept:
        return stages, _calibration_reason(ctx.synthetic, "calibration"), []
    stages.append("calibrated")
    out, seen = [], set()
    for it in kept:
        p = _problem(it, seed, "variation", {"tree": node.id})
        if p.id not in seen:
            seen.add(p.id)
            out.append(p)
    return stages, "", out


# --------------------------------------------------------------------------- the run


@dataclass
class GrowResult:
    """What :func:`grow` wrote: the stats dict and the qualified problems."""

    stats: dict[str, Any]
    qualified: list[Problem]


def grow(seeds: Sequence[Problem], teachers: Sequence[Teacher], students: Students, verifier: Any,
         out_dir: str | Path, config: GrowConfig, method: str = "mbs", qualify: Any = None,
         seeds_in: int | None = None, pre_dropped: dict[str, int] | None = None,
         input_rejects: Sequence[dict[str, Any]] = (), progress: bool = False) -> GrowResult:
    """Grow ``seeds`` (the hard ones), qualify the candidates, write every output.

    Args:
        seeds: the hard seeds (already selected).
        teachers: the teacher pool T1..TM (stage 1 tries them in order).
        students: the student panel.
        verifier: the project verifier.
        out_dir: output folder; rerun the same call to resume.
        config: :class:`GrowConfig`.
        method: ``mbs`` or ``direct`` (the baseline).
        qualify: ``callable(problems, out_dir) -> {id: class}`` measuring the target policy
            (``crl grow`` passes :func:`profile_qualify`); a problem the policy cannot read
            maps to ``"prompt_too_long: <why>"`` instead of a class. None skips qualification
            (nothing qualifies).
        seeds_in: seeds before hardness selection (for the funnel); default ``len(seeds)``.
        pre_dropped: seeds dropped before growing, by reason (e.g. ``not_hard``).
        input_rejects: rows the reader rejected (written to rejects.jsonl too).
        progress: show a progress bar.

    Writes ``trees.jsonl``, ``candidates.jsonl``, ``qualified.jsonl``, ``rejects.jsonl``,
    ``stats.json`` and ``funnel.png`` into ``out_dir``.
    """
    from composition_rl.jobs.profile import progress_bar

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    unique: dict[str, Problem] = {}
    for s in seeds:
        unique.setdefault(s.id, s)
    with JsonlLog(out / TREES_FILE, key="seed_id") as log:
        todo = [s for s in unique.values() if s.id not in log.done]
        with progress_bar(progress, len(unique), len(unique) - len(todo), label=f"growing ({method})") as advance:
            for s in todo:
                log.append(grow_seed(s, teachers, students, verifier, config, method))
                advance(1)
    rows = [r for r in read_jsonl(out / TREES_FILE) if r["seed_id"] in unique]
    candidates: list[Problem] = []
    seen: set[str] = set()
    for r in rows:
        for d in r["candidates"]:
            if d["id"] not in seen:
                seen.add(d["id"])
                candidates.append(Problem.from_dict(d))
    atomic_write_jsonl(out / "candidates.jsonl", (p.to_dict() for p in candidates))
    classes = qualify(candidates, out / "qualify") if (qualify is not None and candidates) else {}
    # a candidate the policy cannot read has no band: it is a reject of the qualify step
    unread = {k: v for k, v in classes.items() if v == TOO_LONG or v.startswith(f"{TOO_LONG}:")}
    classes = {k: v for k, v in classes.items() if k not in unread}
    qualified = [p for p in candidates if classes.get(p.id) == "goldilocks"]
    atomic_write_jsonl(out / "qualified.jsonl", (p.to_dict() for p in qualified))
    too_long_rejects = [
        {"seed_id": r["seed_id"], "stage": "qualify", "reason": TOO_LONG,
         "detail": unread[d["id"]].removeprefix(TOO_LONG).removeprefix(":").strip(),
         "item": Item(d["question"], d["metadata"]["mbs"]["trace"], d["answer"]).to_dict()}
        for r in rows for d in r["candidates"] if d["id"] in unread]
    rejects = ([{"stage": "input", **r} for r in input_rejects] + [rj for r in rows for rj in r["rejects"]]
               + too_long_rejects)
    atomic_write_jsonl(out / "rejects.jsonl", rejects)
    stats = _stats(rows, classes, method, config, seeds_in if seeds_in is not None else len(unique),
                   pre_dropped or {}, len(input_rejects), teachers, students, too_long_rejects)
    atomic_write_json(out / "stats.json", stats)
    write_funnel_png(stats, out / "funnel.png")
    return GrowResult(stats, qualified)


def profile_qualify(policy: Any, verifier: Any, config: Any, name: str = "policy", progress: bool = False,
                    identity: dict[str, Any] | None = None):
    """The qualify step of ``crl grow``: ``qualify(problems, out_dir) -> {id: class}``.

    The candidates are profiled with ``policy`` by ``crl profile``'s machinery
    (:class:`~composition_rl.jobs.profile.ProfileConfig` ``config``) into ``out_dir``; one whose
    prompt does not fit the local policy's context is not sampled (it could only be
    ``solve_none``) and maps to ``"prompt_too_long: policy <name>: <why>"``.
    """
    from composition_rl.jobs.profile import load_profile, profile_problems
    from composition_rl.rollout.base import load_template, render_prompt

    def qualify(problems: Sequence[Problem], out_dir: Path) -> dict[str, str]:
        template = load_template(config.template)
        unread = {}
        for p in problems:
            why = too_long(policy, render_prompt(template, p.question))
            if why:
                unread[p.id] = f"{TOO_LONG}: policy {name}: {why.removeprefix(f'{TOO_LONG}:').strip()}"
        fit = [p for p in problems if p.id not in unread]
        classes: dict[str, str] = {}
        if fit:
            profile_problems(fit, policy, verifier, out_dir, config, progress=progress, identity=identity)
            classes = {r["id"]: r["class"] for r in load_profile(out_dir, ids=[p.id for p in fit])}
        return {**classes, **unread}

    return qualify


def _stats(rows, classes, method, config, seeds_in, pre_dropped, n_input_rejects, teachers, students,
           qualify_rejects=()) -> dict[str, Any]:
    stages = FUNNEL_STAGES if method == "mbs" else DIRECT_STAGES
    reached: Counter = Counter()
    dropped: Counter = Counter(pre_dropped)
    qualified_seeds = 0
    per_seed_q = {}
    for r in rows:
        for st in r["stages"]:
            reached[st] += 1
        nq = sum(1 for d in r["candidates"] if classes.get(d["id"]) == "goldilocks")
        per_seed_q[r["seed_id"]] = nq
        if r["status"] == "dropped":
            dropped[r["reason"]] += 1
        elif nq:
            qualified_seeds += 1
            reached["qualified"] += 1
        elif any(d["id"] in classes for d in r["candidates"]):
            dropped["not_in_band"] += 1
        elif any(q["seed_id"] == r["seed_id"] for q in qualify_rejects):  # the policy could read none
            dropped[TOO_LONG] += 1
        else:
            dropped["not_profiled"] += 1
    reached["seeds_in"] = seeds_in
    reached["hard"] = len(rows)
    funnel = [{"stage": st, "seeds": reached.get(st, 0)} for st in stages]
    hard = len(rows)
    cost: Counter = Counter()
    for r in rows:
        cost.update(r["cost"])
    synth = Counter((s["kind"], s["kept"]) for r in rows for s in r["synthetic"])
    eff = [e for r in rows for e in r["effectivity"]]
    band_counts = Counter(classes.values())
    return {
        "method": method,
        "config": config.to_dict(),
        "students": students.names,
        "seeds_in": seeds_in,
        "input_rejects": n_input_rejects,
        "hard_seeds": hard,
        "qualified_seeds": qualified_seeds,
        "qualified_yield": qualified_seeds / hard if hard else None,
        "qualified_problems": sum(per_seed_q.values()),
        "qualified_per_hard_seed": sum(per_seed_q.values()) / hard if hard else None,
        "funnel": funnel,
        "dropped_by_reason": dict(sorted(dropped.items())),
        "counts_add_up": seeds_in == qualified_seeds + sum(dropped.values()),
        "synthetic": {f"{k}_{'kept' if kept else 'dropped'}": v for (k, kept), v in sorted(synth.items())},
        "candidates": sum(len(r["candidates"]) for r in rows),
        "candidate_bands": dict(sorted(band_counts.items())),
        "effectivity": {
            "tests": len(eff),
            "passed": sum(e["passed"] for e in eff),
                "roots_passed": sum(1 for r in rows if any(e["passed"] and e["level"] == 0 for e in r["effectivity"])),
            "roots_tested": sum(1 for r in rows if any(e["level"] == 0 for e in r["effectivity"])),
        },
        "rejects_by_reason": dict(sorted(Counter(rj["reason"] for rj in [*(rj for r in rows for rj in r["rejects"]),
                                                                           *qualify_rejects]).items())),
        "cost": dict(sorted(cost.items())),
    }


def write_funnel_png(stats: dict[str, Any], path: str | Path) -> bool:
    """Horizontal bar chart of the funnel; False (nothing written) without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    stages = [f["stage"] for f in stats["funnel"]][::-1]
    counts = [f["seeds"] for f in stats["funnel"]][::-1]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.barh(stages, counts, color="#27ae60")
    for y, c in enumerate(counts):
        ax.text(c, y, f" {c}", va="center")
    ax.set_xlabel("seeds")
    y = stats["qualified_yield"]
    ax.set_title(f"{stats['method']}: qualified yield {y:.1%}" if y is not None else stats["method"])
    fig.tight_layout()
    tmp = Path(path).with_name(f".{Path(path).name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)
    return True
