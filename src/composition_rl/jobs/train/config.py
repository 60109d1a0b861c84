"""The training config: typed dataclasses, one YAML file, named presets.

A config file names a preset (``paper`` or ``cpu-tiny``, shipped in
``composition_rl/presets/``) and overrides what it needs; the merge is a deep dict merge,
then every section is validated with messages that name the bad values. Example:

.. code-block:: yaml

    preset: cpu-tiny
    model: runs/tiny-model
    output_dir: runs/train
    stages:
      - {name: depth1, data: runs/composed/depth1.jsonl, max_steps: 20}
      - {name: depth2, data: runs/composed/depth2.jsonl, max_steps: 20}
    curriculum: {mode: auto, threshold: 0.6, window: 3}

>>> cfg = TrainConfig.from_dict({"preset": "paper", "model": "m", "output_dir": "o",
...                              "stages": [{"name": "d1", "data": "d1.jsonl", "max_steps": 5}]})
>>> cfg.grpo.epsilon, cfg.grpo.epsilon_high, cfg.grpo.beta, cfg.grpo.loss_type
(0.2, 0.28, 0.0, 'dapo')
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from composition_rl.jobs.train.curriculum import check_budget
from composition_rl.jobs.train.skip import SkipConfig

if TYPE_CHECKING:
    from composition_rl.grading import VerifyConfig

__all__ = [
    "CurriculumConfig",
    "DynamicSamplingConfig",
    "GRPOSettings",
    "SkipConfig",
    "StageConfig",
    "TrainConfig",
    "load_config",
    "preset_names",
]


@dataclass
class StageConfig:
    """One curriculum stage.

    Args:
        name: shown in logs and metrics.
        max_steps: the stage's step budget.
        data: a problem file (JSONL of ``Problem.to_dict()`` rows, or any file
            ``composition_rl.io.readers.load_problems`` reads).
        arithmetic: instead of ``data``, generate the built-in arithmetic family:
            ``{depth: K, n: 512, seed: 0, digits: 1}`` (the tiny model's task; see
            jobs/train/arithmetic.py).
        reasoning_gym: instead of ``data``, generate one reasoning-gym family (depth 1):
            ``{name: basic_arithmetic, n: 64, seed: 0, config: {min_terms: 2, ...}}`` (the
            generator's own config keys; ``composition_rl.io.readers.load_reasoning_gym``).
        compose: instead of ``data``, compose a stage on the fly with the symbolic engine:
            ``{from: FILE, depth: K, pool_size: 20, max_candidates: 512, seed: 0, risks: last}``
            (``composition_rl.jobs.compose.pipeline.compose_problems``). With ``first: mastered``
            the stage is composed when the curriculum reaches it, and q1 comes only from the
            previous stage's prompts whose latest sampled group was solve_all (the paper's rule:
            compose what the policy has mastered); ``min_mastered`` (default 2) is the fewest
            such prompts it accepts before falling back to all of the previous stage's. Without
            ``from``, the later problems of each composition come from the previous stage's
            prompts too (a stage built from generated problems has no file to name).
        depth: the stage's depth for logs; default the most common depth in its data.
        limit: use only the first ``limit`` problems.
        min_steps: the fewest steps before saturation (``curriculum.mode: auto``) may end the
            stage; 0 (default) lets it end as soon as the rolling window is full. A stage judged
            on a window of 5 after 5 steps shows no climb, only a level.
    """

    name: str
    max_steps: int
    data: str | None = None
    arithmetic: dict[str, int] | None = None
    compose: dict[str, Any] | None = None
    reasoning_gym: dict[str, Any] | None = None
    depth: int | None = None
    limit: int | None = None
    min_steps: int = 0

    @property
    def composes_mastered(self) -> bool:
        """True for a stage composed when reached, from the previous stage's mastered prompts."""
        return self.compose is not None and self.compose.get("first") == "mastered"

    def validate(self) -> None:
        """Check the stage; raises ``ValueError`` naming the stage unless it has exactly one source
        (``data``, ``arithmetic``, ``compose``, ``reasoning_gym``) with its required keys, no unknown
        ones, and a valid step budget."""
        if sum(x is not None for x in (self.data, self.arithmetic, self.compose, self.reasoning_gym)) != 1:
            raise ValueError(f"stage {self.name!r}: give exactly one of data=, arithmetic=, compose= or "
                             "reasoning_gym=")
        if self.reasoning_gym is not None:
            unknown = set(self.reasoning_gym) - {"name", "n", "seed", "config"}
            if unknown or "name" not in self.reasoning_gym:
                raise ValueError(f"stage {self.name!r}: reasoning_gym takes name (and n, seed, config); "
                                 f"got {self.reasoning_gym}")
        if self.compose is not None:
            unknown = set(self.compose) - {"from", "depth", "pool_size", "max_candidates", "seed", "first",
                                           "min_mastered", "risks"}
            if self.compose.get("first", "mastered") != "mastered":
                raise ValueError(f"stage {self.name!r}: compose.first must be 'mastered', got "
                                 f"{self.compose['first']!r}")
            if unknown or "depth" not in self.compose or ("from" not in self.compose and not self.composes_mastered):
                raise ValueError(
                    f"stage {self.name!r}: compose takes from and depth (and pool_size, max_candidates, "
                    f"seed, risks, first, min_mastered; from may be left out with first: mastered); got {self.compose}"
                )
        check_budget(self.name, self.max_steps, self.min_steps)
        if self.arithmetic is not None:
            unknown = set(self.arithmetic) - {"depth", "n", "seed", "digits"}
            if unknown or "depth" not in self.arithmetic:
                raise ValueError(
                    f"stage {self.name!r}: arithmetic takes depth (and n, seed, digits); got {self.arithmetic}"
                )


@dataclass
class DynamicSamplingConfig:
    """Dynamic sampling (Composition-RL, Equation 5).

    Args:
        enabled: filter groups; off means plain GRPO batches (metrics are still written).
        oversample: each round samples ``ceil(needed * oversample)`` prompts.
        max_rounds: generation rounds per step at most (the first included). When they run
            out before the batch is full, the batch is topped up with the latest
            uninformative groups (zero advantage; kept out of the loss and its token count)
            and the step is logged as ``bound_hit``.
        band: optional band-pass ``[lo, hi]``: keep groups with ``lo <= pass rate <= hi``;
            ``None`` keeps ``0 < pass rate < 1``. Needs ``0 < lo <= hi < 1``.
    """

    enabled: bool = True
    oversample: float = 1.0
    max_rounds: int = 4
    band: tuple[float, float] | None = None

    def validate(self) -> None:
        """Check the settings (``oversample >= 1``, ``max_rounds >= 1``, ``0 < lo <= hi < 1``) and
        store ``band`` as a float pair; raises ``ValueError`` naming the bad one."""
        if self.oversample < 1.0:
            raise ValueError(f"dynamic_sampling.oversample must be >= 1, got {self.oversample}")
        if self.max_rounds < 1:
            raise ValueError(f"dynamic_sampling.max_rounds must be >= 1, got {self.max_rounds}")
        if self.band is not None:
            if len(self.band) != 2:
                raise ValueError(f"dynamic_sampling.band must be [lo, hi], got {self.band}")
            lo, hi = self.band
            if not 0.0 < lo <= hi < 1.0:
                raise ValueError(f"dynamic_sampling.band needs 0 < lo <= hi < 1, got [{lo}, {hi}]")
            self.band = (float(lo), float(hi))


@dataclass
class CurriculumConfig:
    """See :class:`composition_rl.jobs.train.curriculum.Curriculum`.

    Args:
        mode: ``auto`` (advance on saturation or budget), ``manual`` (fixed budgets) or
            ``online`` (per prompt during the run: retire what the policy has mastered and
            compose from it; one stage, its problems the starting pool; see
            :class:`composition_rl.jobs.train.online.OnlinePool`).
        threshold: rolling solve_all that ends a stage in ``auto`` mode.
        window: steps in the rolling mean.
        total_steps: optional cap on the whole run's steps (for matched-steps comparisons).
        online: ``online`` mode's rule, the fields of
            :class:`composition_rl.jobs.train.online.OnlineConfig` (``k``, ``window``, ``max_depth``,
            ``partners``, ...); its ``seed`` defaults to the run's seed.
        partners: ``online`` mode: a problem file whose depth-1 problems are the partners of
            retired prompts (the later problems of their compositions); default the stage's
            own problems.
    """

    mode: str = "auto"
    threshold: float = 0.75
    window: int = 5
    total_steps: int | None = None
    online: dict[str, Any] | None = None
    partners: str | None = None

    def validate(self) -> None:
        """Check the mode, threshold, window and step total (and the online settings, which need
        mode ``online``); raises ``ValueError`` naming the bad one."""
        if self.mode not in ("auto", "manual", "online"):
            raise ValueError(f"curriculum.mode must be 'auto', 'manual' or 'online', got {self.mode!r}")
        if self.mode != "online" and (self.online is not None or self.partners is not None):
            raise ValueError(f"curriculum.online and curriculum.partners need mode 'online', got mode {self.mode!r}")
        if self.mode == "online":
            from composition_rl.jobs.train.online import OnlineConfig

            OnlineConfig.from_dict({"seed": 0, **(self.online or {})})  # raises naming the bad setting
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"curriculum.threshold must be in (0, 1], got {self.threshold}")
        if self.window < 1:
            raise ValueError(f"curriculum.window must be >= 1, got {self.window}")
        if self.total_steps is not None and self.total_steps < 1:
            raise ValueError(f"curriculum.total_steps must be >= 1 (or null), got {self.total_steps}")


@dataclass
class GRPOSettings:
    """GRPO hyperparameters. Every field but ``prompts_per_step`` and ``trl`` is a field of TRL's
    ``GRPOConfig`` under the same name and is passed through to it as is (:meth:`trl_fields`);
    the defaults here are this project's (the presets set the paper's).

    ``prompts_per_step`` groups of ``num_generations`` completions make one optimizer step.
    ``loss_type: dapo`` is TRL's token-level normalisation over the whole batch (Composition-RL,
    Equation 3); ``epsilon``/``epsilon_high`` are the asymmetric clip; ``beta: 0`` is no KL.
    ``trl`` passes any other ``GRPOConfig`` field through unchanged.
    """

    prompts_per_step: int = field(default=8, metadata={"help": "groups (prompts) per optimizer step; ours, not TRL's"})
    num_generations: int = field(default=8, metadata={"help": "G, completions per prompt"})
    learning_rate: float = 1e-4
    temperature: float = 1.0
    top_p: float = 1.0
    max_completion_length: int = 96
    beta: float = field(default=0.0, metadata={"help": "KL coefficient (0: no KL, as in the paper)"})
    epsilon: float = field(default=0.2, metadata={"help": "lower clip ratio"})
    epsilon_high: float = field(default=0.28, metadata={"help": "upper clip ratio (clip-higher)"})
    loss_type: str = field(default="dapo", metadata={"help": "TRL loss normalisation; dapo is token-level"})
    scale_rewards: str = field(default="group", metadata={"help": "'group' or 'none' ('batch' would see filtering)"})
    gradient_accumulation_steps: int = 1
    weight_decay: float = 0.0
    warmup_steps: int = 0
    max_grad_norm: float = 1.0
    bf16: bool = field(default=False, metadata={"help": "bf16 on GPU (ignored on CPU)"})
    trl: dict[str, Any] = field(default_factory=dict, metadata={"help": "any other GRPOConfig field, passed as is"})

    def trl_fields(self, trl_config_cls: type) -> dict[str, Any]:
        """The fields of this object that ``trl_config_cls`` (TRL's ``GRPOConfig``) also has."""
        theirs = {f.name for f in fields(trl_config_cls)}
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name in theirs}

    def validate(self) -> None:
        """Check the GRPO settings (at least 2 generations, rows divisible by the gradient
        accumulation, positive rate and temperature, ``scale_rewards`` ``group`` or ``none``);
        raises ``ValueError`` naming the bad one."""
        if self.num_generations < 2:
            raise ValueError(f"grpo.num_generations must be >= 2, got {self.num_generations}")
        if self.prompts_per_step < 1:
            raise ValueError(f"grpo.prompts_per_step must be >= 1, got {self.prompts_per_step}")
        rows = self.prompts_per_step * self.num_generations
        if rows % self.gradient_accumulation_steps:
            raise ValueError(
                f"prompts_per_step * num_generations ({rows}) must divide by "
                f"gradient_accumulation_steps ({self.gradient_accumulation_steps})"
            )
        if self.learning_rate <= 0 or self.temperature <= 0:
            raise ValueError(f"learning_rate ({self.learning_rate}) and temperature ({self.temperature}) must be > 0")
        if self.scale_rewards not in ("group", "none"):
            # "batch" scales by the std of the whole candidate batch, which filtering changes.
            raise ValueError(f"grpo.scale_rewards must be 'group' or 'none', got {self.scale_rewards!r}")


@dataclass
class TrainConfig:
    """Everything ``crl train`` needs. Build with :meth:`from_dict` or :func:`load_config`.

    Args:
        model: a local model folder (``crl tiny-model --out DIR`` makes one) or hub id.
        output_dir: metrics.jsonl, pass_rates.jsonl, transitions, plots and checkpoints.
        stages: the curriculum stages, in order.
        seed: seeds TRL, prompt order and sampling.
        save_steps: checkpoint every N steps, and at the end (0: no checkpoint but
            ``save_on_transition``'s; the final weights are always in ``final/``).
        save_on_transition: also checkpoint at the end of every step where the curriculum
            moves to its next stage: the run as it was at the switch (weights, optimizer,
            sampling state), the branch point ``branch_from`` continues from.
        verify_timeout_s, verify_workers: the answer verifier (composition_rl.grading).
        verify_fallbacks: how the reward reads a completion with no ``\\boxed{}``: names of
            ``composition_rl.grading.extract.FALLBACKS``, tried in order (None: the verifier's
            default, an ``Answer: X`` line). ``[prose]`` also reads "The answer is X" and the
            other common unboxed endings, for a small chat model that answers in words and
            leaves the box empty; the answer is still checked against the gold, but the policy
            is then never pushed to box it (docs/training.md).
        progress: rich progress bar with the step metrics.
        plot: write solve_rates.png at the end.
        torch_threads: ``torch.set_num_threads`` for the run (None: torch's default). Tiny
            models on CPU want 1: their matrices are too small to split, and two threads on a
            loaded 2-core machine make each small op tens of times slower.
        instruction: append the project's "put the final answer in \\boxed{}" instruction to
            every prompt (as the verl/TRL exporters do); off for the tiny model, which was
            never shown it.
        skip: GRESO-style pre-rollout skipping of prompts whose recent groups were all
            correct or all wrong (:class:`composition_rl.jobs.train.skip.SkipConfig`; off by default).
    """

    model: str
    output_dir: str
    stages: list[StageConfig]
    seed: int = 0
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    dynamic_sampling: DynamicSamplingConfig = field(default_factory=DynamicSamplingConfig)
    curriculum: CurriculumConfig = field(default_factory=CurriculumConfig)
    skip: SkipConfig = field(default_factory=SkipConfig)
    save_steps: int = 0
    save_on_transition: bool = False
    save_total_limit: int = 2
    verify_timeout_s: float = 5.0
    verify_workers: int | None = 1
    verify_fallbacks: list[str] | None = None
    progress: bool = True
    plot: bool = True
    torch_threads: int | None = None
    instruction: bool = False
    preset: str | None = None

    def validate(self) -> TrainConfig:
        """Check every section and how they combine (unique stage names, skipping not with the
        online curriculum, which takes one stage); returns ``self``, or raises ``ValueError``."""
        if not self.stages:
            raise ValueError("config needs at least one stage under stages:")
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError(f"stage names must be unique, got {names}")
        for s in self.stages:
            s.validate()
        self.grpo.validate()
        self.dynamic_sampling.validate()
        self.curriculum.validate()
        self.skip.validate()
        if self.skip.enabled and self.curriculum.mode == "online":
            raise ValueError("skip.enabled and curriculum.mode 'online' do not combine: the online pool has its "
                             "own rule for stale prompts (retire or down-weight them)")
        if self.curriculum.mode == "online":
            if len(self.stages) != 1 or self.stages[0].composes_mastered:
                raise ValueError(f"curriculum.mode 'online' takes one stage (the starting pool; it composes the "
                                 f"later depths itself), got {[s.name for s in self.stages]}")
        if self.save_steps < 0:
            raise ValueError(f"save_steps must be >= 0, got {self.save_steps}")
        self.verify_config()  # an unknown fallback name fails here, listing the known ones
        return self

    def verify_config(self) -> VerifyConfig:
        """The reward's :class:`composition_rl.grading.VerifyConfig`."""
        from composition_rl.grading import VerifyConfig

        kw = {} if self.verify_fallbacks is None else {"fallbacks": tuple(self.verify_fallbacks)}
        return VerifyConfig(timeout_s=self.verify_timeout_s, workers=self.verify_workers, **kw)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], base_dir: str | Path | None = None) -> TrainConfig:
        """Merge onto the named preset, type the sections and validate.

        Relative ``data`` paths resolve against ``base_dir`` (the config file's folder).
        """
        raw = copy.deepcopy(dict(raw))
        preset = raw.get("preset")
        merged = _deep_merge(load_preset(preset), raw) if preset else raw
        _reject_unknown(cls, merged, "config")
        for key in ("model", "output_dir", "stages"):
            if key not in merged:
                raise ValueError(f"config is missing {key!r}")
        stages = []
        for i, s in enumerate(merged.pop("stages")):
            _reject_unknown(StageConfig, s, f"stages[{i}]")
            st = StageConfig(**s)
            if st.data is not None and base_dir is not None and not Path(st.data).is_absolute():
                st.data = str(Path(base_dir) / st.data)
            if st.compose and "from" in st.compose and base_dir is not None and not Path(str(st.compose["from"])).is_absolute():
                st.compose = {**st.compose, "from": str(Path(base_dir) / str(st.compose.get("from", "")))}
            stages.append(st)
        sections = {}
        for name, typ in (("grpo", GRPOSettings), ("dynamic_sampling", DynamicSamplingConfig),
                          ("curriculum", CurriculumConfig), ("skip", SkipConfig)):
            sec = merged.pop(name, None) or {}
            _reject_unknown(typ, sec, name)
            if name == "dynamic_sampling" and sec.get("band") is not None:
                sec["band"] = tuple(sec["band"])
            sections[name] = typ(**sec)
        part = sections["curriculum"].partners
        if part and base_dir is not None and not Path(part).is_absolute():
            sections["curriculum"].partners = str(Path(base_dir) / part)
        return cls(stages=stages, **sections, **merged).validate()

    def to_dict(self) -> dict[str, Any]:
        """The whole config as nested plain dicts and lists (``dataclasses.asdict``)."""
        return dataclasses.asdict(self)


def _reject_unknown(typ, d: dict[str, Any], where: str) -> None:
    known = {f.name for f in dataclasses.fields(typ)}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known: {sorted(known)}")


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def preset_names() -> list[str]:
    """Names of the shipped presets (``composition_rl/presets/*.yaml``)."""
    folder = resources.files("composition_rl") / "presets"
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def load_preset(name: str) -> dict[str, Any]:
    """The raw dict of preset ``name``; an unknown name lists the known ones."""
    import yaml

    path = resources.files("composition_rl") / "presets" / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"unknown preset {name!r}; known: {preset_names()}")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    data.pop("preset", None)
    return data


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """Read a YAML config file (plus optional top-level overrides) into a TrainConfig.

    ``path`` may also be the name of a shipped preset that is a whole run (it names its model,
    output folder and stages, as ``real-cpu`` does) when no file of that name exists.
    """
    import yaml

    if not Path(path).is_file() and str(path) in preset_names():
        return TrainConfig.from_dict(_deep_merge({"preset": str(path)}, overrides or {}))
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:  # one line, where it went wrong, instead of the parser's traceback
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ValueError(f"not valid YAML{where}: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected a mapping at the top level, got {type(raw).__name__}")
    if overrides:
        raw = _deep_merge(raw, overrides)
    return TrainConfig.from_dict(raw, base_dir=path.parent)
