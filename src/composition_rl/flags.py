"""Command-line flags generated from a config dataclass, so that each setting is declared once.

The model is TRL's ``GRPOConfig``: every field carries its help text in
``field(metadata={"help": ...})``; the command adds the flags with :func:`add_flags` and
builds the config back with :func:`from_flags`. Validation stays in the dataclass's
``__post_init__``, so a bad flag fails with the same message as a bad config in code.

Metadata keys (all optional except ``help``):

* ``flag``: the flag name when it is not ``--field-name`` (kept where older commands
  spelled it differently, e.g. ``--timeout`` for ``timeout_s``);
* ``choices``: a sequence, or a callable returning one (a registry's ``names``);
* ``type``: the argparse converter when the default does not tell (``None`` defaults);
* ``append``: a tuple field given by repeating the flag;
* ``metavar``; ``cli=False`` to keep a field out of the command line;
* ``help_no``: for a boolean that defaults to True (its flag is ``--no-name``), the help of
  that flag: what turning it off does (required; ``help`` documents the field).

>>> import argparse, dataclasses
>>> @dataclasses.dataclass(frozen=True)
... class C:
...     depth: int = dataclasses.field(default=2, metadata={"help": "problems per prompt"})
...     fast: bool = dataclasses.field(default=False, metadata={"help": "go fast"})
>>> p = argparse.ArgumentParser()
>>> add_flags(p, C)
>>> from_flags(C, p.parse_args(["--depth", "3", "--fast"]))
C(depth=3, fast=True)
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

__all__ = ["add_flags", "at_least", "flag_fields", "from_flags", "non_negative_int", "positive_int", "switch"]

T = TypeVar("T")


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def switch(text: str) -> bool:
    """An argparse converter for a yes/no value: 1/0, true/false, yes/no, on/off (any case);
    anything else is an error naming the accepted words, never a silent False.

    >>> switch("on"), switch("No")
    (True, False)
    >>> switch("maybe")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 'maybe' is not a yes/no value: use one of 1, true, yes, on / 0, false, no, off
    """
    v = text.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"{text!r} is not a yes/no value: use one of {', '.join(_TRUE)} / {', '.join(_FALSE)}")


def at_least(minimum: int) -> Callable[[str], int]:
    """An argparse converter for a whole number of at least ``minimum`` (a count, a step
    budget, a timeout): the one converter every command's bounded integer flag uses.

    >>> at_least(0)("0"), positive_int("3")
    (0, 3)
    >>> positive_int("-1")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: -1 must be >= 1
    >>> non_negative_int("x")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 'x' is not a whole number
    """
    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"{n} must be >= {minimum}")
        return n

    return parse


#: a count that must be at least 1 (``--limit``): 0 or a negative number would otherwise act
#: as a Python slice bound
positive_int = at_least(1)
#: a whole number that may be 0 (``--backfill-after``)
non_negative_int = at_least(0)


def flag_fields(cls: type, skip: Iterable[str] = ()) -> list[dataclasses.Field]:
    """The fields of ``cls`` that become flags: those with help text, not marked ``cli=False``."""
    skip = set(skip)
    return [f for f in dataclasses.fields(cls)
            if "help" in f.metadata and f.metadata.get("cli", True) and f.name not in skip]


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _flag(f: dataclasses.Field) -> str:
    """The flag :func:`add_flags` gives field ``f``."""
    md, default = f.metadata, _default(f)
    if isinstance(default, bool) and default and "flag" not in md:
        return "--no-" + f.name.replace("_", "-")
    return md.get("flag") or "--" + f.name.replace("_", "-")


def in_flags(error: Exception, names: dict[str, str]) -> str:
    """``error``'s message with the config fields it names written as the flags that set them:
    a command line user never typed ``timeout_s``.

    >>> in_flags(ValueError("timeout_s must be a number in (0, 3600] seconds, got -1.0"), {"timeout_s": "--timeout"})
    '--timeout must be a number in (0, 3600] seconds, got -1.0'
    """
    msg = str(error)
    for name, flag in names.items():
        msg = re.sub(rf"(?<![\w-]){re.escape(name)}(?!\w)", flag, msg)
    return msg


def flags_given(cls: type, args: Any, *, prefix: str = "", skip: Iterable[str] = ()) -> list[str]:
    """The flags of ``cls`` (added by :func:`add_flags`) whose parsed value is not the default:
    what a user set. A command that has no use for them says so instead of ignoring them.

    >>> import argparse, dataclasses
    >>> @dataclasses.dataclass
    ... class Demo:
    ...     size: int = dataclasses.field(default=1, metadata={"help": "a size"})
    >>> p = argparse.ArgumentParser(); add_flags(p, Demo)
    >>> flags_given(Demo, p.parse_args(["--size", "3"])), flags_given(Demo, p.parse_args([]))
    (['--size'], [])
    """
    given = []
    for f in flag_fields(cls, skip):
        value = getattr(args, prefix + f.name, None)
        if (bool(value) if f.metadata.get("append") else value != _default(f)):
            given.append(_flag(f))
    return given


def add_flags(group: Any, cls: type, *, prefix: str = "", skip: Iterable[str] = ()) -> None:
    """Add one flag per documented field of ``cls`` to ``group`` (a parser or argument group).

    The parsed value lands in ``args.<prefix><field>``. Booleans become switches:
    ``--name`` for a field that defaults to False, ``--no-name`` for one that defaults to True.
    """
    for f in flag_fields(cls, skip):
        md = f.metadata
        default = _default(f)
        flag = md.get("flag") or "--" + f.name.replace("_", "-")
        kw: dict[str, Any] = {"dest": prefix + f.name, "help": md["help"]}
        if isinstance(default, bool):
            if default and "flag" not in md:
                flag = "--no-" + f.name.replace("_", "-")
                # the field's help says what True does; the flag turns it off and must say so
                if "help_no" not in md:
                    raise ValueError(f"{cls.__name__}.{f.name} defaults to True, so its flag is {flag}: give "
                                     "metadata 'help_no', the help of that flag (what turning it off does)")
                kw["help"] = md["help_no"]
            group.add_argument(flag, action="store_const", const=not default, default=default, **kw)
            continue
        if md.get("append"):
            group.add_argument(flag, action="append", default=[], metavar=md.get("metavar"), **kw)
            continue
        choices = md.get("choices")
        if callable(choices):
            choices = list(choices())
        conv = md.get("type") or (type(default) if default is not None else str)
        if choices is not None:
            kw["choices"] = list(choices)
        else:
            kw["metavar"] = md.get("metavar") or {int: "N", float: "X"}.get(conv, "TEXT")
        if default is not None and not md.get("no_default_in_help") and "(default" not in md["help"]:
            kw["help"] = f"{md['help']} (default {default})"
        group.add_argument(flag, type=conv, default=default, **kw)


def from_flags(cls: type[T], args: argparse.Namespace, *, prefix: str = "", skip: Iterable[str] = (),
               **extra: Any) -> T:
    """``cls`` built from the flags :func:`add_flags` added (plus ``extra`` fields).

    Raises:
        ValueError: from ``cls.__post_init__`` when the values are invalid.
    """
    values: dict[str, Any] = {}
    for f in flag_fields(cls, skip):
        v = getattr(args, prefix + f.name)
        if f.metadata.get("append"):
            v = tuple(v)
        values[f.name] = v
    values.update(extra)
    return cls(**values)
