"""MLIR text -> LLVM -> native code, with an on-disk cache of the compiled kernels.

A kernel is lowered with the MLIR pass pipeline and compiled by the ExecutionEngine
(LLVM -O3 for the host CPU, which also auto-vectorizes the loops). The engine's object
code is linked into a shared object kept in Inductor's cache dir, keyed by a hash of
the source and the pipeline, so a second process loads it without touching MLIR.
The kernel's entry symbol is `_mlir_kernel`: the Python binding's lookup prepends
`_mlir_` to names, so `raw_lookup("kernel")` returns the plain (non-packed) function,
callable through ctypes with each memref passed as its expanded descriptor fields.

Code is generated for the host CPU unless `config.mlir_target_cpu` names another (its
baseline features only). The cache key holds what decides the machine code: the
version of the emitter (npu's codegen sources), the pipeline, the optimization level, the target and the host CPU.
"""

import ctypes
import functools
import hashlib
import os
import platform
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
_FORMAT_VERSION = "2"

_lock = threading.Lock()
# In-process kernels keep their ExecutionEngine (and MLIR context) alive.
_live: dict = {}
stats = {"compiled": 0, "disk_hits": 0}


class MlirCompileError(RuntimeError):
    """The MLIR text did not parse, verify or lower."""


@functools.cache
def host_cpu() -> str:
    """What the host CPU offers the code generator: model and feature flags."""
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    fields = {}
    for line in info.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = " ".join(sorted((fields.get("flags") or fields.get("Features") or "").split()))
    return f"{platform.machine()} {fields.get('model name', '')} {flags}"


def target_cpu() -> str:
    """The CPU kernels are compiled for: "" for the host, else `config.mlir_target_cpu`."""
    from torch_npu.compiler.inductor import config

    return config.mlir_target_cpu


def cache_key(src: str) -> str:
    from torch_npu.compiler.inductor import config

    target = target_cpu()
    parts = (
        _FORMAT_VERSION,
        config._codegen_version,
        PIPELINE,
        str(OPT_LEVEL),
        f"target={target}",
        # Code for the host uses every feature it has: a cache dir moved to another CPU
        # must not serve it.
        host_cpu() if not target else "",
        src,
    )
    h = hashlib.sha256()
    for part in parts:
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
            _set_target(module, target_cpu())
        except Exception as exc:  # the bindings raise ValueError/MLIRError
            raise MlirCompileError(str(exc).splitlines()[0][:300]) from exc
        engine = ExecutionEngine(module, opt_level=OPT_LEVEL)
        addr = engine.raw_lookup(ENTRY)
    if not addr:
        raise MlirCompileError("kernel entry not found after lowering")
    return ctx, module, engine, addr


def _set_target(module, cpu: str) -> None:
    """Make LLVM generate the module's functions for `cpu` with its baseline features.

    A function's own target-cpu/target-features attributes take precedence over the
    JIT's host target; the explicit (empty-but-baseline) feature list drops the host's.
    """
    if not cpu:
        return
    from ._bindings import ir

    features = ir.Attribute.parse('#llvm.target_features<["+cx8"]>')
    for op in module.body.operations:
        if op.operation.name == "llvm.func":
            op.attributes["target_cpu"] = ir.StringAttr.get(cpu)
            op.attributes["target_features"] = features


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
