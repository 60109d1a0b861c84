"""The ``crl`` command line: thin. Each subcommand lives in ``composition_rl.commands.<name>``
and is imported only when it runs, so ``crl compose`` never pays for torch.

A command module defines ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``,
and may define ``RESUMABLE`` (a bool, or a function of the parsed args) when a rerun of an
interrupted command continues where it stopped; the function may also return the sentence
to print instead (what an interrupt at the point the run reached leaves behind).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

from composition_rl.logs import show_logs

# name -> (module, one-line help). Help is duplicated here so `crl --help` imports nothing.
COMMANDS: dict[str, tuple[str, str]] = {
    "compose": ("compose", "compose a verifiable prompt set into a harder one (SPC, depth K)"),
    "export": ("export", "write problems as they are (depth 1) as verl/TRL datasets and Problem JSONL"),
    "demo": ("demo", "run the main job end to end on the built-in default data"),
    "score": ("score", "score responses against gold answers with the bounded verifier"),
    "profile": ("profile", "measure per-prompt pass rates of a policy (solve_all / goldilocks / solve_none)"),
    "probe": ("probe", "reject composed records a solver answers with the first problem's value withheld (guessable)"),
    "eval": ("evaluate", "evaluate a policy on benchmarks: avg@k, pass@k, compositional analyses"),
    "train": ("train", "GRPO with dynamic sampling and a depth curriculum (TRL)"),
    "reproduce": ("reproduce", "reproduce Fig. 2 and Table 1 at toy scale on CPU: seeds, 95%% intervals, figures"),
    "tiny-model": ("tiny_model", "build a tiny Qwen2 model and tokenizer offline, with an SFT warm-up"),
    "grow": ("grow", "MagicBeanStalk: grow hard (solve_none) seeds into problems in the policy's Goldilocks band"),
    "verl-recipe": ("verl_recipe", "write a verl launch script with the paper's settings and a curriculum driver"),
    "audit": ("audit", "blind-audit a composed set: sample records for review, then score the filled form"),
    "browse": ("browse", "write one self-contained HTML page to look at a run folder (no server, no network)"),
    "refresh": ("refresh", "make a stale prompt set informative for a checkpoint: profile, compose, keep the band, report"),
    "decontaminate": ("decontaminate", "set aside the prompts of a set that overlap benchmark problems (n-gram containment)"),
}


class UsageError(Exception):
    """Bad arguments or unreadable inputs: printed without a traceback, exit code 2."""


DESCRIPTION = """\
Composition-RL (arXiv 2602.12036): compose prompts your RLVR run has mastered into harder
ones that are still checkable, verify answers, profile and evaluate policies, and train
with GRPO plus dynamic sampling."""

EPILOG = """\
a first run:
  crl compose --input problems.jsonl --depth 2 --out runs/d2 --export verl,trl
  crl export  --input problems.jsonl --out runs/d1 --format verl,trl     (depth 1, as is)
  crl score   --input responses.jsonl --out scored.jsonl

Inputs: JSON array, JSONL, CSV, TSV or Parquet (also .gz / .zst) with a question and an answer
column; name yours with --question-field / --answer-field. Run 'crl COMMAND --help' for a
command's options. Docs: README.md and docs/ in the repository."""


def version() -> str:
    """The version of the code that runs: ``composition_rl.__version__``, which is also where
    the package metadata reads it from (pyproject.toml's dynamic version)."""
    from composition_rl import __version__

    return __version__


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default, unless it already names one: a switch's
    default is off, an option without a default value is simply not used when left out."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = "default" in text.lower()
        silent = (action.default is None or action.default is argparse.SUPPRESS or action.required
                  or not action.option_strings or action.nargs == 0 or action.default == [])
        if not shown and not silent:
            text += " (default none)" if action.default == "" else " (default %(default)s)"
        return text


class _Once(argparse._StoreAction):
    """A single-value option given twice is refused, never silently reduced to the last one:
    ``--input a --input b`` would otherwise drop ``a`` without a word."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault(_GIVEN, {})
        if self.dest in given:
            parser.error(f"{option_string} given twice ({given[self.dest]!r} and {values!r}): "
                         "this option takes one value; give it once")
        given[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


_GIVEN = "_crl_given_options"


class _Parser(argparse.ArgumentParser):
    """The parser of ``crl`` and its commands: the help formatter above, single-value
    options checked by :class:`_Once`."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)
        # argument groups share these registries, so their options are checked too
        self.register("action", None, _Once)
        self.register("action", "store", _Once)

    def parse_known_args(self, args=None, namespace=None):
        ns, rest = super().parse_known_args(args, namespace)
        ns.__dict__.pop(_GIVEN, None)
        return ns, rest


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``crl`` parser with one subparser per command; only the command named ``only``
    gets its flags (its module is imported), so ``crl --help`` imports no command."""
    parser = _Parser(prog="crl", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"crl (composition-rl) {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (mod, help_) in COMMANDS.items():
        # help strings are %-formatted by argparse, a description is printed as it is
        p = sub.add_parser(name, help=help_, description=help_.replace("%%", "%"))
        if name == only:
            _module(mod).add_arguments(p)
    return parser


def _module(mod: str):
    return importlib.import_module(f"composition_rl.commands.{mod}")


def main(argv: list[str] | None = None) -> int:
    """Run ``crl`` on ``argv`` (default ``sys.argv[1:]``) and return the exit status: the
    command's own, 2 for a usage error (printed in one line), 130 on Ctrl-C; on a nonzero
    status the empty ``--out`` folders this run created are removed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    show_logs()
    cmd = next((a for a in argv if not a.startswith("-")), None)
    if cmd is not None and cmd not in COMMANDS:
        build_parser().parse_args(argv)  # argparse prints the known commands and exits 2
    args = build_parser(only=cmd).parse_args(argv)
    if args.command is None:
        build_parser().print_help()
        return 2
    module = _module(COMMANDS[args.command][0])
    empty = [f"--{k.replace('_', '-')}" for k in ("out", "keep_out", "json")
             if isinstance(getattr(args, k, None), str) and not getattr(args, k).strip()]
    if empty:  # Path("") is the current folder: an empty value would write there without a word
        print(f"crl {args.command}: error: {empty[0]} is empty: name the output (`{empty[0]} .` for the current "
              "folder)", file=sys.stderr)
        return 2
    previous = signal.signal(signal.SIGTERM, _sigterm_handler(os.getpid()))
    created = _missing_folders(getattr(args, "out", None))
    rc = 1
    try:
        rc = int(module.run(args) or 0)
        return rc
    except UsageError as e:
        print(f"crl {args.command}: error: {e}", file=sys.stderr)
        rc = 2
        return rc
    except KeyboardInterrupt:
        resumable = getattr(module, "RESUMABLE", False)
        if callable(resumable):
            resumable = resumable(args)
        if isinstance(resumable, str):
            tail = resumable
        else:
            tail = ("rerun the same command to resume" if resumable
                    else "this command keeps no partial work: rerun it to start over")
        print(f"crl {args.command}: interrupted; {tail}", file=sys.stderr)
        rc = 130
        return rc
    finally:
        signal.signal(signal.SIGTERM, previous)
        if rc != 0:
            _remove_empty(created)


def _missing_folders(out: str | None) -> list[str]:
    """``out`` and its ancestors that do not exist yet, deepest first."""
    if not out:
        return []
    missing = []
    p = os.path.abspath(out)
    while not os.path.exists(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    return missing


def _remove_empty(folders: list[str]) -> None:
    """A run that failed leaves no empty --out folder behind (those it created; rmdir only
    removes an empty folder, so anything the run wrote there on purpose stays)."""
    for p in folders:
        try:
            os.rmdir(p)
        except OSError:
            pass


def _sigterm_handler(pid: int):
    """SIGTERM ends a command like Ctrl-C (cleanup runs, one line, exit 130) in this process.
    A forked child that inherited the handler dies the default way instead."""

    def handler(signum, frame):
        if os.getpid() != pid:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise KeyboardInterrupt

    return handler


if __name__ == "__main__":
    # run through the imported module so that commands and main share one UsageError class
    from composition_rl.cli import main as _main

    sys.exit(_main())
