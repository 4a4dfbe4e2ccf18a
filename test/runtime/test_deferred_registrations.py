"""The registrations that touch every operator (the npu, sparse COO and compressed-layout
fallbacks with their routed operators) are made at the device's initialisation, not at
``import torch_npu``; autocast's and the fast paths' stay at import. Each case runs in a
fresh interpreter so that nothing made them before, and checks that the first use behaves
as it did with everything made at import."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

# The backend fallbacks registered for npu's dispatch keys (torch_npu is the only
# library that registers any for them).
PRELUDE = """
import json, torch, torch_npu

KEYS = ("PrivateUse1", "SparsePrivateUse1", "SparseCsrPrivateUse1", "AutocastPrivateUse1")

def npu_fallbacks():
    return sorted(key for key in KEYS if torch._C._dispatch_has_backend_fallback(getattr(torch._C.DispatchKey, key)))

def routed():
    # native_group_norm has a CPU kernel and a composite one (and no fast path): npu routes
    # it to the fallback.
    return torch._C._dispatch_has_kernel_for_dispatch_key("aten::native_group_norm", "PrivateUse1")

def report(**values):
    print(json.dumps(values))
"""


def _run(code: str) -> dict:
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", TORCH_NPU_MEMORY_CAPACITY_MB="64")
    result = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


ALL_KEYS = ["AutocastPrivateUse1", "PrivateUse1", "SparseCsrPrivateUse1", "SparsePrivateUse1"]
AT_IMPORT = ["AutocastPrivateUse1"]


def test_import_registers_no_fallback_and_the_first_tensor_registers_all():
    out = _run("""
        at_import = (npu_fallbacks(), routed())
        x = torch.arange(6.0, device="npu").reshape(2, 3)
        report(at_import=at_import, after=(npu_fallbacks(), routed()),
               cumsum=x.cumsum(1).cpu().tolist(), want=x.cpu().cumsum(1).tolist())
    """)
    assert out["at_import"] == [AT_IMPORT, False]
    assert out["after"] == [ALL_KEYS, True]
    assert out["cumsum"] == out["want"]


def test_autocast_before_any_npu_tensor_initialises_nothing():
    out = _run("""
        import torch.nn.functional as F
        a = torch.randn(8, 8)
        b = torch.randn(8, 8)
        with torch.autocast("npu", dtype=torch.float16):
            registered = npu_fallbacks()
            initialized = torch.npu.is_initialized()
            an, bn = a.npu(), b.npu()
            mm = an @ bn
            soft = F.softmax(an.half(), dim=1)  # an fp32 op: runs in float32
            added = an + bn  # no autocast policy: falls through, stays float32
        want_mm = (a.half() @ b.half()).float()
        report(registered=registered, initialized=initialized,
               mm_dtype=str(mm.dtype), mm_equal=torch.equal(mm.float().cpu(), want_mm),
               soft_dtype=str(soft.dtype),
               soft_close=torch.allclose(soft.cpu(), F.softmax(a.half().float(), dim=1)),
               added_dtype=str(added.dtype), added_equal=torch.equal(added.cpu(), a + b))
    """)
    assert out["registered"] == AT_IMPORT
    assert out["initialized"] is False
    assert out["mm_dtype"] == "torch.float16" and out["mm_equal"]
    assert out["soft_dtype"] == "torch.float32" and out["soft_close"]
    assert out["added_dtype"] == "torch.float32" and out["added_equal"]


def test_set_autocast_enabled_directly_after_the_first_tensor():
    # torch.set_autocast_enabled reaches no npu code: the device's initialisation made the
    # autocast kernels already.
    out = _run("""
        a = torch.randn(4, 4).npu()
        torch.set_autocast_enabled("npu", True)
        try:
            mm = a @ a
            total = a.sum()
        finally:
            torch.set_autocast_enabled("npu", False)
        report(mm=str(mm.dtype), total=str(total.dtype))
    """)
    assert out == {"mm": "torch.float16", "total": "torch.float32"}


def test_set_autocast_enabled_directly_on_fake_npu_tensors_before_any_device_use():
    # AutocastPrivateUse1 sits above the Python key: fake npu tensors reach it in a process
    # whose device never initialised, so its kernels must exist from the import on.
    out = _run("""
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            x = torch.empty(4, 4, device="npu")
            torch.set_autocast_enabled("npu", True)
            try:
                mm = x @ x
                total = x.sum()
            finally:
                torch.set_autocast_enabled("npu", False)
        report(mm=str(mm.dtype), total=str(total.dtype), initialized=torch.npu.is_initialized())
    """)
    assert out == {"mm": "torch.float16", "total": "torch.float32", "initialized": False}


def test_a_kernel_registered_after_import_for_a_fast_path_operator_stays_in_place():
    # The device's initialisation registers nothing for an operator that has an npu
    # kernel: a program's kernel registered between the import and the first tensor wins,
    # as it does over any kernel registered at load, and nothing warns of an override.
    out = _run("""
        import warnings
        calls = []

        def my_cos(x):
            calls.append(1)
            return torch.zeros_like(x)

        lib = torch.library.Library("aten", "IMPL")
        lib.impl("cos", my_cos, "PrivateUse1")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            x = torch.ones(3, device="npu")
            got = x.cos().cpu().tolist()
        report(got=got, calls=len(calls), warnings=[str(w.message) for w in caught])
    """)
    assert out == {"got": [0.0, 0.0, 0.0], "calls": 1, "warnings": []}


def test_autocast_in_a_compiled_function_as_first_npu_use():
    out = _run("""
        a = torch.randn(8, 8)

        @torch.compile(backend="aot_eager", fullgraph=True)
        def f(x):
            with torch.autocast("npu", dtype=torch.bfloat16):
                return x @ x

        got = f(a.npu())
        report(dtype=str(got.dtype), equal=torch.equal(got.cpu(), a.bfloat16() @ a.bfloat16()))
    """)
    assert out == {"dtype": "torch.bfloat16", "equal": True}


def test_first_npu_call_a_compressed_layout_factory_is_refused_clearly():
    out = _run("""
        try:
            torch.empty(2, 2, device="npu", layout=torch.sparse_csr)
            error = None
        except NotImplementedError as e:
            error = str(e)
        report(error=error)
    """)
    assert out["error"] is not None and "compressed sparse layouts (CSR, CSC, BSR, BSC) are not supported" in out["error"]


def test_first_npu_call_a_sparse_coo_tensor():
    out = _run("""
        i = torch.tensor([[0, 1, 1], [2, 0, 2]])
        v = torch.tensor([3.0, 4.0, 5.0])
        s = torch.sparse_coo_tensor(i, v, (2, 3), device="npu")
        empty = torch.empty(2, 3, device="npu", layout=torch.sparse_coo)
        report(dense=s.to_dense().cpu().tolist(), want=torch.sparse_coo_tensor(i, v, (2, 3)).to_dense().tolist(),
               layout=str(s.layout), empty_layout=str(empty.layout), empty_nnz=empty._nnz(),
               coalesced=s.coalesce().indices().device.type)
    """)
    assert out["dense"] == out["want"]
    assert out["layout"] == "torch.sparse_coo" and out["empty_layout"] == "torch.sparse_coo"
    assert out["empty_nnz"] == 0 and out["coalesced"] == "npu"


def test_autocast_first_used_inside_an_npu_graph_capture():
    out = _run("""
        x = torch.randn(8, 8).npu()
        w = torch.randn(8, 8).npu()
        g = torch.npu.NPUGraph()
        with torch.npu.graph(g):
            with torch.autocast("npu", dtype=torch.float16):
                y = x @ w
        results = []
        for _ in range(2):
            new = torch.randn(8, 8)
            x.copy_(new.npu())
            g.replay()
            results.append(torch.equal(y.cpu(), new.half() @ w.cpu().half()))
        report(dtype=str(y.dtype), results=results)
    """)
    assert out == {"dtype": "torch.float16", "results": [True, True]}
