"""The legacy typed constructors ``torch.npu.FloatTensor(...)``, ``torch.npu.FloatStorage(n)``
and their siblings, as ``torch.cuda`` has them, for code written before ``device=`` existed.

``torch.npu.FloatTensor(2, 3)`` is an uninitialised float32 npu tensor of that shape,
``torch.npu.FloatTensor([1, 2])`` one holding that data, ``torch.npu.FloatTensor()`` an
empty one; ``isinstance(t, torch.npu.FloatTensor)`` tells whether ``t`` is a float32 npu
tensor. The storages are ``torch.TypedStorage`` subclasses on npu, as ``torch.cuda``'s
are on cuda (``torch.storage`` tells the device from the class's module, ``torch.npu``).
"""
from __future__ import annotations

from typing import Any

import torch
from torch._utils import classproperty
from torch.storage import _LegacyStorage, _warn_typed_storage_removal

_DTYPES = {
    "Bool": torch.bool,
    "Byte": torch.uint8,
    "Char": torch.int8,
    "Short": torch.int16,
    "Int": torch.int32,
    "Long": torch.int64,
    "Half": torch.float16,
    "Float": torch.float32,
    "Double": torch.float64,
    "BFloat16": torch.bfloat16,
}

__all__ = [f"{name}Tensor" for name in _DTYPES] + [f"{name}Storage" for name in _DTYPES]


class _LegacyTensorMeta(type):
    dtype: torch.dtype

    def __instancecheck__(cls, instance: Any) -> bool:
        return (
            isinstance(instance, torch.Tensor)
            and instance.device.type == "npu"
            and instance.dtype == cls.dtype
            and instance.layout == torch.strided
        )

    def __call__(cls, *args: Any, device: Any = None) -> torch.Tensor:
        index = torch.npu.current_device() if device is None else torch.device(device).index
        if index is None:
            index = torch.npu.current_device()
        target = torch.device("npu", index)
        if len(args) == 1 and isinstance(args[0], torch.Tensor):
            source = args[0]
            if source.dtype != cls.dtype or source.device != target:
                raise TypeError(
                    f"expected {cls.__module__}.{cls.__name__} (got {source.type()}); "
                    f"convert with tensor.to(device='npu', dtype={cls.dtype})"
                )
            return source
        if len(args) == 1 and isinstance(args[0], torch.TypedStorage | torch.UntypedStorage):
            storage = args[0]
            if storage.device != target:
                raise TypeError(f"expected a storage on {target}, got one on {storage.device}")
            return torch.empty(0, dtype=cls.dtype, device=target).set_(
                storage.untyped() if isinstance(storage, torch.TypedStorage) else storage
            )
        if not args:
            return torch.empty(0, dtype=cls.dtype, device=target)
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args) or (
            len(args) == 1 and isinstance(args[0], torch.Size)
        ):
            sizes = args[0] if len(args) == 1 and isinstance(args[0], torch.Size) else args
            return torch.empty(tuple(sizes), dtype=cls.dtype, device=target)
        if len(args) == 1:
            return torch.tensor(args[0], dtype=cls.dtype, device=target)
        raise TypeError(
            f"{cls.__name__}() takes sizes (ints), a sequence of data, a tensor or a storage; got {args!r}"
        )


def _make_tensor_type(name: str, dtype: torch.dtype) -> type:
    cls = _LegacyTensorMeta(f"{name}Tensor", (), {"dtype": dtype, "is_npu": True, "__module__": "torch.npu"})
    cls.__doc__ = f"Legacy constructor of {dtype} npu tensors (``torch.npu.{name}Tensor``)."
    return cls


class _NpuLegacyStorage(_LegacyStorage):
    @classmethod
    def from_buffer(cls, *args: Any, **kwargs: Any) -> Any:
        _warn_typed_storage_removal()
        raise RuntimeError("from_buffer: Not available for npu storage")

    @classmethod
    def _new_with_weak_ptr(cls, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("_new_with_weak_ptr: Not available for npu storage")

    @classmethod
    def _new_shared_filename(cls, manager: Any, obj: Any, size: Any, *, device: Any = None, dtype: Any = None) -> Any:
        raise RuntimeError("_new_shared_filename: Not available for npu storage")


def _make_storage_type(name: str, dtype: torch.dtype) -> type:
    def _dtype(cls: type) -> torch.dtype:
        return dtype

    def _public_dtype(cls: type) -> torch.dtype:
        _warn_typed_storage_removal()
        return dtype

    namespace = {
        "__module__": "torch.npu",
        "__doc__": f"Legacy typed storage of {dtype} on npu (``torch.npu.{name}Storage``).",
        "_dtype": classproperty(_dtype),
        "dtype": classproperty(_public_dtype),
    }
    return type(f"{name}Storage", (_NpuLegacyStorage,), namespace)


for _name, _dtype in _DTYPES.items():
    globals()[f"{_name}Tensor"] = _make_tensor_type(_name, _dtype)
    globals()[f"{_name}Storage"] = _make_storage_type(_name, _dtype)
del _name, _dtype
