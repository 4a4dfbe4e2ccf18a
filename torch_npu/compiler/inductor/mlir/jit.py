"""MLIR text -> LLVM -> native code, with an on-disk cache of the compiled kernels.

A kernel is lowered with the MLIR pass pipeline and compiled by the ExecutionEngine
(LLVM -O3 for the host CPU, which also auto-vectorizes the loops). The engine's object
code is linked into a shared object kept in Inductor's cache dir, keyed by a hash of
the source and the pipeline, so a second process loads it without touching MLIR.
The kernel's entry symbol is `_mlir_kernel`: the Python binding's lookup prepends
`_mlir_` to names, so `raw_lookup("kernel")` returns the plain (non-packed) function,
callable through ctypes with each memref passed as its expanded descriptor fields.
"""

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading

PIPELINE = (
    "builtin.module("
    "func.func(arith-expand),"
    "convert-scf-to-cf,"
    "convert-math-to-llvm,"
    "convert-math-to-libm,"
    "expand-strided-metadata,"
    "finalize-memref-to-llvm,"
    "convert-arith-to-llvm,"
    "convert-func-to-llvm,"
    "convert-cf-to-llvm,"
    "reconcile-unrealized-casts)"
)
ENTRY = "kernel"  # defined in MLIR as @_mlir_kernel, see module docstring
OPT_LEVEL = 3
_FORMAT_VERSION = "1"

_lock = threading.Lock()
# In-process kernels keep their ExecutionEngine (and MLIR context) alive.
_live: dict = {}
stats = {"compiled": 0, "disk_hits": 0}


class MlirCompileError(RuntimeError):
    """The MLIR text did not parse, verify or lower."""


def cache_key(src: str) -> str:
    h = hashlib.sha256()
    for part in (_FORMAT_VERSION, PIPELINE, str(OPT_LEVEL), src):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def cache_dir() -> str:
    from torch._inductor.runtime.cache_dir_utils import cache_dir as inductor_cache_dir

    path = os.path.join(inductor_cache_dir(), "mlir")
    os.makedirs(path, exist_ok=True)
    return path


def _so_path(key: str) -> str:
    return os.path.join(cache_dir(), f"{key}.so")


def _engine_compile(src: str):
    from ._bindings import ExecutionEngine, ir, passmanager

    ctx = ir.Context()
    with ctx:
        try:
            module = ir.Module.parse(src)
            passmanager.PassManager.parse(PIPELINE).run(module.operation)
        except Exception as exc:  # the bindings raise ValueError/MLIRError
            raise MlirCompileError(str(exc).splitlines()[0][:300]) from exc
        engine = ExecutionEngine(module, opt_level=OPT_LEVEL)
        addr = engine.raw_lookup(ENTRY)
    if not addr:
        raise MlirCompileError("kernel entry not found after lowering")
    return ctx, module, engine, addr


def _persist(engine, key: str) -> None:
    """Link the engine's object code into <cache>/<key>.so (atomically)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("g++")
    if cc is None:
        return
    final = _so_path(key)
    with tempfile.TemporaryDirectory(dir=cache_dir()) as tmp:
        obj = os.path.join(tmp, "k.o")
        engine.dump_to_object_file(obj)
        so = os.path.join(tmp, "k.so")
        # The JIT object is not position independent; -z notext accepts its text relocations.
        proc = subprocess.run(
            [cc, "-shared", "-o", so, obj, "-lm", "-Wl,-z,notext"],
            capture_output=True,
        )
        if proc.returncode == 0:
            os.replace(so, final)


def _signature(nargs: int):
    return ctypes.CFUNCTYPE(None, *([ctypes.c_int64] * nargs))


def compile_kernel(src: str, nargs: int):
    """Return a ctypes function for `src` taking `nargs` int64 arguments.

    Order of lookup: this process's engines, the on-disk cache, a fresh compile (which
    also fills the disk cache). Raises MlirCompileError if `src` does not lower.
    """
    key = cache_key(src)
    with _lock:
        hit = _live.get(key)
        if hit is not None:
            return hit[-1]
        so = _so_path(key)
        if os.path.exists(so):
            lib = ctypes.CDLL(so)
            fn = _signature(nargs)(ctypes.cast(getattr(lib, "_mlir_" + ENTRY), ctypes.c_void_p).value)
            _live[key] = (lib, fn)
            stats["disk_hits"] += 1
            return fn
        ctx, module, engine, addr = _engine_compile(src)
        fn = _signature(nargs)(addr)
        _live[key] = (ctx, module, engine, fn)
        stats["compiled"] += 1
        try:
            _persist(engine, key)
        except OSError:
            pass  # the kernel still runs from the engine; only the disk cache is missed
        return fn
