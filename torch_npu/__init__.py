"""torch_npu: the ``npu`` device for PyTorch, backed by a built-in simulated NPU runtime.

Importing the package loads the runtime (``torch_npu._C``, whose library defines the fused
``npu_*`` operators' schemas, ``torch.ops.npu``; each family's kernels load on first use),
renames PrivateUse1 to ``npu``, registers ``torch.npu`` and the ``.npu()``/``is_npu`` methods,
and installs two import-system finders: the compile trigger (Dynamo/Inductor integration is
set up when those modules are first imported, never here) and the ``npugraph_ex`` alias,
maps ``torch_npu.<name>`` to the operator families, and names the ``hccl`` process-group
backend to torch.distributed (loaded on first use). It also
registers torch_npu's ``TORCH_LOGS`` names and torch.multiprocessing's npu tensor reducer
and, if ``TORCH_NPU_SANITIZER`` asks for it, enables the stream sanitizer. It imports no
compiler module and initialises no device, so it costs about what ``import torch`` costs.
"""
from __future__ import annotations

import importlib
import os as _os
import sys


def _autoload() -> None:
    """Entry point of the ``torch.backends`` group: ``import torch`` loads torch_npu.

    Everything else happens at import. What is left is what ``import torch`` needs before
    it reads ``TORCH_LOGS`` right after this call: our log names. Defined before
    ``import torch`` so that autoload finds it when ``import torch_npu`` comes first
    (torch's own import then loads this partially initialised module).
    """
    from torch_npu._startup import log_names

    log_names.register()


import torch

import torch_npu._C as _C  # noqa: F401  (registers hooks, device guard and kernels)

__version__ = "2.13.0"


def _register_backend() -> None:
    if torch._C._get_privateuse1_backend_name() != "npu":
        torch.utils.rename_privateuse1_backend("npu")
    from torch_npu import npu as npu_module

    if getattr(torch, "npu", None) is not npu_module:
        torch._register_device_module("npu", npu_module)
    if not hasattr(torch.Tensor, "is_npu"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
        )


_register_backend()

from torch_npu._startup import log_names  # noqa: E402

log_names.register()  # TORCH_LOGS=npu and its artifacts (the compile trigger logs to one)

from torch_npu import _public_env  # noqa: E402

_public_env.validate_all()  # Ascend's public variables (TASK_QUEUE_ENABLE...): bad values stop here
_public_env.apply_log_level()  # ASCEND_GLOBAL_LOG_LEVEL

from torch_npu import _tensor_sharing  # noqa: E402
from torch_npu._startup import (  # noqa: E402
    autograd_exit_barrier,
    compile_trigger,
    hccl_registration,
    npugraph_ex_finder,
)

autograd_exit_barrier.register()  # autograd's npu threads finish before the interpreter exits
_tensor_sharing.register()  # torch.multiprocessing shares npu tensors
compile_trigger.install()  # Dynamo/Inductor integration, set up when they are first imported
npugraph_ex_finder.install()  # `import npugraph_ex` finds the bundled package
hccl_registration.register()  # torch.distributed knows the "hccl" backend (loaded on first use)

# The fused npu_* operators: torch.ops.npu.<name> is defined by the runtime library; each
# family is imported on its first call or on first lookup of torch_npu.<name> (see torch_npu.ops).
from torch_npu import ops as _ops  # noqa: E402

_ops.install()

if _os.environ.get("TORCH_NPU_SANITIZER"):
    from torch_npu.npu import _stream_sanitizer  # noqa: E402

    if _stream_sanitizer.enabled_by_environment():
        _stream_sanitizer.enable_npu_sanitizer()

# Subpackages that load on first attribute access (PEP 562), so that
# ``torch_npu.compiler`` or ``torch_npu.dynamo`` cost nothing until used.
_LAZY_SUBMODULES = ("compiler", "distributed", "dynamo", "jit", "npu", "optim", "profiler", "testing", "utils")


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    family = _ops.family_of(name)
    if family is not None:
        value = getattr(_ops.load(family), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY_SUBMODULES) | set(_ops.exported_names()))
