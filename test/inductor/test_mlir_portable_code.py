"""The ``mlir`` backend's kernels do not depend on the host CPU's features.

A CPU without native bf16/f16 conversions (no AVX512-BF16, no F16C) makes LLVM lower
``fptrunc float to bfloat`` to a ``__truncsfbf2`` call the JIT cannot resolve ("JIT
session error: Symbols not found"). The backend writes these conversions as integer code
itself. Such a CPU is reproduced here on any machine by compiling for the ``generic``
CPU (``config.mlir_target_cpu``), which has only baseline features. The conversions must
also round exactly as torch does on cpu, for every bf16/f16 value and for f32 specials.

The compiled kernels' cache keys hold the emitter's version (a digest of npu's codegen
sources; FX-graph cache and the kernel disk cache), the target and the host CPU.
"""
from __future__ import annotations

import pytest
import torch

import torch_npu  # noqa: E402  (a missing package is a failure, not a skip)
pytest.importorskip("torch_mlir")

from inductor_models import NPU  # noqa: E402

from torch_npu.compiler.inductor import config as npu_config  # noqa: E402
from torch_npu.compiler.inductor import mlir as mlir_backend  # noqa: E402
from torch_npu.compiler.inductor.mlir import jit  # noqa: E402

GENERIC_CPU = "generic"
MLIR_OPTIONS = {"npu_backend": "mlir", "fx_graph_cache": False}


def _all_16_bit_values(dtype: torch.dtype) -> torch.Tensor:
    return torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)


def _f32_samples() -> torch.Tensor:
    gen = torch.Generator().manual_seed(0)
    random_bits = torch.randint(-(2**31), 2**31 - 1, (1 << 16,), generator=gen, dtype=torch.int64)
    specials = torch.tensor(
        [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e-40, -1e-45, 65504.0, 65520.0,
         65519.99, 3.4e38, 6.0e-8, 2.98e-8, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 1.0 + 2**-11, 1.0 + 3 * 2**-11],
    )
    return torch.cat([random_bits.to(torch.int32).view(torch.float32), specials])


def conversions(f32, bf16, f16):
    return (
        f32.to(torch.bfloat16),
        f32.to(torch.float16),
        bf16.to(torch.float32) * 1.0,
        f16.to(torch.float32) * 1.0,
        # rounding inside a kernel (kept in f32 registers)
        f32.to(torch.bfloat16).to(torch.float32) + f32.to(torch.float16).to(torch.float32),
    )


@pytest.mark.parametrize("target", [GENERIC_CPU, ""], ids=["generic_cpu", "host_cpu"])
def test_bf16_f16_conversions_compile_for_any_cpu_and_round_like_cpu(target):
    mlir_backend.reset_fallback_stats()
    f32, bf16, f16 = _f32_samples(), _all_16_bit_values(torch.bfloat16), _all_16_bit_values(torch.float16)
    expected = conversions(f32, bf16, f16)
    with npu_config.patch(mlir_target_cpu=target):
        compiled = torch.compile(conversions, backend="inductor", options=MLIR_OPTIONS)
        actual = compiled(f32.to(NPU), bf16.to(NPU), f16.to(NPU))
    for a, e in zip(actual, expected):
        assert a.device.type == "npu" and a.dtype == e.dtype
        torch.testing.assert_close(a.cpu(), e, atol=0, rtol=0, equal_nan=True)
    stats = mlir_backend.fallback_stats()
    assert stats["fallbacks"] == 0, stats["reasons"]
    assert stats["mlir_kernels"] > 0


NARROW_STORE = """
func.func @_mlir_kernel(%a: memref<?xf32>, %b: memref<?x{t}>, %n: index) {{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {{
    %x = memref.load %a[%i] : memref<?xf32>
    %y = arith.truncf %x : f32 to {t}
    memref.store %y, %b[%i] : memref<?x{t}>
  }}
  return
}}
"""


@pytest.mark.parametrize("mlir_type", ["bf16", "f16"])
def test_generic_cpu_target_reproduces_the_missing_conversion_symbols(mlir_type):
    # What the emitter avoids: LLVM's own conversion, for a CPU without it, is a libcall
    # this process cannot resolve. (If this starts passing, the target is not applied.)
    with npu_config.patch(mlir_target_cpu=GENERIC_CPU), pytest.raises(jit.MlirCompileError):
        jit._engine_compile(NARROW_STORE.format(t=mlir_type))


def test_kernel_cache_key_holds_emitter_version_target_and_host():
    src = NARROW_STORE.format(t="bf16")
    base = jit.cache_key(src)
    with npu_config.patch(_codegen_version="another emitter"):
        assert jit.cache_key(src) != base
    with npu_config.patch(mlir_target_cpu=GENERIC_CPU):
        assert jit.cache_key(src) != base
    assert jit.host_cpu()  # model and feature flags of this machine


def test_fx_graph_cache_key_holds_emitter_version():
    # Inductor saves the npu config module (private entries included) into every FX-graph
    # cache key, so graphs compiled by another emitter version are not reused.
    import torch._inductor.codegen.common as common

    torch.compile(lambda x: x + 1, backend="inductor")(torch.ones(2, device="npu"))
    saved = common.custom_backend_codegen_configs["npu"].save_config_portable(ignore_private_configs=False)
    assert saved["_codegen_version"] == npu_config._codegen_version
    assert saved["mlir_target_cpu"] == npu_config.mlir_target_cpu
