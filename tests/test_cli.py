"""The ``crl`` entry point as a user meets it: help and version, flags that refuse what they
cannot read, and setup errors (an unwritable --out, a bad config) as one line before any work."""

from __future__ import annotations

import json

import pytest
from cli_run import crl, one_error_line


def test_crl_help_is_for_users_and_version_is_there():
    r = crl("--help")
    assert r.returncode == 0
    assert "arXiv 2602.12036" in r.stdout and "a first run:" in r.stdout and "export" in r.stdout
    assert "A command module defines" not in r.stdout and "thin" not in r.stdout
    v = crl("--version")
    assert v.returncode == 0 and v.stdout.startswith("crl (composition-rl) ")


def test_help_texts_say_what_the_flags_do():
    r = crl("reproduce", "--help")
    assert "95% intervals" in r.stdout and "95%%" not in r.stdout
    r = crl("compose", "--help")
    flat = " ".join(r.stdout.split())
    assert "--no-prefer-integer rank constants by their structural rank alone" in flat


@pytest.mark.parametrize("argv", [
    ("score", "--input", "{inp}", "--out", "/proc/crl/x.jsonl"),
    ("compose", "--input", "{inp}", "--out", "/proc/crl/x"),
    ("export", "--input", "{inp}", "--out", "/proc/crl/x"),
    ("verl-recipe", "--stages", "{inp}", "--model", "m", "--out", "/proc/crl/x"),
])
def test_an_unwritable_out_is_one_line_before_any_work(math300, argv):
    r = crl(*[a.replace("{inp}", str(math300["math300.jsonl"])) for a in argv])
    assert r.returncode == 2
    line = one_error_line(r)
    assert "/proc/crl/x" in line and "--out" in line


@pytest.mark.slow
def test_out_under_a_file_and_other_setup_errors_are_one_line(math300, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(json.dumps({"question": "X=5+3. Y=X-2. Y-4=?", "answer": "2"}) + "\n")
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("model: [runs/nope\n  bad: : yaml\n")
    (tmp_path / "runs").mkdir()
    no_model = tmp_path / "t.yaml"
    no_model.write_text(f"model: {tmp_path}/runs/nope\noutput_dir: {tmp_path}/tr\nstages:\n  - name: a\n"
                        "    max_steps: 2\n    arithmetic: {depth: 1, n: 8}\n")
    dead = "m@http://127.0.0.1:9/v1"
    cases = [
        (("profile", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--input", str(seeds), "--out",
          str(afile / "p")), "is a file, not a folder"),
        (("eval", "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--benchmark", str(seeds), "--out",
          str(afile / "p")), "is a file, not a folder"),
        (("grow", "--input", str(seeds), "--policy", dead, "--out", str(afile / "g")), "is a file, not a folder"),
        (("audit", str(tmp_path), "--out", str(afile / "a.html")), "is a file, not a folder"),
        (("browse", str(tmp_path), "--out", str(afile / "r.html")), "is a file, not a folder"),
        (("train", "--config", str(bad_yaml)), "not valid YAML at line 2, column 6"),
        (("train", "--config", str(no_model)), "no such model folder"),
    ]
    for argv, needle in cases:
        r = crl(*argv, timeout=300)
        assert r.returncode == 2, (argv, r.stderr[-2000:])
        assert needle in one_error_line(r), argv
    r = crl("grow", "--input", str(seeds), "--policy", dead, "--out", str(tmp_path / "g2"), "--no-progress",
            "--max-tokens", "16", "-n", "1", timeout=600)
    assert r.returncode == 1 and "http://127.0.0.1:9/v1" in one_error_line(r)


def test_grow_refuses_a_negative_limit_and_a_yes_no_value_it_cannot_read(tmp_path):
    from composition_rl.cli import build_parser

    for flag, value, needle in (("--limit", "-1", "-1 must be >= 1"),
                                ("--hide-parent-answer", "maybe", "is not a yes/no value")):
        r = crl("grow", "--input", "x.jsonl", "--policy", "p", "--out", str(tmp_path / "g"), flag, value)
        assert r.returncode == 2 and needle in r.stderr and not (tmp_path / "g").exists()
    args = build_parser("grow").parse_args(["grow", "--input", "x", "--policy", "p", "--out", "o",
                                            "--hide-parent-answer", "on"])
    assert args.cfg_hide_parent_answer is True
    r = crl("profile", "--model", "m", "--input", "x.jsonl", "--out", str(tmp_path / "p"), "--limit", "-1")
    assert r.returncode == 2 and "-1 must be >= 1" in r.stderr  # the same slice in profile/eval
