"""Inductor knobs specific to the npu device.

Registered as the npu ``device_custom_config``, so Inductor saves these values into every
FX-graph cache key: an artifact built with one setting is never served to a compile with
another. Set them like any torch config, ``torch_npu.compiler.inductor.config.X = ...`` or
``with config.patch(X=...)``. The choice of kernel generator is not here but in
``torch._inductor.config.npu_backend``, because only that module's keys are accepted by
``torch.compile(options=...)``.
"""
import sys

from torch.utils._config_module import install_config_module

# Emit every generated kernel call as ``torch.npu._launch_host_kernel(kernel, *args)`` so
# that NPU graph capture records it instead of running it. False calls kernels directly:
# marginally less per-call overhead, but compiled code can then not be captured.
launch_through_runtime: bool = True

install_config_module(sys.modules[__name__])
