"""``crl verl-recipe --stages d1/verl.parquet d2/verl.parquet --model PATH --python PY --out DIR``.

Each stage must be a verl RL parquet (``crl export --format verl`` for depth 1, ``crl compose
--export verl`` for depth 2 and up); its depth is read from the data. ``--python`` names the
interpreter of an environment that has verl and composition_rl (``make verl-env`` builds
``.venv-verl``); the generated scripts run everything through it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from composition_rl.flags import non_negative_int, positive_int

HELP = "write a verl launch script with the paper's settings and a curriculum driver"



def add_arguments(parser) -> None:
    """The flags of ``crl verl-recipe``: stages, model, ``--out``, interpreter, the
    curriculum's budgets and probe, cluster shape, ``--online``, device and time limit."""
    parser.add_argument("--stages", nargs="+", required=True,
                        help="verl parquet files, one per stage, in curriculum order "
                        "(crl export --format verl; crl compose --export verl)")
    parser.add_argument("--model", required=True, help="the starting policy (HF folder or hub id)")
    parser.add_argument("--out", required=True, help="folder for launch.sh, stage_<k>.sh and recipe.json")
    parser.add_argument("--python", help="interpreter of an environment with verl and composition_rl "
                        "(default: this one if it has verl, else ./.venv-verl/bin/python from `make verl-env`)")
    parser.add_argument("--no-python-check", action="store_true",
                        help="do not check --python here (a recipe written for another machine)")
    parser.add_argument("--depths", nargs="+", type=int, help="expected depth of each stage (checked against the data)")
    parser.add_argument("--max-steps", type=positive_int, default=200, help="step budget of each stage")
    parser.add_argument("--threshold", type=float, default=0.75, help="advance when probe solve_all reaches this")
    parser.add_argument("--chunk-steps", type=positive_int, default=50, help="train this many steps between probes")
    parser.add_argument("--probe-size", type=positive_int, default=256, help="probe prompts per stage")
    parser.add_argument("--gpus", type=positive_int, help="GPUs per node (>= 1; default 8, and 1 with --device cpu)")
    parser.add_argument("--nnodes", type=positive_int, default=1, help="machines of the verl run (>= 1)")
    parser.add_argument("--online", nargs="*", metavar="KEY=VALUE",
                        help="run the online curriculum (one depth-1 stage; retired prompts are replaced by "
                        "compositions during training): verl's dataset and replay buffer become "
                        "composition_rl.integrations.verl_online. Optional KEY=VALUE pairs set "
                        "composition_rl.jobs.train.online.OnlineConfig fields, e.g. --online k=3 max_depth=3")
    parser.add_argument("--backfill-after", type=non_negative_int, metavar="N",
                        help="with --online: when DAPO's dynamic sampling starves (verl 0.9.1's V1 trainer then "
                        "generates without limit), a step's refills beyond N train batches are compositions of "
                        "that step's own solve_all prompts; 0 = off (verl's loop). Default 4: a step not filled by "
                        "5 batches has under ~1 informative group in 5, where composition is what it lacks")
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu",
                        help="cpu: a smoke test on this machine's CPU with vLLM's CPU build (make verl-env): verl's "
                        "CPU platform and patches (composition_rl.integrations.verl_cpu), a tiny batch and short "
                        "responses, the reward's prose fallbacks for a model that does not box, and a time limit")
    from composition_rl.integrations.verl_recipe import CPU_TIMEOUT_S

    parser.add_argument("--timeout", type=positive_int, metavar="SECONDS",
                        help=f"wall-clock limit of each verl launch (default: none on gpu, {CPU_TIMEOUT_S} on cpu, "
                        "where a failed weight sync in a vLLM worker can leave the trainer waiting forever)")


def run(args) -> int:
    """Check the stages and online settings, write the launch script, stage scripts and
    ``recipe.json`` into the held ``--out``, and print what was written; 0 on success."""
    from composition_rl.cli import UsageError
    from composition_rl.integrations.verl_recipe import online_settings

    if args.depths and len(args.depths) != len(args.stages):
        raise UsageError(f"--depths has {len(args.depths)} values for {len(args.stages)} stages")
    try:
        online = online_settings(args.online)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if args.backfill_after is not None and online is None:
        raise UsageError("--backfill-after acts on the online mode's replay buffer: add --online")
    if online is not None and len(args.stages) != 1:
        raise UsageError(f"--online grows depth during training: give one --stages file (depth-1 data), "
                         f"not {len(args.stages)}")
    from composition_rl.io.runs import RunBusy, run_folder

    try:
        with run_folder(args.out, "verl-recipe", inputs={f"--stages {f}": f for f in args.stages},
                        refusals=(UsageError, ValueError)):
            return _write(args, online)
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None


def _write(args: argparse.Namespace, online) -> int:
    """Write the recipe, with ``--out`` held (see :func:`run`)."""
    from composition_rl.cli import UsageError
    from composition_rl.integrations.verl_recipe import (
        CPU_TIMEOUT_S,
        RecipeConfig,
        choose_python,
        recipe_stages,
        write_recipe,
    )

    stages = recipe_stages(args.stages, args.depths, args.max_steps)
    python = choose_python(args.python, check=not args.no_python_check)
    out = Path(args.out)
    try:
        cfg = RecipeConfig(model=args.model, out_dir=str(out.resolve()), stages=stages,
                           threshold=args.threshold, chunk_steps=args.chunk_steps, probe_size=args.probe_size,
                           n_gpus_per_node=args.gpus or (1 if args.device == "cpu" else 8), nnodes=args.nnodes,
                           python=python, online=online, device=args.device,
                           timeout_s=args.timeout or (CPU_TIMEOUT_S if args.device == "cpu" else 0),
                           **({} if args.backfill_after is None else {"backfill_after": args.backfill_after}))
        launch = write_recipe(cfg)
    except ValueError as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"--out {out}: cannot write there ({e.strerror or e})") from None
    print(f"wrote {launch} (curriculum driver) and {len(stages)} stage script(s) in {launch.parent}: "
          + ", ".join(f"{s.name}" for s in stages) + f"; interpreter {python}")
    return 0
