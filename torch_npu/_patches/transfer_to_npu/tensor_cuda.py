"""Makes ``Tensor.cuda()`` move to npu and ``tensor.is_cuda`` true for npu tensors: two sites.

Missing extension point: both are attributes of ``torch._C.TensorBase``. ``Tensor.cuda(1)``
(and ``nn.Module.cuda(rank)``, which calls it) reads an integer as an index of the current
accelerator, npu, and then refuses it as no cuda device, before anything is dispatched;
``is_cuda`` is read from Python by scripts that branch on it (``if x.is_cuda: ...``) and
expect True once ported. No mode sees them unless a mode is on the stack for every call,
which transfer_to_npu avoids (see ``device_mode``).

``apply()`` defines, on ``torch.Tensor``:
* ``cuda(device=None, non_blocking=False, memory_format=torch.preserve_format)``: ``to`` the
  npu device of that index (the current one for ``None``); ``self`` when it is already there,
  as CUDA does; anything but an index or a cuda device is refused with CUDA's error.
* the ``is_cuda`` property over the C one: True for an npu tensor read from outside
  PyTorch's own modules (``torch`` and ``torch.*``, Dynamo and FX included: they ask about
  the real device), the C answer otherwise. C++ code is unaffected.

Delete with ``cuda_module``.
"""
from __future__ import annotations

import sys

import torch

_applied = False


def _read_by_torch(frame) -> bool:
    module_name = frame.f_globals.get("__name__", "")
    return module_name == "torch" or module_name.startswith("torch.")


def _npu_index(device) -> int:
    if device is None:
        return torch.npu.current_device()
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device) and device.type in ("cuda", "npu"):
        return torch.npu.current_device() if device.index is None else device.index
    raise RuntimeError("Invalid device, must be cuda device")


def cuda(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
    return self.to(torch.device("npu", _npu_index(device)), non_blocking=non_blocking, memory_format=memory_format)


def _is_cuda_property(real):
    frame = sys._getframe

    def is_cuda(self) -> bool:
        if real(self):
            return True
        return self.device.type == "npu" and not _read_by_torch(frame(1))

    return property(is_cuda, doc=torch._C.TensorBase.is_cuda.__doc__)


def apply() -> None:
    global _applied
    if _applied:
        return
    taken = [name for name in ("cuda", "is_cuda") if name in vars(torch.Tensor)]
    if taken:
        raise RuntimeError(f"torch.Tensor already defines {taken} in Python; transfer_to_npu expects the C attributes")
    cuda.__doc__ = torch._C.TensorBase.cuda.__doc__
    torch.Tensor.cuda = cuda
    torch.Tensor.is_cuda = _is_cuda_property(torch._C.TensorBase.is_cuda.__get__)
    _applied = True


def revert() -> None:
    global _applied
    if not _applied:
        return
    del torch.Tensor.cuda
    del torch.Tensor.is_cuda
    _applied = False


def sites() -> tuple[str, ...]:
    return ("torch.Tensor.cuda", "torch.Tensor.is_cuda")
