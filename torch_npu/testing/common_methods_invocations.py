"""The npu operator database of Ascend's OpInfo-style tests and its sample inputs.

``op_db`` lists ``OpInfo`` entries (PyTorch's ``torch.testing._internal`` OpInfo, with
the two attributes Ascend's entries add: ``dtypesIfNPU``, the dtypes tested on npu, and
``formats``, the storage formats) for the operators whose samples Ascend defines itself:
``median`` (all-reduce and per-dimension forms) and ``normal`` with a number mean and a
tensor std. ``@instantiate_ops_tests(op_db)`` (``torch_npu.testing.decorator``) turns a
test method into one test per entry. Importing this module loads PyTorch's OpInfo
machinery (a few seconds); nothing imports it implicitly.
"""
from __future__ import annotations

from functools import partial

import torch
from torch.testing import make_tensor
from torch.testing._internal.common_dtype import _dispatch_dtypes
from torch.testing._internal.opinfo.core import OpInfo, SampleInput

__all__ = ["op_db", "sample_inputs_median_custom", "sample_inputs_normal_tensor_second", "npu_op_info"]

_S = 5


def sample_inputs_median_custom(self, device, dtype, requires_grad, **kwargs):
    """Samples of ``torch.median``: the median of a whole tensor, and along each dimension
    with and without ``keepdim`` (values drawn without repeats, so the median index is
    unique and cpu and npu must agree on it)."""
    make = partial(make_tensor, device=device, dtype=dtype, requires_grad=requires_grad)
    yield SampleInput(make((_S, _S, _S)))
    yield SampleInput(make(()))
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            values = torch.randperm(_S * _S * _S).reshape(_S, _S, _S).to(dtype) / (_S * _S)
            yield SampleInput(values.to(device).requires_grad_(requires_grad), args=(dim, keepdim))


def sample_inputs_normal_tensor_second(self, device, dtype, requires_grad, **kwargs):
    """Samples of ``torch.normal(mean, std)`` with a number ``mean`` and a tensor ``std``
    (positive, so every draw is defined)."""
    make_std = partial(make_tensor, device=device, dtype=dtype, requires_grad=requires_grad, low=0.1, high=2.0)
    for shape in ((), (_S,), (_S, _S)):
        yield SampleInput(0.3, args=(make_std(shape),))
        yield SampleInput(-1.5, args=(make_std(shape),))


def npu_op_info(name, *, dtypesIfNPU=(torch.float32,), formats=(2,), **kwargs) -> OpInfo:  # noqa: N803
    """An ``OpInfo`` with Ascend's two extra attributes: the dtypes tested on npu and the
    storage formats (ACL ids)."""
    kwargs.setdefault("dtypes", _dispatch_dtypes(dtypesIfNPU))
    info = OpInfo(name, **kwargs)
    info.dtypesIfNPU = _dispatch_dtypes(dtypesIfNPU)
    info.formats = tuple(formats)
    return info


op_db = [
    npu_op_info(
        "median",
        dtypesIfNPU=(torch.float32, torch.float16),
        sample_inputs_func=sample_inputs_median_custom,
        supports_out=False,
    ),
    npu_op_info(
        "normal",
        variant_test_name="number_mean",
        op=torch.normal,
        dtypesIfNPU=(torch.float32,),
        sample_inputs_func=sample_inputs_normal_tensor_second,
        supports_out=False,
        supports_autograd=False,
    ),
]
