"""``npu_fusion_attention`` and ``npu_fusion_attention_grad``: Ascend's fused training attention.

transformers' Ascend flash-attention integration and Megatron/MindSpeed-style training code call
``torch_npu.npu_fusion_attention`` (layouts BSH, SBH, BSND, BNSD and packed TND, sparse modes,
dropout, GQA). Here the operators are defined with the Ascend schema in the ``npu`` namespace and
run the runtime's flash kernels (``npu::_fused_attention_forward``/``_backward``), which never
materialise an Sq x Skv matrix unless an explicit mask or positional bias is given. Shape
functions (a fake kernel for the forward, a Meta kernel for the grad operator) make them traceable
by ``torch.compile`` and ``torch.export``; autograd uses the grad operator, as on Ascend.

The schema follows the Ascend package, with one difference a caller cannot see: the three int
outputs (dropout seed, offset, element count) are declared ``SymInt`` so that a compiled
training step carries the seed drawn at run time into its backward (declared ``int``, the seed
would be frozen at trace time and the backward would rebuild the wrong dropout mask).
"""
from __future__ import annotations

import torch

from torch_npu.ops import attention_layout as L
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_fusion_attention", "npu_fusion_attention_grad"]

_FORWARD_SCHEMA = (
    "npu_fusion_attention(Tensor query, Tensor key, Tensor value, int head_num, str input_layout, "
    "Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, float scale=1., "
    "float keep_prob=1., int pre_tockens=2147483647, int next_tockens=2147483647, int inner_precise=0, "
    "int[]? prefix=None, int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None, int sparse_mode=0, "
    "bool gen_mask_parallel=True, bool sync=False, str softmax_layout=\"\", Tensor? sink=None, "
    "Tensor? dropout_mask=None, int seed=0, int offset=0) "
    "-> (Tensor, Tensor, Tensor, Tensor, SymInt, SymInt, SymInt)"
)
_GRAD_SCHEMA = (
    "npu_fusion_attention_grad(Tensor query, Tensor key, Tensor value, Tensor dy, int head_num, "
    "str input_layout, *, Tensor? pse=None, Tensor? padding_mask=None, Tensor? atten_mask=None, "
    "Tensor? softmax_max=None, Tensor? softmax_sum=None, Tensor? softmax_in=None, Tensor? attention_in=None, "
    "float scale_value=1., float keep_prob=1., int pre_tockens=2147483647, int next_tockens=2147483647, "
    "int inner_precise=0, SymInt seed=0, SymInt offset=0, SymInt numels=0, int[]? prefix=None, "
    "int[]? actual_seq_qlen=None, int[]? actual_seq_kvlen=None, int sparse_mode=0, "
    "bool gen_mask_parallel=True, bool sync=False, str softmax_layout=\"\", Tensor? sink=None) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor)"
)

_OP = "npu_fusion_attention"
_GRAD_OP = "npu_fusion_attention_grad"
_LAYOUTS = ("BSH", "SBH", "BSND", "BNSD", "TND")


class _Call:
    """One checked call: the canonical problem, its band, mask, bias and sequence lengths."""

    def __init__(self, op, query, key, value, head_num, input_layout, pse, padding_mask, atten_mask,
                 keep_prob, pre_tockens, next_tockens, actual_seq_qlen, actual_seq_kvlen, sparse_mode,
                 softmax_layout, sink, dropout_mask):
        L.check_tensors(op, query, key, value)
        if not isinstance(input_layout, str) or input_layout not in _LAYOUTS:
            L.fail(op, f"input_layout must be one of {', '.join(_LAYOUTS)}, got {input_layout!r}")
        if padding_mask is not None:
            L.fail(op, "padding_mask is not supported (reserved, as in the Ascend package); pass None and "
                       "express padding with atten_mask or actual_seq_qlen/actual_seq_kvlen (TND)")
        if dropout_mask is not None:
            L.fail(op, "dropout_mask (an external Ascend dropout bit mask) is not supported by this runtime; "
                       "leave it None: the op draws its dropout mask from seed/offset")
        if not 0.0 < float(keep_prob) <= 1.0:
            L.fail(op, f"keep_prob must be in (0, 1], got {keep_prob}")
        if softmax_layout not in ("", "TND") or (softmax_layout == "TND" and input_layout != "TND"):
            L.fail(op, f"softmax_layout must be \"\" (or \"TND\" with input_layout TND), got {softmax_layout!r}")
        q, k, v = L.canonical_qkv(op, query, key, value, head_num, input_layout)
        packed = input_layout == "TND"
        p = L.Problem(op, input_layout, input_layout, q, k, v, head_num, k.shape[1], packed=packed)
        if packed:
            p.q_lens = L.cumulative_to_lengths(op, "actual_seq_qlen", actual_seq_qlen, q.shape[2])
            p.kv_lens = L.cumulative_to_lengths(op, "actual_seq_kvlen", actual_seq_kvlen, k.shape[2])
            if len(p.q_lens) != len(p.kv_lens):
                L.fail(op, f"actual_seq_qlen ({len(p.q_lens)} sequences) and actual_seq_kvlen "
                           f"({len(p.kv_lens)} sequences) must describe the same sequences")
        self.problem = p
        self.band, use_mask = L.sparse_band(op, sparse_mode, pre_tockens, next_tockens, atten_mask is not None)
        self.mask = None
        if atten_mask is not None:
            if use_mask:
                self.mask = L.explicit_mask(op, atten_mask, p)
            else:
                L.check_compressed_mask(op, atten_mask, sparse_mode)
        self.bias = None if pse is None else L.check_bias(op, "pse", pse, p, query)
        if sink is not None:
            if not isinstance(sink, torch.Tensor) or sink.dtype != torch.float32 or tuple(sink.shape) != (head_num,):
                L.fail(op, f"sink must be a float32 tensor of shape ({head_num},) (one value per query head)")
        self.sink = sink

    def forward(self, scale, keep_prob, seed, offset):
        p, band = self.problem, self.band
        out, smax, ssum = torch.ops.npu._fused_attention_forward(
            p.q, p.k, p.v, self.bias, self.mask, self.sink, None, p.q_lens, None, p.kv_lens, p.packed,
            scale, scale, keep_prob, seed, offset, band.lo, band.hi, band.bottom_right, 8,
            p.out_perm(), p.stats_perm())
        return out, smax, ssum

    def stats_out(self, t):
        """Ascend's layout of softmax_max/softmax_sum: [B, N, Sq, 8], or [T, N, 8] for TND."""
        return t[0].transpose(0, 1) if self.problem.packed else t

    def stats_in(self, op, name, t):
        """A caller's softmax_max/softmax_sum as a [B, N, Sq] view."""
        p = self.problem
        want = (p.q_len, p.heads, 8) if p.packed else (p.batch, p.heads, p.q_len, 8)
        if not isinstance(t, torch.Tensor) or t.dtype != torch.float32 or tuple(t.shape) != want:
            L.fail(op, f"{name} must be the float32 {list(want)} tensor the forward returned")
        return t.transpose(0, 1).unsqueeze(0)[..., 0] if p.packed else t[..., 0]


def _draw_seed(query, keep_prob, seed):
    if keep_prob >= 1.0:
        return seed
    if seed != 0:
        return seed
    return torch.ops.npu._draw_dropout_seed(query)


def _fusion_attention(query, key, value, head_num, input_layout, pse=None, padding_mask=None, atten_mask=None,
                      scale=1.0, keep_prob=1.0, pre_tockens=2147483647, next_tockens=2147483647,
                      inner_precise=0, prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                      gen_mask_parallel=True, sync=False, softmax_layout="", sink=None, dropout_mask=None,
                      seed=0, offset=0):
    call = _Call(_OP, query, key, value, head_num, input_layout, pse, padding_mask, atten_mask, keep_prob,
                 pre_tockens, next_tockens, actual_seq_qlen, actual_seq_kvlen, sparse_mode, softmax_layout,
                 sink, dropout_mask)
    seed = _draw_seed(query, keep_prob, seed)
    if keep_prob >= 1.0:
        offset = 0
    out, smax, ssum = call.forward(scale, keep_prob, seed, offset)
    p = call.problem
    return (p.to_layout(out), call.stats_out(smax), call.stats_out(ssum), query.new_empty([0]),
            seed, offset, p.dropout_numel())


def _empty_like_layout(call, sizes, layout, dtype, device):
    """What the kernels allocate: a canonical tensor in `layout`'s memory order, in that layout."""
    perm = L.layout_perm(layout)
    phys = [sizes[i] for i in perm]
    inv = [0] * 4
    for i, d in enumerate(perm):
        inv[d] = i
    return L.from_canonical(torch.empty(phys, dtype=dtype, device=device).permute(inv), layout)


def _fusion_attention_fake(query, key, value, head_num, input_layout, pse=None, padding_mask=None,
                           atten_mask=None, scale=1.0, keep_prob=1.0, pre_tockens=2147483647,
                           next_tockens=2147483647, inner_precise=0, prefix=None, actual_seq_qlen=None,
                           actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True, sync=False,
                           softmax_layout="", sink=None, dropout_mask=None, seed=0, offset=0):
    call = _Call(_OP, query, key, value, head_num, input_layout, pse, padding_mask, atten_mask, keep_prob,
                 pre_tockens, next_tockens, actual_seq_qlen, actual_seq_kvlen, sparse_mode, softmax_layout,
                 sink, dropout_mask)
    p = call.problem
    out = _empty_like_layout(call, [p.batch, p.heads, p.q_len, p.value_dim], input_layout, query.dtype,
                             query.device)
    stat_shape = [p.q_len, p.heads, 8] if p.packed else [p.batch, p.heads, p.q_len, 8]
    smax = query.new_empty(stat_shape, dtype=torch.float32)
    ssum = query.new_empty(stat_shape, dtype=torch.float32)
    if keep_prob < 1.0 and seed == 0:
        seed = torch.library.get_ctx().new_dynamic_size()
    if keep_prob >= 1.0:
        offset = 0
    return out, smax, ssum, query.new_empty([0]), seed, offset, p.dropout_numel()


def _fusion_attention_grad(query, key, value, dy, head_num, input_layout, *, pse=None, padding_mask=None,
                           atten_mask=None, softmax_max=None, softmax_sum=None, softmax_in=None,
                           attention_in=None, scale_value=1.0, keep_prob=1.0, pre_tockens=2147483647,
                           next_tockens=2147483647, inner_precise=0, seed=0, offset=0, numels=0, prefix=None,
                           actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0, gen_mask_parallel=True,
                           sync=False, softmax_layout="", sink=None):
    call = _Call(_GRAD_OP, query, key, value, head_num, input_layout, pse, padding_mask, atten_mask, keep_prob,
                 pre_tockens, next_tockens, actual_seq_qlen, actual_seq_kvlen, sparse_mode, softmax_layout,
                 sink, None)
    p = call.problem
    if not isinstance(dy, torch.Tensor) or dy.dtype != query.dtype:
        L.fail(_GRAD_OP, "dy must be a tensor of query's dtype, shaped like the forward's attention output")
    dy4 = p.from_layout(dy)
    if tuple(dy4.shape) != (p.batch, p.heads, p.q_len, p.value_dim):
        L.fail(_GRAD_OP, f"dy has shape {tuple(dy.shape)}; it must be shaped like the attention output")
    if softmax_max is None or softmax_sum is None or attention_in is None:
        out4, smax4, ssum4 = call.forward(scale_value, keep_prob, seed, offset)
        smax3, ssum3 = smax4[..., 0], ssum4[..., 0]
    else:
        smax3 = call.stats_in(_GRAD_OP, "softmax_max", softmax_max)
        ssum3 = call.stats_in(_GRAD_OP, "softmax_sum", softmax_sum)
        if not isinstance(attention_in, torch.Tensor) or attention_in.shape != dy.shape:
            L.fail(_GRAD_OP, "attention_in must be the forward's attention output (shaped like dy)")
        out4 = p.from_layout(attention_in)
    band = call.band
    perm = L.layout_perm(input_layout)
    dq, dk, dv, dbias, dsink = torch.ops.npu._fused_attention_backward(
        dy4, p.q, p.k, p.v, out4, smax3, ssum3, call.bias, call.mask, call.sink, None, p.q_lens, None,
        p.kv_lens, p.packed, scale_value, scale_value, keep_prob, seed, offset, band.lo, band.hi,
        band.bottom_right, pse is not None, perm, perm, perm)
    dpse = dbias.sum_to_size(pse.shape).to(pse.dtype) if pse is not None else query.new_empty([0])
    return p.to_layout(dq), p.to_layout(dk), p.to_layout(dv), dpse, dsink


def _fusion_attention_grad_fake(query, key, value, dy, head_num, input_layout, *, pse=None, padding_mask=None,
                                atten_mask=None, softmax_max=None, softmax_sum=None, softmax_in=None,
                                attention_in=None, scale_value=1.0, keep_prob=1.0, pre_tockens=2147483647,
                                next_tockens=2147483647, inner_precise=0, seed=0, offset=0, numels=0,
                                prefix=None, actual_seq_qlen=None, actual_seq_kvlen=None, sparse_mode=0,
                                gen_mask_parallel=True, sync=False, softmax_layout="", sink=None):
    call = _Call(_GRAD_OP, query, key, value, head_num, input_layout, pse, padding_mask, atten_mask, keep_prob,
                 pre_tockens, next_tockens, actual_seq_qlen, actual_seq_kvlen, sparse_mode, softmax_layout,
                 sink, None)
    p = call.problem
    dev = query.device
    dq = _empty_like_layout(call, list(p.q.shape), input_layout, query.dtype, dev)
    dk = _empty_like_layout(call, list(p.k.shape), input_layout, query.dtype, dev)
    dv = _empty_like_layout(call, list(p.v.shape), input_layout, query.dtype, dev)
    dpse = pse.new_empty(pse.shape) if pse is not None else query.new_empty([0])
    dsink = query.new_empty([head_num] if sink is not None else [0], dtype=torch.float32)
    return dq, dk, dv, dpse, dsink


_SAVED_ARGS = ("head_num", "input_layout", "scale", "keep_prob", "pre_tockens", "next_tockens", "inner_precise",
               "prefix", "actual_seq_qlen", "actual_seq_kvlen", "sparse_mode", "softmax_layout")
_ARG_INDEX = {name: i for i, name in enumerate(
    ("query", "key", "value", "head_num", "input_layout", "pse", "padding_mask", "atten_mask", "scale",
     "keep_prob", "pre_tockens", "next_tockens", "inner_precise", "prefix", "actual_seq_qlen",
     "actual_seq_kvlen", "sparse_mode", "gen_mask_parallel", "sync", "softmax_layout", "sink", "dropout_mask",
     "seed", "offset"))}


def _setup_context(ctx, inputs, output):
    get = lambda name: inputs[_ARG_INDEX[name]]  # noqa: E731
    out, smax, ssum, _, seed, offset, numels = output
    ctx.save_for_backward(get("query"), get("key"), get("value"), get("pse"), get("atten_mask"), get("sink"),
                          out, smax, ssum)
    ctx.args = {name: get(name) for name in _SAVED_ARGS}
    ctx.seed, ctx.offset, ctx.numels = seed, offset, numels


def _backward(ctx, dout, *unused_grads):
    query, key, value, pse, atten_mask, sink, out, smax, ssum = ctx.saved_tensors
    a = ctx.args
    dq, dk, dv, dpse, dsink = torch.ops.npu.npu_fusion_attention_grad(
        query, key, value, dout, a["head_num"], a["input_layout"], pse=pse, atten_mask=atten_mask,
        softmax_max=smax, softmax_sum=ssum, attention_in=out, scale_value=a["scale"], keep_prob=a["keep_prob"],
        pre_tockens=a["pre_tockens"], next_tockens=a["next_tockens"], inner_precise=a["inner_precise"],
        seed=ctx.seed, offset=ctx.offset, numels=ctx.numels, prefix=a["prefix"],
        actual_seq_qlen=a["actual_seq_qlen"], actual_seq_kvlen=a["actual_seq_kvlen"],
        sparse_mode=a["sparse_mode"], softmax_layout=a["softmax_layout"], sink=sink)
    grads = [None] * len(_ARG_INDEX)
    grads[_ARG_INDEX["query"]] = dq
    grads[_ARG_INDEX["key"]] = dk
    grads[_ARG_INDEX["value"]] = dv
    if pse is not None:
        grads[_ARG_INDEX["pse"]] = dpse
    if sink is not None:
        grads[_ARG_INDEX["sink"]] = dsink
    return tuple(grads)


_family = OpFamily(__name__)
# The kernels also serve cpu tensors (they are the runtime's host kernels). The forward's fake
# kernel needs the fake context for the run-time dropout seed (an unbacked SymInt); the grad
# op's shape function does not, so it is a Meta kernel (FakeTensorMode runs it).
_family.define(_FORWARD_SCHEMA, kernel=_fusion_attention, fake=_fusion_attention_fake, backward=_backward,
               setup_context=_setup_context, fake_needs_context=True, kernel_keys=("CPU", "PrivateUse1"))
_family.define(_GRAD_SCHEMA, kernel=_fusion_attention_grad, fake=_fusion_attention_grad_fake,
               kernel_keys=("CPU", "PrivateUse1"))

npu_fusion_attention = torch.ops.npu.npu_fusion_attention
npu_fusion_attention_grad = torch.ops.npu.npu_fusion_attention_grad
