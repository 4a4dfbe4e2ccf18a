"""``torch_npu.npu_format_cast`` and ``torch_npu.get_npu_format``: NPU storage formats.

Ascend code casts weights and activations to device formats (``FRACTAL_NZ``, ``NC1HWC0``,
...) for speed. The simulated npu keeps every tensor as plain strided memory, so a format
is recorded as the tensor's backend metadata (saved by ``torch.save``, readable through
``torch._utils.get_tensor_metadata``) and the values never change: code that casts runs,
and ``get_npu_format`` answers what was cast. ND (2), the default, records nothing.
"""
from __future__ import annotations

import torch

import torch_npu._C as _C
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_format_cast", "get_npu_format"]

# The ACL storage formats torch_npu accepts, by id.
ACL_FORMATS = {
    0: "NCHW",
    1: "NHWC",
    2: "ND",
    3: "NC1HWC0",
    4: "FRACTAL_Z",
    12: "NC1HWC0_C04",
    16: "HWCN",
    27: "NDHWC",
    29: "FRACTAL_NZ",
    30: "NCDHW",
    32: "NDC1HWC0",
    33: "FRACTAL_Z_3D",
}


def _check_format(acl_format: int) -> None:
    if acl_format not in ACL_FORMATS:
        known = ", ".join(f"{k} ({v})" for k, v in sorted(ACL_FORMATS.items()))
        raise ValueError(f"npu_format_cast: unknown ACL format {acl_format}; the formats are {known}")


def _format_cast_npu(self: torch.Tensor, acl_format: int) -> torch.Tensor:
    _check_format(acl_format)
    out = self.clone()
    _C._set_npu_format(out, acl_format)
    return out


def _format_cast_fake(self: torch.Tensor, acl_format: int) -> torch.Tensor:
    _check_format(acl_format)
    out = torch.empty_like(self)
    _C._set_npu_format(out, acl_format)  # traced code that asks for the format sees it
    return out


ND_FORMAT = 2


def _format_of_real_tensor(fake: torch.Tensor) -> int:
    """The format of the real tensor ``fake`` was made from, read from its fake mode's records.

    A fake tensor is a meta tensor: it holds no backend metadata of the real one. Its mode's
    converter keeps, for every real tensor it converted (bases of views included), the
    tensor's id and the fake made for that id, both weakly; the real tensor is found by the
    fake's identity. A fake made some other way (a traced op's output) has no real tensor.
    """
    from torch._subclasses.fake_tensor import FakeTensor

    if not isinstance(fake, FakeTensor):
        return ND_FORMAT
    converter = fake.fake_mode.fake_tensor_converter.meta_converter
    tensor_id = next((tid for tid, made in list(converter.tensor_memo.items()) if made is fake), None)
    if tensor_id is None:
        return ND_FORMAT
    real = next((t for t, tid in list(converter.describer.lookup_tensor.items()) if tid == tensor_id), None)
    if real is None or real.device.type != "npu":
        return ND_FORMAT
    return _C._get_npu_format(real)


def _get_npu_format_fake(self: torch.Tensor) -> int:
    # A format cast traced in this graph recorded the format on its fake output; a fake input
    # answers with the format of the real tensor it stands for.
    recorded = _C._get_npu_format(self)
    return recorded if recorded != ND_FORMAT else _format_of_real_tensor(self)


def _get_npu_format_npu(self: torch.Tensor) -> int:
    return _C._get_npu_format(self)


def _format_cast_backward(ctx, grad):
    return grad, None


# The fake kernels read and write the format in the fake tensors' own backend metadata and
# find the real tensor a fake stands for, which a Meta kernel (run on meta copies) could not:
# they are real fake registrations.
_family = OpFamily(__name__)
_family.define("npu_format_cast(Tensor self, int acl_format) -> Tensor", kernel=_format_cast_npu,
               fake=_format_cast_fake, backward=_format_cast_backward, fake_needs_context=True)
_family.define("get_npu_format(Tensor self) -> int", kernel=_get_npu_format_npu, fake=_get_npu_format_fake,
               fake_needs_context=True)


def npu_format_cast(self: torch.Tensor, acl_format: int, customize_dtype=None) -> torch.Tensor:
    """``self`` in the NPU storage format ``acl_format`` (an ACL format id, e.g. 29 for
    FRACTAL_NZ). Casting to the tensor's current format returns ``self``; otherwise a copy
    with the format recorded (the values are the same). ``customize_dtype`` picks the block
    size (C0) of Ascend's fractal layout; the simulator records formats, not their blocks, so
    it is validated and changes nothing."""
    if customize_dtype is not None and not isinstance(customize_dtype, (torch.dtype, int)):
        raise TypeError(
            f"npu_format_cast: customize_dtype must be a torch.dtype (or None), got {type(customize_dtype).__name__}"
        )
    _check_format(acl_format)
    if self.device.type == "npu" and get_npu_format(self) == acl_format:
        return self
    return torch.ops.npu.npu_format_cast(self, acl_format)


def get_npu_format(self: torch.Tensor) -> int:
    """The ACL storage format id recorded for the npu tensor ``self`` (2, ND, by default)."""
    if self.device.type != "npu":
        raise RuntimeError(f"get_npu_format expects an npu tensor, got a tensor on {self.device}")
    return torch.ops.npu.get_npu_format(self)
