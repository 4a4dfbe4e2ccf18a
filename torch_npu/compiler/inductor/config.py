"""Inductor knobs specific to the npu device.

Registered as the npu ``device_custom_config``, so Inductor saves these values into every
FX-graph cache key: an artifact built with one setting is never served to a compile with
another. Set them like any torch config, ``torch_npu.compiler.inductor.config.X = ...`` or
``with config.patch(X=...)``. The choice of kernel generator is not here but in
``torch._inductor.config.npu_backend``, because only that module's keys are accepted by
``torch.compile(options=...)``.
"""
import hashlib
import os
import sys

from torch.utils._config_module import install_config_module

# Emit every generated kernel call as ``torch.npu._launch_host_kernel(kernel, *args)`` so
# that NPU graph capture records it instead of running it. False calls kernels directly:
# marginally less per-call overhead, but compiled code can then not be captured.
launch_through_runtime: bool = True

# The CPU the mlir backend compiles its kernels for. "" is the host CPU (all its features);
# a name such as "x86-64" (or "generic") compiles for that CPU's baseline features only,
# which is how a machine without native bf16/f16 conversions is reproduced on one with them.
mlir_target_cpu: str = ""



def codegen_source_files() -> list[str]:
    """The sources that decide what npu's Inductor compiles: its code generation
    (scheduling, wrapper, the mlir emitter and its lowering: this package) and the fused
    operators' decompositions (``torch_npu.ops``), which AOT autograd applies before
    Inductor sees the graph."""
    package = os.path.dirname(os.path.abspath(__file__))
    ops = os.path.join(os.path.dirname(os.path.dirname(package)), "ops")
    files = []
    for root in (package, ops):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            files.extend(os.path.join(dirpath, f) for f in sorted(filenames) if f.endswith(".py"))
    return files


def _codegen_sources_digest() -> str:
    digest = hashlib.sha256()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for path in codegen_source_files():
        digest.update(os.path.relpath(path, root).encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


# Version of npu's code generators and decompositions, emitter of the mlir kernels
# included. Inductor saves this module's values into every FX-graph cache key and every
# AOT-autograd cache key (whose details extend the FX-graph ones), and its own key covers
# only torch's sources: so a graph compiled by other npu code (another torch_npu, an edited
# one) is never served from either cache. The mlir kernels' disk cache is keyed by it too.
_codegen_version: str = _codegen_sources_digest()

install_config_module(sys.modules[__name__])
