"""The callable Inductor's wrapper code holds for each MLIR kernel.

Wrapper code defines `mlir_fused_N = MlirKernel("ttixw", r'''<mlir>''')` and calls it
with the kernel's buffers and sizes. Each tensor is passed as the expanded fields of a
1-d memref descriptor over its own storage (allocated ptr, aligned ptr, offset 0,
size, stride 1): no copies in or out. The per-call argument marshalling is a small
generated function, so a launch costs one ctypes call.

Every kernel takes the [lo, hi) slice of its outermost loop to run. Kernels whose
outermost loop may be split ('x' extent argument) and that have enough work are run as
one slice per thread, like Inductor's OpenMP C++ kernels; ctypes releases the GIL for
the duration of each call, so the slices run in parallel.
"""

import concurrent.futures
import os
import threading

import torch

from . import jit

# Below this many elements a kernel runs on the calling thread: waking workers costs more.
PARALLEL_MIN_WORK = 1 << 16
_FULL_RANGE = 1 << 62

_pool = None
_pool_lock = threading.Lock()


def _forget_pool_in_child():
    # worker threads do not survive fork(); a child starts its own pool when needed
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool_in_child)


def kernel_arg_count(kinds: str) -> int:
    """Native arguments: 5 per memref descriptor, 1 per size, plus the [lo, hi) pair."""
    return sum(5 if k == "t" else 1 for k in kinds if k in "ti") + 2


def _workers():
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=max(1, torch.get_num_threads() - 1), thread_name_prefix="mlir-kernel"
                )
    return _pool


def run_split(fn, args, extent):
    threads = min(torch.get_num_threads(), extent)
    if threads <= 1:
        fn(*args, 0, extent)
        return
    step = -(-extent // threads)
    pool = _workers()
    futures = [pool.submit(fn, *args, lo, min(lo + step, extent)) for lo in range(step, extent, step)]
    fn(*args, 0, step)
    for f in futures:
        f.result()


def _make_caller(fn, kinds: str):
    params, parts = [], []
    extent = work = None
    for i, kind in enumerate(kinds):
        params.append(f"a{i}")
        if kind == "t":
            parts.append(f"(p{i} := a{i}.data_ptr()), p{i}, 0, 0, 1")
        elif kind == "i":
            parts.append(f"a{i}")
        elif kind == "x":
            extent = f"a{i}"
        elif kind == "w":
            work = f"a{i}"
    native = ", ".join(parts)
    lines = [f"def call({', '.join(params)}):"]
    if extent is not None:
        lines.append(f"    if {work} >= {PARALLEL_MIN_WORK} and {extent} > 1:")
        lines.append(f"        return run_split(fn, ({native},), {extent})")
    lines.append(f"    fn({native}{', ' if native else ''}0, {_FULL_RANGE})")
    scope = {"fn": fn, "run_split": run_split}
    exec(compile("\n".join(lines) + "\n", "<mlir kernel launch>", "exec"), scope)
    return scope["call"]


class MlirKernel:
    __slots__ = ("kinds", "src", "run")

    def __init__(self, kinds: str, src: str):
        self.kinds = kinds
        self.src = src
        self.run = _make_caller(jit.compile_kernel(src, kernel_arg_count(kinds)), kinds)

    def __call__(self, *args):
        self.run(*args)
