"""The 1-bit sign codec of Ascend's gradient compression: ``npu_sign_bits_pack`` and
``npu_sign_bits_unpack``.

Semantics (Ascend documentation, which gives its NumPy equivalent): pack maps each element of
a 1-D float tensor to a bit, 1 for ``x >= 0`` and 0 for ``x < 0``, eight to a uint8 with the
first element in the lowest bit, pads the tail with 0 bits (the code of -1.0) to a multiple
of 8, and reshapes the bytes to ``(size, -1)``. Unpack maps each bit of a 1-D uint8 tensor
back to ``+1.0`` or ``-1.0`` (lowest bit first), in ``dtype``, reshaped to ``(size, -1)``.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_sign_bits_pack", "npu_sign_bits_unpack"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

BITS = 8


def _check_pack_args(x, size) -> int:
    op = "npu_sign_bits_pack"
    check.tensor(op, "self", x)
    check.dtype(op, "self", x, (torch.float16, torch.float32))
    check.rank(op, "self", x, (1,))
    packed = -(-x.shape[0] // BITS)
    if size <= 0 or packed % size:
        raise ValueError(f"{op}: size={size} must be positive and divide the {packed} packed bytes")
    return packed


def _pack(self, size: int):
    packed = _check_pack_args(self, size)
    bits = (self >= 0).to(torch.uint8)
    bits = torch.cat([bits, bits.new_zeros(packed * BITS - self.shape[0])])
    weights = (2 ** torch.arange(BITS, device=self.device)).to(torch.uint8)
    return (bits.reshape(packed, BITS) * weights).sum(dim=1, dtype=torch.uint8).reshape(size, -1)


def _pack_fake(self, size: int):
    packed = _check_pack_args(self, size)
    return self.new_empty((size, packed // size), dtype=torch.uint8)


_family.define("npu_sign_bits_pack(Tensor self, int size) -> Tensor", kernel=_pack, fake=_pack_fake, decompose=True)


def _check_unpack_args(x, size, dtype) -> int:
    op = "npu_sign_bits_unpack"
    check.tensor(op, "inputs", x)
    check.dtype(op, "inputs", x, (torch.uint8,))
    check.rank(op, "inputs", x, (1,))
    check.choice(op, "dtype", dtype, (torch.float16, torch.float32))
    values = x.shape[0] * BITS
    if size <= 0 or values % size:
        raise ValueError(f"{op}: size={size} must be positive and divide the {values} unpacked values")
    return values


def _unpack(inputs, size: int, dtype):
    _check_unpack_args(inputs, size, dtype)
    shifts = torch.arange(BITS, device=inputs.device, dtype=torch.uint8)
    bits = (inputs.unsqueeze(1) >> shifts) & 1
    return (bits.to(dtype) * 2 - 1).reshape(size, -1)


def _unpack_fake(inputs, size: int, dtype):
    values = _check_unpack_args(inputs, size, dtype)
    return inputs.new_empty((size, values // size), dtype=dtype)


_family.define("npu_sign_bits_unpack(Tensor inputs, int size, ScalarType dtype) -> Tensor",
               kernel=_unpack, fake=_unpack_fake, decompose=True)

npu_sign_bits_pack = torch.ops.npu.npu_sign_bits_pack
npu_sign_bits_unpack = torch.ops.npu.npu_sign_bits_unpack
