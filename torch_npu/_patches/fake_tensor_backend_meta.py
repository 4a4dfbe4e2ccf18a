"""Fake tensors made from npu tensors carry the npu tensor's backend metadata.

Missing extension point: ``FakeTensorConverter.from_real_tensor`` (the one place Dynamo,
AOT autograd and export turn a real tensor into a fake one) builds the fake from a meta
tensor described by ``torch._subclasses.meta_utils``, which copies sizes, strides, dtype
and autograd state but not ``c10::BackendMeta``; no device hook is consulted there (the
``TensorBackendMetaRegistry`` of PrivateUse1 serves only ``torch.save``/``torch.load``).
So a fake of a tensor cast with ``torch_npu.npu_format_cast`` forgets its NPU format, and
traced code that asks ``get_npu_format`` sees ND. The patch wraps that method: after the
fake is made, the npu tensor's metadata (``torch._utils.get_tensor_metadata``) is set on
it; every other tensor is left exactly as PyTorch makes it.

Applied from the compile trigger's Dynamo setup steps: fake tensors of npu tensors are
made by tracing. A ``FakeTensorMode`` a user builds by hand before anything imported
``torch._dynamo`` does not see it (``import torch_npu.compiler`` or ``torch._dynamo``
first). Delete this patch once meta conversion copies backend metadata or asks the
device for it.
"""
from __future__ import annotations

DEVICE_TYPE = "npu"


def apply() -> None:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorConverter

    from_real_tensor = FakeTensorConverter.from_real_tensor

    def from_real_tensor_with_backend_meta(self, fake_mode, t, *args, **kwargs):
        fake = from_real_tensor(self, fake_mode, t, *args, **kwargs)
        # Only plain npu tensors hold metadata of ours; subclasses, sparse and functional
        # wrappers go through PyTorch's conversion untouched.
        if type(t) in (torch.Tensor, torch.nn.Parameter) and t.layout == torch.strided and t.device.type == DEVICE_TYPE:
            metadata = torch._utils.get_tensor_metadata(t)
            if metadata and not torch._utils.get_tensor_metadata(fake):
                torch._utils.set_tensor_metadata(fake, metadata)
        return fake

    from_real_tensor_with_backend_meta._npu_aware = True
    from_real_tensor_with_backend_meta.__wrapped__ = from_real_tensor
    FakeTensorConverter.from_real_tensor = from_real_tensor_with_backend_meta
