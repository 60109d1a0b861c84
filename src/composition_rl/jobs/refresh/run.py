"""``crl refresh``: a stale prompt set made informative for a checkpoint, in one resumable run.

The stages, each in a subfolder of the run folder and skipped when done (a profile stage
resumes per chunk from its log, so a kill never repeats finished samples):

    decontaminate/  the input's prompts that overlap a benchmark, set aside with the row they match
    profile/        pass rates of the input at ``n`` (seed ``s``)
    confirm/        ``confirm`` more samples of every n/n prompt (seed ``s + 1``, new draws):
                    solve_all only if they are all correct too
    compose-d2/     the confirmed solve_all prompts composed at depth 2 (each composition
                    belongs to its last problem, the one whose answer it asks)
    profile-d2/     up to ``per_prompt`` compositions of each solve_all prompt profiled
    compose-d3/     depth 3 for the prompts whose depth-2 compositions all stayed solve_all
    profile-d3/     (the paper's curriculum, Section 4.2, per prompt)
    grow/           with ``grow``: the solve_none prompts grown by MagicBeanStalk (``crl grow``'s
                    :func:`~composition_rl.jobs.grow.run`, the policy as the one student and as the
                    qualifying policy); every teacher reply and policy sample is kept as it
                    comes, so a killed grow asks none of them again
    reprofile/      the refreshed set profiled again with another seed (``s + 2``)

then ``refreshed.jsonl`` (the informative originals and kept compositions, each with its
provenance), ``set_aside.jsonl`` (everything else, with its reason), the verl/TRL exports
and the report (:mod:`composition_rl.jobs.refresh.report`).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from composition_rl.io.files import atomic_write_json, atomic_write_jsonl, read_jsonl
from composition_rl.io.identity import RunMismatch, claim_run
from composition_rl.io.runs import RUN_FILE
from composition_rl.jobs.decontaminate import BenchmarkIndex, DecontamConfig
from composition_rl.jobs.grow.config import GrowConfig
from composition_rl.jobs.profile import ProfileConfig, load_profile, profile_problems
from composition_rl.records import Problem
from composition_rl.stats import band, parse_band, wilson_interval

__all__ = ["RefreshConfig", "RefreshResult", "refresh_problems"]

REFRESHED_FILE = "refreshed.jsonl"
SET_ASIDE_FILE = "set_aside.jsonl"
STAGES_FILE = "stages.json"
DONE_FILE = "done.json"
#: seeds of the stages, added to the sampling seed: every stage draws new samples
CONFIRM_SEED, REPROFILE_SEED = 1, 2


@dataclass(frozen=True)
class RefreshConfig:
    """Settings of one refresh (``crl refresh`` generates its flags from the fields with help).

    ``profile`` holds the sampling settings of every profile stage (``n``, decoding, template).
    """

    confirm: int = field(default=8, metadata={
        "help": "more samples for a prompt with n/n correct; solve_all only if all are correct too (0: no "
                "confirmation)"})
    band: str = field(default="informative", metadata={
        "help": "the target band of the pass rate: band names (informative, goldilocks) or an interval LO,HI "
                "such as 0.125,0.875 or (0,1)"})
    max_depth: int = field(default=3, metadata={
        "help": "deepest composition: 2, or 3 for the prompts whose depth-2 compositions all stay solve_all"})
    per_prompt: int = field(default=4, metadata={
        "help": "compositions profiled per solve_all prompt and depth (the rollout budget of the compose stages)"})
    pool_size: int = field(default=20, metadata={"help": "q1 pool size of the composition (paper: 20)"})
    engine: str = field(default="symbolic", metadata={
        "help": "composition engine: a batch one (symbolic); the model-backed llm/auto engines run as crl compose"})
    seed: int = field(default=0, metadata={"help": "seed of the composition's random choices (--seed is sampling's)",
                                           "flag": "--compose-seed"})
    reprofile: bool = field(default=True, metadata={
        "help": "profile the refreshed set again with another sampling seed (the report's check of the selection)",
        "help_no": "skip the fresh re-profile of the refreshed set"})
    grow: bool = field(default=False, metadata={
        "help": "grow the solve_none prompts with MagicBeanStalk, as crl grow does (needs --teacher; costs teacher "
                "calls and policy samples: docs/refresh.md, 'Growing')"})
    profile: ProfileConfig = field(default_factory=ProfileConfig, metadata={"cli": False})
    #: MagicBeanStalk's settings of the grow stage (used with ``grow``)
    mbs: GrowConfig = field(default_factory=GrowConfig, metadata={"cli": False})
    decontam: DecontamConfig = field(default_factory=DecontamConfig, metadata={"cli": False})

    def __post_init__(self) -> None:
        bad = []
        if not 0 <= self.confirm <= 1024:
            bad.append(f"confirm={self.confirm} (must be in [0, 1024])")
        try:
            parse_band(self.band)
        except ValueError as e:
            bad.append(str(e))
        if self.max_depth not in (2, 3):
            bad.append(f"max_depth={self.max_depth} (must be 2 or 3)")
        if self.per_prompt < 1:
            bad.append(f"per_prompt={self.per_prompt} (must be >= 1)")
        if self.pool_size < 1:
            bad.append(f"pool_size={self.pool_size} (must be >= 1)")
        from composition_rl.jobs.compose.run import is_resumable

        try:
            if is_resumable(self.engine):
                bad.append(f"engine={self.engine!r} (refresh composes with a batch engine such as symbolic; "
                           "a model-backed engine runs as `crl compose --engine llm`)")
        except KeyError as e:
            bad.append(str(e).strip("'\""))
        if bad:
            raise ValueError("invalid refresh config: " + "; ".join(bad))

    def run_record(self) -> dict[str, Any]:
        """The settings that decide the results (compared on a rerun)."""
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
             if f.name not in ("profile", "decontam", "grow", "mbs")}
        d["band"] = str(parse_band(self.band))
        if self.grow:  # only then: a run made before the grow stage existed still resumes
            d.update({f"grow.{k}": v for k, v in self.mbs.to_dict().items()})  # each named when it differs
        return {**d, "profile": self.profile.run_record(), "decontam": dataclasses.asdict(self.decontam)}


@dataclass
class RefreshResult:
    """What :func:`refresh_problems` made: the refreshed prompts, the set-aside rows and the report."""

    refreshed: list[Problem]
    set_aside: list[dict[str, Any]]
    report: dict[str, Any]


class _Clock:
    """Seconds spent per stage, kept in ``stages.json`` across resumes (a killed stage's
    time up to the kill is kept too)."""

    def __init__(self, out: Path):
        self.path = out / STAGES_FILE
        self.seconds: dict[str, float] = {}
        if self.path.is_file():
            import json

            self.seconds = {k: float(v) for k, v in json.loads(self.path.read_text(encoding="utf-8")).items()}

    def run(self, stage: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - t0
            atomic_write_json(self.path, self.seconds)


def _counts(row: dict[str, Any]) -> tuple[int, int]:
    return int(row["correct"]), int(row["n"])


def _measure(correct: int, n: int, confidence: float) -> dict[str, Any]:
    lo, hi = wilson_interval(correct, n, confidence)
    return {"correct": correct, "n": n, "pass_rate": correct / n, "wilson": [lo, hi], "class": band(correct, n)}


def refresh_problems(
    problems: Sequence[Problem],
    backend: Any,
    verifier: Any,
    out_dir: str | Path,
    config: RefreshConfig | None = None,
    *,
    benchmarks: Sequence[tuple[str, Sequence[Problem]]] = (),
    identity: dict[str, Any] | None = None,
    progress: bool = False,
    exports: Sequence[str] = (),
    teacher: Any = None,
) -> RefreshResult:
    """Refresh ``problems`` for the policy behind ``backend``; every stage resumes (module doc).

    Args:
        problems: the stale prompt set.
        backend: a rollout backend or an executor (as :func:`~composition_rl.jobs.profile.profile_problems`).
        verifier: the project verifier.
        out_dir: the run folder.
        config: :class:`RefreshConfig`.
        benchmarks: ``(name, problems)`` of each benchmark to decontaminate against.
        identity: what decides the results besides the config (model, backend, input hashes);
            a rerun with any of it changed is refused (:class:`~composition_rl.io.identity.RunMismatch`).
        progress: progress bars on every stage.
        exports: trainer datasets of the refreshed set to write beside it (``"verl"``, ``"trl"``).
        teacher: the MagicBeanStalk teacher of the grow stage (:func:`~composition_rl.jobs.grow.build_teacher`);
            needed with ``config.grow``, refused without it. Its name (and served model) join the
            run's identity.

    Returns:
        A :class:`RefreshResult`; the files are in ``out_dir`` (module doc).
    """
    cfg = config or RefreshConfig()
    if cfg.grow and teacher is None:
        raise ValueError("grow=True needs a teacher (composition_rl.jobs.grow.build_teacher; crl refresh --grow --teacher)")
    if teacher is not None and not cfg.grow:
        raise ValueError("a teacher is used only with grow=True (crl refresh --grow --teacher)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    target = parse_band(cfg.band)
    _claim_refresh(out, cfg, identity, benchmarks, teacher)
    st = _Stages(out, backend, verifier, progress, identity)
    pcfg = cfg.profile

    # -- decontaminate the input ------------------------------------------------------------
    unique: dict[str, Problem] = {}
    for p in problems:
        unique.setdefault(p.id, p)
    originals = list(unique.values())
    index = BenchmarkIndex(benchmarks, cfg.decontam) if benchmarks else None
    clean = originals
    if index is not None:
        clean, hits = st.clock.run("decontaminate",
                                   lambda: _decontaminate_stage(originals, index, out / "decontaminate"))
        for p, m in hits:
            st.aside(p, "benchmark_overlap", "decontaminate", match=m)

    prof, conf, measured, solve_all = _profile_and_confirm(st, clean, cfg, target)
    sampling_of = {"profile": pcfg.sampling.to_dict()}
    by_id = {p.id: p for p in originals}
    compositions = _compose_depths(st, solve_all, by_id, index, cfg, target)
    grown = _grow_solve_none(st, clean, measured, by_id, index, teacher, cfg, target) if cfg.grow else None

    refreshed = _write_refreshed(st, cfg, verifier, exports)
    # -- the fresh re-profile ---------------------------------------------------------------
    re_rows: dict[str, dict[str, Any]] = {}
    if cfg.reprofile and refreshed:
        rcfg = dataclasses.replace(pcfg, sampling=dataclasses.replace(pcfg.sampling,
                                                                      seed=pcfg.sampling.seed + REPROFILE_SEED))
        re_rows = st.profile("reprofile", refreshed, rcfg)
        sampling_of["reprofile"] = rcfg.sampling.to_dict()

    from composition_rl.jobs.refresh.report import build_report

    report = build_report(out, originals=originals, clean=clean, profile=prof, confirm=conf, measured=measured,
                          refreshed=refreshed, set_aside=st.set_aside, reprofile=re_rows, compositions=compositions,
                          config=cfg, seconds=st.clock.seconds, model=st.model, sampling=sampling_of, grown=grown)
    return RefreshResult(refreshed, st.set_aside, report)


def _write_refreshed(st: _Stages, cfg: RefreshConfig, verifier: Any, exports: Sequence[str]) -> list[Problem]:
    """Write the kept prompts, each with its provenance, the set-aside rows and the trainer
    exports (never an old run's export beside them); returns the refreshed prompts."""
    verify_settings = {"fallbacks": list(getattr(getattr(verifier, "config", None), "fallbacks", ()) or ()),
                       "timeout_s": getattr(getattr(verifier, "config", None), "timeout_s", None)}
    refreshed = [_with_provenance(p, prov, st.model, cfg.profile, verify_settings) for p, prov in st.kept]
    atomic_write_jsonl(st.out / REFRESHED_FILE, (p.to_dict() for p in refreshed))
    atomic_write_jsonl(st.out / SET_ASIDE_FILE, st.set_aside)
    from composition_rl.jobs.export import clear_exports, export

    clear_exports(st.out)  # never an export of a previous run beside this refreshed set
    for name in exports if refreshed else ():
        export(refreshed, name, st.out)
    return refreshed


def _claim_refresh(out: Path, cfg: RefreshConfig, identity: dict[str, Any] | None,
                   benchmarks: Sequence[tuple[str, Sequence[Problem]]], teacher: Any) -> None:
    """Claim ``out`` for these settings; a folder refreshed with other ones is refused."""
    ident = {**(identity or {}), **cfg.run_record(),
             "benchmarks": sorted(name for name, _ in benchmarks)}
    if cfg.grow:
        ident["grow.teacher"] = _teacher_identity(teacher)
    stage_dirs = [out / d for d in ("decontaminate", "profile", "confirm", "compose-d2", "profile-d2",
                                    "compose-d3", "profile-d3", "grow", "reprofile")]
    if not cfg.grow and (out / RUN_FILE).is_file() and (out / "grow").is_dir():
        # the grow settings are recorded only with grow (older runs resume): their absence is a change too
        raise RunMismatch(f"{out} holds a refresh made with other settings (grown -> not grown); "
                          "use another --out, or rerun with the same settings (--grow --teacher ...)")
    claim_run(out / RUN_FILE, {**ident, "command": "refresh"}, has_work=any(d.exists() for d in stage_dirs),
              what="a refresh", fix="use another --out, or rerun with the same settings")


class _Stages:
    """What the stages of one refresh share: the run folder, the policy, the clock, and the
    two lists every stage adds to (prompts kept with their provenance, rows set aside)."""

    def __init__(self, out: Path, backend: Any, verifier: Any, progress: bool, identity: dict[str, Any] | None):
        self.out, self.backend, self.verifier, self.progress = out, backend, verifier, progress
        self.clock = _Clock(out)
        self.model = {k: v for k, v in (identity or {}).items() if k in ("model", "model_content", "backend")}
        self.kept: list[tuple[Problem, dict[str, Any]]] = []  # (problem, provenance)
        self.set_aside: list[dict[str, Any]] = []

    def profile(self, name: str, items: Sequence[Problem], pc: ProfileConfig) -> dict[str, dict[str, Any]]:
        """Profile ``items`` in stage folder ``name`` (resumable): {id: profile row}."""
        if not items:
            return {}
        d = self.out / name
        self.clock.run(name, lambda: profile_problems(items, self.backend, self.verifier, d, pc, progress=self.progress,
                                                      identity={**self.model, "command": "refresh", "stage": name},
                                                      label=f"refresh {name} (n={pc.n})"))
        return {r["id"]: r for r in load_profile(d, ids=[p.id for p in items])}

    def aside(self, p: Problem, reason: str, stage: str, **extra: Any) -> None:
        self.set_aside.append({"id": p.id, "reason": reason, "stage": stage, **extra, "problem": p.to_dict()})


def _profile_and_confirm(st: _Stages, clean: Sequence[Problem], cfg: RefreshConfig, target):
    """Profile the clean originals, confirm the solve_all ones with more samples, and sort
    each into kept (in the band), solve_all (to compose) or set aside.

    Returns:
        (profile rows, confirmation rows, {id: measure}, the solve_all originals).
    """
    pcfg = cfg.profile
    prof = st.profile("profile", clean, pcfg)
    full = [p for p in clean if _counts(prof[p.id])[0] == pcfg.n]
    conf: dict[str, dict[str, Any]] = {}
    if cfg.confirm and full:
        ccfg = dataclasses.replace(pcfg, n=cfg.confirm,
                                   sampling=dataclasses.replace(pcfg.sampling, seed=pcfg.sampling.seed + CONFIRM_SEED))
        conf = st.profile("confirm", full, ccfg)
    solve_all: list[Problem] = []
    measured: dict[str, dict[str, Any]] = {}
    for p in clean:
        c, n = _counts(prof[p.id])
        if p.id in conf:
            c2, n2 = _counts(conf[p.id])
            c, n = c + c2, n + n2
        m = measured[p.id] = _measure(c, n, pcfg.confidence)
        if c == n:
            solve_all.append(p)
            st.aside(p, "solve_all", "confirm" if p.id in conf else "profile", composed=True, **_short(m))
        elif target.admits(c, n):
            # the counts include the confirmation's samples, drawn at their own seed
            extra = {"confirm": {"correct": c - _counts(prof[p.id])[0], "n": n - pcfg.n,
                                 "seed": pcfg.sampling.seed + CONFIRM_SEED}} if p.id in conf else {}
            st.kept.append((p, {"source": "original", "parents": [], **m, **extra}))
        else:
            st.aside(p, f"band:{m['class']}" if c in (0,) else "outside_band", "profile", **_short(m))
    return prof, conf, measured, solve_all


def _compose_depths(st: _Stages, solve_all: list[Problem], by_id: dict[str, Problem], index: BenchmarkIndex | None,
                    cfg: RefreshConfig, target) -> dict[int, dict[str, Any]]:
    """Compose the solve_all prompts, profile the compositions, keep those in the band, and
    escalate to the next depth the owners whose compositions all stayed solve_all."""
    compositions: dict[int, dict[str, Any]] = {}
    owners = solve_all
    pool = solve_all
    for depth in range(2, cfg.max_depth + 1):
        if not owners or len(pool) < 2:
            compositions[depth] = {"owners": len(owners), "composed": 0, "profiled": 0, "kept": 0,
                                   "note": "no prompt to compose" if not owners else "fewer than 2 solve_all prompts"}
            break
        name = f"compose-d{depth}"
        chosen, cstats = st.clock.run(name, functools.partial(_compose_stage, owners, pool, depth, cfg, st.out / name))
        if index is not None:  # a composition's own text, and each part's alone
            overlap = {p.id: m for p in chosen
                       if (m := index.match_problem(p, [by_id[q].question for q in p.parents if q in by_id]))}
            for p in chosen:
                if p.id in overlap:
                    st.aside(p, "benchmark_overlap", name, match=overlap[p.id].to_dict())
            chosen = [p for p in chosen if p.id not in overlap]
        rows = st.profile(f"profile-d{depth}", chosen, cfg.profile)
        stay_full: dict[str, list[bool]] = defaultdict(list)
        n_kept = 0
        for p in chosen:
            c, n = _counts(rows[p.id])
            m = _measure(c, n, cfg.profile.confidence)
            stay_full[p.parents[-1]].append(c == n)
            if target.admits(c, n):
                st.kept.append((p, {"source": f"composed depth {depth}", "parents": list(p.parents), **m}))
                n_kept += 1
            else:
                st.aside(p, f"band:{m['class']}", f"profile-d{depth}", **_short(m))
        compositions[depth] = {"owners": len(owners), **cstats, "profiled": len(chosen), "kept": n_kept}
        owners = [by_id[i] for i, full_ in stay_full.items() if all(full_)]
        compositions[depth]["still_solve_all_owners"] = len(owners)
    return compositions


def _grow_solve_none(st: _Stages, clean: Sequence[Problem], measured: dict[str, dict[str, Any]],
                     by_id: dict[str, Problem], index: BenchmarkIndex | None, teacher: Any, cfg: RefreshConfig,
                     target) -> dict[str, Any]:
    """Grow the solve_none prompts (MagicBeanStalk) and keep the grown problems in the band;
    each seed's set-aside row says what growing it gave."""
    seeds = [p for p in clean if measured[p.id]["correct"] == 0]
    gres, cands, rows, skipped = st.clock.run("grow", functools.partial(
        _grow_stage, seeds, teacher, st.backend, st.verifier, cfg, st.out / "grow", st.model, st.progress))
    grown = {"seeds": len(seeds), "stats": gres.stats, "candidates": len(cands), "kept": 0, "set_aside": 0}
    grew = Counter(p.metadata["mbs"]["seed_id"] for p in cands)
    trees = {r["seed_id"]: r for r in read_jsonl(st.out / "grow" / "trees.jsonl")}
    for r in st.set_aside:  # each seed's row says what growing it gave
        if r["id"] in trees:
            t = trees[r["id"]]
            r["grow"] = {"status": t["status"], "reason": t["reason"], "candidates": grew[r["id"]]}
        elif r["id"] in skipped:  # the teacher cannot read it: never grown
            r["grow"] = {"status": "dropped", "reason": skipped[r["id"]], "candidates": 0}
    for p in cands:
        seed_id = p.metadata["mbs"]["seed_id"]
        m = index.match_problem(p, [by_id[seed_id].question]) if index is not None else None
        if m is not None:
            st.aside(p, "benchmark_overlap", "grow", match=m.to_dict())
        elif p.id not in rows:  # the policy could not read it (its context): never sampled
            st.aside(p, "prompt_too_long", "grow")
        else:
            mm = _measure(*_counts(rows[p.id]), cfg.profile.confidence)
            if target.admits(mm["correct"], mm["n"]):
                st.kept.append((p, {"source": "grown", "parents": [seed_id], **mm,
                                    "grow": {"kind": p.metadata["mbs"]["kind"], "teacher": _teacher_identity(teacher),
                                             "method": "mbs"}}))
                grown["kept"] += 1
                continue
            st.aside(p, f"band:{mm['class']}", "grow", **_short(mm))
        grown["set_aside"] += 1
    return grown


def _short(m: dict[str, Any]) -> dict[str, Any]:
    return {"correct": m["correct"], "n": m["n"], "pass_rate": m["pass_rate"]}


def _with_provenance(p: Problem, prov: dict[str, Any], model: dict[str, Any], pcfg: ProfileConfig,
                     verify_settings: dict[str, Any]) -> Problem:
    """``p`` with its provenance in ``metadata["refresh"]``: where it came from and how its
    pass rate was measured (which model, n, sampling, template, verifier)."""
    meta = dict(p.metadata)
    meta["refresh"] = {
        "source": prov["source"], "parents": prov["parents"],
        "pass_rate": prov["pass_rate"], "wilson": prov["wilson"], "confidence": pcfg.confidence,
        "correct": prov["correct"], "n": prov["n"], "class": prov["class"],
        "model": model, "sampling": pcfg.sampling.to_dict(), "template": pcfg.template, "verifier": verify_settings,
        **({"confirm": prov["confirm"]} if "confirm" in prov else {}),
        **({"grow": prov["grow"]} if "grow" in prov else {}),
    }
    return dataclasses.replace(p, metadata=meta)


def _decontaminate_stage(problems: Sequence[Problem], index: BenchmarkIndex, d: Path):
    """Split ``problems`` into clean ones and ``(problem, match row)`` hits; the hits are
    written to ``d/matches.jsonl`` (recomputed on a rerun: it takes seconds)."""
    d.mkdir(parents=True, exist_ok=True)
    clean, hits = [], []
    for p in problems:
        m = index.match_problem(p)
        if m is None:
            clean.append(p)
        else:
            hits.append((p, m.to_dict()))
    atomic_write_jsonl(d / "matches.jsonl", ({"id": p.id, "question": p.question, "match": m} for p, m in hits))
    return clean, hits


def _compose_stage(owners: Sequence[Problem], pool: Sequence[Problem], depth: int, cfg: RefreshConfig,
                   d: Path) -> tuple[list[Problem], dict[str, Any]]:
    """Compose ``pool`` at ``depth`` and keep, of the chains that end with one of ``owners``, up to
    ``per_prompt`` compositions per owner, in the engine's seeded output order. Done once:
    ``d/chosen.jsonl`` with ``d/done.json`` is read back on a rerun."""
    done = d / DONE_FILE
    if done.is_file() and (d / "chosen.jsonl").is_file():
        import json

        stats = json.loads(done.read_text(encoding="utf-8"))
        return [Problem.from_dict(r) for r in read_jsonl(d / "chosen.jsonl")], stats
    # the executor the verb `compose` calls (refresh takes the engines that need no model, so
    # the verb's model plumbing has nothing to do here; importing it would make a circle)
    from composition_rl.jobs.compose.pipeline import ComposeConfig, compose_problems

    d.mkdir(parents=True, exist_ok=True)
    # the chains of the whole solve_all pool (the paper's pools: q1.. sampled, the last
    # position the full set), of which an owner takes those that end with it
    res = compose_problems(list(pool), ComposeConfig(depth=depth, pool_size=cfg.pool_size, seed=cfg.seed,
                                                     engine=cfg.engine, workers=1))
    mine = {p.id for p in owners}
    per: Counter[str] = Counter()
    chosen: list[Problem] = []
    for p in res.accepted:
        if p.parents[-1] in mine and per[p.parents[-1]] < cfg.per_prompt:
            per[p.parents[-1]] += 1
            chosen.append(p)
    atomic_write_jsonl(d / "composed.jsonl", (p.to_dict() for p in res.accepted))
    atomic_write_jsonl(d / "rejected.jsonl", res.rejected)
    atomic_write_jsonl(d / "chosen.jsonl", (p.to_dict() for p in chosen))
    stats = {"candidates": res.candidates, "composed": len(res.accepted), "rejected": len(res.rejected),
             "chosen": len(chosen), "owners_with_composition": len(per)}
    atomic_write_json(done, stats)
    return chosen, stats


def _teacher_identity(teacher: Any) -> dict[str, Any]:
    """What names a teacher in the run identity: its kind, and the served model of a chat teacher."""
    chat = getattr(teacher, "chat", None)
    return {"name": getattr(teacher, "name", type(teacher).__name__),
            "model": getattr(chat, "model", None) if chat is not None else getattr(teacher, "model", None)}


def _key(*parts: Any) -> str:
    import hashlib
    import json

    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class _KeptTeacher:
    """A teacher whose every reply (an item, a list of items, or its :class:`TeacherError`) is
    kept in a :class:`~composition_rl.chat.cache.ResponseCache` as it comes: a grow killed
    in the middle of a seed asks none of that seed's finished calls again on the rerun (the
    teachers are seeded per call, so the reply is the one it would give)."""

    def __init__(self, inner: Any, cache: Any):
        self.inner, self.cache = inner, cache
        self.name = getattr(inner, "name", type(inner).__name__)
        self.unreadable = getattr(inner, "unreadable", None)
        self.kept = 0  # calls answered from the cache

    def cost(self) -> dict[str, int]:
        return {**self.inner.cost(), "kept_replies": self.kept}

    def _call(self, verb: str, args: tuple, key_args: tuple) -> Any:
        from composition_rl.jobs.grow.teachers import Item, TeacherError

        k = _key(verb, key_args)
        hit = self.cache.get(k)
        if hit is None:
            try:
                got = getattr(self.inner, verb)(*args)
            except TeacherError as e:
                hit = {"error": [e.kind, e.detail]}
            else:
                hit = {"items": [i.to_dict() for i in got]} if isinstance(got, list) else {"item": got.to_dict()}
            self.cache.put(k, hit)
        else:
            self.kept += 1
        if "error" in hit:
            raise TeacherError(*hit["error"])
        if "items" in hit:
            return [Item.from_dict(d) for d in hit["items"]]
        return Item.from_dict(hit["item"])

    def solve(self, question, attempt):
        return self._call("solve", (question, attempt), (question, attempt))

    def decompose(self, item, attempt, max_parts):
        return self._call("decompose", (item, attempt, max_parts), (item.to_dict(), attempt, max_parts))

    def harder(self, leaf, trial):
        return self._call("harder", (leaf, trial), (leaf.to_dict(), trial))

    def compose(self, children, blueprint, trial):
        return self._call("compose", (children, blueprint, trial),
                          ([c.to_dict() for c in children], blueprint.parent.to_dict(),
                           [c.to_dict() for c in blueprint.children], trial))

    def vary(self, item, trial):
        return self._call("vary", (item, trial), (item.to_dict(), trial))


class _KeptRollout:
    """A rollout backend whose every generate call's completions are kept as they come (a
    :class:`~composition_rl.chat.cache.ResponseCache` keyed by the prompts, ``n`` and the
    sampling settings): the effectivity tests and calibrations of a seed killed half-way are
    not sampled again on the rerun."""

    def __init__(self, inner: Any, cache: Any):
        self.inner, self.cache = inner, cache
        self.name = getattr(inner, "name", type(inner).__name__)
        self.kept = 0

    def prompt_too_long(self, prompt: str) -> str | None:
        ask = getattr(self.inner, "prompt_too_long", None)
        return ask(prompt) if callable(ask) else None

    def generate(self, prompts, n, sampling):
        from composition_rl.rollout.base import Completion

        k = _key(list(prompts), n, sampling.to_dict())
        hit = self.cache.get(k)
        if hit is not None:
            self.kept += 1
            return [[Completion(**c) for c in cs] for cs in hit["completions"]]
        got = self.inner.generate(prompts, n, sampling)
        self.cache.put(k, {"completions": [[dataclasses.asdict(c) for c in cs] for cs in got]})
        return got

    def close(self) -> None:
        pass  # the policy is the caller's


def _grow_stage(seeds: Sequence[Problem], teacher: Any, backend: Any, verifier: Any, cfg: RefreshConfig, d: Path,
                identity: dict[str, Any], progress: bool):
    """Grow ``seeds`` with :func:`composition_rl.jobs.grow.run` into ``d``: the policy is the one
    student (calibration) and the qualifying policy (a profile at the refresh's settings in
    ``d/qualify``). Returns the grow result, every candidate, and the qualify profile's rows
    by id. Resumes: finished seeds from ``trees.jsonl``, the seed in flight from the kept
    teacher replies (``teacher_replies.jsonl``) and policy samples (``policy_samples.jsonl``),
    the qualification per chunk."""
    from composition_rl.chat.cache import ResponseCache
    from composition_rl.jobs.grow import Students, grow
    from composition_rl.jobs.grow.run import profile_qualify

    pcfg = cfg.profile
    # the policy as a rollout backend: an executor holding one in this process lends it
    policy = backend if callable(getattr(backend, "generate", None)) else getattr(backend, "backend", None)
    if not callable(getattr(policy, "generate", None)):
        raise ValueError(f"the grow stage samples the policy in this process; {type(backend).__name__} holds no "
                         "in-process backend (use the local executor)")
    d.mkdir(parents=True, exist_ok=True)
    with ResponseCache(d / "teacher_replies.jsonl") as tcache, ResponseCache(d / "policy_samples.jsonl") as scache:
        kept_teacher = _KeptTeacher(teacher, tcache)
        kept_policy = _KeptRollout(policy, scache)
        name = str(identity.get("model") or getattr(policy, "name", "policy"))
        students = Students([(name, kept_policy)], verifier, n=cfg.mbs.student_n, sampling=pcfg.sampling,
                            template=pcfg.template)
        readable = getattr(teacher, "unreadable", None)
        pre: Counter[str] = Counter(readable(p.question) for p in seeds if readable(p.question)) if readable else Counter()
        growable = [p for p in seeds if not (readable and readable(p.question))]
        qualify = profile_qualify(policy, verifier, pcfg, name=name, progress=progress,
                                  identity={**identity, "command": "refresh", "stage": "grow/qualify"})
        res = grow(growable, [kept_teacher], students, verifier, d, cfg.mbs, qualify=qualify, seeds_in=len(seeds),
                   pre_dropped=dict(pre), progress=progress)
    cands = [Problem.from_dict(r) for r in read_jsonl(d / "candidates.jsonl")]
    rows: dict[str, dict[str, Any]] = {}
    if (d / "qualify" / "profile.jsonl").is_file() and cands:
        rows = {r["id"]: r for r in load_profile(d / "qualify", ids=[p.id for p in cands])}
    skipped = {p.id: readable(p.question) for p in seeds if readable and readable(p.question)}
    return res, cands, rows, skipped


def refresh_from_args(args: Any, config: RefreshConfig, out: Path, marks: Sequence[str], exports: Sequence[str],
                      verify_config: Any, fallbacks: Sequence[str]) -> tuple[RefreshResult, list[dict[str, Any]]]:
    """The ``crl refresh`` job with ``out`` held: read ``--input`` (the policy flags of
    :func:`composition_rl.jobs.profile.add_backend_arguments`), set aside the prompts too long for
    the model, load the benchmark files ``marks``, build the ``--grow`` teacher, refresh, and
    write ``input_rejects.jsonl``. Returns the result and the input rows set aside.

    Raises:
        ValueError: an unusable input, benchmark or flag, or a folder made with other settings.
        RolloutError: generation failed; ChatError: the teacher gave no answer (finished work
            is kept either way: a rerun resumes).
    """
    from composition_rl.grading import shared_verifier
    from composition_rl.io.identity import run_identity
    from composition_rl.jobs.decontaminate import load_benchmarks
    from composition_rl.jobs.profile import backend_from_args, fit_to_context, load_input

    input_rejects: list = []
    problems = load_input(args.input, args, input_rejects)
    problems, too_long = fit_to_context(problems, args, where=args.input)
    input_rejects += too_long
    if not problems:
        raise ValueError(f"{args.input}: no prompt fits the context of {args.model} ({len(too_long)} set aside)")
    benchmarks = load_benchmarks(marks)
    teacher, cache = None, None
    if config.grow:  # as crl grow builds it (an openai teacher caches its replies in OUT/teacher_cache.jsonl)
        from composition_rl.jobs.grow.job import teacher_from_args

        teacher, cache = teacher_from_args(args, config.mbs.seed, out)
    backend = backend_from_args(args)
    try:
        res = refresh_problems(
            problems, backend, shared_verifier(verify_config), out, config, benchmarks=benchmarks,
            identity=run_identity(model=args.model, backend=backend.name,
                                  inputs={"input": args.input, **{f"benchmark {b}": b for b in marks}},
                                  fallbacks=list(fallbacks)),
            progress=not args.no_progress, exports=exports, teacher=teacher)
    finally:
        backend.close()
        if cache is not None:
            cache.close()
    atomic_write_jsonl(out / "input_rejects.jsonl", input_rejects)
    return res, input_rejects
