"""``crl verl-recipe --stages d1.parquet d2.parquet ... --model PATH --out DIR``."""

from __future__ import annotations

HELP = "write a verl launch script with the paper's settings and a curriculum driver"


def add_arguments(parser) -> None:
    parser.add_argument("--stages", nargs="+", required=True,
                        help="verl parquet files, one per stage, in curriculum order (crl compose --export verl)")
    parser.add_argument("--model", required=True, help="the starting policy (HF folder or hub id)")
    parser.add_argument("--out", required=True, help="folder for launch.sh, stage_<k>.sh and recipe.json")
    parser.add_argument("--depths", nargs="+", type=int, help="depth of each stage (default 1, 2, 3, ...)")
    parser.add_argument("--max-steps", type=int, default=200, help="step budget of each stage")
    parser.add_argument("--threshold", type=float, default=0.75, help="advance when probe solve_all reaches this")
    parser.add_argument("--chunk-steps", type=int, default=50, help="train this many steps between probes")
    parser.add_argument("--probe-size", type=int, default=256, help="probe prompts per stage")
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node")
    parser.add_argument("--nnodes", type=int, default=1)


def run(args) -> int:
    from pathlib import Path

    from composition_rl.cli import UsageError
    from composition_rl.integrations.verl_recipe import RecipeConfig, RecipeStage, write_recipe

    depths = args.depths or list(range(1, len(args.stages) + 1))
    if len(depths) != len(args.stages):
        raise UsageError(f"--depths has {len(depths)} values for {len(args.stages)} stages")
    stages = []
    for f, d in zip(args.stages, depths):
        p = Path(f)
        if not p.is_file():
            raise UsageError(f"stage file not found: {p}")
        stages.append(RecipeStage(name=f"depth{d}", train_file=str(p.resolve()), depth=d, max_steps=args.max_steps))
    try:
        cfg = RecipeConfig(model=args.model, out_dir=str(Path(args.out).resolve()), stages=stages,
                           threshold=args.threshold, chunk_steps=args.chunk_steps, probe_size=args.probe_size,
                           n_gpus_per_node=args.gpus, nnodes=args.nnodes)
        launch = write_recipe(cfg)
    except ValueError as e:
        raise UsageError(str(e)) from None
    print(f"wrote {launch} (curriculum driver) and {len(stages)} stage script(s) in {launch.parent}")
    return 0
