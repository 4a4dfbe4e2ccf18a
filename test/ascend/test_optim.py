"""torch_npu.optim: the fused optimizers train to torch.optim's parameters (bit-equal, on cpu
and on npu), or to a float64 reference of the published formula where torch has none;
parameters, grads and states stay views of the combined buffers."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from parameterized import parameterized

import torch_npu  # noqa: F401
from torch_npu.optim import (NpuFusedAdadelta, NpuFusedAdam, NpuFusedAdamP, NpuFusedAdamW, NpuFusedBertAdam,
                             NpuFusedLamb, NpuFusedOptimizerBase, NpuFusedRMSprop, NpuFusedRMSpropTF, NpuFusedSGD)

STEPS = 6


def small_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(7, 13), torch.nn.Tanh(), torch.nn.Linear(13, 3))


def batches(steps=STEPS):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(9, 7, generator=g), torch.randn(9, 3, generator=g)) for _ in range(steps)]


def train(model, opt, device, steps=STEPS):
    for x, y in batches(steps):
        opt.zero_grad()
        F.mse_loss(model(x.to(device)), y.to(device)).backward()
        opt.step()
    return [p.detach().cpu() for p in model.parameters()]


TORCH_COUNTERPARTS = [
    ("adam", NpuFusedAdam, torch.optim.Adam, dict(lr=0.01, weight_decay=0.1)),
    ("adam_amsgrad", NpuFusedAdam, torch.optim.Adam, dict(lr=0.01, amsgrad=True)),
    ("adamw", NpuFusedAdamW, torch.optim.AdamW, dict(lr=0.01)),
    ("adamw_amsgrad", NpuFusedAdamW, torch.optim.AdamW, dict(lr=0.01, weight_decay=0.3, amsgrad=True)),
    ("sgd", NpuFusedSGD, torch.optim.SGD, dict(lr=0.1)),
    ("sgd_momentum", NpuFusedSGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("sgd_nesterov", NpuFusedSGD, torch.optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
    ("adadelta", NpuFusedAdadelta, torch.optim.Adadelta, dict(lr=1.0, weight_decay=0.01)),
    ("rmsprop", NpuFusedRMSprop, torch.optim.RMSprop, dict(lr=0.01)),
    ("rmsprop_centered", NpuFusedRMSprop, torch.optim.RMSprop,
     dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.01)),
]


@parameterized.expand(TORCH_COUNTERPARTS)
def test_trains_bit_equal_to_torch_optim(_name, fused_cls, torch_cls, kwargs):
    fused_model = small_model().npu()
    fused = train(fused_model, fused_cls(fused_model.parameters(), **kwargs), "npu")
    cpu_model = small_model()
    on_cpu = train(cpu_model, torch_cls(cpu_model.parameters(), **kwargs), "cpu")
    npu_model = small_model().npu()
    on_npu = train(npu_model, torch_cls(npu_model.parameters(), **kwargs), "npu")
    for f, c, n in zip(fused, on_cpu, on_npu):
        assert torch.equal(f, c), (f - c).abs().max()
        assert torch.equal(f, n), (f - n).abs().max()


# ---- float64 references of the published formulas (one parameter at a time) -----------

def lamb_reference(params, grads_per_step, lr, betas, eps, weight_decay, adam=False, use_global_grad_norm=False):
    b1, b2 = betas
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for grads in grads_per_step:
        if use_global_grad_norm:
            total = math.sqrt(sum(float((g ** 2).sum()) for g in grads))
            grads = [g / max(total, 1.0) for g in grads]
        for i, (p, g) in enumerate(zip(params, grads)):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            d = m[i] / (v[i].sqrt() + eps) + weight_decay * p
            w_norm = min(float(p.norm()), 10.0)
            d_norm = float(d.norm())
            trust = 1.0 if adam or w_norm == 0 or d_norm == 0 else w_norm / d_norm
            p -= lr * trust * d
    return params


def adamp_reference(params, grads_per_step, lr, betas, eps, weight_decay, delta, wd_ratio, nesterov):
    b1, b2 = betas
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for t, grads in enumerate(grads_per_step, start=1):
        for i, (p, g) in enumerate(zip(params, grads)):
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            denom = v[i].sqrt() / math.sqrt(1 - b2 ** t) + eps
            d = ((b1 * m[i] + (1 - b1) * g) if nesterov else m[i]) / denom
            ratio = 1.0
            if p.dim() > 1:
                for rows in (p.shape[0], 1):  # per output channel, then the whole layer
                    gv, pv = g.reshape(rows, -1), p.reshape(rows, -1)
                    cos = (gv * pv).sum(1) / (gv.norm(dim=1).clamp(min=eps) * pv.norm(dim=1).clamp(min=eps))
                    if float(cos.abs().max()) < delta / math.sqrt(pv.shape[1]):
                        unit = pv / (pv.norm(dim=1, keepdim=True) + eps)
                        dv = d.reshape(rows, -1)
                        d = (dv - unit * (unit * dv).sum(1, keepdim=True)).reshape(p.shape)
                        ratio = wd_ratio
                        break
            p *= 1 - lr * weight_decay * ratio
            p -= lr / (1 - b1 ** t) * d
    return params


def bert_adam_reference(params, grads_per_step, lr, warmup, t_total, b1, b2, e, weight_decay, max_grad_norm):
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for t, grads in enumerate(grads_per_step):
        x = t / t_total
        factor = x / warmup if x < warmup else max((x - 1.0) / (warmup - 1.0), 0.0)  # warmup_linear
        for i, (p, g) in enumerate(zip(params, grads)):
            if max_grad_norm > 0:
                g = g * min(max_grad_norm / (float(g.norm()) + 1e-6), 1.0)
            m[i] = b1 * m[i] + (1 - b1) * g
            v[i] = b2 * v[i] + (1 - b2) * g * g
            p -= lr * factor * (m[i] / (v[i].sqrt() + e) + weight_decay * p)
    return params


def rmsprop_tf_reference(params, grads_per_step, lr, alpha, eps, weight_decay, momentum, centered, decoupled_decay,
                         lr_in_momentum):
    sq = [torch.ones_like(p) for p in params]
    ga = [torch.zeros_like(p) for p in params]
    buf = [torch.zeros_like(p) for p in params]
    for grads in grads_per_step:
        for i, (p, g) in enumerate(zip(params, grads)):
            if weight_decay:
                if decoupled_decay:
                    p *= 1 - lr * weight_decay
                else:
                    g = g + weight_decay * p
            sq[i] = sq[i] + (1 - alpha) * (g * g - sq[i])
            if centered:
                ga[i] = ga[i] + (1 - alpha) * (g - ga[i])
                avg = (sq[i] - ga[i] * ga[i] + eps).sqrt()
            else:
                avg = (sq[i] + eps).sqrt()
            if momentum > 0:
                if lr_in_momentum:
                    buf[i] = momentum * buf[i] + lr * g / avg
                    p -= buf[i]
                else:
                    buf[i] = momentum * buf[i] + g / avg
                    p -= lr * buf[i]
            else:
                p -= lr * g / avg
    return params


def fixed_grads(shapes, steps=STEPS, seed=3):
    g = torch.Generator().manual_seed(seed)
    return [[torch.randn(s, generator=g, dtype=torch.float64) * 0.1 for s in shapes] for _ in range(steps)]


PUBLISHED = [
    ("lamb", NpuFusedLamb, lamb_reference, dict(lr=0.01, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01)),
    ("lamb_adam", NpuFusedLamb, lamb_reference, dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6, weight_decay=0, adam=True)),
    ("lamb_global_norm", NpuFusedLamb, lamb_reference,
     dict(lr=0.01, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01, use_global_grad_norm=True)),
    ("adamp", NpuFusedAdamP, adamp_reference,
     dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1, delta=0.1, wd_ratio=0.1, nesterov=False)),
    ("adamp_nesterov_projecting", NpuFusedAdamP, adamp_reference,
     dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1, delta=10.0, wd_ratio=0.1, nesterov=True)),
    ("bert_adam", NpuFusedBertAdam, bert_adam_reference,
     dict(lr=0.01, warmup=0.3, t_total=10, b1=0.9, b2=0.999, e=1e-6, weight_decay=0.01, max_grad_norm=0.5)),
    ("rmsprop_tf", NpuFusedRMSpropTF, rmsprop_tf_reference,
     dict(lr=0.01, alpha=0.9, eps=1e-10, weight_decay=0.01, momentum=0.9, centered=False, decoupled_decay=False,
          lr_in_momentum=True)),
    ("rmsprop_tf_centered_decoupled", NpuFusedRMSpropTF, rmsprop_tf_reference,
     dict(lr=0.01, alpha=0.9, eps=1e-3, weight_decay=0.05, momentum=0.5, centered=True, decoupled_decay=True,
          lr_in_momentum=False)),
]


@parameterized.expand(PUBLISHED)
def test_trains_to_the_published_formula(_name, fused_cls, reference, kwargs):
    shapes = [(5, 4), (5,), (3, 2, 2)]
    gen = torch.Generator().manual_seed(2)
    start = [torch.randn(s, generator=gen, dtype=torch.float64) for s in shapes]
    grads = fixed_grads(shapes)
    params = [torch.nn.Parameter(p.float().npu()) for p in start]
    opt = fused_cls(params, **kwargs)
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = g.float().npu()
        opt.step()
    expected = reference([p.clone() for p in start], grads, **kwargs)
    moved = 0.0
    for p, e, s in zip(params, expected, start):
        torch.testing.assert_close(p.detach().cpu().double(), e, rtol=1e-5, atol=1e-6)
        moved = max(moved, float((e - s).abs().max()))
    assert moved > 1e-3  # the reference really moved the parameters


# ---- the combined buffers ---------------------------------------------------------------

def test_params_grads_and_states_stay_views_of_the_combined_buffers():
    model = small_model().npu()
    params = list(model.parameters())
    opt = NpuFusedAdam(params, lr=0.01)
    train(model, opt, "npu", steps=2)
    (combined_params,), (combined_grads,) = opt.get_combined_params(), opt.get_combined_grads()
    assert len(combined_params) == 1 and combined_params[0].numel() == sum(p.numel() for p in params)
    assert torch_npu.utils.is_combined_tensor_valid(combined_params[0], params)
    assert torch_npu.utils.is_combined_tensor_valid(combined_grads[0], [p.grad for p in params])
    # One write to the combined buffer is seen by every parameter.
    with torch.no_grad():
        combined_params[0].fill_(0.25)
    assert all(bool((p == 0.25).all()) for p in params)
    # zero_grad keeps the grads (views) and zeroes the one buffer.
    opt.zero_grad()
    assert all(p.grad is not None and not p.grad.any() for p in params)
    assert torch_npu.utils.is_combined_tensor_valid(combined_grads[0], [p.grad for p in params])
    exp_avgs = [opt.state[p]["exp_avg"] for p in params]
    assert len({t.untyped_storage().data_ptr() for t in exp_avgs}) == 1


def test_recombines_after_set_to_none_and_state_dict_round_trip():
    model, reference = small_model().npu(), small_model()
    opt = NpuFusedAdamW(model.parameters(), lr=0.01)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=0.01)
    data = batches(6)
    for i, (x, y) in enumerate(data):
        opt.zero_grad(set_to_none=True)  # grads are new tensors each step: re-homed each step
        ref_opt.zero_grad()
        F.mse_loss(model(x.npu()), y.npu()).backward()
        F.mse_loss(reference(x), y).backward()
        opt.step()
        ref_opt.step()
        if i == 2:  # a state dict round trip replaces the state tensors
            saved = opt.state_dict()
            opt = NpuFusedAdamW(model.parameters(), lr=0.01)
            opt.load_state_dict(saved)
    for p, r in zip(model.parameters(), reference.parameters()):
        assert torch.equal(p.detach().cpu(), r.detach())
    params = list(model.parameters())
    assert torch_npu.utils.is_combined_tensor_valid(opt.get_combined_params()[0][0], params)


def test_buckets_split_by_dtype_and_skip_params_without_grad():
    a = torch.nn.Parameter(torch.randn(4, device="npu"))
    b = torch.nn.Parameter(torch.randn(3, device="npu", dtype=torch.float16))
    c = torch.nn.Parameter(torch.randn(2, device="npu"))
    untouched = c.detach().clone()
    opt = NpuFusedSGD([a, b, c], lr=0.1, momentum=0.9)
    a.grad, b.grad = torch.ones_like(a), torch.ones_like(b)
    opt.step()
    groups = opt.get_combined_params()
    assert {t.dtype for t in groups[0]} == {torch.float32, torch.float16}
    assert torch.equal(c.detach(), untouched) and c.grad is None
    assert "momentum_buffer" in opt.state[a] and len(opt.state[c]) == 0


def test_clip_grad_norm_fused_matches_torch():
    model, reference = small_model().npu(), small_model()
    x, y = batches(1)[0]
    F.mse_loss(model(x.npu()), y.npu()).backward()
    F.mse_loss(reference(x), y).backward()
    opt = NpuFusedSGD(model.parameters(), lr=0.1)
    for norm_type in (2.0, float("inf")):
        total = opt.clip_grad_norm_fused_(0.05, norm_type=norm_type)
        expected = torch.nn.utils.clip_grad_norm_(reference.parameters(), 0.05, norm_type=norm_type)
        torch.testing.assert_close(total.cpu(), expected, rtol=1e-5, atol=1e-7)
        for p, r in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad.cpu(), r.grad, rtol=1e-5, atol=1e-7)


def test_subclass_of_the_base_with_its_own_update():
    class SignDescent(NpuFusedOptimizerBase):
        _uses_step = False

        def __init__(self, params, lr=0.1):
            super().__init__(params, dict(lr=lr))

        def _init_param_state(self, state, param, group):
            pass

        def _bucket_step(self, group, bucket):
            bucket.param.add_(bucket.grad.sign(), alpha=-group["lr"])

    p = torch.nn.Parameter(torch.tensor([1.0, -2.0, 3.0], device="npu"))
    opt = SignDescent([p])
    p.grad = torch.tensor([0.5, -0.5, 0.0], device="npu")
    opt.step()
    expected = torch.tensor([1.0, -2.0, 3.0]).add_(torch.tensor([0.5, -0.5, 0.0]).sign(), alpha=-0.1)
    assert torch.equal(p.detach().cpu(), expected)


@pytest.mark.parametrize("make", [
    lambda p: NpuFusedAdam(p, lr=-1.0),
    lambda p: NpuFusedAdam(p, betas=(1.0, 0.9)),
    lambda p: NpuFusedSGD(p, lr=0.1, nesterov=True),
    lambda p: NpuFusedBertAdam(p, lr=0.1, schedule="cosine"),
    lambda p: NpuFusedBertAdam(p, lr=0.1, warmup=1.5),
    lambda p: NpuFusedLamb(p, eps=-1.0),
])
def test_invalid_hyper_parameters_raise_value_error(make):
    with pytest.raises(ValueError):
        make([torch.nn.Parameter(torch.zeros(2, device="npu"))])


def test_unimplemented_update_is_a_clear_error():
    p = torch.nn.Parameter(torch.zeros(2, device="npu"))
    p.grad = torch.ones_like(p)
    opt = NpuFusedOptimizerBase([p], dict(lr=0.1))
    with pytest.raises(NotImplementedError, match="_init_param_state"):
        opt.step()


def test_grad_scaler_steps_a_fused_optimizer_as_it_steps_torch_optim():
    def run(opt_cls):
        model = small_model().npu()
        opt = opt_cls(model.parameters(), lr=0.01)
        scaler = torch.amp.GradScaler("npu", init_scale=2.0 ** 10)
        for x, y in batches(4):
            opt.zero_grad()
            scaler.scale(F.mse_loss(model(x.npu()), y.npu())).backward()
            scaler.step(opt)
            scaler.update()
        return [p.detach().cpu() for p in model.parameters()]

    for fused, plain in zip(run(NpuFusedAdam), run(torch.optim.Adam)):
        assert torch.equal(fused, plain)
