"""GRPO with dynamic sampling, solve_all tracking and a depth curriculum, on TRL.

:func:`run_training` is the whole job: load the stages, build TRL's ``GRPOTrainer`` with
our dynamic sampling (jobs/train/trl_adapter.py, the class a user's own TRL script uses too, with the
curriculum as its prompt source), train until the curriculum ends, and write under
``output_dir``:

- ``metrics.jsonl``: one row per step (see jobs/train/metrics.py);
- ``pass_rates.jsonl``: one row per sampled prompt group (per-prompt pass-rate history);
- ``transitions.jsonl``: every stage change with its reason;
- ``online.jsonl`` (``curriculum.mode: online``): every retirement and the prompts composed
  from it (composition_rl.jobs.train.online.OnlinePool);
- ``solve_rates.png``: solve_all / solve_none over steps;
- ``checkpoints/checkpoint-N``: TRL checkpoints plus ``crl_state.json`` (curriculum and
  prompt-stream state), from which a rerun resumes.

Not run here (it trains a model for minutes; tests/test_train_grpo.py runs it on the tiny model):

>>> from composition_rl.jobs.train import run_training
>>> run_training("train.yaml")                          # doctest: +SKIP
PosixPath('runs/train/metrics.jsonl')
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from composition_rl.io.files import atomic_write_json, dumps
from composition_rl.io.identity import claim_run, run_identity
from composition_rl.io.runs import RUN_FILE
from composition_rl.jobs.train.config import TrainConfig, load_config
from composition_rl.jobs.train.curriculum import Curriculum, StageSpec
from composition_rl.jobs.train.data import (
    PromptStream,
    load_stage_problems,
    problem_row,
    stage_depth,
)
from composition_rl.jobs.train.metrics import plot_solve_rates, step_row, truncate_after
from composition_rl.jobs.train.prompt_source import PromptSource

__all__ = ["latest_checkpoint", "run_training"]

log = logging.getLogger(__name__)

CRL_STATE = "crl_state.json"
LOGS = ("metrics.jsonl", "pass_rates.jsonl", "transitions.jsonl", "online.jsonl")
BRANCH_FILE = "branch.json"  # where a --branch-from run came from


def latest_checkpoint(output_dir: str | os.PathLike) -> Path | None:
    """The highest ``checkpoints/checkpoint-N`` folder that holds our state, or None."""
    root = Path(output_dir) / "checkpoints"
    if not root.is_dir():
        return None
    found = []
    for p in root.iterdir():
        m = re.fullmatch(r"checkpoint-(\d+)", p.name)
        if m and (p / CRL_STATE).is_file():
            found.append((int(m.group(1)), p))
    return max(found)[1] if found else None


def _grpo_args(cfg: TrainConfig, max_steps: int):
    """TRL's ``GRPOConfig`` for a run: every :class:`GRPOSettings` field that TRL also has is
    passed through under its own name (none is copied by hand), then the fields this trainer
    derives, then ``grpo.trl`` unchanged."""
    import torch
    from trl import GRPOConfig

    g = cfg.grpo
    kwargs: dict[str, Any] = g.trl_fields(GRPOConfig)
    kwargs.update(
        output_dir=str(Path(cfg.output_dir) / "checkpoints"),
        per_device_train_batch_size=g.prompts_per_step * g.num_generations // g.gradient_accumulation_steps,
        lr_scheduler_type="constant",
        max_steps=max_steps,
        logging_steps=1,
        save_strategy="steps" if cfg.save_steps else "no",
        save_steps=cfg.save_steps or 500,
        # the switches' checkpoints are branch points: none is rotated away by a later save
        save_total_limit=None if cfg.save_on_transition else cfg.save_total_limit,
        seed=cfg.seed,
        data_seed=cfg.seed,
        report_to="none",
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
        bf16=g.bf16 and torch.cuda.is_available(),
        log_completions=False,
    )
    kwargs.update(g.trl)
    return GRPOConfig(**kwargs)


class _Run:
    """State shared by the trainer hook and the callback: streams, curriculum, log files."""

    def __init__(self, cfg: TrainConfig) -> None:
        self.cfg = cfg
        self.out = Path(cfg.output_dir)
        # a stage composed from the mastered prompts of the one before is built when reached
        self.streams: list[PromptStream | None] = []
        self.problems: list[list | None] = []
        self.pending_streams: dict[str, dict[str, int]] = {}
        self.say: Callable[[str], None] = lambda m: None
        specs = []
        for st in cfg.stages:
            if st.composes_mastered:
                self.problems.append(None)
                self.streams.append(None)
                specs.append(StageSpec(st.name, st.depth or int(st.compose["depth"]), st.max_steps, st.min_steps))
                continue
            probs = self._fit(st.name, load_stage_problems(st))
            self.problems.append(probs)
            self.streams.append(PromptStream(probs, st.name, seed=cfg.seed, instruction=cfg.instruction))
            specs.append(StageSpec(st.name, stage_depth(st, probs), st.max_steps, st.min_steps))
        if cfg.stages[0].composes_mastered:
            raise ValueError(f"stage {cfg.stages[0].name!r}: compose.first: mastered needs a stage before it")
        c = cfg.curriculum
        self.online = self._online_pool() if c.mode == "online" else None
        self.skipper = None
        if cfg.skip.enabled:
            from composition_rl.jobs.train.skip import PromptSkipper

            self.skipper = PromptSkipper(cfg.skip, seed=cfg.seed)
        self.step = 0  # the step being generated (the trainer's global_step + 1)
        # a checkpoint at the run's end too when the folder holds one of the middle (every N
        # steps, or a switch's): a rerun would otherwise resume from the middle and train the end again
        self.save_final = bool(cfg.save_steps or cfg.save_on_transition)
        # online mode has one stage, run for its budget; the pool, not the stage, changes
        self.curriculum = Curriculum(specs, mode="manual" if c.mode == "online" else c.mode,
                                     threshold=c.threshold, window=c.window, total_steps=c.total_steps)

    def _fit(self, stage: str, problems: list) -> list:
        """The stage's prompts that fit the model's context; the others go, with their
        reason, to input_rejects.jsonl (rewritten whole, so a resumed run lists them once)."""
        from composition_rl.io.files import atomic_write_jsonl
        from composition_rl.jobs.train.data import fit_stage

        kept, rejects = fit_stage(problems, stage, self.cfg.model, self.cfg.instruction)
        self.rejects = {**getattr(self, "rejects", {}), stage: rejects}
        if rejects:
            log.warning("stage %s: %d of %d prompts are longer than the model's context: set aside -> %s",
                        stage, len(rejects), len(problems), self.out / "input_rejects.jsonl")
            atomic_write_jsonl(self.out / "input_rejects.jsonl", (r for rs in self.rejects.values() for r in rs))
        return kept

    def _online_pool(self):
        from composition_rl.jobs.train.data import read_problems
        from composition_rl.jobs.train.online import OnlineConfig, OnlinePool

        c = self.cfg.curriculum
        rule = OnlineConfig.from_dict({"seed": self.cfg.seed, **(c.online or {})})
        partners = self.problems[0]
        if c.partners is not None:
            if not Path(c.partners).is_file():
                raise ValueError(f"curriculum.partners file not found: {c.partners}")
            partners = read_problems(Path(c.partners))
        # the pool appends online.jsonl itself; a resume cuts it back with the pool's state
        return OnlinePool(self.problems[0], rule, partners=partners, log_path=str(self.out / "online.jsonl"))

    def _build(self, i: int) -> PromptStream:
        """Compose stage ``i`` from what the policy mastered in stage ``i - 1`` (pass_rates.jsonl)."""
        from composition_rl.io.files import atomic_write_jsonl, read_jsonl
        from composition_rl.jobs.train.data import compose_from_mastered

        st, prev = self.cfg.stages[i], self.cfg.stages[i - 1]
        log = self.out / "pass_rates.jsonl"
        rates = list(read_jsonl(log)) if log.exists() else []
        probs, info = compose_from_mastered(st, self.problems[i - 1], prev.name, rates)
        probs = self._fit(st.name, probs)
        self.problems[i] = probs
        atomic_write_jsonl(self.out / "stages" / f"{st.name}.jsonl", (p.to_dict() for p in probs))
        stream = PromptStream(probs, st.name, seed=self.cfg.seed, instruction=self.cfg.instruction)
        if st.name in self.pending_streams:
            stream.load_state_dict(self.pending_streams.pop(st.name))
        self.streams[i] = stream
        self.say(f"stage {st.name}: composed {info['problems']} prompts with q1 from the {info['mastered']} of "
                 f"{info['previous_prompts']} {prev.name} prompts last seen solve_all"
                 + (" (too few: all of them used)" if info["fallback_to_all"] else ""))
        return stream

    @property
    def watches_rounds(self) -> bool:
        """Whether each dynamic-sampling round's groups must be seen before the next draw."""
        return self.online is not None or self.skipper is not None

    def observe_round(self, groups) -> None:
        """Feed one dynamic-sampling round's groups to the online pool or the skipper (before the next draw)."""
        if self.online is not None:
            self.online.observe(self.step, [(g.id, sum(s >= 1.0 for s in g.scores), len(g.scores)) for g in groups])
        if self.skipper is not None:
            for g in groups:
                self.skipper.observe(g.id, g.kind)

    def end_if_exhausted(self, step: int):
        """Online mode: end the run after ``step`` when no live prompt is left; the Transition or None."""
        if self.online is None or not self.online.exhausted or self.curriculum.finished:
            return None
        return self.curriculum.end(step, "online pool exhausted: every live prompt retired at max_depth")

    def draw(self, n: int) -> list[dict]:
        if self.online is not None:
            # an exhausted pool fills the step's refill rounds with retired prompts (uninformative,
            # but the batch keeps its shape); end_if_exhausted ends the run at the step's end
            st = self.cfg.stages[0].name
            return [problem_row(p, st, self.cfg.instruction)
                    for p in self.online.draw(n, retired_if_exhausted=True)]
        i = self.curriculum.index
        stream = self.streams[i] or self._build(i)
        if self.skipper is not None:
            return self.skipper.select(lambda: stream.draw(1)[0], n)
        return stream.draw(n)

    def state_dict(self, step: int) -> dict[str, Any]:
        streams = {s.name: s.state_dict() for s in self.streams if s is not None}
        state = {"step": step, "curriculum": self.curriculum.state_dict(), "streams": {**self.pending_streams,
                                                                                        **streams}}
        if self.online is not None:
            state["online"] = self.online.state_dict()
        if self.skipper is not None:
            state["skip"] = self.skipper.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.curriculum.load_state_dict(state["curriculum"])
        if self.online is not None:
            if "online" not in state:
                raise ValueError("the checkpoint has no online pool state: it was not written in curriculum.mode "
                                 "'online' (crl train --fresh starts over)")
            self.online.load_state_dict(state["online"])
        if self.skipper is not None:
            if "skip" not in state:
                raise ValueError("the checkpoint has no skip state: it was not written with skip.enabled "
                                 "(crl train --fresh starts over)")
            self.skipper.load_state_dict(state["skip"])
        for st, s in zip(self.cfg.stages, self.streams):
            if s is not None:
                if st.name not in state["streams"]:  # a renamed or added stage: not this run's checkpoint
                    raise ValueError(f"the checkpoint has no state for stage {st.name!r} (it has: "
                                     f"{', '.join(sorted(state['streams'])) or 'none'}): it was written with other "
                                     "stages (crl train --fresh starts over)")
                s.load_state_dict(state["streams"][st.name])
            elif st.name in state["streams"]:
                self.pending_streams[st.name] = state["streams"][st.name]


class _CurriculumSource(PromptSource):
    """The run's prompts for the trainer: every round from the current curriculum stage (or the
    online pool), whatever TRL's dataloader gave (it only paces the steps). The run saves its
    own state with each checkpoint (crl_state.json)."""

    def __init__(self, run: _Run) -> None:
        self.run = run

    def draw(self, n: int) -> list[dict]:
        return self.run.draw(n)

    def observe(self, step: int, groups) -> None:
        if self.run.watches_rounds:
            self.run.observe_round(groups)


def _callback(run: _Run, trainer_ref: list, say: Callable[[str], None]):
    from transformers import TrainerCallback

    class CurriculumCallback(TrainerCallback):
        """Writes the step's metrics, feeds the curriculum, saves our state with checkpoints."""

        def __init__(self) -> None:
            self.t_step = time.perf_counter()
            self.bar = None

        def on_step_begin(self, args, state, control, **kw):
            self.t_step = time.perf_counter()
            run.step = state.global_step + 1

        def on_step_end(self, args, state, control, **kw):
            trainer = trainer_ref[0]
            sample = trainer.last_sample
            if sample is None:
                return
            cur = run.curriculum
            stage = cur.stage
            step = state.global_step
            seconds = {"step_seconds": time.perf_counter() - self.t_step, "gen_seconds": trainer.last_gen_seconds,
                       "reward_seconds": trainer.last_reward_seconds}
            row = step_row(step, stage.name, stage.depth, sample, seconds)
            if run.online is not None:
                _observe_online(run, step, sample, row)
            if run.skipper is not None:
                row["skip"] = run.skipper.end_step()
            with open(run.out / "metrics.jsonl", "a", encoding="utf-8") as f:
                f.write(dumps(row) + "\n")
            with open(run.out / "pass_rates.jsonl", "a", encoding="utf-8") as f:
                for g in sample.groups:
                    f.write(dumps({"step": step, **g.to_dict()}) + "\n")
            if sample.bound_hit:
                say(f"step {step}: dynamic-sampling bound hit after {sample.rounds} rounds; "
                    f"{sample.filled} uninformative group(s) filled the batch")
            t = cur.observe(step, row["solve_all"])
            if t is not None:
                with open(run.out / "transitions.jsonl", "a", encoding="utf-8") as f:
                    f.write(dumps(t.to_dict()) + "\n")
                say(f"step {step}: stage {t.from_stage} -> {t.to_stage or 'end'} ({t.reason})")
                if run.cfg.save_on_transition and t.to_stage is not None:
                    control.should_save = True  # the switch's checkpoint: a branch point
            t = run.end_if_exhausted(step)
            if t is not None:
                with open(run.out / "transitions.jsonl", "a", encoding="utf-8") as f:
                    f.write(dumps(t.to_dict()) + "\n")
                say(f"step {step}: {t.reason}")
            if cur.finished:
                control.should_training_stop = True
            if run.save_final and (cur.finished or step >= args.max_steps):
                control.should_save = True  # always leave a final checkpoint: a rerun then has nothing to redo
            if self.bar is not None:
                self.bar(f"{stage.name} d{stage.depth} solve_all {row['solve_all']:.2f} "
                         f"solve_none {row['solve_none']:.2f} reward {row['reward_mean']:.2f}")
            trainer.last_sample = None

        def on_save(self, args, state, control, **kw):
            ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if ckpt.is_dir():
                atomic_write_json(ckpt / CRL_STATE, run.state_dict(state.global_step))

    return CurriculumCallback()


def _observe_online(run: _Run, step: int, sample, row: dict[str, Any]) -> None:
    """Add the pool's counts to the step's row (its retirements are in online.jsonl already)."""
    from collections import Counter

    # the stage has no single depth any more: the row's depth is the step's most sampled one
    row["depth"] = Counter(g.depth for g in sample.groups).most_common(1)[0][0]
    row["online"] = run.online.step_metrics()


def training_identity(cfg: TrainConfig) -> dict[str, Any]:
    """What a training run's checkpoints were trained from (:func:`composition_rl.io.identity.run_identity`):
    the model, the stages (each stage's settings, its name among them, and its data files by
    content), the curriculum, the skip setting, the GRPO and dynamic-sampling settings, the seed,
    the instruction and how the reward reads answers. A resume with any of them changed would
    report one run's training as another's, so it is refused; a renamed stage is refused here
    rather than failing on the checkpoint's per-stage state."""
    files = {f"stage {st.name}": st.data for st in cfg.stages if st.data}
    files.update({f"stage {st.name} compose from": st.compose["from"] for st in cfg.stages
                  if st.compose and st.compose.get("from")})
    if cfg.curriculum.partners:
        files["curriculum partners"] = cfg.curriculum.partners
    # file paths are compared by content (above), not by where they are
    stages = [{k: ({**v, "from": None} if k == "compose" and v and v.get("from") else v)
               for k, v in asdict(st).items() if k != "data"} for st in cfg.stages]
    curriculum = {**asdict(cfg.curriculum), "partners": None}
    return run_identity(model=cfg.model, inputs=files, seed=cfg.seed, grpo=asdict(cfg.grpo),
                        dynamic_sampling=asdict(cfg.dynamic_sampling), instruction=cfg.instruction, command="train",
                        reward_fallbacks=cfg.verify_fallbacks, stages=stages, curriculum=curriculum,
                        skip=asdict(cfg.skip))


#: what a branch shares with its source: everything but the stages, the curriculum and where it writes
BRANCH_SHARED = ("model", "seed", "grpo", "dynamic_sampling", "instruction", "verify_fallbacks",
                 "verify_timeout_s", "torch_threads")


def _same_training(cfg: TrainConfig, src_run: Path, source: Path) -> None:
    """Refuse a branch whose training settings differ from its source's (its config.json)."""
    src_cfg = src_run / "config.json"
    if not src_cfg.is_file():
        raise ValueError(f"--branch-from {source}: no config.json in {src_run} to compare the branch's settings with")
    theirs, ours = json.loads(src_cfg.read_text()), json.loads(json.dumps(cfg.to_dict()))
    differ = [k for k in BRANCH_SHARED if theirs.get(k) != ours.get(k)]
    if differ:
        raise ValueError(f"--branch-from {source}: the branch would train with other {', '.join(differ)} than its "
                         "source; a branch changes only the stages and the curriculum")


def _branch(run: _Run, source: Path) -> dict[str, Any]:
    """Start ``run``'s output_dir from another run's checkpoint ``source`` (``--branch-from``).

    The checkpoint (weights, optimizer, scheduler and RNG state) is copied in as this run's own,
    with this config's curriculum replayed over the source's solve_all ratios of steps 1..S and
    the source's prompt-stream state for every stage of the same name; the source's metrics and
    pass rates of steps 1..S are copied too, so the branch's logs hold the whole history. A
    config whose curriculum would have changed stage before S is refused: it is not a branch of
    that run (a change at S itself is kept, as the source made it). Returns what ``branch.json`` records."""
    import shutil

    from composition_rl.io.files import atomic_write_jsonl, read_jsonl

    cfg = run.cfg
    if not (source / CRL_STATE).is_file() or not (source / "trainer_state.json").is_file():
        raise ValueError(f"--branch-from {source}: not a crl train checkpoint (no {CRL_STATE} and trainer_state.json)")
    if cfg.curriculum.mode == "online" or cfg.skip.enabled:
        raise ValueError("--branch-from: a branch of an online-pool or skipping run is not supported "
                         "(their pools' state is not replayed)")
    source = source.resolve()
    state = json.loads((source / CRL_STATE).read_text())
    step, src_run = int(state["step"]), source.parent.parent
    total = cfg.curriculum.total_steps
    if total is not None and total <= step:
        raise ValueError(f"--branch-from {source}: the branch point is step {step}; the run's total step budget "
                         f"(--max-steps / curriculum.total_steps {total}) must be past it")
    _same_training(cfg, src_run, source)
    rows = [r for r in read_jsonl(src_run / "metrics.jsonl") if r["step"] <= step] \
        if (src_run / "metrics.jsonl").is_file() else []
    if [r["step"] for r in rows] != list(range(1, step + 1)):
        raise ValueError(f"--branch-from {source}: {src_run / 'metrics.jsonl'} does not hold steps 1-{step}, "
                         "whose solve_all ratios the branch's curriculum is replayed over")
    for r in rows:
        t = run.curriculum.observe(r["step"], r["solve_all"])
        if t is not None and t.step < step:  # a switch at the branch point itself is the source's own
            raise ValueError(f"--branch-from {source}: this config's curriculum would have moved "
                             f"{t.from_stage} -> {t.to_stage or 'end'} at step {t.step} ({t.reason}), before the "
                             f"branch point (step {step}): give its stages a budget past {step}")
    for st, s in zip(cfg.stages, run.streams):
        if st.name not in state["streams"]:
            continue
        if s is not None:
            s.load_state_dict(state["streams"][st.name])
        else:  # a stage composed when reached: its order continues once it is built
            run.pending_streams[st.name] = state["streams"][st.name]
    out = Path(cfg.output_dir)
    dest = out / "checkpoints" / source.name
    tmp = out / "checkpoints" / f".{source.name}.part"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(dest, ignore_errors=True)  # a checkpoint folder without our state (latest_checkpoint skips it)
    for f in (src_run / "stages").glob("*.jsonl") if (src_run / "stages").is_dir() else ():
        if f.stem in run.pending_streams:  # the composed prompts the carried order indexes
            (out / "stages").mkdir(parents=True, exist_ok=True)
            shutil.copy(f, out / "stages" / f.name)
    shutil.copytree(source, tmp)
    atomic_write_json(tmp / CRL_STATE, run.state_dict(step))
    rates = [r for r in read_jsonl(src_run / "pass_rates.jsonl") if r["step"] <= step] \
        if (src_run / "pass_rates.jsonl").is_file() else []
    atomic_write_jsonl(out / "metrics.jsonl", rows)
    atomic_write_jsonl(out / "pass_rates.jsonl", rates)
    atomic_write_jsonl(out / "transitions.jsonl", (t.to_dict() for t in run.curriculum.transitions))
    info = {"from": str(source), "step": step, "source_stage": state["curriculum"]["index"],
            "streams_carried": sorted(set(state["streams"]) & {st.name for st in cfg.stages})}
    atomic_write_json(out / BRANCH_FILE, info)
    tmp.rename(dest)  # last: until the checkpoint is in place, a rerun branches again
    return info


def run_training(
    config: TrainConfig | str | os.PathLike,
    resume: bool | str = "auto",
    log: Callable[[str], None] | None = log.info,  # the module's logger (crl train passes print)
    branch_from: str | os.PathLike | None = None,
) -> Path:
    """Train with GRPO + dynamic sampling + the depth curriculum; return metrics.jsonl's path.

    Args:
        config: a :class:`TrainConfig` or a YAML file path.
        resume: ``"auto"`` resumes from the latest checkpoint in ``output_dir`` if any;
            ``True`` requires one; ``False`` starts fresh (old logs are replaced).
        log: where progress lines go (stage transitions, bound hits, summary): by default
            this module's logger at INFO, ``None`` for none; ``crl train`` passes ``print``.
        branch_from: another run's checkpoint folder (``.../checkpoints/checkpoint-S``, say the
            one ``save_on_transition`` leaves at a curriculum switch): a new ``output_dir``
            starts from it, weights, optimizer and sampling state included, and trains on with
            this config from step S+1 (:func:`_branch`); once the folder holds its own
            checkpoint, a rerun resumes that.
    """
    # first: a trl of another version fails here, and torch, transformers and trl are imported
    # when the folder is claimed, so the run record names their versions (package_versions)
    from composition_rl.jobs.train import trl_adapter  # noqa: F401
    from composition_rl.jobs.train.step_progress import step_progress

    cfg = config if isinstance(config, TrainConfig) else load_config(config)
    cfg.validate()
    _refuse_missing_model(cfg.model)
    say = log or (lambda m: None)
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    ckpt = _claim_folder(cfg, out, resume, branch_from)
    # built after the folder is claimed: building it sets aside over-long prompts and writes
    # input_rejects.jsonl, which a refused run must leave as it was
    run = _Run(cfg)
    run.say = say
    start = _start(run, out, ckpt, branch_from)
    if start is None:
        return out / "metrics.jsonl"
    ckpt, step = start
    atomic_write_json(out / "config.json", cfg.to_dict())
    trainer, callback = _trainer(run)
    with step_progress("GRPO", run.curriculum.max_total_steps - step, enabled=cfg.progress) as advance:
        callback.bar = advance
        trainer.train(resume_from_checkpoint=str(ckpt) if ckpt is not None else None)
    return _finish(run, trainer, out)


def _refuse_missing_model(model: str) -> None:
    """Refuse a local model path that is not there (a hub name has no such first folder here)
    now, not after the data is built and the hub client has retried for half a minute."""
    from composition_rl.io.gguf import is_gguf

    m = Path(model).expanduser()
    if is_gguf(model):
        if model.endswith(".gguf") and not m.is_file():
            raise ValueError(f"model {model!r}: no such GGUF file")
    elif not m.exists() and (model.startswith((".", "/", "~")) or (len(m.parts) > 1 and Path(m.parts[0]).is_dir())):
        raise ValueError(f"model {model!r}: no such model folder; `crl tiny-model --out runs/tiny` builds a small one")


def _claim_folder(cfg: TrainConfig, out: Path, resume: bool | str,
                  branch_from: str | os.PathLike | None) -> Path | None:
    """Claim ``out`` for this training (:func:`composition_rl.io.identity.claim_run`); the
    checkpoint to resume from, if any."""
    if branch_from is not None and not resume:
        raise ValueError("--branch-from continues another run's checkpoint; it does not combine with --fresh")
    ckpt = latest_checkpoint(out) if resume else None
    if resume is True and ckpt is None and branch_from is None:
        raise ValueError(f"resume=True but no checkpoint with {CRL_STATE} under {out / 'checkpoints'}")
    # what the checkpoints were trained from: resuming them with another model, other data or
    # other GRPO settings would report one run's training as another's
    ident = training_identity(cfg)
    if branch_from is not None:  # a branch is another run than a start from the model (and than another branch)
        ident["branch_from"] = str(Path(branch_from).resolve())
    # a folder with metrics but no checkpoint (save_steps: 0) still holds a run: starting it
    # over with another model would replace that run's logs; --fresh says to
    logged = bool(resume) and (out / "metrics.jsonl").is_file() and (out / "metrics.jsonl").stat().st_size > 0
    claim_run(out / RUN_FILE, ident, has_work=ckpt is not None or logged, what="a training run",
              fix="use another output_dir, or start over with crl train --fresh")
    return ckpt


def _start(run: _Run, out: Path, ckpt: Path | None,
           branch_from: str | os.PathLike | None) -> tuple[Path | None, int] | None:
    """Where the run starts: the checkpoint it resumes (a branch's copy of its source's, made
    here) and its step, its state loaded and its logs cut back to that step; no checkpoint and
    step 0, the old logs removed, for a fresh run. None when the run already finished its
    curriculum: nothing to do."""
    say = run.say
    if branch_from is not None:
        # a branch starts from a checkpoint of the middle: it also ends with one (_Run.save_final)
        run.save_final = True
        if ckpt is None:
            info = _branch(run, Path(branch_from))
            ckpt = latest_checkpoint(out)
            say(f"branched from {info['from']} at step {info['step']} (prompt streams carried: "
                f"{', '.join(info['streams_carried']) or 'none'})")
    if ckpt is None:
        for name in (*LOGS, BRANCH_FILE):
            (out / name).unlink(missing_ok=True)
        return None, 0
    state = json.loads((ckpt / CRL_STATE).read_text())
    run.load_state_dict(state)
    for name in LOGS:
        truncate_after(out / name, state["step"])
    if run.curriculum.finished:
        say(f"{out} finished its curriculum at step {state['step']}; nothing to do "
            "(crl train --fresh, or resume=False, starts over)")
        return None
    say(f"resuming from {ckpt} (step {state['step']}, stage {run.curriculum.stage.name})")
    return ckpt, state["step"]


def _trainer(run: _Run):
    """TRL's trainer for ``run`` (our dynamic-sampling subclass), with the model loaded and
    the callback that drives the curriculum; returns both."""
    import torch
    from datasets import Dataset
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    from composition_rl.io.hf_model import load_causal_lm
    from composition_rl.jobs.train.trl_adapter import DynamicSamplingGRPOTrainer
    from composition_rl.jobs.train.verifier_reward import VerifierReward

    cfg = run.cfg
    # TRL's dataloader only paces the steps; prompts come from the curriculum streams.
    rows = [problem_row(p, st.name, cfg.instruction) for st, probs in zip(cfg.stages, run.problems)
            for p in probs or []]
    # With fewer rows than one step's prompts, TRL's sampler yields no batch and training
    # ends after 0 steps without a word; repeating the rows only changes that pacing.
    while len(rows) < cfg.grpo.prompts_per_step:
        rows += rows
    dataset = Dataset.from_list(rows)
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    torch.manual_seed(cfg.seed)
    try:
        tokenizer, model = load_causal_lm(cfg.model)
    except (OSError, ValueError) as e:  # no such folder, no network for a hub name, not a model
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"model {cfg.model!r}: cannot load it ({first}); give a local model folder "
                         "(`crl tiny-model --out runs/tiny` builds a small one)") from None
    args = _grpo_args(cfg, run.curriculum.max_total_steps)
    reward = VerifierReward(config=cfg.verify_config())
    trainer_ref: list = []
    callback = _callback(run, trainer_ref, run.say)
    trainer = DynamicSamplingGRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[callback],
        dynamic_sampling=cfg.dynamic_sampling,
        prompt_source=_CurriculumSource(run),
    )
    trainer_ref.append(trainer)
    for cb in (PrinterCallback, ProgressCallback):  # our bar and metrics.jsonl replace TRL's dict prints
        trainer.remove_callback(cb)
    return trainer, callback


def _finish(run: _Run, trainer, out: Path) -> Path:
    """Save the final model, the plot and summary.json of a trained run; metrics.jsonl's path."""
    cfg = run.cfg
    trainer.save_model(str(out / "final"))
    metrics = out / "metrics.jsonl"
    transitions = [t.to_dict() for t in run.curriculum.transitions]
    if cfg.plot and metrics.exists():
        plot_solve_rates(metrics, out / "solve_rates.png", transitions)
    summary = {"steps": trainer.state.global_step, "transitions": transitions, "config": asdict(cfg)}
    if run.online is not None:
        summary["online"] = {"retired": run.online.retired_total, "injected": len(run.online.injected),
                             "live_by_depth": run.online.live_by_depth()}
        run.say(f"online pool: {run.online.retired_total} prompt(s) retired, {len(run.online.injected)} injected; "
                f"live by depth {run.online.live_by_depth()}")
    if run.skipper is not None:
        t = run.skipper.totals
        summary["skip"] = {"drawn": t.drawn, "skipped": t.skipped, "refilled": t.refilled}
    atomic_write_json(out / "summary.json", summary)
    return metrics
