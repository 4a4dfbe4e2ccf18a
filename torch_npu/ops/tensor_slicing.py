"""Slicing, padding and transposing as Ascend code calls them: ``npu_pad``, ``npu_slice``,
``npu_transpose``, ``npu_indexing`` (a strided slice with TensorFlow's masks) and
``npu_stride_add``.

Semantics (Ascend documentation):

* ``npu_pad(input, paddings)``: zero padding, ``paddings`` being ``[before_0, after_0,
  before_1, after_1, ...]`` in dimension order (TensorFlow's ``Pad``).
* ``npu_slice(self, offsets, size)``: ``self[o_0 : o_0 + s_0, ...]`` (``s_i = -1``: to the end),
  as a new contiguous tensor.
* ``npu_transpose(self, perm, require_contiguous)``: ``self.permute(perm)``, contiguous.
* ``npu_indexing(self, begin, end, strides, begin_mask, end_mask, ellipsis_mask,
  new_axis_mask, shrink_axis_mask)``: TensorFlow's ``StridedSlice``: bit ``i`` of a mask applies
  to spec entry ``i`` (ignore begin / end, an ellipsis, a new axis of size 1, or take the
  single index ``begin[i]`` and drop the dimension); negative strides walk backwards.
* ``npu_stride_add(self, other, offset1, offset2, c1_len)``: the sum of two slices of
  ``c1_len`` channel blocks of 16 (Ascend's C1 axis of the 5HD layout, dimension 1 here),
  starting at block ``offset1`` of ``self`` and ``offset2`` of ``other``; channels beyond an
  input's size count as zeros, so the result has ``16 * c1_len`` channels.

All are copies with exact results (no arithmetic but ``npu_stride_add``'s one sum). Under
Inductor they decompose into the ATen view and copy ops they are made of.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_pad", "npu_slice", "npu_transpose", "npu_indexing", "npu_stride_add"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

C0 = 16  # channels per C1 block of Ascend's 5HD layout


# --- npu_pad -------------------------------------------------------------------------------

def _check_pad_args(x, paddings) -> None:
    op = "npu_pad"
    check.tensor(op, "input", x)
    if len(paddings) != 2 * x.dim():
        raise ValueError(
            f"{op}: paddings must hold two values (before, after) per dimension of input "
            f"({2 * x.dim()} for shape {tuple(x.shape)}), got {len(paddings)}"
        )
    if any(p < 0 for p in paddings):
        raise ValueError(f"{op}: paddings must be non-negative, got {list(paddings)}")


def _pad(input, paddings):
    _check_pad_args(input, paddings)
    # F.pad takes the last dimension first.
    reversed_pairs = [p for d in reversed(range(input.dim())) for p in (paddings[2 * d], paddings[2 * d + 1])]
    return F.pad(input, reversed_pairs).clone(memory_format=torch.contiguous_format)


def _pad_fake(input, paddings):
    _check_pad_args(input, paddings)
    shape = [s + paddings[2 * d] + paddings[2 * d + 1] for d, s in enumerate(input.shape)]
    return input.new_empty(shape)


_family.define("npu_pad(Tensor input, int[] paddings) -> Tensor", kernel=_pad, fake=_pad_fake, decompose=True)


def npu_pad(input_, paddings):
    """``torch.ops.npu.npu_pad`` under the Python signature Ascend exports."""
    return torch.ops.npu.npu_pad(input_, paddings)


# --- npu_slice -----------------------------------------------------------------------------

def _slice_bounds(x, offsets, size) -> list[tuple[int, int]]:
    op = "npu_slice"
    check.tensor(op, "self", x)
    if len(offsets) != x.dim() or len(size) != x.dim():
        raise ValueError(
            f"{op}: offsets and size need one entry per dimension of self ({x.dim()}), got "
            f"{len(offsets)} and {len(size)}"
        )
    bounds = []
    for d, (start, length) in enumerate(zip(offsets, size)):
        extent = x.shape[d]
        stop = extent if length == -1 else start + length
        if not (0 <= start <= extent and start <= stop <= extent):
            raise IndexError(
                f"{op}: offsets[{d}]={start} with size[{d}]={length} is outside dimension {d} of "
                f"self (size {extent})"
            )
        bounds.append((start, stop))
    return bounds


def _slice(self, offsets, size):
    out = self
    for d, (start, stop) in enumerate(_slice_bounds(self, offsets, size)):
        out = out.narrow(d, start, stop - start)
    return out.clone(memory_format=torch.contiguous_format)


def _slice_fake(self, offsets, size):
    return self.new_empty([stop - start for start, stop in _slice_bounds(self, offsets, size)])


_family.define("npu_slice(Tensor self, int[] offsets, int[] size) -> Tensor", kernel=_slice, fake=_slice_fake,
               decompose=True)


# --- npu_transpose -------------------------------------------------------------------------

def _check_perm(x, perm) -> None:
    op = "npu_transpose"
    check.tensor(op, "self", x)
    if sorted(p % x.dim() if x.dim() else p for p in perm) != list(range(x.dim())):
        raise ValueError(f"{op}: perm={list(perm)} is not a permutation of the {x.dim()} dimensions of self")


def _transpose(self, perm, require_contiguous: bool = True):
    _check_perm(self, perm)
    return self.permute(perm).clone(memory_format=torch.contiguous_format)


def _transpose_fake(self, perm, require_contiguous: bool = True):
    _check_perm(self, perm)
    return self.new_empty([self.shape[p] for p in perm])


def _transpose_out(self, perm, require_contiguous: bool = True, *, out):
    result = _transpose(self, perm, require_contiguous)
    out.resize_(result.shape).copy_(result)
    return out


def _transpose_out_fake(self, perm, require_contiguous: bool = True, *, out):
    _check_perm(self, perm)
    return out.resize_([self.shape[p] for p in perm])


_family.define("npu_transpose(Tensor self, int[] perm, bool require_contiguous=True) -> Tensor",
               kernel=_transpose, fake=_transpose_fake, decompose=True)
_family.define("npu_transpose.out(Tensor self, int[] perm, bool require_contiguous=True, *, Tensor(a!) out) "
               "-> Tensor(a!)", kernel=_transpose_out, fake=_transpose_out_fake)


def npu_transpose(self, perm, require_contiguous=True, out=None):
    """``torch.ops.npu.npu_transpose`` (or its ``out`` overload) under Ascend's Python signature."""
    if out is None:
        return torch.ops.npu.npu_transpose(self, perm, require_contiguous)
    return torch.ops.npu.npu_transpose.out(self, perm, require_contiguous, out=out)


# --- npu_indexing --------------------------------------------------------------------------

def _strided_slice_plan(x, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                        shrink_axis_mask) -> list[tuple]:
    """The strided slice as steps over the input's dimensions: ("take", start, stop, step),
    ("index", i) or ("new",), in output order."""
    op = "npu_indexing"
    check.tensor(op, "self", x)
    if not len(begin) == len(end) == len(strides):
        raise ValueError(f"{op}: begin, end and strides must have the same length, got {len(begin)}, {len(end)}, {len(strides)}")
    spec = len(begin)
    consuming = sum(1 for i in range(spec) if not (new_axis_mask >> i) & 1 and not (ellipsis_mask >> i) & 1)
    ellipsis_at = next((i for i in range(spec) if (ellipsis_mask >> i) & 1), None)
    if consuming > x.dim():
        raise ValueError(f"{op}: the slice spec indexes {consuming} dimensions but self has {x.dim()}")
    steps: list[tuple] = []
    dim = 0

    def full(d):
        return ("take", 0, x.shape[d], 1)

    for i in range(spec):
        if i == ellipsis_at:
            for _ in range(x.dim() - consuming):
                steps.append(full(dim))
                dim += 1
            continue
        if (new_axis_mask >> i) & 1:
            steps.append(("new",))
            continue
        size, stride = x.shape[dim], strides[i]
        if stride == 0:
            raise ValueError(f"{op}: strides[{i}] is 0; a stride must be non-zero")
        if (shrink_axis_mask >> i) & 1:
            index = begin[i] + size if begin[i] < 0 else begin[i]
            if not 0 <= index < size:
                raise IndexError(f"{op}: begin[{i}]={begin[i]} is out of range for dimension {dim} of size {size}")
            steps.append(("index", index))
        else:
            low, high = (0, size) if stride > 0 else (-1, size - 1)
            if (begin_mask >> i) & 1:
                start = low if stride > 0 else high
            else:
                start = begin[i] + size if begin[i] < 0 else begin[i]
                start = min(max(start, low), high)
            if (end_mask >> i) & 1:
                stop = high if stride > 0 else low
            else:
                stop = end[i] + size if end[i] < 0 else end[i]
                stop = min(max(stop, low), high)
            steps.append(("take", start, stop, stride))
        dim += 1
    while dim < x.dim():
        steps.append(full(dim))
        dim += 1
    return steps


def _indexing(self, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
              shrink_axis_mask=0):
    steps = _strided_slice_plan(self, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                                shrink_axis_mask)
    out, at = self, 0  # ``at``: the output dimension the next input dimension sits at
    for step in steps:
        if step[0] == "new":
            out = out.unsqueeze(at)
            at += 1
        elif step[0] == "index":
            out = out.select(at, step[1])
        else:
            _, start, stop, stride = step
            positions = torch.arange(start, stop, stride, device=self.device)
            out = out.index_select(at, positions)
            at += 1
    return out.clone(memory_format=torch.contiguous_format)


def _indexing_fake(self, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
                   shrink_axis_mask=0):
    steps = _strided_slice_plan(self, begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask,
                                shrink_axis_mask)
    shape = []
    for step in steps:
        if step[0] == "new":
            shape.append(1)
        elif step[0] == "take":
            shape.append(len(range(step[1], step[2], step[3])))
    return self.new_empty(shape)


_family.define(
    "npu_indexing(Tensor self, int[] begin, int[] end, int[] strides, int begin_mask=0, int end_mask=0, "
    "int ellipsis_mask=0, int new_axis_mask=0, int shrink_axis_mask=0) -> Tensor",
    kernel=_indexing, fake=_indexing_fake,
)


# --- npu_stride_add ------------------------------------------------------------------------

def _check_stride_add_args(x, other, offset1, offset2, c1_len) -> None:
    op = "npu_stride_add"
    check.tensor(op, "self", x)
    check.tensor(op, "other", other)
    check.same_dtype(op, "other", other, "self", x)
    if x.dim() < 2 or other.dim() != x.dim():
        raise ValueError(f"{op}: self and other must have the same number (>= 2) of dimensions, got shapes {tuple(x.shape)} and {tuple(other.shape)}")
    if tuple(x.shape[:1]) + tuple(x.shape[2:]) != tuple(other.shape[:1]) + tuple(other.shape[2:]):
        raise ValueError(f"{op}: self {tuple(x.shape)} and other {tuple(other.shape)} may differ only in dimension 1 (channels)")
    for name, value in (("offset1", offset1), ("offset2", offset2), ("c1_len", c1_len)):
        if int(value) != value or value < 0:
            raise ValueError(f"{op}: {name}={value} must be a non-negative integer (in blocks of {C0} channels)")


def _channel_blocks(x, offset: int, c1_len: int) -> torch.Tensor:
    start, width = offset * C0, c1_len * C0
    available = max(0, min(x.shape[1] - start, width))
    part = x.narrow(1, min(start, x.shape[1]), available)
    return F.pad(part, [0, 0] * (x.dim() - 2) + [0, width - available])


def _stride_add(self, other, offset1, offset2, c1_len):
    _check_stride_add_args(self, other, offset1, offset2, c1_len)
    return _channel_blocks(self, int(offset1), int(c1_len)) + _channel_blocks(other, int(offset2), int(c1_len))


def _stride_add_fake(self, other, offset1, offset2, c1_len):
    _check_stride_add_args(self, other, offset1, offset2, c1_len)
    shape = list(self.shape)
    shape[1] = int(c1_len) * C0
    return self.new_empty(shape)


_family.define("npu_stride_add(Tensor self, Tensor other, Scalar offset1, Scalar offset2, Scalar c1_len) -> Tensor",
               kernel=_stride_add, fake=_stride_add_fake, decompose=True)

npu_slice = torch.ops.npu.npu_slice
npu_indexing = torch.ops.npu.npu_indexing
npu_stride_add = torch.ops.npu.npu_stride_add
