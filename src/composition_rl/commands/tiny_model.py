"""``crl tiny-model --out DIR``: build the tiny Qwen2 policy offline (tokenizer, weights, SFT)."""

from __future__ import annotations

import json

HELP = "build a tiny Qwen2 model and tokenizer offline, with an SFT warm-up"


def add_arguments(parser) -> None:
    """The flags of ``crl tiny-model``: ``--out``, ``--sft-steps``, ``--digits``,
    ``--seed`` and ``--no-progress``."""
    parser.add_argument("--out", required=True, help="folder to write the model into (reused if already built)")
    parser.add_argument("--sft-steps", type=int, default=None, help="SFT warm-up steps (default 300; the whole build ~1.5 min on 2 cores)")
    parser.add_argument("--digits", type=int, choices=(1, 2, 3), default=None,
                        help="operand digits of the arithmetic task (default 1; 2 needs far more SFT)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the weights' initialisation and the SFT data")
    from composition_rl.progress import progress_help

    parser.add_argument("--no-progress", action="store_true", help=progress_help())


def run(args) -> int:
    """Build the tiny Qwen2 model into ``--out`` (reused if already built) and print its size,
    vocabulary and greedy accuracy per depth; 0 on success."""
    from composition_rl.cli import UsageError
    from composition_rl.jobs.tiny_model import TinyModelConfig, build_tiny_model

    kw = {"seed": args.seed}
    if args.digits is not None:
        kw["digits"] = args.digits
    if args.sft_steps is not None:
        if args.sft_steps < 0:
            raise UsageError(f"--sft-steps must be >= 0, got {args.sft_steps}")
        kw["sft_steps"] = args.sft_steps
    from composition_rl.io.runs import RunBusy, run_folder

    try:
        # two builds into one folder would interleave their weight files
        with run_folder(args.out, "tiny-model", refusals=(UsageError, ValueError)):
            out = build_tiny_model(args.out, TinyModelConfig(**kw), progress=not args.no_progress, log=print)
    except (RunBusy, ValueError) as e:
        raise UsageError(str(e)) from None
    info = json.loads((out / "build_info.json").read_text())
    acc = ", ".join(f"depth {d}: {a:.0%}" for d, a in info["greedy_accuracy"].items())
    print(f"tiny model in {out}: {info['params'] / 1e6:.2f}M parameters, vocab {info['vocab_size']}, "
          f"greedy accuracy {acc} ({info['seconds']} s to build)")
    return 0
