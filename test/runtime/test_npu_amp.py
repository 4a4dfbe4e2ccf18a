"""Mixed precision on npu: torch.autocast("npu"), the torch.npu.amp.autocast factory and
GradScaler("npu")."""
from __future__ import annotations

import warnings

import pytest
import torch
from parameterized import parameterized


@parameterized.expand([("fp16", torch.float16), ("bf16", torch.bfloat16)])
def test_autocast_lower_precision_ops(_name, dtype):
    a = torch.randn(8, 8, device="npu")
    b = torch.randn(8, 8, device="npu")
    lin = torch.nn.Linear(8, 4).npu()
    with torch.autocast("npu", dtype=dtype):
        assert torch.is_autocast_enabled("npu")
        mm = a @ b
        out = lin(a)
        summed = mm.float().sum()
    assert mm.dtype == dtype and out.dtype == dtype
    assert summed.dtype == torch.float32
    torch.testing.assert_close(mm.float().cpu(), a.cpu() @ b.cpu(), rtol=2e-2, atol=5e-2)
    assert not torch.is_autocast_enabled("npu")
    assert (a @ b).dtype == torch.float32


@parameterized.expand([("fp16", torch.float16), ("bf16", torch.bfloat16)])
def test_autocast_keeps_fp32_ops_in_fp32(_name, dtype):
    x = torch.randn(4, 6, device="npu", dtype=dtype)
    with torch.autocast("npu", dtype=dtype):
        sm = torch.softmax(x, dim=-1)
        ls = torch.log_softmax(x, dim=-1)
    assert sm.dtype == torch.float32 and ls.dtype == torch.float32


def test_autocast_backward_grads_are_fp32():
    lin = torch.nn.Linear(6, 3).npu()
    x = torch.randn(5, 6, device="npu")
    with torch.autocast("npu", dtype=torch.float16):
        loss = lin(x).float().pow(2).mean()
    loss.backward()
    assert lin.weight.grad.dtype == torch.float32


def test_npu_amp_autocast_is_a_torch_autocast():
    ctx = torch.npu.amp.autocast(dtype=torch.bfloat16)
    assert type(ctx) is torch.autocast
    assert ctx.device == "npu"
    with ctx:
        assert torch.get_autocast_dtype("npu") == torch.bfloat16


def test_npu_amp_autocast_as_decorator():
    @torch.npu.amp.autocast(dtype=torch.float16)
    def f(a, b):
        return a @ b

    a = torch.randn(4, 4, device="npu")
    assert f(a, a).dtype == torch.float16
    assert (a @ a).dtype == torch.float32


def test_autocast_disabled_and_nested():
    a = torch.randn(4, 4, device="npu")
    with torch.npu.amp.autocast(dtype=torch.float16):
        with torch.npu.amp.autocast(enabled=False):
            assert (a @ a).dtype == torch.float32
        assert (a @ a).dtype == torch.float16


def test_default_autocast_dtype_and_supported_list():
    assert torch.npu.get_amp_supported_dtype() == [torch.float16, torch.bfloat16]
    assert torch.get_autocast_dtype("npu") in (torch.float16, torch.bfloat16)
    assert torch.amp.is_autocast_available("npu")


def test_unsupported_autocast_dtype():
    with pytest.raises(ValueError, match="does not support dtype torch.float64"):
        torch.npu.amp.autocast(dtype=torch.float64)
    # torch.autocast itself follows its own rule: warn and disable.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.autocast("npu", dtype=torch.float64):
            assert not torch.is_autocast_enabled("npu")
    assert any("npu" in str(w.message) for w in caught)


def _train_step(model, opt, scaler, x, y):
    opt.zero_grad()
    with torch.autocast("npu", dtype=torch.float16):
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    return loss


@pytest.mark.parametrize("make_scaler", [lambda: torch.amp.GradScaler("npu", init_scale=1024.0), lambda: torch.npu.amp.GradScaler(init_scale=1024.0)])
def test_grad_scaler_trains_and_skips_inf_steps(make_scaler):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1).npu()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = make_scaler()
    x = torch.randn(32, 4, device="npu")
    y = x.sum(dim=1, keepdim=True)
    first = _train_step(model, opt, scaler, x, y).item()
    for _ in range(30):
        last = _train_step(model, opt, scaler, x, y).item()
    assert last < first
    assert scaler.get_scale() == 1024.0
    # An inf gradient skips the step and halves the scale.
    weight_before = model.weight.detach().clone()
    opt.zero_grad()
    loss = model(x).sum() * float("inf")
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 512.0
    torch.testing.assert_close(model.weight.detach(), weight_before)


def test_binary_cross_entropy_is_banned_under_autocast_as_on_cuda():
    import torch.nn.functional as F

    p = torch.rand(4, device="npu")
    t = torch.rand(4, device="npu")
    with torch.autocast("npu", dtype=torch.float16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, t)
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            torch.nn.BCELoss()(p, t)
        # The safe variant runs.
        F.binary_cross_entropy_with_logits(p, t)
    # Outside autocast it runs and equals cpu.
    torch.testing.assert_close(F.binary_cross_entropy(p, t).cpu(), F.binary_cross_entropy(p.cpu(), t.cpu()))
