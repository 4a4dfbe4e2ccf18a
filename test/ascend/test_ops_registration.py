"""Registration of the npu operators: every top-level operator name of Ascend's listing is a
torch_npu attribute; every differentiable operator has a schema ``register_autograd`` accepts
(its Autograd kernel is built on first use, so the checks it would make at registration are
made here); and the first differentiable call builds the same kernel register_autograd would."""
from __future__ import annotations

import torch
from torch._library import utils as library_utils

import torch_npu
from torch_npu import ops

LISTING = "/work/shared/reference/torch_npu_public_api.tsv"


def _npu_overloads():
    for family in ops.FAMILIES:
        module = ops.load(family)  # its kernels replace the first-call stand-ins
        for schema in getattr(getattr(module, "_family", None), "schemas", ()):
            qualified = schema.split("(", 1)[0].strip()
            yield torch._library.utils.lookup_op(f"npu::{qualified}")


def test_every_top_level_operator_of_the_listing_exists():
    import os

    if not os.path.exists(LISTING):
        import pytest

        pytest.skip("the public API listing is not on this machine")
    names = set()
    for line in open(LISTING):
        parts = line.rstrip("\n").split("\t")
        if len(parts) >= 2 and parts[0] == "python" and parts[1].count(".") == 1 and parts[1].startswith("torch_npu."):
            names.add(parts[1].split(".")[1])
    op_like = {n for n in names if n.startswith("npu_") or n in ("fast_gelu", "erase_stream", "matmul_checksum", "HiFloat8Tensor")}
    missing = sorted(n for n in op_like if not hasattr(torch_npu, n))
    assert not missing, missing


def test_differentiable_operators_have_schemas_register_autograd_accepts():
    checked = 0
    for op in _npu_overloads():
        if not torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Autograd"):
            continue
        checked += 1
        assert library_utils.is_functional_schema(op._schema), op
        assert not library_utils.has_kwarg_only_tensors(op._schema), op
        assert not library_utils.is_out(op), op
    assert checked >= 20


def test_first_differentiable_call_builds_the_autograd_kernel():
    x = torch.randn(5, 6, device="npu", requires_grad=True)
    y = torch_npu.npu_fast_gelu(x)
    assert type(y.grad_fn).__name__.startswith("GeneratedBackwardFor_npu_npu_fast_gelu")
    y.sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape
