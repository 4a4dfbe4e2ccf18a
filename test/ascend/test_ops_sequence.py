"""npu_lstm against torch.nn.LSTM in float64 (forward, sequence masks, backward) and
npu_multi_head_attention against a float64 attention written from Ascend's description."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from npu_ops_compare import assert_close, opcheck

import torch_npu


def ascend_lstm_weights(lstm):
    """torch's (i, f, g, o) rows -> Ascend's (I + H, 4H) columns in (i, j=g, f, o) order."""
    def reorder(t):
        i, f, g, o = t.chunk(4, 0)
        return torch.cat([i, g, f, o], 0)
    weight = torch.cat([reorder(lstm.weight_ih_l0), reorder(lstm.weight_hh_l0)], dim=1).t().contiguous()
    bias = reorder(lstm.bias_ih_l0 + lstm.bias_hh_l0)
    return weight.detach(), bias.detach()


def test_npu_lstm_against_torch_lstm_forward_and_backward():
    torch.manual_seed(0)
    steps, batch, features, hidden = 5, 3, 4, 6
    lstm = torch.nn.LSTM(features, hidden).double()
    x0 = torch.randn(steps, batch, features, dtype=torch.float64)
    h0, c0 = torch.randn(1, batch, hidden, dtype=torch.float64), torch.randn(1, batch, hidden, dtype=torch.float64)
    weight, bias = ascend_lstm_weights(lstm)
    x, w, b, h, c = (t.float().npu().requires_grad_(True) for t in (x0, weight, bias, h0, c0))
    y, out_h, out_c, i, j, f, o, tanhc = torch_npu.npu_lstm(x, w, b, torch.empty(0, device="npu"), h, c, True, 1, 0.0, True, False, False, False, False)
    xr, hr, cr = (t.clone().requires_grad_(True) for t in (x0, h0, c0))
    ref_y, (ref_h, ref_c) = lstm(xr, (hr, cr))
    assert y.shape == out_h.shape == (steps, batch, hidden)
    assert_close(y, ref_y, torch.float32, scale=10)
    assert_close(out_h[-1], ref_h[0], torch.float32, scale=10)
    assert_close(out_c[-1], ref_c[0], torch.float32, scale=10)
    assert_close(tanhc[-1], torch.tanh(ref_c[0]), torch.float32, scale=10)
    seed = torch.randn(steps, batch, hidden, dtype=torch.float64)
    (y * seed.float().npu()).sum().backward()
    (ref_y * seed).sum().backward()
    assert_close(x.grad, xr.grad, torch.float32, scale=20)
    assert_close(h.grad, hr.grad, torch.float32, scale=20)
    assert_close(c.grad, cr.grad, torch.float32, scale=20)
    # weight gradient: torch's gradients mapped into Ascend's layout
    ref_w_grad = torch.cat([lstm.weight_ih_l0.grad, lstm.weight_hh_l0.grad], 1)
    i_, f_, g_, o_ = ref_w_grad.chunk(4, 0)
    assert_close(w.grad, torch.cat([i_, g_, f_, o_], 0).t(), torch.float32, scale=20)


def test_npu_lstm_sequence_lengths_keep_the_state():
    torch.manual_seed(1)
    lstm = torch.nn.LSTM(3, 4).double()
    x0 = torch.randn(6, 2, 3, dtype=torch.float64)
    weight, bias = ascend_lstm_weights(lstm)
    zeros = torch.zeros(1, 2, 4)
    lengths = torch.tensor([6, 3], dtype=torch.int32)
    y, out_h, out_c, *_ = torch_npu.npu_lstm(x0.float().npu(), weight.float().npu(), bias.float().npu(), lengths.npu(),
                                             zeros.npu(), zeros.npu(), True, 1, 0.0, False, False, False, False, False)
    for seq, length in enumerate(lengths.tolist()):
        ref_y, (ref_h, _) = lstm(x0[:length, seq:seq + 1])
        assert_close(y[:length, seq], ref_y[:, 0], torch.float32, scale=10)
        assert y[length:, seq].eq(0).all()
        assert_close(out_h[-1, seq], ref_h[0, 0], torch.float32, scale=10)


def mha_reference(q, k, v, wq, wk, wv, wo, bq, bk, bv, bo, mask, heads, d, s, t):
    b = q.shape[0] // t
    qh = F.linear(q, wq, bq).reshape(b, t, heads, d).transpose(1, 2)
    kh = F.linear(k, wk, bk).reshape(b, s, heads, d).transpose(1, 2)
    vh = F.linear(v, wv, bv).reshape(b, s, heads, d).transpose(1, 2)
    probs = torch.softmax(qh @ kh.transpose(-1, -2) / math.sqrt(d) + mask, -1)
    ctx = (probs @ vh).transpose(1, 2).reshape(b * t, heads * d)
    return F.linear(ctx, wo, bo), probs


def test_npu_multi_head_attention_forward_and_backward():
    torch.manual_seed(2)
    heads, d, s, t, b = 2, 4, 5, 3, 2
    e = heads * d
    tensors = [torch.randn(b * t, e), torch.randn(b * s, e), torch.randn(b * s, e)]
    tensors += [torch.randn(e, e) / 3 for _ in range(3)]
    mask = torch.where(torch.rand(b, heads, t, s) > 0.8, -1000.0, 0.0)
    wo = torch.randn(e, e) / 3
    biases = [torch.randn(e) for _ in range(4)]
    npu = [x.npu().requires_grad_(True) for x in tensors + [wo] + biases]
    q, k, v, wq, wk, wv, wo_n, bq, bk, bv, bo = npu
    outs = torch_npu.npu_multi_head_attention(q, k, v, wq, wk, wv, mask.npu(), wo_n, bq, bk, bv, bo, None,
                                              heads, d, s, t, 0.0, True)
    y, keep, q_res, k_res, v_res, scores, probs, context = outs
    ref_in = [x.double().requires_grad_(True) for x in tensors + [wo] + biases]
    rq, rk, rv, rwq, rwk, rwv, rwo, rbq, rbk, rbv, rbo = ref_in
    ref_y, ref_probs = mha_reference(rq, rk, rv, rwq, rwk, rwv, rwo, rbq, rbk, rbv, rbo, mask.double(), heads, d, s, t)
    assert y.shape == (b * t, e) and keep.shape == (b, heads, t, s) and q_res.shape == (b, heads, t, d)
    assert_close(y, ref_y, torch.float32, scale=20)
    assert_close(probs, ref_probs, torch.float32, scale=10)
    seed = torch.randn(b * t, e)
    y.backward(seed.npu())
    ref_y.backward(seed.double())
    for got, want in zip(npu, ref_in):
        assert_close(got.grad, want.grad, torch.float32, scale=50)


def test_errors_and_opcheck():
    x = torch.randn(4, 2, 3, device="npu")
    w, bias = torch.randn(7, 16, device="npu"), torch.randn(16, device="npu")
    h = torch.zeros(1, 2, 4, device="npu")
    with pytest.raises(ValueError, match="only one layer"):
        torch_npu.npu_lstm(x, w, bias, torch.empty(0, device="npu"), h, h, True, 2, 0.0, True, False, False, False, False)
    with pytest.raises(ValueError, match="weight has 8 rows"):
        torch_npu.npu_lstm(x, torch.randn(8, 16, device="npu"), bias, torch.empty(0, device="npu"), h, h, True, 1, 0.0, True, False, False, False, False)
    opcheck(torch.ops.npu.npu_lstm.default, (x, w, bias, torch.empty(0, device="npu"), h, h, True, 1, 0.0, True, False, False, False, False))
    e = 8
    args = (torch.randn(6, e, device="npu"), torch.randn(10, e, device="npu"), torch.randn(10, e, device="npu"),
            *(torch.randn(e, e, device="npu") for _ in range(3)), torch.zeros(2, 2, 3, 5, device="npu"),
            torch.randn(e, e, device="npu"), *(torch.randn(e, device="npu") for _ in range(4)), None, 2, 4, 5, 3, 0.0, True)
    opcheck(torch.ops.npu.npu_multi_head_attention.default, args)
