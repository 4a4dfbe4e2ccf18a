"""The callable Inductor's wrapper code holds for each MLIR kernel.

Wrapper code defines `mlir_fused_N = MlirKernel("tti", r'''<mlir>''')` and calls it
with the kernel's buffers and sizes. Each tensor is passed as the expanded fields of a
1-d memref descriptor over its own storage (allocated ptr, aligned ptr, offset 0,
size, stride 1): no copies in or out. The per-call argument marshalling is a small
generated function, so a launch costs one ctypes call.
"""

from . import jit


def _make_caller(fn, kinds: str):
    params, parts = [], []
    for i, kind in enumerate(kinds):
        params.append(f"a{i}")
        if kind == "t":
            parts.append(f"(p{i} := a{i}.data_ptr()), p{i}, 0, 0, 1")
        else:
            parts.append(f"a{i}")
    src = f"def call({', '.join(params)}):\n    fn({', '.join(parts)})\n"
    scope = {"fn": fn}
    exec(compile(src, "<mlir kernel launch>", "exec"), scope)
    return scope["call"]


class MlirKernel:
    __slots__ = ("kinds", "src", "run")

    def __init__(self, kinds: str, src: str):
        self.kinds = kinds
        self.src = src
        nargs = sum(5 if k == "t" else 1 for k in kinds)
        self.run = _make_caller(jit.compile_kernel(src, nargs), kinds)

    def __call__(self, *args):
        self.run(*args)
