"""The run-folder contract (``composition_rl.io.runs``): every command that writes x each
hazard, each refused or safe.

Hazards: an output that is an input; an output inside another command's run; two runs at
once; an interrupted rerun; an empty result; the same model path with other weights; and a
refused run that must leave nothing behind. Commands run in-process (``cli.main``) on tiny
inputs; profile and eval talk to the fake OpenAI server, the weight cases use the tiny
random Qwen of ``tests/fakes``.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from fakes.openai_server import FakeOpenAIServer

from composition_rl.cli import main as crl

QA = [(f"Tom has {a} apples and buys {b} more. How many apples does he have now?", str(a + b))
      for a in range(2, 8) for b in range(3, 6)]


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every visible file of ``folder`` (recursively) with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


def run(capsys, *argv: str) -> tuple[int, str]:
    rc = crl([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.err + cap.out


@contextmanager
def held(lock: Path, who: str = "compose"):
    """The lock as a second running crl holds it (an flock on the lock file)."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"4242 {who}\n".encode())
        yield
    finally:
        os.close(fd)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One finished compose run (with exports), export run and profile run, copied per test."""
    root = tmp_path_factory.mktemp("built")
    qa = write_jsonl(root / "qa.jsonl", [{"problem": q, "answer": a} for q, a in QA])
    assert crl(["compose", "--input", str(qa), "--out", str(root / "compose"), "--workers", "1",
                "--max-candidates", "80", "--no-progress", "--export", "verl,trl"]) == 0
    assert crl(["export", "--input", str(qa), "--out", str(root / "export")]) == 0
    with FakeOpenAIServer(lambda body: "So the answer is $\\boxed{7}$.") as srv:
        assert crl(["profile", "--base-url", srv.url, "--model", "fake-model", "--input", str(qa), "-n", "1",
                    "--out", str(root / "profile"), "--no-progress"]) == 0
    return root


@pytest.fixture
def w(built, tmp_path):
    """A fresh copy of the built runs and inputs, for one test."""
    for name in ("compose", "export", "profile"):
        shutil.copytree(built / name, tmp_path / name)
    shutil.copy(built / "qa.jsonl", tmp_path / "qa.jsonl")
    write_jsonl(tmp_path / "rollouts.jsonl", [{"response": f"\\boxed{{{a}}}", "answer": a} for _, a in QA])
    write_jsonl(tmp_path / "words.jsonl", [{"problem": f"Name colour number {i} of the list.", "answer": c}
                                           for i, c in enumerate(["red", "blue", "green", "pink", "grey", "teal"])])
    return tmp_path


@pytest.fixture
def server():
    with FakeOpenAIServer(lambda body: "So the answer is $\\boxed{7}$.") as srv:
        yield srv


def train_yaml(w: Path, output_dir: Path, model: str) -> Path:
    shutil.copy(w / "export" / "problems.jsonl", w / "d1.jsonl")
    p = w / "train.yaml"
    p.write_text(f"preset: cpu-tiny\nmodel: {model}\noutput_dir: {output_dir}\n"
                 "stages:\n  - {name: d1, data: d1.jsonl, max_steps: 1}\n")
    return p


# --------------------------------------------------------------------------------------------
# 1. an output that is an input, or a file of another command's run
# --------------------------------------------------------------------------------------------
def _onto_input(w: Path, url: str) -> tuple[list[str], Path]:
    return {
        # finding 1: JSON figures / HTML written over the records
        "audit --scan --json RUN/composed.jsonl": (
            ["audit", w / "compose", "--scan", "--json", w / "compose" / "composed.jsonl"], w / "compose"),
        "browse RUN --out RUN/composed.jsonl": (
            ["browse", w / "compose", "--out", w / "compose" / "composed.jsonl"], w / "compose"),
        # finding 2: the kept prompts written over the input they were profiled from
        "profile --keep-out INPUT": (
            ["profile", "--base-url", url, "--model", "fake-model", "--input", w / "qa.jsonl", "-n", "1",
             "--out", w / "p2", "--no-progress", "--keep", "solve_none", "--keep-out", w / "qa.jsonl"], w),
        "audit --scan --json STATS of the run": (
            ["audit", w / "compose", "--scan", "--json", w / "compose" / "stats.json"], w / "compose"),
        "browse --out a profile's summary.json": (
            ["browse", w / "compose", "--out", w / "profile" / "summary.json"], w / "profile"),
        "profile --keep-out a compose run's composed.jsonl": (
            ["profile", "--base-url", url, "--model", "fake-model", "--input", w / "qa.jsonl", "-n", "1",
             "--out", w / "p3", "--no-progress", "--keep", "all", "--keep-out", w / "compose" / "composed.jsonl"],
            w / "compose"),
    }


ONTO_INPUT = list(_onto_input(Path("."), "").keys())


@pytest.mark.parametrize("case", ONTO_INPUT)
def test_an_output_onto_an_input_or_another_runs_file_is_refused(case, w, server, capsys):
    argv, guarded = _onto_input(w, server.url)[case]
    before = snapshot(guarded)
    rc, err = run(capsys, *argv)
    assert rc == 2, err
    assert "is also an input of this run" in err or "is a file of the `crl" in err, err
    assert snapshot(guarded) == before


# --------------------------------------------------------------------------------------------
# 2. --out is another command's run folder
# --------------------------------------------------------------------------------------------
def _foreign(w: Path, url: str) -> dict[str, tuple[list, Path]]:
    c, e, p = w / "compose", w / "export", w / "profile"
    return {
        # finding 8: 12 depth-1 rows as verl.parquet beside a depth-2 composed.jsonl
        "export --out COMPOSE": (["export", "--input", w / "qa.jsonl", "--out", c], c),
        # finding 9: eval overwrote the profile's run.json
        "eval --out PROFILE": (["eval", "--base-url", url, "--model", "fake-model", "--benchmark", w / "qa.jsonl",
                                "-n", "1", "--out", p, "--no-progress"], p),
        "profile --out COMPOSE": (["profile", "--base-url", url, "--model", "fake-model", "--input", w / "qa.jsonl",
                                   "-n", "1", "--out", c, "--no-progress"], c),
        "compose --out EXPORT": (["compose", "--input", w / "qa.jsonl", "--out", e, "--workers", "1",
                                  "--max-candidates", "20", "--no-progress"], e),
        "compose --from-profile P --out P": (["compose", "--input", w / "qa.jsonl", "--from-profile", p,
                                              "--select", "all", "--out", p, "--workers", "1", "--no-progress"], p),
        "grow --out COMPOSE": (["grow", "--input", w / "qa.jsonl", "--policy", "fake-model", "--teacher", "program",
                                "--out", c, "--no-progress"], c),
        "tiny-model --out COMPOSE": (["tiny-model", "--out", c, "--sft-steps", "0", "--no-progress"], c),
        "demo --out COMPOSE": (["demo", "--out", c, "--compose-only", "--max-candidates", "50", "--no-progress"], c),
        "verl-recipe --stages COMPOSE/verl.parquet --out COMPOSE": (
            ["verl-recipe", "--stages", c / "verl.parquet", "--model", "m", "--python", "python3", "--out", c], c),
        "reproduce --out PROFILE": (["reproduce", "--out", p, "--quick", "--no-progress"], p),
    }


FOREIGN = list(_foreign(Path("."), "").keys())


@pytest.mark.parametrize("case", FOREIGN)
def test_out_into_another_commands_run_is_refused(case, w, server, capsys):
    argv, guarded = _foreign(w, server.url)[case]
    before = snapshot(guarded)
    rc, err = run(capsys, *argv)
    assert rc == 2, err
    assert "run; `crl" in err or "is also --from-profile" in err, err
    assert snapshot(guarded) == before


def test_train_into_another_commands_run_is_refused(w, capsys):
    before = snapshot(w / "compose")
    rc, err = run(capsys, "train", "--config", train_yaml(w, w / "compose", str(w)))
    assert rc == 2 and "holds a `crl compose` run" in err, err
    assert snapshot(w / "compose") == before


# --------------------------------------------------------------------------------------------
# 3. two runs at once: the second meets a one-line refusal
# --------------------------------------------------------------------------------------------
def _busy(w: Path, url: str) -> dict[str, tuple[list, Path]]:
    q = w / "qa.jsonl"
    return {
        "compose (while export holds it)": (["compose", "--input", q, "--out", w / "o", "--workers", "1",
                                             "--max-candidates", "20", "--no-progress"], w / "o" / ".crl.lock"),
        # finding 8: export wrote verl.parquet while compose was writing the folder
        "export": (["export", "--input", q, "--out", w / "o"], w / "o" / ".crl.lock"),
        # finding 6: 80,000 rows for 40,000 inputs; 6 profile rows for 3 prompts
        "score": (["score", "--input", w / "rollouts.jsonl", "--out", w / "s.jsonl", "--workers", "1",
                   "--no-progress"], w / ".s.jsonl.lock"),
        "profile": (["profile", "--base-url", url, "--model", "fake-model", "--input", q, "-n", "1",
                     "--out", w / "o", "--no-progress"], w / "o" / ".crl.lock"),
        "eval": (["eval", "--base-url", url, "--model", "fake-model", "--benchmark", q, "-n", "1",
                  "--out", w / "o", "--no-progress"], w / "o" / ".crl.lock"),
        "audit --out": (["audit", w / "compose", "--sample", "3", "--out", w / "a.html"], w / ".a.html.lock"),
        "browse": (["browse", w / "compose"], w / "compose" / ".report.html.lock"),
        "verl-recipe": (["verl-recipe", "--stages", w / "export" / "verl.parquet", "--model", "m", "--python",
                         "python3", "--out", w / "o"], w / "o" / ".crl.lock"),
        "demo": (["demo", "--out", w / "o", "--compose-only", "--max-candidates", "50", "--no-progress"],
                 w / "o" / ".crl.lock"),
        "tiny-model": (["tiny-model", "--out", w / "o", "--sft-steps", "0", "--no-progress"], w / "o" / ".crl.lock"),
    }


BUSY = list(_busy(Path("."), "").keys())


@pytest.mark.parametrize("case", BUSY)
def test_a_second_run_at_once_is_refused_in_one_line(case, w, server, capsys):
    argv, lock = _busy(w, server.url)[case]
    folder = lock.parent
    before = snapshot(folder) if folder.exists() else {}
    with held(lock, "export" if case.startswith("compose") else "compose"):
        rc, err = run(capsys, *argv)
    assert rc == 2, err
    line = [x for x in err.splitlines() if "error:" in x]
    assert len(line) == 1 and "is in use by a running `crl " in line[0] and "(pid 4242)" in line[0], err
    assert (snapshot(folder) if folder.exists() else {}) == before


def test_the_lock_of_a_dead_run_is_taken_over(w, capsys):
    (w / "o").mkdir()
    (w / "o" / ".crl.lock").write_text("999999 export\n")  # its process is gone: no flock on it
    rc, err = run(capsys, "export", "--input", w / "qa.jsonl", "--out", w / "o")
    assert rc == 0, err
    assert (w / "o" / "problems.jsonl").exists()


@pytest.mark.slow
def test_a_second_train_at_once_is_refused(w, capsys, tiny_qwen):
    out = w / "t"
    with held(out / ".crl.lock"):
        rc, err = run(capsys, "train", "--config", train_yaml(w, out, str(tiny_qwen)), "--no-progress")
    assert rc == 2 and "is in use by a running `crl compose` (pid 4242)" in err, err
    assert sorted(p.name for p in out.iterdir()) == [".crl.lock"]


# --------------------------------------------------------------------------------------------
# 4. an interrupted rerun leaves the previous complete run as it was
# --------------------------------------------------------------------------------------------
def _interrupt_exports(monkeypatch):
    import composition_rl.jobs.export as io_export
    from composition_rl.jobs.compose import run as compose_run

    real = io_export.export
    calls = []

    def export(*a, **k):  # Ctrl-C while the second export is written
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(io_export, "export", export)
    monkeypatch.setattr(compose_run, "export", export, raising=False)
    return calls


def test_ctrl_c_in_a_compose_rerun_keeps_the_finished_run_and_its_exports(w, monkeypatch, capsys):
    """Finding 4: the rerun deleted the finished run's exports and kept its composed.jsonl."""
    before = snapshot(w / "compose")
    _interrupt_exports(monkeypatch)
    rc, err = run(capsys, "compose", "--input", w / "qa.jsonl", "--out", w / "compose", "--seed", "5",
                  "--workers", "1", "--max-candidates", "80", "--no-progress", "--export", "verl,trl")
    assert rc == 130, err
    assert snapshot(w / "compose") == before
    assert not list((w / "compose").glob(".crl-stage-*"))


def test_ctrl_c_in_an_export_rerun_keeps_the_finished_export(w, monkeypatch, capsys):
    before = snapshot(w / "export")
    write_jsonl(w / "other.jsonl", [{"problem": q, "answer": a} for q, a in QA[:5]])
    _interrupt_exports(monkeypatch)
    rc, err = run(capsys, "export", "--input", w / "other.jsonl", "--out", w / "export")
    assert rc == 130, err
    assert snapshot(w / "export") == before


# --------------------------------------------------------------------------------------------
# 5. an empty result leaves the previous complete run as it was
# --------------------------------------------------------------------------------------------
def test_a_compose_rerun_that_accepts_nothing_keeps_the_previous_run(w, capsys):
    """Finding 3: "0 of 132 accepted" replaced a 103-record composed.jsonl with an empty file."""
    before = snapshot(w / "compose")
    assert before["composed.jsonl"]
    rc, err = run(capsys, "compose", "--input", w / "words.jsonl", "--out", w / "compose", "--workers", "1",
                  "--no-progress", "--export", "verl")
    assert rc == 1 and "keeps the previous run as it was" in err, err
    assert snapshot(w / "compose") == before


def test_an_export_rerun_with_no_usable_row_keeps_the_previous_export(w, capsys):
    before = snapshot(w / "export")
    write_jsonl(w / "bad.jsonl", [{"problem": "no answer here"}] * 3)
    rc, err = run(capsys, "export", "--input", w / "bad.jsonl", "--out", w / "export")
    assert rc == 2, err
    assert snapshot(w / "export") == before


# --------------------------------------------------------------------------------------------
# 6. derived files go with what they were made from
# --------------------------------------------------------------------------------------------
def test_a_compose_rerun_removes_the_report_page_of_the_previous_run(w, capsys):
    assert run(capsys, "browse", w / "compose")[0] == 0
    assert (w / "compose" / "report.html").exists()
    rc, err = run(capsys, "compose", "--input", w / "qa.jsonl", "--out", w / "compose", "--seed", "3",
                  "--workers", "1", "--max-candidates", "40", "--no-progress")
    assert rc == 0, err
    assert not (w / "compose" / "report.html").exists()
    assert not (w / "compose" / "verl.parquet").exists()  # made from the replaced records


def test_browse_out_with_a_trailing_slash_writes_into_that_folder(w, capsys):
    rc, err = run(capsys, "browse", w / "compose", "--out", f"{w / 'pages'}/")
    assert rc == 0, err
    assert (w / "pages" / "report.html").is_file()


# --------------------------------------------------------------------------------------------
# 7. the same model path with other weights
# --------------------------------------------------------------------------------------------
@pytest.fixture
def tiny_qwen(tmp_path):
    from fakes.rollout_tiny_qwen import build_tiny_qwen

    return build_tiny_qwen(tmp_path / "tiny", seed=0, hidden=32, layers=1)


def _swap_weights(model: Path, tmp_path: Path) -> None:
    from fakes.rollout_tiny_qwen import build_tiny_qwen

    other = build_tiny_qwen(tmp_path / "other", seed=1, hidden=32, layers=1)
    for f in other.glob("*.safetensors"):
        shutil.copy(f, model / f.name)  # new weights, same folder, same names


@pytest.mark.slow
@pytest.mark.parametrize("command", ["profile", "eval"])
def test_new_weights_in_the_same_folder_are_not_resumed_as_the_old(command, w, tiny_qwen, capsys):
    """Finding 7: the samples of the old weights were reused for the new ones."""
    flag = "--input" if command == "profile" else "--benchmark"
    argv = [command, "--model", tiny_qwen, flag, w / "qa.jsonl", "--limit", "2", "-n", "1", "--max-tokens", "4",
            "--device", "cpu", "--out", w / "o", "--no-progress"]
    rc, err = run(capsys, *argv)
    assert rc in (0, 1), err
    before = snapshot(w / "o")
    _swap_weights(tiny_qwen, w)
    rc, err = run(capsys, *argv)
    assert rc == 2 and "model_content" in err, err
    assert snapshot(w / "o") == before


def test_model_content_follows_the_bytes_not_the_path(tmp_path):
    from composition_rl.io.identity import model_content

    m = tmp_path / "m"
    m.mkdir()
    (m / "model.safetensors").write_bytes(b"a" * 100)
    (m / "config.json").write_text("{}")
    (m / "notes.txt").write_text("x")
    a = model_content(m)
    (m / "notes.txt").write_text("y")  # not a model file
    assert model_content(m) == a
    (m / "model.safetensors").write_bytes(b"b" * 100)  # same name and size, other bytes
    assert model_content(m) != a
    g = tmp_path / "q.gguf"
    g.write_bytes(b"GGUF1")
    b = model_content(g)
    g.write_bytes(b"GGUF2")
    assert model_content(g) != b
    assert model_content("Qwen/Qwen3-4B") is None  # a hub name: by name only


# --------------------------------------------------------------------------------------------
# 8. a refused run leaves nothing behind
# --------------------------------------------------------------------------------------------
def test_train_with_a_missing_model_fails_fast_and_leaves_no_folder(w, capsys, monkeypatch):
    """Finding 12: a minute of hub retries, then config.json and run.json were left behind."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = w / "runs" / "t"
    t0 = time.monotonic()
    rc, err = run(capsys, "train", "--config", train_yaml(w, out, "nowhere/tiny"), "--no-progress")
    assert rc == 2 and "nowhere/tiny" in err, err
    assert time.monotonic() - t0 < 30
    assert not out.exists()


@pytest.mark.parametrize("model", ["./runs/nope", "a/b/c", "~/nope-model"])
def test_a_missing_local_model_path_is_refused_at_once(model, monkeypatch):
    from composition_rl.io.runs import check_model_source

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(ValueError, match="no such model folder"):
        check_model_source(model)


def test_a_hub_name_not_in_the_cache_is_refused_offline(monkeypatch, tmp_path):
    from composition_rl.io.runs import check_model_source

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ValueError, match="HF_HUB_OFFLINE is set"):
        check_model_source("someorg/not-a-model")


def test_a_refused_profile_leaves_no_folder(w, capsys):
    write_jsonl(w / "bad.jsonl", [{"problem": "no answer here"}] * 3)
    rc, err = run(capsys, "profile", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--input",
                  w / "bad.jsonl", "--out", w / "new", "--no-progress")
    assert rc == 2, err
    assert not (w / "new").exists()


def test_the_contract_modules_doctests_pass():
    import doctest

    import composition_rl.io.files as files
    import composition_rl.io.identity as identity
    import composition_rl.io.runs as runs

    for mod in (runs, identity, files):
        assert doctest.testmod(mod).failed == 0, mod.__name__


# --------------------------------------------------------------------------------------------
# issue 52: the findings one step outside the matrix above (each test failed on 5f93223)
# --------------------------------------------------------------------------------------------
def test_a_refused_run_never_removes_the_lock_or_folder_of_a_live_run(w, monkeypatch, capsys):
    """Finding 1: run B finds no folder, run A makes and locks it, B is refused as busy and
    must not remove A's lock and folder (a third run would then lock it beside A)."""
    from contextlib import ExitStack

    from composition_rl.io import runs

    out, real = w / "o", runs.hold_lock
    a = ExitStack()

    def hold(target, command, **kw):
        if not a._exit_callbacks:  # A starts between B's look at the folder and B's lock
            a.enter_context(real(target, "export", **kw))
        return real(target, command, **kw)

    monkeypatch.setattr(runs, "hold_lock", hold)
    rc, err = run(capsys, "export", "--input", w / "qa.jsonl", "--out", out)
    monkeypatch.setattr(runs, "hold_lock", real)
    try:
        assert rc == 2 and "in use by a running `crl export`" in err, err
        assert (out / ".crl.lock").exists(), "the refused run removed the live run's lock"
        with pytest.raises(runs.RunBusy), real(out, "compose"):  # a third run still meets A's lock
            pass
    finally:
        a.close()


def test_a_file_lock_is_never_held_by_two_runs(tmp_path, monkeypatch):
    """Finding 2: B opens the lock file, A ends (removing it), B locks the removed file; a
    third run C must still find the lock held (before: C locked a new file beside B's)."""
    import fcntl as real_fcntl
    from contextlib import ExitStack

    from composition_rl.io import runs

    target = tmp_path / "scored.jsonl"
    a = ExitStack()
    a.enter_context(runs.hold_lock(target, "score", folder=False))

    class Fcntl:
        LOCK_EX, LOCK_NB, LOCK_UN = real_fcntl.LOCK_EX, real_fcntl.LOCK_NB, real_fcntl.LOCK_UN

        @staticmethod
        def flock(fd, op):
            a.close()  # A ends after B opened the file, before B locks it
            return real_fcntl.flock(fd, op)

    monkeypatch.setattr(runs, "fcntl", Fcntl)
    with runs.hold_lock(target, "browse", folder=False):
        monkeypatch.setattr(runs, "fcntl", real_fcntl)
        with pytest.raises(runs.RunBusy), runs.hold_lock(target, "audit", folder=False):
            pass


def test_a_bad_line_in_the_middle_of_a_log_loses_nothing_after_it(tmp_path, caplog):
    """Finding 3: lines a, <bad>, c, d kept only a; now a, c, d stay (in order), the bad line
    goes to NAME.jsonl.quarantined with its reason, and a torn last line is still cut."""
    from composition_rl.io.files import JsonlLog

    p = tmp_path / "profile.jsonl"
    p.write_bytes(b'{"id":"a"}\n{"id": "b\n{"id":"c"}\n[1]\n{"id":"d"}\n{"id":"e"')
    with caplog.at_level(logging.INFO, logger="composition_rl"), JsonlLog(p, key="id") as log:
        assert log.done == {"a", "c", "d"}
        assert log.append({"id": "b"})
    assert p.read_bytes() == b'{"id":"a"}\n{"id":"c"}\n{"id":"d"}\n{"id":"b"}\n'
    bad = [json.loads(x) for x in (tmp_path / "profile.jsonl.quarantined").read_text().splitlines()]
    assert [(b["line"], b["text"]) for b in bad] == [(2, '{"id": "b'), (4, "[1]")]
    assert all(b["reason"] for b in bad)
    assert "moved to" in caplog.text


def test_a_profile_rerun_after_a_garbled_line_asks_only_for_that_prompt(w, capsys):
    """Finding 3 at the command: the rows after a damaged line are paid model calls; the
    rerun asks the model once, for the damaged prompt's row only."""
    out = w / "profile"
    lines = (out / "profile.jsonl").read_bytes().splitlines(keepends=True)
    (out / "profile.jsonl").write_bytes(b"".join(lines[:2] + [b'{"id": "x\n'] + lines[3:]))
    with FakeOpenAIServer(lambda body: "So the answer is $\\boxed{7}$.") as srv:
        rc, err = run(capsys, "profile", "--base-url", srv.url, "--model", "fake-model", "--input", w / "qa.jsonl",
                      "-n", "1", "--out", out, "--no-progress")
        asked = srv.requests
    assert rc == 0, err
    assert asked == 1, f"the rerun asked {asked} times for 1 damaged row"
    assert sorted((out / "profile.jsonl").read_bytes().splitlines()) == sorted(x.rstrip(b"\n") for x in lines)


def test_a_compose_that_finds_no_chain_leaves_no_folder(w, capsys):
    """Finding 5: one problem makes no depth-2 chain; the refused run leaves no folder (it
    left .crl.lock, an empty composed.jsonl, stats.json and run.json)."""
    one = write_jsonl(w / "one.jsonl", [{"problem": QA[0][0], "answer": QA[0][1]}])
    rc, err = run(capsys, "compose", "--input", one, "--out", w / "new" / "c", "--workers", "1", "--no-progress")
    assert rc == 1 and "no candidate chain" in err, err
    assert not (w / "new").exists()


def test_a_refused_score_leaves_no_files_and_the_rerun_scores(w, capsys):
    """Finding 5: a score refused for an empty input left empty output, rejects and options
    files, and the rerun with good input was then refused until --fresh."""
    (w / "empty.jsonl").write_text("")
    rc, err = run(capsys, "score", "--input", w / "empty.jsonl", "--out", w / "s.jsonl", "--workers", "1",
                  "--no-progress")
    assert rc == 2 and "holds no rows" in err, err
    assert sorted(p.name for p in w.glob("s.*")) == []
    rc, err = run(capsys, "score", "--input", w / "rollouts.jsonl", "--out", w / "s.jsonl", "--workers", "1",
                  "--no-progress")
    assert rc == 0, err
    assert len((w / "s.jsonl").read_text().splitlines()) == len(QA)


def test_the_probe_fold_is_replaced_whole_or_not_at_all(w, monkeypatch):
    """Finding 6: apply_to_run rewrote rejected, composed, stats and the exports one at a
    time; a failure in the last one left composed.jsonl probed but stats.json not."""
    import composition_rl.jobs.export as io_export
    from composition_rl.io.readers import ReaderConfig, load_problems
    from composition_rl.jobs.probe import ProbeResult, apply_to_run

    out = w / "compose"
    records = load_problems(str(out / "composed.jsonl"), ReaderConfig()).problems
    before = snapshot(out)
    result = ProbeResult(kept=records[1:], rejected=[{"id": records[0].id, "reason": "guessable"}], unprobed=[],
                         summary={"rejected_guessable": 1})

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(io_export, "export", boom)
    with pytest.raises(OSError, match="disk full"):
        apply_to_run(out, result, ["verl"])
    assert snapshot(out) == before


def test_the_library_profile_takes_the_lock_and_refuses_another_commands_folder(w, server):
    """Finding 6: ``crl.profile`` took no lock and checked no foreign folder: it wrote a
    profile into a compose run and beside a running profile."""
    import composition_rl as crl
    from composition_rl.io.readers import ReaderConfig, load_problems
    from composition_rl.io.runs import RunBusy, RunClash

    problems = load_problems(str(w / "qa.jsonl"), ReaderConfig()).problems[:2]
    before = snapshot(w / "compose")
    with pytest.raises(RunClash, match="holds a `crl compose` run"):
        crl.profile(problems, w / "compose", base_url=server.url, model="fake-model")
    assert snapshot(w / "compose") == before
    with held(w / "p" / ".crl.lock", "profile"), pytest.raises(RunBusy):
        crl.profile(problems, w / "p", base_url=server.url, model="fake-model")
    assert not (w / "p" / "profile.jsonl").exists()


def test_atomic_writes_never_touch_the_umask(tmp_path, monkeypatch):
    """Finding 10: atomic_open set the process umask to 0 for a moment (racy with threads);
    the file still gets 0666 less the umask."""
    from composition_rl.io.files import atomic_write_json

    calls = []
    real = os.umask
    old = real(0o027)
    try:
        monkeypatch.setattr(os, "umask", lambda m: calls.append(m) or real(m))
        atomic_write_json(tmp_path / "a.json", {"a": 1})
    finally:
        real(old)
    assert calls == []
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640


def test_a_rerun_keeps_a_report_html_crl_did_not_write(w, capsys):
    """Finding 10: run_folder removed any report.html of --out, a user's own page included;
    only a page crl browse wrote goes."""
    (w / "export" / "report.html").write_text("<html>my notes on this export</html>\n")
    rc, err = run(capsys, "export", "--input", w / "qa.jsonl", "--out", w / "export")
    assert rc == 0, err
    assert (w / "export" / "report.html").read_text() == "<html>my notes on this export</html>\n"


@pytest.mark.parametrize("name", ["profile.jsonl", "run.json", "summary.json"])
def test_keep_out_onto_the_runs_own_files_is_refused(name, w, server, capsys):
    """Finding 11: --keep-out R/profile.jsonl overwrote the run's own pass rates (the next
    profile and compose --from-profile then crashed: KeyError 'class'); R/run.json left a
    run that could not be resumed."""
    before = snapshot(w / "profile")
    rc, err = run(capsys, "profile", "--base-url", server.url, "--model", "fake-model", "--input", w / "qa.jsonl",
                  "-n", "1", "--out", w / "profile", "--no-progress", "--keep", "all", "--keep-out",
                  w / "profile" / name)
    assert rc == 2 and "--keep-out" in err and "this run's own folder" in err, err
    assert snapshot(w / "profile") == before


USERS = {"stats.json": '{"mine": true}\n', "rejected.jsonl": '{"mine": 1}\n', "problems.jsonl": '{"mine": 2}\n',
         "notes.txt": "notes\n"}


@pytest.mark.parametrize("command", ["compose", "export"])
@pytest.mark.parametrize("out", [".", "", "mine"])
def test_out_into_a_folder_of_the_users_own_files_is_refused(command, out, w, monkeypatch, capsys):
    """Finding 12: `--out .` (or `--out ""`, the current folder) in a folder of one's own
    stats.json, rejected.jsonl, problems.jsonl overwrote them without a word."""
    mine = w / "mine"
    mine.mkdir()
    for name, text in USERS.items():
        (mine / name).write_text(text)
    monkeypatch.chdir(mine)
    argv = {"compose": ["compose", "--input", w / "qa.jsonl", "--out", out, "--workers", "1", "--max-candidates",
                        "20", "--no-progress"],
            "export": ["export", "--input", w / "qa.jsonl", "--out", out]}[command]
    rc, err = run(capsys, *[str(mine) if a == "mine" else a for a in argv])
    assert rc == 2, err
    assert ("files crl did not make" in err) if out else ("--out is empty" in err), err
    assert snapshot(mine) == {k: v.encode() for k, v in USERS.items()}


def test_out_at_the_root_is_refused(w, capsys):
    """Finding 12: `--out /` wrote into / (not run on the old code: it would)."""
    before = sorted(os.listdir("/"))
    rc, err = run(capsys, "export", "--input", w / "qa.jsonl", "--out", "/")
    assert rc == 2 and "files crl did not make" in err, err
    assert sorted(os.listdir("/")) == before


@pytest.mark.parametrize("target", ["samples/qa.jsonl", "samples/new.html"])
def test_browse_out_into_a_runs_subfolder_is_refused(target, w, server, capsys):
    """Finding 13: browse --out RUN/samples/qa.jsonl replaced an eval's per-sample responses
    with HTML (a run's top-level files were protected, its subfolders not)."""
    e = w / "eval"
    assert run(capsys, "eval", "--base-url", server.url, "--model", "fake-model", "--benchmark", w / "qa.jsonl",
               "-n", "1", "--out", e, "--no-progress")[0] == 0
    before = snapshot(e)
    rc, err = run(capsys, "browse", w / "compose", "--out", e / target)
    assert rc == 2 and "is inside the `crl eval` run" in err, err
    assert snapshot(e) == before


def test_an_output_onto_a_file_crl_did_not_write_is_refused(w, capsys):
    """Found by the harness: `audit --json` onto an input of other runs (a file crl did not
    write) replaced it; a file crl wrote (the audit's own figures) is replaced."""
    data = w / "qa.jsonl"
    before = data.read_bytes()
    rc, err = run(capsys, "audit", w / "compose", "--scan", "--json", data)
    assert rc == 2 and "a file crl did not write" in err, err
    assert data.read_bytes() == before
    assert run(capsys, "audit", w / "compose", "--scan", "--json", w / "scan.json")[0] == 0
    assert run(capsys, "audit", w / "compose", "--scan", "--json", w / "scan.json")[0] == 0


def test_compose_checks_the_folder_again_once_it_holds_the_lock(w, monkeypatch, capsys):
    """Found by the harness: an export that took a new folder between compose's checks and
    its lock was mixed with the compose run (compose did not look again under the lock)."""
    from composition_rl.jobs.compose import run as compose_run

    out, real, done = w / "o", compose_run.hold_lock, []

    def hold(target, command, **kw):
        if not done:
            done.append(crl(["export", "--input", str(w / "qa.jsonl"), "--out", str(out)]))
        return real(target, command, **kw)

    monkeypatch.setattr(compose_run, "hold_lock", hold)
    rc, err = run(capsys, "compose", "--input", w / "qa.jsonl", "--out", out, "--workers", "1",
                  "--max-candidates", "20", "--no-progress")
    assert done == [0]
    assert rc == 2 and "holds a `crl export` run" in err, err
    assert not (out / "composed.jsonl").exists()
