"""Library code says what it did through ``logging`` (a logger per module, all under
``composition_rl``); only ``crl`` shows those notes on stderr (``logs.show_logs``). A library
user sees nothing unless they attach a handler of their own, and then gets every note."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

from cli_run import REPO, crl

from composition_rl.cli import main
from composition_rl.io.files import JsonlLog
from composition_rl.logs import _Stderr

#: a library call that notes something: a log with a damaged line, read back
_DAMAGED = b'{"id":"a"}\n[1]\n{"id":"b"}\n'


def test_a_library_note_reaches_a_handler_of_the_users_own(tmp_path):
    seen: list[tuple[str, str, str]] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.name, record.levelname, record.getMessage()))

    (tmp_path / "log.jsonl").write_bytes(_DAMAGED)
    logger, keep = logging.getLogger("composition_rl"), Keep(logging.INFO)
    level = logger.level
    logger.addHandler(keep)
    logger.setLevel(logging.INFO)
    try:
        with JsonlLog(tmp_path / "log.jsonl", key="id") as log:
            assert log.done == {"a", "b"}
    finally:
        logger.removeHandler(keep)
        logger.setLevel(level)
    assert [(n, lv) for n, lv, _ in seen] == [("composition_rl.io.files", "WARNING")]
    assert seen[0][2].startswith("note: 1 unreadable line(s) of ") and "moved to" in seen[0][2]


def test_the_library_prints_nothing_without_the_command_line(tmp_path):
    """In a fresh process (no ``crl`` main has run), notes of two modules go nowhere."""
    (tmp_path / "log.jsonl").write_bytes(_DAMAGED)
    (tmp_path / "rows.jsonl").write_text(json.dumps({"problem": "What is 1+1?", "answer": "2"}) + "\n{bad json\n")
    code = ("import sys, pathlib\n"
            "from composition_rl.io.files import JsonlLog\n"
            "from composition_rl.jobs.train.data import read_problems\n"
            "d = pathlib.Path(sys.argv[1])\n"
            "with JsonlLog(d / 'log.jsonl', key='id') as log:\n"
            "    assert log.done == {'a', 'b'}\n"
            "assert len(read_problems(d / 'rows.jsonl')) == 1\n")
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert (r.stdout, r.stderr) == ("", "")
    assert (tmp_path / "log.jsonl.quarantined").is_file()  # the note was due: the work was done


def test_crl_shows_a_library_note_on_stderr(tmp_path):
    """``run_folder`` removes the stale page of a folder and says so; ``crl`` shows it as it did."""
    (tmp_path / "qa.jsonl").write_text(json.dumps({"question": "What is 1+1?", "answer": "2"}) + "\n")
    out = tmp_path / "o"
    argv = ["export", "--input", str(tmp_path / "qa.jsonl"), "--out", str(out), "--format", "trl"]
    assert crl(*argv).returncode == 0
    (out / "report.html").write_text("<html><title>crl browse: o</title></html>")
    r = crl(*argv)
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines() == [f"note: removed {out / 'report.html'} (it showed the folder before this run; "
                                     f"`crl browse {out}` writes it again)"]


def test_main_attaches_one_handler_however_often_it_runs(tmp_path, capsys):
    qa = tmp_path / "qa.jsonl"
    qa.write_text(json.dumps({"question": "What is 1+1?", "answer": "2"}) + "\n")
    for _ in range(2):
        assert main(["export", "--input", str(qa), "--out", str(tmp_path / "o"), "--format", "trl"]) == 0
        (tmp_path / "o" / "report.html").write_text("<title>crl browse: o</title>")
    assert sum(isinstance(h, _Stderr) for h in logging.getLogger("composition_rl").handlers) == 1
    err = capsys.readouterr().err  # the handler writes to the stderr of the moment (here the capture)
    assert err.count("note: removed ") == 1, err
