"""The ``crl`` command line: thin. Each subcommand lives in ``composition_rl.commands.<name>``
and is imported only when it runs, so ``crl compose`` never pays for torch.

A command module defines ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help). Help is duplicated here so `crl --help` imports nothing.
COMMANDS: dict[str, tuple[str, str]] = {
    "compose": ("compose", "compose a verifiable prompt set into a harder one (SPC, depth K)"),
    "demo": ("demo", "run the main job end to end on the built-in default data"),
    "score": ("score", "score responses against gold answers with the bounded verifier"),
    "profile": ("profile", "measure per-prompt pass rates of a policy (solve_all / goldilocks / solve_none)"),
    "eval": ("evaluate", "evaluate a policy on benchmarks: avg@k, pass@k, compositional analyses"),
    "train": ("train", "GRPO with dynamic sampling and a depth curriculum (TRL)"),
    "tiny-model": ("tiny_model", "build a tiny Qwen2 model and tokenizer offline, with an SFT warm-up"),
    "grow": ("grow", "MagicBeanStalk: grow hard (solve_none) seeds into problems in the policy's Goldilocks band"),
    "verl-recipe": ("verl_recipe", "write a verl launch script with the paper's settings and a curriculum driver"),
}


class UsageError(Exception):
    """Bad arguments or unreadable inputs: printed without a traceback, exit code 2."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crl", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (mod, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        if name == only:
            _module(mod).add_arguments(p)
    return parser


def _module(mod: str):
    return importlib.import_module(f"composition_rl.commands.{mod}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    cmd = next((a for a in argv if not a.startswith("-")), None)
    if cmd is not None and cmd not in COMMANDS:
        build_parser().parse_args(argv)  # argparse prints the known commands and exits 2
    args = build_parser(only=cmd).parse_args(argv)
    if args.command is None:
        build_parser().print_help()
        return 2
    try:
        return int(_module(COMMANDS[args.command][0]).run(args) or 0)
    except UsageError as e:
        print(f"crl {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"crl {args.command}: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    # run through the imported module so that commands and main share one UsageError class
    from composition_rl.cli import main as _main

    sys.exit(_main())
