"""The ``mlir`` npu backend kernel by kernel: op coverage, fallback accounting, caching.

Op coverage compiles a few functions that together exercise reductions (sum, max,
argmax, softmax, layernorm/var_mean), pointwise math with broadcasting, index
expressions and gathers, masked loads (padding, pooling), integer/bool ops and dynamic
shapes, and checks each against cpu eager with no C++ fallback. Fallback accounting
uses an op the backend does not emit. Install hint and on-disk kernel cache are
checked in fresh interpreters.
"""
from __future__ import annotations

import logging
import os
import tempfile

import pytest
import torch
import torch.nn.functional as F

import torch_npu  # noqa: E402  (a missing package is a failure, not a skip)
pytest.importorskip("torch_mlir")

from fresh_interpreter import run_python  # noqa: E402

from torch_npu.compiler.inductor import mlir as mlir_backend  # noqa: E402

NPU = torch.device("npu")
MLIR_OPTIONS = {
    "npu_backend": "mlir",
    "fx_graph_cache": False,  # every test generates, and counts, its kernels
}


@pytest.fixture(autouse=True)
def _fresh_counters():
    mlir_backend.reset_fallback_stats()
    yield


def check_against_cpu(fn, *inputs, dynamic=False, atol=1e-5, rtol=1e-5):
    compiled = torch.compile(fn, options=MLIR_OPTIONS, dynamic=dynamic)
    got = compiled(*(t.to(NPU) for t in inputs))
    want = fn(*inputs)
    got = got if isinstance(got, (tuple, list)) else (got,)
    want = want if isinstance(want, (tuple, list)) else (want,)
    for g, w in zip(got, want):
        assert g.device.type == "npu"
        torch.testing.assert_close(g.cpu(), w, atol=atol, rtol=rtol, equal_nan=True)


def assert_no_fallback():
    stats = mlir_backend.fallback_stats()
    assert stats["fallbacks"] == 0, stats["reasons"]
    assert stats["mlir_kernels"] > 0


def reductions(x):
    return (
        x.sum(-1),
        x.amax(0),
        x.argmax(-1),
        torch.softmax(x, -1),
        F.layer_norm(x, x.shape[-1:]),
        torch.var_mean(x, dim=0, correction=1)[0],
        x.logsumexp(-1),
        (x > 0).any(-1),
    )


def pointwise(x, row, col):
    y = torch.where(x > row, torch.tanh(x) * col, torch.sigmoid(x) - row)
    return (
        y.exp() + F.gelu(x) + torch.erf(x) * x.abs().sqrt(),
        torch.remainder(x, 0.7) + torch.floor(x * 3) / 3,
        torch.clamp(x, -0.5, 0.5).pow(2) + x.clamp_min(0).log1p(),
        (x * 100).to(torch.int32) // 7 + (x > col).to(torch.int64),
        x.to(torch.bfloat16) * 2,
    )


def indexing(x, idx):
    return (
        x[idx] * 2,
        x.t().contiguous() + 1,
        x[:, ::2] - x[:, 1::2],
        torch.cat([x, x.flip(0)], dim=1).sum(1),
        x.gather(1, idx.view(-1, 1).expand(-1, 3) % x.shape[1]),
    )


def masked(img):
    return (
        F.pad(img, (2, 1, 1, 2), value=-1.0),
        F.max_pool2d(img, 3, stride=2, padding=1),
        F.avg_pool2d(img, 2),
        F.interpolate(img, scale_factor=2, mode="nearest"),
    )


def test_reductions():
    check_against_cpu(reductions, torch.randn(33, 70), atol=1e-4, rtol=1e-4)
    assert_no_fallback()


def test_pointwise_with_broadcasting():
    check_against_cpu(pointwise, torch.randn(16, 40), torch.randn(16, 1), torch.randn(40), atol=1e-4, rtol=1e-4)
    assert_no_fallback()


def test_index_expressions_and_gathers():
    check_against_cpu(indexing, torch.randn(20, 10), torch.randint(-20, 20, (7,)))
    assert_no_fallback()


def test_masked_loads():
    check_against_cpu(masked, torch.randn(2, 3, 9, 11))
    assert_no_fallback()


def test_dynamic_shapes_pass_sizes_as_kernel_arguments():
    fn = torch.compile(lambda a, b: torch.softmax(a * b, -1) + a.sum(0), options=MLIR_OPTIONS, dynamic=True)
    for rows, cols in ((5, 7), (9, 13)):
        a, b = torch.randn(rows, cols), torch.randn(cols)
        got = fn(a.to(NPU), b.to(NPU))
        torch.testing.assert_close(got.cpu(), torch.softmax(a * b, -1) + a.sum(0), atol=1e-5, rtol=1e-5)
    assert_no_fallback()


def test_unsupported_kernel_falls_back_to_cpp_counted_and_logged_once(caplog):
    def uses_lgamma(x):
        return torch.lgamma(x.abs() + 1) * 2

    with caplog.at_level(logging.WARNING, logger="torch_npu.compiler.inductor.mlir"):
        for n in (10, 11):  # two compiles, one reason
            torch._dynamo.reset()
            check_against_cpu(uses_lgamma, torch.randn(n), atol=1e-4, rtol=1e-4)
    stats = mlir_backend.fallback_stats()
    assert stats["fallbacks"] == 2, stats
    assert list(stats["reasons"]) == ["op lgamma"]
    logged = [r for r in caplog.records if "C++ path instead" in r.getMessage()]
    assert len(logged) == 1 and "lgamma" in logged[0].getMessage()

    mlir_backend.reset_fallback_stats()
    assert mlir_backend.fallback_stats() == {"fallbacks": 0, "reasons": {}, "mlir_kernels": 0}


def test_missing_bindings_raise_import_error_with_install_hint():
    out = run_python(
        """
        import importlib.abc, sys

        class HideTorchMlir(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "torch_mlir" or name.startswith("torch_mlir."):
                    raise ImportError("No module named " + repr(name))
                return None

        sys.meta_path.insert(0, HideTorchMlir())
        try:
            import torch_npu.compiler.inductor.mlir
        except ImportError as exc:
            print("IMPORT-ERROR", exc)
        """
    )
    assert "IMPORT-ERROR" in out
    assert "pip install --no-deps torch-mlir==20261001" in out
    assert "mlir` extra" in out


def test_compiled_kernels_are_cached_on_disk_across_processes():
    code = """
        import torch, torch_npu
        from torch_npu.compiler.inductor.mlir import jit
        f = torch.compile(lambda x: torch.softmax(x.cos() * 3, -1),
                          options={"npu_backend": "mlir"})
        x = torch.randn(8, 33)
        torch.testing.assert_close(f(x.to("npu")).cpu(), torch.softmax(x.cos() * 3, -1))
        print("STATS", jit.stats["compiled"], jit.stats["disk_hits"])
    """
    env = {"TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="mlir_disk_cache_")}
    first = run_python(code, env=env).split("STATS")[1].split()
    second = run_python(code, env=env).split("STATS")[1].split()
    assert int(first[0]) > 0
    assert int(second[0]) == 0 and int(second[1]) > 0
    assert any(name.endswith(".so") for name in os.listdir(os.path.join(env["TORCHINDUCTOR_CACHE_DIR"], "mlir")))


def test_default_backend_never_imports_the_mlir_layer():
    out = run_python(
        """
        import sys, torch, torch_npu
        f = torch.compile(lambda x: x * 2 + 1, options={"npu_backend": "default"})
        f(torch.randn(8).to("npu"))
        print("LOADED", sorted(m for m in sys.modules
                               if m.startswith("torch_mlir") or m.startswith("torch_npu.compiler.inductor.mlir")))
        """
    )
    assert "LOADED []" in out


def test_dropout_random_numbers_are_emitted_too():
    x = torch.randn(128, 257) + 3.0  # no zeros of its own
    f = torch.compile(lambda a: torch.nn.functional.dropout(a, 0.25, training=True), options=MLIR_OPTIONS)
    out = f(x.to(NPU)).cpu()
    dropped = out == 0
    assert 0.2 < dropped.float().mean().item() < 0.3
    torch.testing.assert_close(out[~dropped], x[~dropped] / 0.75)
    assert_no_fallback()
