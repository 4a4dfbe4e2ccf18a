"""npu_prompt_flash_attention, npu_incre_flash_attention and npu_fused_infer_attention_score
against plain-PyTorch attention per sequence.

Layouts (BSH, BSND, BNSD, BNSD_BSND, TND and FIA's transposing layouts), sparse modes, per-batch
valid lengths, left padding, paged KV caches, GQA, pse_shift, rope, shared prefixes and the
log-sum-exp, in float16 and bfloat16 (the dtypes the Ascend documentation lists; float32 is
rejected as on Ascend); the argument errors; opcheck, torch.compile and torch.export.
"""
from __future__ import annotations

import itertools
import math

import pytest
import torch

import torch_npu
from attention_reference import attention, band_mask, from_bnsd

NPU = torch.device("npu", 0)
COMPRESSED = torch.triu(torch.ones(2048, 2048, dtype=torch.bool), diagonal=1)
TOL = {torch.float16: dict(atol=4e-3, rtol=4e-3), torch.bfloat16: dict(atol=3e-2, rtol=3e-2)}


def gen(seed):
    return torch.Generator().manual_seed(seed)


def qkv(b, n1, n2, sq, skv, d, dtype, seed=0):
    g = gen(seed)
    return (torch.randn(b, n1, sq, d, generator=g).to(dtype), torch.randn(b, n2, skv, d, generator=g).to(dtype),
            torch.randn(b, n2, skv, d, generator=g).to(dtype))


def reference(q, k, v, scale, *, q_lens=None, kv_lens=None, q_starts=None, kv_starts=None, sparse_mode=None,
              pre=2147483647, nxt=2147483647, mask=None, pse=None):
    """Per-batch attention on the valid rows/keys; rows outside them are zero. `mask` is an
    explicit [B|1, 1, Sq, Skv] mask indexed by absolute position."""
    b, n, sq, _ = q.shape
    out = torch.zeros(b, n, sq, v.shape[3], dtype=torch.float64)
    lse = torch.full((b, n, sq), float("-inf"), dtype=torch.float64)
    for i in range(b):
        ql = sq if q_lens is None else q_lens[i]
        kl = k.shape[2] if kv_lens is None else kv_lens[i]
        q0 = 0 if q_starts is None else q_starts[i]
        k0 = 0 if kv_starts is None else kv_starts[i]
        if ql == 0:
            continue
        qi, ki, vi = q[i:i + 1, :, q0:q0 + ql], k[i:i + 1, :, k0:k0 + kl], v[i:i + 1, :, k0:k0 + kl]
        m = None if sparse_mode is None else band_mask(ql, kl, sparse_mode, pre, nxt)
        if mask is not None:
            mi = mask[min(i, mask.shape[0] - 1), :, q0:q0 + ql, k0:k0 + kl]
            m = mi if m is None else m | mi
        pi = None if pse is None else pse[min(i, pse.shape[0] - 1):][:1, :, q0:q0 + ql, k0:k0 + kl]
        if kl > 0:
            out[i:i + 1, :, q0:q0 + ql] = attention(qi, ki, vi, scale, mask=m, pse=pi, pse_scale=1.0)
            s = (qi.double() @ ki.double().repeat_interleave(n // k.shape[1], 1).transpose(-1, -2)) * scale
            if pi is not None:
                s = s + pi.double()
            if m is not None:
                s = s.masked_fill(m, float("-inf"))
            lse[i:i + 1, :, q0:q0 + ql] = torch.logsumexp(s, dim=-1)
    return out, lse


def close(got, want, dtype):
    torch.testing.assert_close(got.cpu().double(), want.double(), **TOL[dtype])


# ---- prompt flash attention --------------------------------------------------------------------

PFA_MODES = [None, 0, 1, 2, 3, 4]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("sparse_mode", PFA_MODES, ids=lambda m: f"mode{m}")
@pytest.mark.parametrize("layout", ["BSH", "BSND", "BNSD", "BNSD_BSND"])
def test_prompt_flash_attention(layout, sparse_mode, dtype):
    b, n1, n2, sq, skv, d = 2, 4, 2, 19, 27, 16
    q, k, v = qkv(b, n1, n2, sq, skv, d, dtype)
    in_layout = "BNSD" if layout == "BNSD_BSND" else layout
    out_layout = "BSND" if layout == "BNSD_BSND" else layout
    q_lens, kv_lens = [19, 12], [27, 20]
    pre, nxt = (6, 2) if sparse_mode in (0, 4) else (2147483647, 0)
    explicit = torch.rand(b, 1, sq, skv, generator=gen(1)) < 0.2
    kwargs = dict(num_heads=n1, num_key_value_heads=n2, scale_value=1 / math.sqrt(d), input_layout=layout,
                  actual_seq_lengths=q_lens, actual_seq_lengths_kv=kv_lens, pre_tokens=pre, next_tokens=nxt)
    ref_mask = None
    if sparse_mode is not None:
        kwargs["sparse_mode"] = sparse_mode
        if sparse_mode in (0, 1):
            kwargs["atten_mask"] = explicit.to(NPU)
            ref_mask = explicit
        else:
            kwargs["atten_mask"] = COMPRESSED.to(NPU)
    out = torch_npu.npu_prompt_flash_attention(*(from_bnsd(t, in_layout).to(NPU) for t in (q, k, v)), **kwargs)
    want, _ = reference(q, k, v, 1 / math.sqrt(d), q_lens=q_lens, kv_lens=kv_lens, sparse_mode=sparse_mode,
                        pre=pre, nxt=nxt, mask=ref_mask)
    assert out.dtype == dtype
    close(out, from_bnsd(want, out_layout), dtype)


def test_prompt_flash_attention_packed_and_pse():
    dtype = torch.float16
    q, k, v = qkv(1, 4, 4, 17, 17, 16, dtype)
    lens = [5, 12]
    out = torch_npu.npu_prompt_flash_attention(
        *(from_bnsd(t, "TND").to(NPU) for t in (q, k, v)), num_heads=4, input_layout="TND", scale_value=0.25,
        actual_seq_lengths=list(itertools.accumulate(lens)), actual_seq_lengths_kv=list(itertools.accumulate(lens)),
        atten_mask=COMPRESSED.to(NPU), sparse_mode=3)
    pieces = [attention(q[:, :, a:a + n], k[:, :, a:a + n], v[:, :, a:a + n], 0.25, mask=band_mask(n, n, 3, 0, 0))
              for a, n in zip([0, 5], lens)]
    close(out, from_bnsd(torch.cat(pieces, dim=2), "TND"), dtype)
    # pse_shift is added to the scaled scores.
    q, k, v = qkv(2, 4, 4, 9, 13, 16, dtype, seed=2)
    pse = torch.randn(1, 4, 9, 13, generator=gen(3)).to(dtype)
    out = torch_npu.npu_prompt_flash_attention(*(t.to(NPU) for t in (q, k, v)), pse_shift=pse.to(NPU),
                                               num_heads=4, input_layout="BNSD", scale_value=0.25)
    close(out, reference(q, k, v, 0.25, pse=pse)[0], dtype)


# ---- incremental flash attention ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["BSH", "BSND", "BNSD"])
def test_incre_flash_attention(layout, dtype):
    b, n1, n2, skv, d = 3, 8, 2, 40, 16
    q, k, v = qkv(b, n1, n2, 1, skv, d, dtype)
    kv_lens = [40, 17, 1]
    mask = torch.rand(b, skv, generator=gen(4)) < 0.2
    mask[:, 0] = False
    out = torch_npu.npu_incre_flash_attention(
        *(from_bnsd(t, layout).to(NPU) for t in (q, k, v)), atten_mask=mask.to(NPU), actual_seq_lengths=kv_lens,
        num_heads=n1, num_key_value_heads=n2, scale_value=0.25, input_layout=layout)
    want, _ = reference(q, k, v, 0.25, kv_lens=kv_lens, mask=mask[:, None, None, :])
    close(out, from_bnsd(want, layout), dtype)


@pytest.mark.parametrize("cache", ["BnBsH", "BnNBsD"])
def test_incre_flash_attention_paged_cache(cache):
    dtype = torch.float16
    b, n1, n2, d, block = 2, 4, 2, 16, 16
    kv_lens = [37, 20]
    q, k, v = qkv(b, n1, n2, 1, 48, d, dtype, seed=5)
    # Scatter each sequence's keys into shuffled physical blocks of a 7-block cache.
    table = torch.tensor([[5, 0, 3], [6, 2, 1]], dtype=torch.int32)
    kc = torch.zeros(7, n2, block, d, dtype=dtype)
    vc = torch.zeros(7, n2, block, d, dtype=dtype)
    for i in range(b):
        for j in range(3):
            kc[table[i, j]] = k[i, :, j * block:(j + 1) * block]
            vc[table[i, j]] = v[i, :, j * block:(j + 1) * block]
    if cache == "BnBsH":
        kc, vc = (t.permute(0, 2, 1, 3).reshape(7, block, n2 * d) for t in (kc, vc))
        layout = "BSH"
    else:
        layout = "BNSD"
    out = torch_npu.npu_incre_flash_attention(
        from_bnsd(q, layout).to(NPU), kc.to(NPU), vc.to(NPU), block_table=table.to(NPU), block_size=block,
        actual_seq_lengths=kv_lens, num_heads=n1, num_key_value_heads=n2, scale_value=0.25, input_layout=layout)
    want, _ = reference(q, k, v, 0.25, kv_lens=kv_lens)
    close(out, from_bnsd(want, layout), dtype)


def test_incre_flash_attention_left_padded_cache():
    dtype = torch.bfloat16
    q, k, v = qkv(2, 4, 4, 1, 30, 16, dtype, seed=6)
    kv_lens, pad = [12, 25], 3
    out = torch_npu.npu_incre_flash_attention(
        *(t.to(NPU) for t in (q, k, v)), actual_seq_lengths=kv_lens, kv_padding_size=torch.tensor([pad]).to(NPU),
        num_heads=4, scale_value=0.25, input_layout="BNSD")
    starts = [30 - pad - n for n in kv_lens]
    want, _ = reference(q, k, v, 0.25, kv_lens=kv_lens, kv_starts=starts)
    close(out, want, dtype)


# ---- fused infer attention score ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["BSH", "BNSD", "BSND", "BNSD_BSND", "BSH_NBSD", "BSND_NBSD", "BNSD_NBSD"])
def test_fused_infer_prefill_with_lse(layout, dtype):
    b, n1, n2, sq, skv, d = 2, 4, 1, 15, 22, 16
    q, k, v = qkv(b, n1, n2, sq, skv, d, dtype, seed=7)
    in_layout, out_layout = (layout.split("_") + [layout])[:2]
    q_lens, kv_lens = [15, 9], [22, 14]
    out, lse = torch_npu.npu_fused_infer_attention_score(
        *(from_bnsd(t, in_layout).to(NPU) for t in (q, k, v)), num_heads=n1, num_key_value_heads=n2, scale=0.25,
        input_layout=layout, actual_seq_lengths=q_lens, actual_seq_lengths_kv=kv_lens,
        atten_mask=COMPRESSED.to(NPU), sparse_mode=3, softmax_lse_flag=True)
    want, want_lse = reference(q, k, v, 0.25, q_lens=q_lens, kv_lens=kv_lens, sparse_mode=3)
    want = want.transpose(0, 1) if out_layout == "NBSD" else from_bnsd(want, out_layout)
    close(out, want, dtype)
    assert lse.shape == (b, n1, sq, 1) and lse.dtype == torch.float32
    valid = torch.isfinite(want_lse)
    torch.testing.assert_close(lse[..., 0].cpu()[valid].double(), want_lse[valid], atol=2e-2, rtol=1e-2)


@pytest.mark.parametrize("layout", ["TND", "TND_NTD", "NTD_TND", "NTD"])
def test_fused_infer_packed(layout):
    dtype = torch.float16
    q_lens, kv_lens = [4, 9, 6], [7, 9, 11]
    q, k, v = qkv(1, 4, 2, sum(q_lens), sum(kv_lens), 16, dtype, seed=8)
    in_layout, out_layout = (layout.split("_") + [layout])[:2]
    to = lambda t: (t[0] if in_layout == "NTD" else from_bnsd(t, "TND")).to(NPU)  # noqa: E731
    out, lse = torch_npu.npu_fused_infer_attention_score(
        to(q), to(k), to(v), num_heads=4, num_key_value_heads=2, scale=0.25, input_layout=layout,
        actual_seq_lengths=list(itertools.accumulate(q_lens)),
        actual_seq_lengths_kv=list(itertools.accumulate(kv_lens)), atten_mask=COMPRESSED.to(NPU), sparse_mode=3,
        softmax_lse_flag=True)
    pieces, lses, qa, ka = [], [], 0, 0
    for a, c in zip(q_lens, kv_lens):
        o, s = reference(q[:, :, qa:qa + a], k[:, :, ka:ka + c], v[:, :, ka:ka + c], 0.25, sparse_mode=3)
        pieces.append(o)
        lses.append(s)
        qa, ka = qa + a, ka + c
    want = torch.cat(pieces, dim=2)
    close(out, want[0] if out_layout == "NTD" else from_bnsd(want, "TND"), dtype)
    assert lse.shape == (sum(q_lens), 4, 1)
    torch.testing.assert_close(lse[..., 0].cpu().double(), torch.cat(lses, dim=2)[0].transpose(0, 1),
                               atol=2e-2, rtol=1e-2)


def test_fused_infer_decode_paged_and_padding():
    dtype = torch.float16
    b, n1, n2, d, block = 2, 8, 2, 16, 16
    q, k, v = qkv(b, n1, n2, 1, 32, d, dtype, seed=9)
    kv_lens = [29, 5]
    table = torch.tensor([[1, 0], [3, 2]], dtype=torch.int32)
    kc = torch.zeros(4, block, n2 * d, dtype=dtype)
    vc = torch.zeros(4, block, n2 * d, dtype=dtype)
    for i in range(b):
        for j in range(2):
            kc[table[i, j]] = from_bnsd(k[i:i + 1, :, j * block:(j + 1) * block], "BSH")[0]
            vc[table[i, j]] = from_bnsd(v[i:i + 1, :, j * block:(j + 1) * block], "BSH")[0]
    out, lse = torch_npu.npu_fused_infer_attention_score(
        from_bnsd(q, "BSH").to(NPU), kc.to(NPU), vc.to(NPU), block_table=table.to(NPU), block_size=block,
        actual_seq_lengths_kv=kv_lens, num_heads=n1, num_key_value_heads=n2, scale=0.25, input_layout="BSH")
    close(out, from_bnsd(reference(q, k, v, 0.25, kv_lens=kv_lens)[0], "BSH"), dtype)
    assert lse.shape == (1,) and lse.item() == 0
    # Prefill with query left padding (rows at the end of S are the valid ones).
    q, k, v = qkv(2, 4, 4, 12, 12, 16, dtype, seed=10)
    q_lens = [7, 12]
    out, _ = torch_npu.npu_fused_infer_attention_score(
        *(t.to(NPU) for t in (q, k, v)), num_heads=4, scale=0.25, input_layout="BNSD", actual_seq_lengths=q_lens,
        query_padding_size=torch.tensor([0]).to(NPU))
    want, _ = reference(q, k, v, 0.25, q_lens=q_lens, q_starts=[12 - n for n in q_lens])
    close(out, want, dtype)


def test_fused_infer_rope_and_shared_prefix():
    dtype = torch.bfloat16
    q, k, v = qkv(2, 4, 1, 6, 10, 16, dtype, seed=11)
    qr, kr, _ = qkv(2, 4, 1, 6, 10, 8, dtype, seed=12)
    out, _ = torch_npu.npu_fused_infer_attention_score(
        *(t.to(NPU) for t in (q, k, v)), query_rope=qr.to(NPU), key_rope=kr.to(NPU), num_heads=4,
        num_key_value_heads=1, scale=0.2, input_layout="BNSD")
    close(out, attention(torch.cat([q, qr], -1), torch.cat([k, kr], -1), v, 0.2), dtype)
    kp, vp, _ = qkv(1, 1, 1, 5, 5, 16, dtype, seed=13)
    kp, vp = kp[:, :1].expand(1, 1, 5, 16), vp[:, :1].expand(1, 1, 5, 16)
    kp, vp = qkv(1, 1, 1, 5, 5, 16, dtype, seed=14)[1:]
    out, _ = torch_npu.npu_fused_infer_attention_score(
        *(t.to(NPU) for t in (q, k, v)), key_shared_prefix=kp.to(NPU), value_shared_prefix=vp.to(NPU),
        actual_shared_prefix_len=[3], num_heads=4, num_key_value_heads=1, scale=0.2, input_layout="BNSD")
    kk = torch.cat([kp[:, :, :3].expand(2, -1, -1, -1), k], 2)
    vv = torch.cat([vp[:, :, :3].expand(2, -1, -1, -1), v], 2)
    close(out, attention(q, kk, vv, 0.2), dtype)


# ---- errors, opcheck, compile, export -----------------------------------------------------------

def _inputs(dtype=torch.float16, layout="BSH"):
    g = gen(20)
    shape = {"BSH": (2, 10, 64), "BNSD": (2, 4, 10, 16)}[layout]
    return [torch.randn(shape, generator=g).to(dtype).to(NPU) for _ in range(3)]


@pytest.mark.parametrize("call,message", [
    (lambda q, k, v: torch_npu.npu_prompt_flash_attention(q.float(), k.float(), v.float(), num_heads=4),
     "query has dtype torch.float32, which is not supported; use one of float16, bfloat16"),
    (lambda q, k, v: torch_npu.npu_prompt_flash_attention(q, k, v, num_heads=4, input_layout="SBH"),
     "input_layout must be one of"),
    (lambda q, k, v: torch_npu.npu_prompt_flash_attention(q, k, v, num_heads=3), "num_heads (3) must divide"),
    (lambda q, k, v: torch_npu.npu_prompt_flash_attention(q, k, v, num_heads=4, atten_mask=torch.zeros(
        3, 10, dtype=torch.bool, device=NPU)), "atten_mask has shape (3, 10)"),
    (lambda q, k, v: torch_npu.npu_prompt_flash_attention(q, k, v, num_heads=4, sparse_mode=2, atten_mask=torch.zeros(
        10, 10, dtype=torch.bool, device=NPU)), "compressed 2048x2048"),
    (lambda q, k, v: torch_npu.npu_prompt_flash_attention(q, k, v, num_heads=4, quant_scale2=q),
     "quant_scale2 (quantised attention) is not supported"),
    (lambda q, k, v: torch_npu.npu_incre_flash_attention(q, k, v, num_heads=4),
     "one query token per sequence"),
    (lambda q, k, v: torch_npu.npu_incre_flash_attention(q[:, :1], k, v, num_heads=4, atten_mask=torch.zeros(
        2, 1, 2, 10, dtype=torch.bool, device=NPU)), "for decoding (query S = 1) expected"),
    (lambda q, k, v: torch_npu.npu_fused_infer_attention_score(q, k, v, num_heads=4, num_key_value_heads=3),
     "key hidden size 64 must be num_key_value_heads (3)"),
    (lambda q, k, v: torch_npu.npu_fused_infer_attention_score(q, k, v, num_heads=4, block_table=torch.zeros(
        2, 1, dtype=torch.int32, device=NPU), block_size=16), "needs the actual kv lengths"),
])
def test_bad_arguments_name_the_argument(call, message):
    q, k, v = _inputs()
    with pytest.raises(RuntimeError) as info:
        call(q, k, v)
    assert message in str(info.value)


OPCHECK_UTILS = {"cpu": None, "npu": ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")}


@pytest.mark.parametrize("device", ["cpu", "npu"])
def test_opcheck(device):
    extra = {} if OPCHECK_UTILS[device] is None else dict(test_utils=OPCHECK_UTILS[device])
    q, k, v = (t.to(device) for t in _inputs())
    torch.library.opcheck(torch.ops.npu.npu_prompt_flash_attention.default, (q, k, v),
                          dict(num_heads=4, scale_value=0.25, actual_seq_lengths=[10, 6],
                               atten_mask=COMPRESSED.to(device), sparse_mode=3), **extra)
    torch.library.opcheck(torch.ops.npu.npu_incre_flash_attention.default, (q[:, :1], k, v),
                          dict(num_heads=4, scale_value=0.25, actual_seq_lengths=[10, 3]), **extra)
    torch.library.opcheck(torch.ops.npu.npu_fused_infer_attention_score.default, (q, k, v),
                          dict(num_heads=4, num_key_value_heads=4, scale=0.25, softmax_lse_flag=True), **extra)


class _Decoder(torch.nn.Module):
    def forward(self, q, k, v, mask):
        prefill = torch_npu.npu_prompt_flash_attention(q, k, v, num_heads=4, scale_value=0.25, atten_mask=mask,
                                                       sparse_mode=2)
        out, lse = torch_npu.npu_fused_infer_attention_score(q, k, v, num_heads=4, scale=0.25, atten_mask=mask,
                                                             sparse_mode=3, softmax_lse_flag=True)
        step = torch_npu.npu_incre_flash_attention(q[:, -1:], k, v, num_heads=4, scale_value=0.25)
        return prefill + out, lse.sum(), step * 2


def test_compile_and_export():
    q, k, v = _inputs()
    mask = COMPRESSED.to(NPU)
    want = _Decoder()(q, k, v, mask)
    got = torch.compile(_Decoder(), fullgraph=True)(q, k, v, mask)
    for a, b in zip(got, want):
        torch.testing.assert_close(a.cpu(), b.cpu())
    exported = torch.export.export(_Decoder(), (q, k, v, mask))
    targets = {str(n.target) for n in exported.graph.nodes if n.op == "call_function"}
    assert {"npu.npu_prompt_flash_attention.default", "npu.npu_fused_infer_attention_score.default",
            "npu.npu_incre_flash_attention.default"} <= targets
    for a, b in zip(exported.module()(q, k, v, mask), want):
        torch.testing.assert_close(a.cpu(), b.cpu())
