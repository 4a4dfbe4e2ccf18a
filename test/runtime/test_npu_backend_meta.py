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


def test_fake_tensors_of_npu_tensors_carry_metadata():
    import torch._dynamo  # noqa: F401 - the compile trigger's setup steps run on this import
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    x = torch_npu.npu_format_cast(torch.randn(4, 4, device="npu"), 29)
    plain = torch.randn(4, 4, device="npu")
    mode = FakeTensorMode()
    fake, fake_plain = mode.from_tensor(x), mode.from_tensor(plain)
    assert isinstance(fake, FakeTensor) and fake.device == x.device
    assert torch._utils.get_tensor_metadata(fake) == torch._utils.get_tensor_metadata(x) == {"npu_format_29": True}
    assert torch._utils.get_tensor_metadata(fake_plain) == {}
    with mode:
        assert torch_npu.get_npu_format(fake) == 29
        assert torch_npu.get_npu_format(fake_plain) == 2
        assert torch_npu.get_npu_format(torch_npu.npu_format_cast(fake, 3)) == 3

    # The fakes Dynamo traces with are made the same way.
    seen = []

    def backend(gm, example_inputs):
        seen.extend(torch._utils.get_tensor_metadata(n.meta["example_value"])
                    for n in gm.graph.nodes if n.op == "placeholder")
        return gm

    torch._dynamo.reset()
    out = torch.compile(lambda t: t * 2, backend=backend)(x)
    assert seen == [{"npu_format_29": True}]
    torch.testing.assert_close(out.cpu(), x.cpu() * 2)
