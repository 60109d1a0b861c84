"""A fault-injection harness for the run-folder contract (docs/runs.md, ``io/runs.py``).

A seeded random sequence of operations on one shared world of folders:

- every writing command (``compose``, ``export``, ``score``, ``profile``, ``eval``,
  ``browse``, ``audit``) run in-process (``cli.main``), its ``--out`` / ``--keep-out`` /
  ``--json`` drawn from: shared run folders, new folders, a folder of the user's own files,
  the inputs' folder, ``.`` and ``""`` (the current folder is the user's), another run's
  files and its subfolders, an input file;
- interleavings: two or three runs on one target in threads, switched by a seeded
  scheduler at every step of the locking code (open, ``flock``, close, folder checks), so
  the races of the lock (a refused run's clean-up, a lock file unlinked while held) are
  drawn like any other choice;
- kills: a run in a subprocess, stopped by SIGINT or SIGKILL after a random delay;
- damage to a log: a line in the middle of a ``profile.jsonl`` made undecodable, or its last
  line torn, then the run's rerun.

After every operation the invariants are checked:

1. no input changed; 2. no file crl did not make changed (the user's folder);
3. no file of another run changed (only the operation's own outputs may change);
4. a refused run leaves nothing (no new file or folder, but the diagnostics its message
   names); 5. no run crashed (a traceback); 6. two runs never held one lock at once;
7. a rerun of a finished (or killed, or damaged) run finishes the job (rc 0), with the
   rows of a clean run, none lost or twice, and no finished model call made again.

A violation is printed with the seed, the operation (an interleaving with its schedule, a
kill with its signal and delay), the command lines of the earlier operations that touched
the same paths (the reproduction to try first, by hand), and the command that replays the
whole sequence up to it (the RNG makes it the same sequence; a kill's timing is the one
thing that varies). Shared by ``tests/test_fault_harness.py`` (a short
seeded run in the fast suite, a long one in ``make test``) and ``scripts/fault_harness.py``
(``--seed S --ops N`` for long runs). The scheduler of the interleavings and its hooks into
the locking code are in ``fault_scheduler.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from fault_scheduler import Scheduler, scheduled_locking, thread_crl  # noqa: E402

QA = [(f"Tom has {a} apples and buys {b} more. How many apples does he have now?", str(a + b))
      for a in range(2, 8) for b in range(3, 6)]
WORDS = [(f"Name colour number {i} of the list.", c) for i, c in enumerate(["red", "blue", "green", "pink"])]
USER_FILES = {  # a user's own folder: names crl also writes, and others
    "notes.txt": "my notes\n", "stats.json": '{"mine": true}\n', "rejected.jsonl": '{"mine": 1}\n',
    "problems.jsonl": '{"mine": 2}\n', "report.html": "<html>my own page</html>\n", "data.csv": "a,b\n1,2\n",
}
SLOTS = ("r0", "r1", "r2", "r3")  # run folders every command may aim at
FILE_SLOTS = ("s0.jsonl", "s1.jsonl", "page.html", "scan.json")  # file outputs outside any run


def _write_jsonl(path: Path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


# ---------------------------------------------------------------------------------------
# operations
# ---------------------------------------------------------------------------------------
@dataclass
class Op:
    n: int
    kind: str  # run | interleave | kill | damage
    argvs: list[list[str]]
    cwd: str | None = None
    outs: list[str] = field(default_factory=list)  # paths (relative to the world) it may change
    note: str = ""

    def lines(self) -> list[str]:
        pre = f"(cd {self.cwd} && " if self.cwd else ""
        return [f"{pre}crl {shlex.join(a)}{')' if self.cwd else ''}" for a in self.argvs]


@dataclass
class Violation:
    n: int
    invariant: str
    detail: str
    op: Op


class World:
    """The shared folders: ``in/`` (inputs), ``user/`` (files crl did not make), ``runs/``."""

    def __init__(self, root: Path, url: str, server) -> None:
        self.root, self.url, self.server = root, url, server
        (root / "in").mkdir(parents=True)
        _write_jsonl(root / "in" / "qa.jsonl", [{"problem": q, "answer": a} for q, a in QA])
        _write_jsonl(root / "in" / "words.jsonl", [{"problem": q, "answer": a} for q, a in WORDS])
        (root / "in" / "empty.jsonl").write_text("")
        _write_jsonl(root / "in" / "rollouts.jsonl",
                     [{"response": f"so \\boxed{{{a if i % 3 else 0}}}", "answer": a} for i, (_, a) in enumerate(QA)]
                     + [{"response": 5}])
        (root / "user").mkdir()
        for name, text in USER_FILES.items():
            (root / "user" / name).write_text(text)
        (root / "runs").mkdir()
        self.pristine = {k: v for k, v in self.snapshot().items() if k.startswith(("in/", "user/"))}
        self.made_by: dict[str, list[str]] = {}  # a target -> the argv of the run that finished it
        self.fresh = 0

    def p(self, rel: str) -> Path:
        return self.root / rel

    def snapshot(self) -> dict[str, bytes | None]:
        """Every file (bytes) and folder (None) of the world; lock files by existence only."""
        snap: dict[str, bytes | None] = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            d = Path(dirpath)
            for name in dirnames:
                snap[str((d / name).relative_to(self.root))] = None
            for name in filenames:
                f = d / name
                rel = str(f.relative_to(self.root))
                if name == ".crl.lock":
                    continue  # a run folder's lock: its holder's pid, rewritten by every run
                try:
                    snap[rel] = b"" if name.endswith(".lock") else f.read_bytes()
                except OSError:
                    pass
        return snap

    def restore(self) -> None:
        """Put the inputs and the user's files back as they were (after a violation that
        changed them, so that the operations after it test something)."""
        for top in ("in", "user"):
            d = self.root / top
            if d.is_file() or d.is_symlink():
                d.unlink()
            d.mkdir(exist_ok=True)
            for p in sorted(d.rglob("*"), reverse=True):
                rel = str(p.relative_to(self.root))
                if rel not in self.pristine:
                    if p.is_dir() and not p.is_symlink():
                        shutil.rmtree(p, ignore_errors=True)
                    else:
                        p.unlink(missing_ok=True)
            for rel, data in self.pristine.items():
                f = self.root / rel
                if data is not None and (not f.is_file() or f.read_bytes() != data):
                    f.write_bytes(data)

    def run_folders(self) -> list[str]:
        from composition_rl.io.runs import folder_owner

        return [f"runs/{s}" for s in SLOTS if self.p(f"runs/{s}").is_dir() and folder_owner(self.p(f"runs/{s}"))]


def _in_process(argv: list[str], cwd: Path | None = None) -> tuple[int, str]:
    """``crl ARGV`` in this process: its exit status and what it printed (a crash: rc -1 and
    the traceback)."""
    from composition_rl.cli import main

    buf = io.StringIO()
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                rc = main(list(argv))
            except SystemExit as e:
                rc = int(e.code or 0) if not isinstance(e.code, str) else 2
            except BaseException:  # noqa: BLE001 - a crash is a finding, shown with its traceback
                return -1, buf.getvalue() + traceback.format_exc()
    finally:
        os.chdir(old)
    return rc, buf.getvalue()


class Harness:
    """Draws and runs ``ops`` operations from ``seed``; collects :class:`Violation`s."""

    def __init__(self, root: Path, seed: int, *, kill_share: float = 0.06, subprocess_env: dict | None = None,
                 log: Callable[[str], None] = lambda s: None, stop_at_first: bool = False) -> None:
        from fakes.openai_server import FakeOpenAIServer

        self.seed, self.rng, self.log = seed, random.Random(seed), log
        self.kill_share = kill_share
        import composition_rl

        src = str(Path(composition_rl.__file__).resolve().parents[1])
        self.env = subprocess_env or {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
                                      "OMP_WAIT_POLICY": "PASSIVE"}
        self.stop_at_first = stop_at_first
        self.server = FakeOpenAIServer(lambda body: "So the answer is $\\boxed{7}$.").start()
        self.root = root
        self.world = World(root / "w", self.server.url, self.server)
        self.refs: dict[str, dict[str, bytes]] = {}
        self.violations: list[Violation] = []
        self.history: list[Op] = []
        self.counts: dict[str, int] = {}

    def close(self) -> None:
        self.server.stop()

    # -- drawing -------------------------------------------------------------------------
    def _folder_target(self) -> tuple[str, str | None]:
        """A --out folder (relative to the world) and the cwd to run in (for ``.``/``""``)."""
        r = self.rng.random()
        if r < 0.62:
            return f"runs/{self.rng.choice(SLOTS)}", None
        if r < 0.74:
            self.world.fresh += 1
            return f"runs/new{self.world.fresh}", None
        if r < 0.80:
            return "user", None
        if r < 0.84:
            return "in", None
        if r < 0.90:
            return self.rng.choice([".", ""]), "user"
        runs = self.world.run_folders() or ["runs/r0"]
        return f"{self.rng.choice(runs)}/{self.rng.choice(['samples', 'probe', 'sub'])}", None

    def _file_target(self) -> str:
        r = self.rng.random()
        if r < 0.55:
            return f"runs/{self.rng.choice(FILE_SLOTS)}"
        if r < 0.62:
            return "in/qa.jsonl"
        runs = self.world.run_folders()
        if not runs:
            return f"runs/{self.rng.choice(FILE_SLOTS)}"
        run = self.rng.choice(runs)
        subs = [str(p.relative_to(self.world.root)) for p in sorted(self.world.p(run).rglob("*"))
                if p.is_file() and not p.name.startswith(".")]
        return self.rng.choice(subs) if subs else f"{run}/composed.jsonl"

    def _argv(self, command: str) -> tuple[list[str], str | None, list[str]]:
        """A command line for ``command``: argv (paths relative to the world root, made
        absolute at run time), cwd, and the paths it may change."""
        rng, url = self.rng, self.world.url
        if command in ("compose", "export", "profile", "eval"):
            out, cwd = self._folder_target()
            outs = [out if cwd is None else cwd]
            if command == "compose":
                inp = rng.choice(["in/qa.jsonl"] * 5 + ["in/words.jsonl", "in/empty.jsonl"])
                argv = ["compose", "--input", inp, "--out", out, "--workers", "1", "--max-candidates", "30",
                        "--no-progress", "--seed", str(rng.choice([0, 1]))]
                profiles = [f for f in self.world.run_folders() if self._owner(f) == "profile"]
                if profiles and rng.random() < 0.25:
                    argv += ["--from-profile", rng.choice(profiles), "--select", "all"]
            elif command == "export":
                argv = ["export", "--input", rng.choice(["in/qa.jsonl"] * 4 + ["in/empty.jsonl"]), "--out", out]
            elif command == "profile":
                argv = ["profile", "--base-url", url, "--model", "fake-model", "--input", "in/qa.jsonl", "-n", "1",
                        "--out", out, "--no-progress"]
                if rng.random() < 0.4:
                    keep = (f"{out}/{rng.choice(['profile.jsonl', 'run.json', 'kept.jsonl'])}"
                            if rng.random() < 0.6 and cwd is None else self._file_target())
                    argv += ["--keep", "all", "--keep-out", keep]
                    outs += [keep, keep.rsplit(".", 1)[0] + ".rejects.jsonl"]
            else:
                argv = ["eval", "--base-url", url, "--model", "fake-model", "--benchmark", "in/qa.jsonl", "-n", "1",
                        "--out", out, "--no-progress"]
            return argv, cwd, outs
        if command == "score":
            out = self._file_target()
            stem = out.rsplit(".", 1)[0]
            argv = ["score", "--input", rng.choice(["in/rollouts.jsonl"] * 4 + ["in/empty.jsonl"]), "--out", out,
                    "--workers", "1", "--no-progress"]
            return argv, None, [out, f"{stem}.rejects.jsonl", f"{stem}.options.json"]
        runs = self.world.run_folders() or ["runs/r0"]
        run = rng.choice(runs)
        if command == "browse":
            if rng.random() < 0.4:
                return ["browse", run], None, [f"{run}/report.html"]
            out = self._file_target()
            return ["browse", run, "--out", out], None, [out]
        out = self._file_target()  # audit
        return ["audit", run, "--scan", "--json", out], None, [out]

    def _owner(self, rel: str) -> str | None:
        from composition_rl.io.runs import folder_owner

        return folder_owner(self.world.p(rel))

    def _abs(self, argv: list[str]) -> list[str]:
        """World-relative paths made absolute (``.`` and ``""`` stay: they mean the cwd)."""
        w = self.world.root
        out = []
        for a in argv:
            if a and a != "." and not a.startswith(("-", "http")) and a.split("/")[0] in ("in", "runs", "user"):
                out.append(str(w / a))
            else:
                out.append(a)
        return out

    # -- running ---------------------------------------------------------------------------
    def run(self, ops: int) -> list[Violation]:
        for n in range(ops):
            r = self.rng.random()
            if r < self.kill_share:
                self._kill(n)
            elif r < self.kill_share + 0.16:
                self._interleave(n)
            elif r < self.kill_share + 0.22:
                self._damage(n)
            else:
                self._single(n)
            self.world.restore()
            if self.stop_at_first and self.violations:
                break
        return self.violations

    def _count(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def check(self, argv: list[str], cwd: str | None = None, outs: list[str] | None = None) -> list[Violation]:
        """Run one given operation (world-relative paths) through the invariants; the
        violations it caused."""
        before = len(self.violations)
        self._single(len(self.history), (argv, cwd, outs if outs is not None else [_target(argv) or cwd or ""]))
        return self.violations[before:]

    def _single(self, n: int, given: tuple | None = None) -> None:
        if given is None:
            command = self.rng.choice(["compose"] * 4 + ["export"] * 3 + ["profile"] * 3
                                      + ["eval", "score", "browse", "browse", "audit"])
            given = self._argv(command)
        argv, cwd, outs = given
        command = argv[0]
        op = Op(n, "run", [argv], cwd, outs)
        self._count(f"run {command}")
        before = self.world.snapshot()
        rc, text = _in_process(self._abs(argv), self.world.p(cwd) if cwd else None)
        self._after(op, before, [(rc, text)])
        if rc == 0:
            self._rerun_finishes(op, argv, cwd)

    def _rerun_finishes(self, op: Op, argv: list[str], cwd: str | None) -> None:
        """A finished run, run again, finishes again (nothing to redo, or the same result)."""
        before = self.world.snapshot()
        rc, text = _in_process(self._abs(argv), self.world.p(cwd) if cwd else None)
        if rc != 0:
            self._violate(op, "a rerun finishes the job", f"the rerun of a finished run: rc {rc}: {_tail(text)}")
            return
        self._after(Op(op.n, "rerun", [argv], cwd, op.outs), before, [(rc, text)])
        if cwd is None:
            target = _target(argv)
            if target:
                self.world.made_by[target] = argv

    def _interleave(self, n: int) -> None:
        """Two or three runs on one target, in threads switched at every locking step."""
        drawn = self._interleaved_argvs()
        if drawn is None:
            return self._single(n)
        argvs, outs = drawn
        op = Op(n, "interleave", argvs, None, outs)
        self._count("interleave")
        sched = Scheduler(random.Random(self.rng.random()))
        buf = io.StringIO()
        clash: list[str] = []
        results: list[tuple[int, str]] = [(0, "")] * len(argvs)

        finished: list[int] = []

        def body(i: int, argv: list[str]) -> Callable[[], None]:
            def fn() -> None:
                results[i] = thread_crl(self._abs(argv))
                finished.append(i)
            return fn

        before = self.world.snapshot()
        with scheduled_locking(sched, clash), contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            sched.run([body(i, a) for i, a in enumerate(argvs)])
        op.note = "schedule: " + " ".join(sched.trace)
        for c in clash:
            self._violate(op, "a lock has one holder and stays while held", c)
        for rc, text in results:
            if rc not in (0, 2) or "Traceback" in buf.getvalue():
                self._violate(op, "no crash", f"rc {rc}: {_trace(text + buf.getvalue())}")
        self._after(op, before, [(0, "")])  # the runs wrote only their own target
        ok = [i for i in finished if results[i][0] == 0]
        if ok:  # the target is a consistent finished run: the last one to finish
            self._rerun_finishes(op, argvs[ok[-1]], None)

    def _interleaved_argvs(self) -> tuple[list[list[str]], list[str]] | None:
        """Two or three command lines on one drawn target (a run folder, or a page or scan file
        of a compose run), and that target; None when a file target has no compose run yet."""
        rng = self.rng
        kind = rng.choice(["folder", "folder", "file"])
        if kind == "folder":
            target = rng.choice([f"runs/new{self.world.fresh + 1}"] * 2 + [f"runs/{rng.choice(SLOTS)}"])
            if target.startswith("runs/new"):
                self.world.fresh += 1
            argvs = [rng.choice([["export", "--input", "in/qa.jsonl", "--out", target]] * 2
                                + [["compose", "--input", "in/qa.jsonl", "--out", target, "--workers", "1",
                                    "--max-candidates", "20", "--no-progress"]])
                     for _ in range(rng.choice([2, 3, 3, 3]))]
            return argvs, [target]
        runs_ = [f for f in self.world.run_folders() if self._owner(f) == "compose"]
        if not runs_:
            return None
        target = f"runs/{rng.choice(['page.html', 'scan.json'])}"
        run = rng.choice(runs_)
        argvs = [(["browse", run, "--out", target] if target.endswith(".html")
                  else ["audit", run, "--scan", "--json", target]) for _ in range(rng.choice([2, 3, 3, 3]))]
        return argvs, [target]

    def _kill(self, n: int) -> None:
        """A run in a subprocess, killed after a random delay; its rerun finishes the job."""
        rng = self.rng
        command = rng.choice(["compose", "export", "score", "profile"])
        self.world.fresh += 1
        if command == "score":
            target = f"runs/k{self.world.fresh}.jsonl"
            argv = ["score", "--input", "in/rollouts.jsonl", "--out", target, "--workers", "1", "--no-progress"]
            outs = [target, target[:-6] + ".rejects.jsonl", target[:-6] + ".options.json"]
        else:
            target = f"runs/k{self.world.fresh}"
            argv = {"compose": ["compose", "--input", "in/qa.jsonl", "--out", target, "--workers", "1",
                                "--max-candidates", "60", "--no-progress", "--export", "verl"],
                    "export": ["export", "--input", "in/qa.jsonl", "--out", target],
                    "profile": ["profile", "--base-url", self.world.url, "--model", "fake-model", "--input",
                                "in/qa.jsonl", "-n", "1", "--out", target, "--no-progress"]}[command]
            outs = [target]
        sig = rng.choice([signal.SIGINT, signal.SIGKILL])
        delay = rng.uniform(0.3, 4.0)
        op = Op(n, "kill", [argv], None, outs, note=f"{signal.Signals(sig).name} after {delay:.2f} s")
        self._count(f"kill {command}")
        before = self.world.snapshot()
        proc = subprocess.Popen([sys.executable, "-m", "composition_rl.cli", *self._abs(argv)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=self.env, start_new_session=True, text=True)
        try:
            proc.wait(delay)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
        text = proc.communicate(timeout=120)[0]
        if "Traceback" in text and sig == signal.SIGKILL:
            self._violate(op, "no crash", _trace(text))
        self._after(op, before, [(0, "")])
        rc, text = _in_process(self._abs(argv))
        if rc != 0:
            self._violate(op, "a rerun finishes the job", f"rc {rc} after the kill: {_tail(text)}")
            return
        self._same_as_clean(op, argv, target)

    def _damage(self, n: int) -> None:
        """A profile log's line in the middle made undecodable (or its last line torn); the
        rerun keeps every other finished row and asks the model only for the damaged one."""
        rng = self.rng
        logs = [f for f in self.world.run_folders() if self._owner(f) == "profile"
                and (self.world.p(f) / "profile.jsonl").is_file()
                and len((self.world.p(f) / "profile.jsonl").read_bytes().splitlines()) >= 4
                and self.world.made_by.get(f)]
        if not logs or rng.random() < 0.3:
            self.world.fresh += 1
            run = f"runs/new{self.world.fresh}"
            argv = ["profile", "--base-url", self.world.url, "--model", "fake-model", "--input", "in/qa.jsonl",
                    "-n", "1", "--out", run, "--no-progress"]
            rc, text = _in_process(self._abs(argv))
            if rc != 0:
                return self._violate(Op(n, "run", [argv], None, [run]), "no crash", f"rc {rc}: {_tail(text)}")
            self.world.made_by[run] = argv
        else:
            run = rng.choice(logs)
        log = self.world.p(run) / "profile.jsonl"
        lines = log.read_bytes().splitlines(keepends=True)
        torn = rng.random() < 0.3
        if torn:
            i = len(lines) - 1
            lines[i] = lines[i][: max(1, len(lines[i]) // 2)]
        else:
            i = rng.randrange(1, len(lines) - 1)
            lines[i] = rng.choice([b'{"id": "broken\n', b'{"id": "broken' + b"\xff\n", b"[1, 2]\n", b"\n"])
        log.write_bytes(b"".join(lines))
        argv = self.world.made_by[run]
        op = Op(n, "damage", [argv], None, [run], note=f"{'tore the last line' if torn else f'garbled line {i + 1}'} "
                f"of {run}/profile.jsonl ({len(lines)} lines)")
        self._count("damage")
        asked = self.server.requests
        rc, text = _in_process(self._abs(argv))
        if rc != 0:
            self._violate(op, "a rerun finishes the job", f"rc {rc}: {_tail(text)}")
            return
        extra = self.server.requests - asked
        if extra > 1:
            self._violate(op, "no finished row lost", f"the rerun asked the model {extra} times for 1 damaged row: "
                          "finished rows after the damaged line were thrown away")
        self._same_as_clean(op, argv, run)

    # -- invariants ------------------------------------------------------------------------------
    def _violate(self, op: Op, invariant: str, detail: str) -> None:
        v = Violation(op.n, invariant, detail, op)
        self.violations.append(v)
        self.log(format_violation(v, self.seed, self.history))

    def _after(self, op: Op, before: dict, results: list[tuple[int, str]]) -> None:
        """Invariants 1-5 over the world, before -> after ``op``."""
        self.history.append(op)
        after = self.world.snapshot()
        # a run that ends with nothing to use but says where each reason is (rejected.jsonl)
        # finished with an empty result: it may write its own outputs
        refused = (all(rc not in (0, -1) for rc, _ in results) and op.kind == "run"
                   and not any("reason in rejected.jsonl" in text for _, text in results))
        for rc, text in results:
            if rc == -1 or "Traceback" in text:
                self._violate(op, "no crash", _trace(text))
        outs = [o for o in op.outs]
        own = [o for o in outs if o not in ("", ".")]
        if op.cwd:
            own.append(op.cwd)  # --out . or "": the user's folder is the output (and must be refused)
        named = " ".join(text for _, text in results)
        changed = sorted(k for k in set(before) | set(after) if before.get(k, 0) != after.get(k, 0))
        found: dict[str, list[str]] = {}
        for k in changed:
            where = "changed" if k in before and k in after else ("removed" if k in before else "created")
            if k.startswith("in/"):
                found.setdefault("no input changed", []).append(f"{k} {where}")
            elif k.startswith("user/") or k == "user":
                found.setdefault("no file crl did not make changed", []).append(f"{k} {where}")
            elif refused and not any(n == k or n.startswith(k + "/") for n in _named_rejects(named, self.world.root)):
                found.setdefault("a refused run leaves nothing", []).append(f"{k} {where}")
            elif not refused and not any(k == o or k.startswith(o.rstrip("/") + "/") or _sidecar(k, o) for o in own):
                found.setdefault("no file of another run changed", []).append(f"{k} {where}")
            elif not refused and self._other_run_file(k, op):
                found.setdefault("no file of another run changed", []).append(f"{k} {where} (in the run {_run_of(k)})")
        for invariant, what in found.items():
            tail = f" (rc {results[0][0]}: {_tail(named, 300)})" if invariant == "a refused run leaves nothing" else ""
            self._violate(op, invariant, ", ".join(what[:6]) + (f" and {len(what) - 6} more" if len(what) > 6 else "")
                          + tail)

    def _other_run_file(self, k: str, op: Op) -> bool:
        """``k`` lies in a run folder that is not the op's --out folder (a browse of that run
        may write its report.html)."""
        run = _run_of(k)
        if run is None:
            return False
        for argv in op.argvs:
            if _target(argv) == run:
                return False
            if argv[0] == "browse" and argv[1] == run and k == f"{run}/report.html":
                return False
        existed = (self.world.p(run) / "run.json").exists() or any((self.world.p(run) / m).exists()
                                                                   for m in ("composed.jsonl", "profile.jsonl"))
        return existed

    def _same_as_clean(self, op: Op, argv: list[str], target: str) -> None:
        """The target holds what a clean run of ``argv`` writes: no row lost or twice."""
        ref = self._reference(argv, target)
        got = _result_files(self.world.p(target), argv[0])
        if got != ref:
            diff = sorted(k for k in set(got) | set(ref) if got.get(k) != ref.get(k))
            self._violate(op, "no finished row lost or duplicated",
                          f"{target} differs from a clean run in {', '.join(diff)}")

    def _reference(self, argv: list[str], target: str) -> dict[str, bytes]:
        key = json.dumps(argv).replace(target, "@")
        if key not in self.refs:
            scratch = self.root / "ref" / hashlib.sha256(key.encode()).hexdigest()[:12]
            scratch.mkdir(parents=True, exist_ok=True)
            out = scratch / Path(target).name
            clean = list(argv)
            if "--keep-out" in clean:  # the kept prompts: not compared, not written into the world
                i = clean.index("--keep")
                del clean[i:i + 2]
                i = clean.index("--keep-out")
                del clean[i:i + 2]
            rc, text = _in_process([str(out) if a == str(self.world.p(target)) else a
                                    for a in self._abs(clean)])
            assert rc == 0, text
            self.refs[key] = _result_files(out, argv[0])
        return self.refs[key]


def _target(argv: list[str]) -> str | None:
    for flag in ("--out",):
        if flag in argv:
            return argv[argv.index(flag) + 1]
    return None


def _run_of(k: str) -> str | None:
    parts = k.split("/")
    if len(parts) >= 3 and parts[0] == "runs":
        return "/".join(parts[:2])
    return None


def _named_rejects(text: str, root: Path) -> list[str]:
    """The rejects files (``input_rejects.jsonl``) an error message names, relative to the
    world: the one thing a refused run may leave (with the folder that holds it)."""
    import re

    return [m.replace(str(root) + "/", "") for m in re.findall(r"(\S+/input_rejects\.jsonl)", text)]


def _sidecar(k: str, out: str) -> bool:
    """A file a file output brings: its lock (``.NAME.lock``), its temporaries."""
    d, _, name = out.rpartition("/")
    kd, _, kname = k.rpartition("/")
    return kd == d and kname.startswith(f".{name}.")


def _result_files(path: Path, command: str) -> dict[str, bytes]:
    """What a run's result is compared by (timings and paths left out)."""
    if command == "score":
        stem = path.with_suffix("")
        return {n: p.read_bytes() for n, p in (("out", path), ("rejects", Path(f"{stem}.rejects.jsonl")))
                if p.exists()}
    names = {"compose": ("composed.jsonl", "rejected.jsonl", "verl.parquet"), "export": ("problems.jsonl",),
             "profile": ("profile.jsonl",), "eval": ()}[command]
    got = {}
    for n in names:
        p = path / n
        if p.exists():
            data = p.read_bytes()
            got[n] = b"".join(sorted(data.splitlines(keepends=True))) if n == "profile.jsonl" else data
    return got


def _trace(text: str) -> str:
    """A traceback cut to its frames in composition_rl and its last line."""
    lines = text.strip().splitlines()
    keep = [x.strip() for i, x in enumerate(lines) if "composition_rl" in x or (i and "composition_rl" in lines[i - 1])]
    return " | ".join(keep[-8:] + lines[-1:])


def _tail(text: str, n: int = 600) -> str:
    text = text.strip()
    return text if len(text) <= n else "..." + text[-n:]


def format_violation(v: Violation, seed: int, history: list[Op]) -> str:
    """The violation, and the command lines of the operations before it that touched the
    same paths (the reproduction)."""
    touched = set(v.op.outs) | {_run_of(o) or o for o in v.op.outs}
    for argv in v.op.argvs:
        touched |= {a for a in argv if a.startswith(("runs/", "user", "in/"))}
    related = [op for op in history if op.n < v.n and (set(op.outs) | {_run_of(o) or o for o in op.outs}) & touched]
    lines = [f"VIOLATION [{v.invariant}] at op {v.n} (seed {seed}): {v.detail}",
             f"  op {v.n} ({v.op.kind}{'; ' + v.op.note if v.op.note else ''}):"]
    lines += [f"    {x}" for x in v.op.lines()]
    if related:
        lines.append("  after these operations on the same paths (world: in/ inputs, user/ the user's files):")
        for op in related[-6:]:
            lines += [f"    [{op.n}] {x}" for x in op.lines()]
    lines.append(f"  reproduce: python scripts/fault_harness.py --seed {seed} --ops {v.n + 1}")
    return "\n".join(lines)


@contextlib.contextmanager
def harness(seed: int, *, root: Path | None = None, **kw) -> Iterator[Harness]:
    """A :class:`Harness` in a temporary folder (removed after)."""
    tmp = Path(tempfile.mkdtemp(prefix="crl-faults-")) if root is None else root
    h = Harness(tmp, seed, **kw)
    try:
        yield h
    finally:
        h.close()
        if root is None:
            shutil.rmtree(tmp, ignore_errors=True)


def summary(h: Harness, ops: int, wall: float) -> str:
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(h.counts.items()))
    by = {}
    for v in h.violations:
        by[v.invariant] = by.get(v.invariant, 0) + 1
    return (f"seed {h.seed}: {ops} operations ({kinds}) in {wall:.0f} s; "
            f"{len(h.violations)} invariant violation(s)" + (f": {by}" if by else ""))


def main_loop(seed: int, ops: int, log: Callable[[str], None] = print, **kw) -> list[Violation]:
    t0 = time.perf_counter()
    with harness(seed, log=log, **kw) as h:
        h.run(ops)
        log(summary(h, ops, time.perf_counter() - t0))
        return h.violations
