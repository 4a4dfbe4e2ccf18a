"""Backend metadata of npu tensors (torch._utils.get_tensor_metadata/set_tensor_metadata,
a dict[str, bool]) survives copies and torch.save/torch.load; npu_format_cast records
NPU formats in it without changing values."""
from __future__ import annotations

import io

import pytest
import torch

import torch_npu


def _roundtrip(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf)


def test_set_get_and_copies():
    x = torch.randn(3, 4, device="npu")
    assert torch._utils.get_tensor_metadata(x) == {}
    torch._utils.set_tensor_metadata(x, {"tuned": True, "pinned_layout": False})
    assert torch._utils.get_tensor_metadata(x) == {"tuned": True, "pinned_layout": False}
    for copy in (x.detach(), x.clone(), x.to("npu", copy=True), torch.empty_like(x).copy_(x)):
        assert torch._utils.get_tensor_metadata(copy) == {"tuned": True, "pinned_layout": False}
    # A copy into a tensor that has its own metadata keeps the destination's.
    y = torch.zeros(3, 4, device="npu")
    torch._utils.set_tensor_metadata(y, {"other": True})
    y.copy_(x)
    assert torch._utils.get_tensor_metadata(y) == {"other": True}
    # Moving to cpu drops npu metadata, as any device move does.
    assert torch._utils.get_tensor_metadata(x.cpu()) == {}


def test_save_load_keeps_metadata():
    x = torch.randn(5, device="npu")
    torch._utils.set_tensor_metadata(x, {"tuned": True})
    y = _roundtrip(x)
    assert y.device.type == "npu"
    torch.testing.assert_close(y, x)
    assert torch._utils.get_tensor_metadata(y) == {"tuned": True}
    state = _roundtrip({"w": x})
    assert torch._utils.get_tensor_metadata(state["w"]) == {"tuned": True}


def test_npu_format_cast():
    x = torch.randn(4, 8, device="npu")
    assert torch_npu.get_npu_format(x) == 2
    # ND is the default: casting to it changes nothing.
    assert torch_npu.npu_format_cast(x, 2) is x
    assert torch._utils.get_tensor_metadata(x) == {}
    nz = torch_npu.npu_format_cast(x, 29)
    assert torch_npu.get_npu_format(nz) == 29 and torch_npu.get_npu_format(x) == 2
    torch.testing.assert_close(nz, x)
    assert torch_npu.npu_format_cast(nz, 29) is nz
    assert torch_npu.get_npu_format(_roundtrip(nz)) == 29
    assert torch_npu.get_npu_format(nz.clone()) == 29
    assert torch_npu.get_npu_format(torch_npu.npu_format_cast(nz, 2)) == 2


def test_npu_format_cast_autograd_and_errors():
    x = torch.randn(3, device="npu", requires_grad=True)
    torch_npu.npu_format_cast(x, 29).mul(2).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.full((3,), 2.0))
    with pytest.raises(ValueError, match="unknown ACL format 99"):
        torch_npu.npu_format_cast(x, 99)
    with pytest.raises(RuntimeError, match="expects an npu tensor"):
        torch_npu.get_npu_format(torch.ones(2))


def test_traced_code_sees_the_format_of_the_real_tensor():
    # A fake tensor holds no backend metadata of the real tensor it stands for;
    # get_npu_format's fake kernel asks the fake mode which real tensor that is.
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    x = torch_npu.npu_format_cast(torch.randn(4, 4, device="npu"), 29)
    plain = torch.randn(4, 4, device="npu")
    mode = FakeTensorMode()
    fake, fake_plain = mode.from_tensor(x), mode.from_tensor(plain)
    assert isinstance(fake, FakeTensor) and fake.device == x.device
    with mode:
        assert torch_npu.get_npu_format(fake) == 29
        assert torch_npu.get_npu_format(fake_plain) == 2
        assert torch_npu.get_npu_format(torch_npu.npu_format_cast(fake, 3)) == 3  # a traced cast
        assert torch_npu.get_npu_format(fake * 2) == 2  # an op's output has no real tensor
    # Another mode has its own records.
    assert torch_npu.get_npu_format(FakeTensorMode().from_tensor(x)) == 29

    def branch(t):
        return t * 2 if torch_npu.get_npu_format(t) == 29 else t * 3

    for backend in ("eager", "aot_eager"):
        torch._dynamo.reset()
        compiled = torch.compile(branch, backend=backend)
        assert torch.equal(compiled(x).cpu(), x.cpu() * 2), backend
        assert torch.equal(compiled(plain).cpu(), plain.cpu() * 3), backend

    class Branch(torch.nn.Module):
        def forward(self, t):
            return branch(t)

    exported = torch.export.export(Branch(), (x,), strict=False)
    assert torch.equal(exported.module()(x).cpu(), x.cpu() * 2)

