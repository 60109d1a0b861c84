"""Every command's options: help that says what each does and its default, single-value
options given once, and numeric settings bounded with a one-line error."""

from __future__ import annotations

import argparse

import pytest

from composition_rl.cli import COMMANDS, build_parser, main


def _command_parser(name: str) -> argparse.ArgumentParser:
    root = build_parser(only=name)
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _options(name: str):
    p = _command_parser(name)
    fmt = p._get_formatter()
    for a in p._actions:
        if isinstance(a, argparse._HelpAction) or not a.option_strings:
            continue
        yield a, fmt._expand_help(a) if a.help else ""


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_option_has_help(command):
    """Breaks when an option is added without help text (``--temperature`` had none)."""
    missing = [a.option_strings[0] for a, text in _options(command) if not text.strip()]
    assert not missing, f"crl {command}: options without help: {missing}"


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_default_is_shown(command):
    """An option that has a default value shows it in --help (switches are off by default,
    options without a value are not used when left out)."""
    hidden = []
    for a, text in _options(command):
        if a.default in (None, argparse.SUPPRESS, []) or a.required or a.nargs == 0:
            continue
        if "default" not in text.lower():
            hidden.append(f"{a.option_strings[0]} (default {a.default!r})")
    assert not hidden, f"crl {command}: defaults not shown: {hidden}"


def test_the_help_names_the_default_value():
    text = dict((a.option_strings[0], t) for a, t in _options("profile"))
    assert "(default 0.6)" in text["--temperature"]
    assert "(default 4096)" in text["--max-tokens"]
    assert "csv" in text["--input"]


@pytest.mark.parametrize("argv", [
    ["profile", "--model", "m", "--input", "a.jsonl", "--input", "b.jsonl", "--out", "o"],
    ["score", "--input", "a.jsonl", "--out", "o.jsonl", "--out", "p.jsonl"],
    ["compose", "--input", "a.jsonl", "--input", "b.jsonl", "--out", "o"],
    ["export", "--input", "a.jsonl", "--input", "b.jsonl", "--out", "o"],
])
def test_a_single_value_option_given_twice_is_refused(argv, capsys):
    """``--input a --input b`` used to drop ``a`` without a word."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "given twice" in err and ("a.jsonl" in err or "o.jsonl" in err)


def test_repeatable_options_still_repeat():
    args = build_parser(only="eval").parse_args(
        ["eval", "--model", "m", "--benchmark", "a.json", "--benchmark", "b.json", "--out", "o"])
    assert args.benchmark == ["a.json", "b.json"]
    assert not hasattr(args, "_crl_given_options")


@pytest.mark.parametrize("argv, says", [
    (["score", "--input", "{resp}", "--out", "{out}/s.jsonl", "--timeout", "1e9"], "--timeout must be a number in (0, 3600]"),
    (["score", "--input", "{resp}", "--out", "{out}/s.jsonl", "--workers", "100000"], "--workers must be an int in [1, 1024]"),
    (["profile", "--model", "{out}/m", "--input", "{qa}", "--out", "{out}/p", "-n", "100000000"], "n=100000000 (must be in [1, 1024])"),
    (["profile", "--model", "{out}/m", "--input", "{qa}", "--out", "{out}/p", "--max-tokens", "10000000000"], "max_tokens=10000000000"),
    (["profile", "--model", "{out}/m", "--input", "{qa}", "--out", "{out}/p", "--temperature", "nan"], "temperature=nan"),
    (["eval", "--model", "{out}/m", "--benchmark", "{qa}", "--out", "{out}/p", "-n", "5000"], "n=5000 must be in [1, 1024]"),
    (["compose", "--input", "{qa}", "--out", "{out}/c", "--workers", "100000"], "workers=100000 must be in [0, 1024]"),
    (["compose", "--input", "{qa}", "--out", "{out}/c", "--depth", "100000"], "depth=100000 must be <= 16"),
])
def test_absurd_numbers_fail_in_one_line_and_leave_nothing(argv, says, tmp_path, capsys):
    """``--timeout 1e9`` was an OverflowError traceback, ``-n 100000000`` a 2 TB allocation
    that left an empty profile.jsonl, ``--workers 100000`` forked without end."""
    qa = tmp_path / "qa.jsonl"
    qa.write_text('{"question": "What is 1+1?", "answer": "2"}\n{"question": "What is 2+3?", "answer": "5"}\n')
    resp = tmp_path / "resp.jsonl"
    resp.write_text('{"response": "\\\\boxed{2}", "answer": "2"}\n')
    out = tmp_path / "out"
    out.mkdir()
    argv = [a.format(qa=qa, resp=resp, out=out) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert list(out.iterdir()) == []
