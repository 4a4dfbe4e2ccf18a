"""The storage-level ``torch.ops.npu`` operators Ascend's ATen schema declares beyond
``npu_format_cast``: format-aware allocation, in-place and tensor-targeted format casts,
raw memory copy, storage size and data-pointer rebinding.

Ascend code and Ascend-written libraries call these through ``torch.ops.npu.<name>``. On
the simulated npu a storage format is backend metadata over plain strided memory (see
``format_cast``), so every cast here records a format and keeps the values; allocation with
a format is ``torch.empty`` with the format recorded; "swapped" (host-backed) memory is the
npu's host memory already. ``npu_change_data_ptr`` makes ``dst`` view ``src``'s memory at an
element offset, the aliasing Ascend's pointer swap gives.

The factory operators have no tensor argument to dispatch on, so their kernel is registered
as ``CompositeExplicitAutograd`` and builds the tensor on the requested device (``meta``
included, which is their Meta/fake behaviour).
"""
from __future__ import annotations

import torch

import torch_npu._C as _C

from ._op_family import OpFamily
from .format_cast import _check_format

__all__: list[str] = []

_family = OpFamily(__name__)
_lib = _family.library

_ND = 2


def _record_format(tensor: torch.Tensor, acl_format: int) -> None:
    # Only npu tensors (real or fake) carry a storage format; a meta tensor has no backend
    # to record it for.
    if tensor.device.type == "npu":
        _C._set_npu_format(tensor, acl_format)


def _check_size(op: str, size) -> None:
    if any(int(s) < 0 for s in size):
        raise ValueError(f"{op}: size must have no negative dimension, got {list(size)}")


def _empty(op: str, size, dtype, layout, device, pin_memory, acl_format) -> torch.Tensor:
    _check_size(op, size)
    _check_format(acl_format)
    if layout is not None and layout != torch.strided:
        raise ValueError(f"{op}: only layout=torch.strided is supported, got {layout}")
    device = torch.device("npu") if device is None else torch.device(device)
    out = torch.empty(size, dtype=dtype, device=device, pin_memory=bool(pin_memory) and device.type == "cpu")
    _record_format(out, acl_format)
    return out


def _empty_with_format(size, *, dtype=None, layout=None, device=None, pin_memory=None, acl_format=_ND,
                       base_addr_aligned_kb=None):
    # Alignment of the base address asks for a larger device allocation on Ascend; host
    # memory from the simulator's allocator is already aligned, so only validate it.
    if base_addr_aligned_kb is not None and base_addr_aligned_kb < 0:
        raise ValueError(f"empty_with_format: base_addr_aligned_kb must be >= 0, got {base_addr_aligned_kb}")
    return _empty("empty_with_format", size, dtype, layout, device, pin_memory, acl_format)


def _empty_with_format_names(size, names, *, dtype=None, layout=None, device=None, pin_memory=None, acl_format=_ND):
    out = _empty("empty_with_format", size, dtype, layout, device, pin_memory, acl_format)
    if names is not None:
        if len(names) != len(size):
            raise ValueError(f"empty_with_format: {len(names)} names for {len(size)} dimensions")
        # This PyTorch has no named tensors to attach the names to: they are validated and
        # the tensor is returned unnamed, as the names-free overload would return it.
    return out


def _unsafe_empty_with_format(size, *, dtype=None, layout=None, device=None, pin_memory=None, acl_format=_ND,
                              keep_format=False):
    del keep_format  # Ascend may fall back to ND unless asked to keep; the record is always kept here
    return _empty("unsafe_empty_with_format", size, dtype, layout, device, pin_memory, acl_format)


def _empty_with_swapped_memory(size, *, dtype=None, device=None):
    return _empty("empty_with_swapped_memory", size, dtype, None, device, None, _ND)


_family.define_schema("empty_with_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
                      "bool? pin_memory=None, int acl_format=2, int? base_addr_aligned_kb=None) -> Tensor")
# Dimname is not a schema type outside ATen; names arrive as str here, as Dimnames do in Python.
_family.define_schema("empty_with_format.names(SymInt[] size, str[]? names, *, ScalarType? dtype=None, Layout? layout=None, "
                      "Device? device=None, bool? pin_memory=None, int acl_format=2) -> Tensor")
_family.define_schema("unsafe_empty_with_format(SymInt[] size, *, ScalarType? dtype=None, Layout? layout=None, "
                      "Device? device=None, bool? pin_memory=None, int acl_format=2, bool keep_format=False) -> Tensor")
_family.define_schema("empty_with_swapped_memory(SymInt[] size, *, ScalarType? dtype=None, Device? device=None) -> Tensor")
_lib.impl("empty_with_format", _empty_with_format, "CompositeExplicitAutograd")
_lib.impl("empty_with_format.names", _empty_with_format_names, "CompositeExplicitAutograd")
_lib.impl("unsafe_empty_with_format", _unsafe_empty_with_format, "CompositeExplicitAutograd")
_lib.impl("empty_with_swapped_memory", _empty_with_swapped_memory, "CompositeExplicitAutograd")


def _check_npu(op: str, *tensors: torch.Tensor) -> None:
    for t in tensors:
        if t.device.type not in ("npu", "meta"):
            raise RuntimeError(f"{op} expects npu tensors, got a tensor on {t.device}")


def _cast_copy(op: str, self: torch.Tensor, acl_format: int) -> torch.Tensor:
    _check_format(acl_format)
    out = self.clone() if self.device.type != "meta" else torch.empty_like(self)
    _record_format(out, acl_format)
    return out


def _format_cast_tensor(self, dst, *, customize_dtype=None, input_dtype=None):
    _check_npu("npu_format_cast", self, dst)
    return _cast_copy("npu_format_cast", self, _C._get_npu_format(dst))


def _format_cast_inplace_src(self, src, *, customize_dtype=None, input_dtype=None):
    _check_npu("npu_format_cast_", self, src)
    _record_format(self, _C._get_npu_format(src))
    return self


def _format_cast_inplace(self, acl_format, *, customize_dtype=None, input_dtype=None):
    _check_npu("npu_format_cast_", self)
    _check_format(acl_format)
    _record_format(self, acl_format)
    return self


def _private_format_cast(self, acl_format):
    _check_npu("_npu_format_cast", self)
    return _cast_copy("_npu_format_cast", self, acl_format)


def _private_format_cast_aclnn(self, acl_format, customize_dtype):
    return _private_format_cast(self, acl_format)


def _private_format_cast_input_dtype(self, acl_format, customize_dtype, input_dtype):
    return _private_format_cast(self, acl_format)


def _copy_memory_(self, src, non_blocking=False):
    _check_npu("copy_memory_", self, src)
    if self.dtype != src.dtype:
        raise RuntimeError(f"copy_memory_: self is {self.dtype} but src is {src.dtype}; a memory copy keeps the dtype")
    if self.numel() != src.numel():
        raise RuntimeError(f"copy_memory_: self has {self.numel()} elements but src has {src.numel()}")
    with torch.no_grad():
        self.copy_(src.reshape(self.shape), non_blocking=non_blocking)
    return self


def _get_storage_size(self):
    _check_npu("get_storage_size", self)
    return self.untyped_storage().nbytes() // self.element_size()


def _change_data_ptr(dst, src, index):
    _check_npu("npu_change_data_ptr", dst, src)
    if dst.dtype != src.dtype:
        raise RuntimeError(f"npu_change_data_ptr: dst is {dst.dtype} but src is {src.dtype}; they must match")
    if index < 0:
        raise ValueError(f"npu_change_data_ptr: index must be >= 0, got {index}")
    offset = src.storage_offset() + index
    needed = offset + dst.numel()
    available = _get_storage_size(src)
    if needed > available:
        raise RuntimeError(
            f"npu_change_data_ptr: dst needs elements [{offset}, {needed}) of src's storage, which has {available}"
        )
    with torch.no_grad():
        dst.set_(src.untyped_storage(), offset, dst.size(), dst.stride())
    return 0


def _meta_int(*args, **kwargs):
    # Storage facts are not traceable: ask for them on real tensors.
    raise RuntimeError("this operator reads a real npu storage and has no meta/fake kernel")


_CAST_KW = "*, int? customize_dtype=None, int? input_dtype=None"
_family.define(f"npu_format_cast.Tensor(Tensor self, Tensor dst, {_CAST_KW}) -> Tensor",
               kernel=_format_cast_tensor, fake=_format_cast_tensor)
_family.define(f"npu_format_cast_(Tensor(a!) self, Tensor src, {_CAST_KW}) -> Tensor(a!)",
               kernel=_format_cast_inplace_src, fake=_format_cast_inplace_src)
_family.define(f"npu_format_cast_.acl_format(Tensor(a!) self, int acl_format, {_CAST_KW}) -> Tensor(a!)",
               kernel=_format_cast_inplace, fake=_format_cast_inplace)
_family.define("_npu_format_cast(Tensor self, int acl_format) -> Tensor",
               kernel=_private_format_cast, fake=_private_format_cast)
_family.define("_npu_format_cast.aclnn(Tensor self, int acl_format, int customize_dtype) -> Tensor",
               kernel=_private_format_cast_aclnn, fake=_private_format_cast_aclnn)
_family.define("_npu_format_cast.input_dtype(Tensor self, int acl_format, int customize_dtype, int input_dtype) -> Tensor",
               kernel=_private_format_cast_input_dtype, fake=_private_format_cast_input_dtype)
_family.define("copy_memory_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
               kernel=_copy_memory_, fake=lambda self, src, non_blocking=False: self)
_family.define("get_storage_size(Tensor self) -> int", kernel=_get_storage_size, fake=_meta_int)
_family.define("npu_change_data_ptr(Tensor dst, Tensor src, int index) -> int", kernel=_change_data_ptr, fake=_meta_int)


