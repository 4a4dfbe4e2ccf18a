"""Ascend's inference attention ops: npu_prompt_flash_attention (prefill),
npu_incre_flash_attention (decode) and npu_fused_infer_attention_score (both, plus the
log-sum-exp for ring attention).

LLM serving code written for Ascend (vLLM-Ascend style model runners, MindIE-like scripts) calls
these instead of SDPA: per-batch valid lengths (actual_seq_lengths), left padding, paged KV caches
(block_table), packed TND sequences, GQA through num_key_value_heads, and the same sparse modes as
npu_fusion_attention. They run the runtime's flash kernel. They are inference operators, as on
Ascend: no backward. The quantised paths (int8/int4 inputs, dequant/quant/antiquant scales) are
not provided by this runtime and say so; query must be float16 or bfloat16, as the Ascend
documentation states.
"""
from __future__ import annotations

import torch

from torch_npu.ops import attention_layout as L
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_prompt_flash_attention", "npu_incre_flash_attention", "npu_fused_infer_attention_score"]

_PFA_SCHEMA = (
    "npu_prompt_flash_attention(Tensor query, Tensor key, Tensor value, *, Tensor? padding_mask=None, "
    "Tensor? atten_mask=None, Tensor? pse_shift=None, int[]? actual_seq_lengths=None, Tensor? deq_scale1=None, "
    "Tensor? quant_scale1=None, Tensor? deq_scale2=None, Tensor? quant_scale2=None, Tensor? quant_offset2=None, "
    "int num_heads=1, float scale_value=1.0, int pre_tokens=2147483647, int next_tokens=0, "
    "str input_layout=\"BSH\", int num_key_value_heads=0, int[]? actual_seq_lengths_kv=None, "
    "int sparse_mode=0) -> Tensor"
)
_IFA_SCHEMA = (
    "npu_incre_flash_attention(Tensor query, Tensor key, Tensor value, *, Tensor? padding_mask=None, "
    "Tensor? atten_mask=None, Tensor? pse_shift=None, SymInt[]? actual_seq_lengths=None, "
    "Tensor? antiquant_scale=None, Tensor? antiquant_offset=None, Tensor? block_table=None, "
    "Tensor? dequant_scale1=None, Tensor? quant_scale1=None, Tensor? dequant_scale2=None, "
    "Tensor? quant_scale2=None, Tensor? quant_offset2=None, Tensor? kv_padding_size=None, int num_heads=1, "
    "float scale_value=1.0, str input_layout=\"BSH\", int num_key_value_heads=0, int block_size=0, "
    "int inner_precise=1) -> Tensor"
)
_FIA_SCHEMA = (
    "npu_fused_infer_attention_score(Tensor query, Tensor key, Tensor value, *, Tensor? pse_shift=None, "
    "Tensor? atten_mask=None, SymInt[]? actual_seq_lengths=None, SymInt[]? actual_seq_lengths_kv=None, "
    "Tensor? dequant_scale1=None, Tensor? quant_scale1=None, Tensor? dequant_scale2=None, "
    "Tensor? quant_scale2=None, Tensor? quant_offset2=None, Tensor? antiquant_scale=None, "
    "Tensor? antiquant_offset=None, Tensor? key_antiquant_scale=None, Tensor? key_antiquant_offset=None, "
    "Tensor? value_antiquant_scale=None, Tensor? value_antiquant_offset=None, Tensor? block_table=None, "
    "Tensor? query_padding_size=None, Tensor? kv_padding_size=None, Tensor? key_shared_prefix=None, "
    "Tensor? value_shared_prefix=None, SymInt[]? actual_shared_prefix_len=None, Tensor? query_rope=None, "
    "Tensor? key_rope=None, Tensor? key_rope_antiquant_scale=None, int num_heads=1, float scale=1.0, "
    "int pre_tokens=2147483647, int next_tokens=2147483647, str input_layout=\"BSH\", "
    "int num_key_value_heads=0, int sparse_mode=0, int inner_precise=0, int block_size=0, "
    "int antiquant_mode=0, bool softmax_lse_flag=False, int key_antiquant_mode=0, "
    "int value_antiquant_mode=0) -> (Tensor, Tensor)"
)

_INFER_DTYPES = (torch.float16, torch.bfloat16)
# input_layout -> (layout of query/key/value, layout of the output)
_PFA_LAYOUTS = {"BSH": ("BSH", "BSH"), "BSND": ("BSND", "BSND"), "BNSD": ("BNSD", "BNSD"),
                "BNSD_BSND": ("BNSD", "BSND"), "TND": ("TND", "TND")}
_IFA_LAYOUTS = {"BSH": ("BSH", "BSH"), "BSND": ("BSND", "BSND"), "BNSD": ("BNSD", "BNSD")}
_FIA_LAYOUTS = dict(_PFA_LAYOUTS, **{"BSH_NBSD": ("BSH", "NBSD"), "BSND_NBSD": ("BSND", "NBSD"),
                                     "BNSD_NBSD": ("BNSD", "NBSD"), "TND_NTD": ("TND", "NTD"),
                                     "NTD_TND": ("NTD", "TND"), "NTD": ("NTD", "NTD")})


def _unsupported(op, **named):
    for name, value in named.items():
        if value is not None:
            L.fail(op, f"{name} (quantised attention) is not supported by this runtime; pass None and use "
                       f"float16/bfloat16 query, key and value")


def _tensor_values(op, name, t, batch):
    """Per-batch values of a small int tensor argument (1 value for all, or one per batch)."""
    if not isinstance(t, torch.Tensor) or t.dtype not in (torch.int64, torch.int32):
        L.fail(op, f"{name} must be an int64 tensor")
    vals = [int(x) for x in t.reshape(-1).tolist()]
    if len(vals) == 1:
        return vals * batch
    if len(vals) < batch:
        L.fail(op, f"{name} must have 1 or {batch} (batch) values, got {len(vals)}")
    return vals[:batch]


def _per_batch(op, name, values, batch, limit):
    if values is None:
        return None
    vals = [int(v) for v in values]
    if len(vals) == 1:
        vals = vals * batch
    elif len(vals) >= batch:
        vals = vals[:batch]
    else:
        L.fail(op, f"{name} must have 1 or at least {batch} (batch) entries, got {len(vals)}")
    for v in vals:
        if v < 0 or v > limit:
            L.fail(op, f"{name} entries must be in [0, {limit}] (the sequence length of the tensor), got {vals}")
    return vals


class _InferCall:
    """One checked inference call in canonical form."""

    def __init__(self, op, query, key, value, *, layouts, input_layout, num_heads, num_key_value_heads,
                 atten_mask, pse_shift, actual_seq_lengths, actual_seq_lengths_kv, sparse_mode, pre_tokens,
                 next_tokens, decode=None, block_table=None, block_size=0, query_padding_size=None,
                 kv_padding_size=None, query_rope=None, key_rope=None, key_shared_prefix=None,
                 value_shared_prefix=None, actual_shared_prefix_len=None, materialize=True):
        L.check_tensors(op, query, key, value, dtypes=_INFER_DTYPES)
        if not isinstance(input_layout, str) or input_layout not in layouts:
            L.fail(op, f"input_layout must be one of {', '.join(layouts)}, got {input_layout!r}")
        in_layout, out_layout = layouts[input_layout]
        self.op = op
        if (query_rope is None) != (key_rope is None):
            L.fail(op, "query_rope and key_rope must be given together")
        if (key_shared_prefix is None) != (value_shared_prefix is None):
            L.fail(op, "key_shared_prefix and value_shared_prefix must be given together")
        paged = block_table is not None
        if paged:
            key, value = self._gather_pages(op, key, value, block_table, block_size, actual_seq_lengths_kv)
            kv_layout = "BSH" if key.dim() == 3 else "BNSD"
        else:
            kv_layout = in_layout
        if not isinstance(num_heads, int) or num_heads <= 0:
            L.fail(op, f"num_heads must be a positive int, got {num_heads!r}")
        want_dim = 3 if in_layout in ("BSH", "TND", "NTD") else 4
        if query.dim() != want_dim:
            L.fail(op, f"input_layout {input_layout!r} expects {want_dim}-D query, got shape {tuple(query.shape)}")
        if in_layout == "BSH" and query.shape[2] % num_heads != 0:
            L.fail(op, f"num_heads ({num_heads}) must divide the hidden size H={query.shape[2]} of query")
        q4 = L.to_canonical(query, in_layout, num_heads)
        if q4.shape[1] != num_heads:
            L.fail(op, f"num_heads ({num_heads}) must equal the N dimension of query in layout {in_layout} "
                       f"(shape {tuple(query.shape)})")
        d = q4.shape[3]
        for name, t in (("key", key), ("value", value)):
            if t.dim() != (3 if kv_layout in ("BSH", "TND", "NTD") else 4):
                L.fail(op, f"{name} has shape {tuple(t.shape)}, which does not fit input_layout {input_layout!r}")
        if kv_layout == "BSH":
            n2 = num_key_value_heads or num_heads
            if key.shape[2] != n2 * d:
                L.fail(op, f"key hidden size {key.shape[2]} must be num_key_value_heads ({n2}) x head dim ({d})")
            if value.shape[2] % n2 != 0:
                L.fail(op, f"value hidden size {value.shape[2]} is not a multiple of num_key_value_heads ({n2})")
        k4 = L.to_canonical(key, kv_layout, num_key_value_heads or num_heads)
        v4 = L.to_canonical(value, kv_layout, num_key_value_heads or num_heads)
        n2 = k4.shape[1]
        if num_key_value_heads and num_key_value_heads != n2:
            L.fail(op, f"num_key_value_heads ({num_key_value_heads}) must equal the N dimension of key/value ({n2})")
        if num_heads % n2 != 0:
            L.fail(op, f"num_heads ({num_heads}) must be a multiple of the key/value head count ({n2})")
        if k4.shape[3] != d or tuple(k4.shape[:3]) != tuple(v4.shape[:3]):
            L.fail(op, f"key {tuple(key.shape)} / value {tuple(value.shape)} do not fit query {tuple(query.shape)}")
        packed = in_layout in ("TND", "NTD")
        if not packed and k4.shape[0] != q4.shape[0]:
            L.fail(op, f"query batch {q4.shape[0]} and key/value batch {k4.shape[0]} must be equal")
        if query_rope is not None:
            qr = L.to_canonical(query_rope, in_layout, num_heads)
            kr = L.to_canonical(key_rope, kv_layout, n2)
            if tuple(qr.shape[:3]) != tuple(q4.shape[:3]) or tuple(kr.shape[:3]) != tuple(k4.shape[:3]):
                L.fail(op, "query_rope/key_rope must match query/key in every dimension but the last")
            q4 = torch.cat([q4, qr], dim=-1) if materialize else q4.new_empty(q4.shape[:3] + (d + qr.shape[3],))
            k4 = torch.cat([k4, kr], dim=-1) if materialize else k4.new_empty(k4.shape[:3] + (d + kr.shape[3],))
        self.prefix_len = 0
        if key_shared_prefix is not None:
            kp = L.to_canonical(key_shared_prefix, kv_layout, n2)
            vp = L.to_canonical(value_shared_prefix, kv_layout, n2)
            if kp.shape[0] != 1 or tuple(kp.shape[1:]) != (n2, kp.shape[2], k4.shape[3]) or vp.shape[2] != kp.shape[2]:
                L.fail(op, "key_shared_prefix/value_shared_prefix must have batch 1 and the head sizes of key/value")
            plen = kp.shape[2] if actual_shared_prefix_len is None else int(list(actual_shared_prefix_len)[0])
            self.prefix_len = plen
            b = k4.shape[0]
            k4 = torch.cat([kp[:, :, :plen].expand(b, -1, -1, -1), k4], dim=2)
            v4 = torch.cat([vp[:, :, :plen].expand(b, -1, -1, -1), v4], dim=2)
        self.out_layout = out_layout
        p = L.Problem(op, in_layout, out_layout, q4, k4, v4, num_heads, n2, packed=packed)
        self.q_starts = self.kv_starts = None
        if packed:
            p.q_lens = L.cumulative_to_lengths(op, "actual_seq_lengths", actual_seq_lengths, q4.shape[2])
            p.kv_lens = L.cumulative_to_lengths(op, "actual_seq_lengths_kv", actual_seq_lengths_kv, k4.shape[2])
            if len(p.q_lens) != len(p.kv_lens):
                L.fail(op, "actual_seq_lengths and actual_seq_lengths_kv must describe the same sequences")
        else:
            b = q4.shape[0]
            p.q_lens = _per_batch(op, "actual_seq_lengths", actual_seq_lengths, b, q4.shape[2])
            kv_lens = _per_batch(op, "actual_seq_lengths_kv", actual_seq_lengths_kv, b,
                                 k4.shape[2] - self.prefix_len)
            if kv_lens is not None and self.prefix_len:
                kv_lens = [n + self.prefix_len for n in kv_lens]
            p.kv_lens = kv_lens
            if p.q_lens is not None or p.kv_lens is not None:
                p.q_lens = p.q_lens or [q4.shape[2]] * b
                p.kv_lens = p.kv_lens or [k4.shape[2]] * b
            if query_padding_size is not None and materialize:
                if actual_seq_lengths is None:
                    L.fail(op, "query_padding_size needs actual_seq_lengths")
                pads = [max(0, v) for v in _tensor_values(op, "query_padding_size", query_padding_size, b)]
                self.q_starts = [q4.shape[2] - pad - n for pad, n in zip(pads, p.q_lens)]
                if min(self.q_starts) < 0:
                    L.fail(op, "query_padding_size + actual_seq_lengths exceed the query sequence length")
            if kv_padding_size is not None and materialize:
                if actual_seq_lengths_kv is None:
                    L.fail(op, "kv_padding_size needs the actual kv lengths")
                pads = [max(0, v) for v in _tensor_values(op, "kv_padding_size", kv_padding_size, b)]
                starts = [k4.shape[2] - pad - n for pad, n in zip(pads, p.kv_lens)]
                # Decode with a window starting before the cache: no key (the output is zero).
                p.kv_lens = [0 if s < 0 else n for s, n in zip(starts, p.kv_lens)]
                self.kv_starts = [max(0, s) for s in starts]
        self.problem = p
        self.decode = q4.shape[2] == 1 if decode is None else decode
        self.band = L.Band()
        self.mask = None
        self.bias = None
        if self.decode:
            if atten_mask is not None:
                self.mask = self._decode_mask(op, atten_mask, p)
        else:
            self.band, use_mask = L.sparse_band(op, sparse_mode, pre_tokens, next_tokens, atten_mask is not None,
                                                pre_name="pre_tokens", next_name="next_tokens")
            if atten_mask is not None:
                if use_mask:
                    b, sq, skv = p.batch, p.q_len, p.kv_len
                    shapes = [(sq, skv), (b, sq, skv), (1, sq, skv), (b, 1, sq, skv), (1, 1, sq, skv)]
                    self.mask = L.explicit_mask(op, atten_mask, p, dtypes=L.INFER_MASK_DTYPES, shapes=shapes)
                    self.mask = self.mask.view(torch.uint8) if self.mask.dtype == torch.int8 else self.mask
                else:
                    L.check_compressed_mask(op, atten_mask, sparse_mode, dtypes=L.INFER_MASK_DTYPES,
                                            allow_leading_ones=True)
        if pse_shift is not None:
            if not isinstance(pse_shift, torch.Tensor) or pse_shift.dtype != query.dtype:
                L.fail(op, "pse_shift must be a tensor of query's dtype")
            if packed:
                L.fail(op, "pse_shift is not supported with packed (TND) sequences")
            b, n, sq, skv = p.batch, p.heads, p.q_len, p.kv_len
            if pse_shift.dim() != 4 or pse_shift.shape[0] not in (1, b) or pse_shift.shape[1] != n \
                    or pse_shift.shape[2] < sq or pse_shift.shape[3] < skv:
                L.fail(op, f"pse_shift has shape {tuple(pse_shift.shape)}; expected ({b} or 1, {n}, {sq}, {skv})")
            self.bias = pse_shift[:, :, :sq, :skv]

    @staticmethod
    def _decode_mask(op, mask, p):
        if not isinstance(mask, torch.Tensor) or mask.dtype not in L.INFER_MASK_DTYPES:
            L.fail(op, "atten_mask must be a bool/int8/uint8 tensor (1 = masked)")
        b, skv = p.batch, p.kv_len
        shape = tuple(mask.shape)
        if mask.dim() == 2 and shape[0] in (1, b) and shape[1] >= skv:
            m = mask[:, None, None, :skv]
        elif mask.dim() == 3 and shape[0] in (1, b) and shape[1] == 1 and shape[2] >= skv:
            m = mask[:, :, None, :skv]
        elif mask.dim() == 4 and shape[0] in (1, b) and shape[1] == 1 and shape[2] == 1 and shape[3] >= skv:
            m = mask[..., :skv]
        else:
            L.fail(op, f"atten_mask has shape {shape}; for decoding (query S = 1) expected ({b}, {skv}), "
                       f"({b}, 1, {skv}) or ({b}, 1, 1, {skv})")
        return m.view(torch.uint8) if m.dtype == torch.int8 else m

    @staticmethod
    def _gather_pages(op, key, value, block_table, block_size, kv_lens):
        """The contiguous [B, S, ...] key/value of a paged cache (block_table[b, i] = physical block)."""
        if not isinstance(block_table, torch.Tensor) or block_table.dim() != 2 or block_table.dtype not in (
                torch.int32, torch.int64):
            L.fail(op, "block_table must be a 2-D int32 tensor [batch, max blocks per sequence]")
        if not isinstance(block_size, int) or block_size <= 0:
            L.fail(op, "block_size must be a positive int when block_table is given")
        if kv_lens is None:
            L.fail(op, "page attention (block_table) needs the actual kv lengths of every batch")
        b, blocks = block_table.shape
        if key.dim() == 3:        # (block num, block size, H)
            if key.shape[1] != block_size:
                L.fail(op, f"key cache {tuple(key.shape)} must be (block num, block_size={block_size}, H)")
            gather = lambda t: t.index_select(0, block_table.reshape(-1).long()).reshape(  # noqa: E731
                b, blocks * block_size, t.shape[2])
        elif key.dim() == 4:      # (block num, N, block size, D)
            if key.shape[2] != block_size:
                L.fail(op, f"key cache {tuple(key.shape)} must be (block num, N, block_size={block_size}, D)")
            gather = lambda t: t.index_select(0, block_table.reshape(-1).long()).reshape(  # noqa: E731
                b, blocks, t.shape[1], block_size, t.shape[3]).permute(0, 2, 1, 3, 4).reshape(
                b, t.shape[1], blocks * block_size, t.shape[3])
        else:
            L.fail(op, f"a paged key cache must be 3-D or 4-D, got shape {tuple(key.shape)}")
        return gather(key), gather(value)

    def run(self, scale, stats):
        p, band = self.problem, self.band
        return torch.ops.npu._fused_attention_forward(
            p.q, p.k, p.v, self.bias, self.mask, None, self.q_starts, p.q_lens, self.kv_starts, p.kv_lens, p.packed,
            scale, 1.0, 1.0, 0, 0, band.lo, band.hi, band.bottom_right, 0 if stats else 8,
            L.layout_perm(self.out_layout), p.stats_perm())

    def empty_out(self, query):
        p = self.problem
        sizes = [p.batch, p.heads, p.q_len, p.value_dim]
        perm = L.layout_perm(self.out_layout)
        inv = [0] * 4
        for i, dim in enumerate(perm):
            inv[dim] = i
        phys = torch.empty([sizes[i] for i in perm], dtype=query.dtype, device=query.device)
        return L.from_canonical(phys.permute(inv), self.out_layout)

    def lse_shape(self):
        p = self.problem
        return [p.q_len, p.heads, 1] if p.packed else [p.batch, p.heads, p.q_len, 1]

    def lse_out(self, lse):
        """Logsumexp [B, N, Sq] -> (B, N, Sq, 1), or (T, N, 1) for packed layouts."""
        return lse[0].transpose(0, 1).unsqueeze(-1) if self.problem.packed else lse.unsqueeze(-1)


# ---- npu_prompt_flash_attention ------------------------------------------------------------

_PFA = "npu_prompt_flash_attention"


def _pfa_call(query, key, value, padding_mask, atten_mask, pse_shift, actual_seq_lengths, num_heads,
              pre_tokens, next_tokens, input_layout, num_key_value_heads, actual_seq_lengths_kv, sparse_mode,
              materialize):
    if padding_mask is not None:
        L.fail(_PFA, "padding_mask is reserved and must be None")
    return _InferCall(_PFA, query, key, value, layouts=_PFA_LAYOUTS, input_layout=input_layout,
                      num_heads=num_heads, num_key_value_heads=num_key_value_heads, atten_mask=atten_mask,
                      pse_shift=pse_shift, actual_seq_lengths=actual_seq_lengths,
                      actual_seq_lengths_kv=actual_seq_lengths_kv, sparse_mode=sparse_mode, pre_tokens=pre_tokens,
                      next_tokens=next_tokens, decode=False, materialize=materialize)


def _prompt_flash_attention(query, key, value, *, padding_mask=None, atten_mask=None, pse_shift=None,
                            actual_seq_lengths=None, deq_scale1=None, quant_scale1=None, deq_scale2=None,
                            quant_scale2=None, quant_offset2=None, num_heads=1, scale_value=1.0,
                            pre_tokens=2147483647, next_tokens=0, input_layout="BSH", num_key_value_heads=0,
                            actual_seq_lengths_kv=None, sparse_mode=0):
    _unsupported(_PFA, deq_scale1=deq_scale1, quant_scale1=quant_scale1, deq_scale2=deq_scale2,
                 quant_scale2=quant_scale2, quant_offset2=quant_offset2)
    call = _pfa_call(query, key, value, padding_mask, atten_mask, pse_shift, actual_seq_lengths, num_heads,
                     pre_tokens, next_tokens, input_layout, num_key_value_heads, actual_seq_lengths_kv,
                     sparse_mode, True)
    out, _, _ = call.run(scale_value, stats=True)
    return call.problem.to_layout(out)


def _prompt_flash_attention_fake(query, key, value, *, padding_mask=None, atten_mask=None, pse_shift=None,
                                 actual_seq_lengths=None, deq_scale1=None, quant_scale1=None, deq_scale2=None,
                                 quant_scale2=None, quant_offset2=None, num_heads=1, scale_value=1.0,
                                 pre_tokens=2147483647, next_tokens=0, input_layout="BSH", num_key_value_heads=0,
                                 actual_seq_lengths_kv=None, sparse_mode=0):
    _unsupported(_PFA, deq_scale1=deq_scale1, quant_scale1=quant_scale1, deq_scale2=deq_scale2,
                 quant_scale2=quant_scale2, quant_offset2=quant_offset2)
    call = _pfa_call(query, key, value, padding_mask, atten_mask, pse_shift, actual_seq_lengths, num_heads,
                     pre_tokens, next_tokens, input_layout, num_key_value_heads, actual_seq_lengths_kv,
                     sparse_mode, False)
    return call.empty_out(query)


# ---- npu_incre_flash_attention ---------------------------------------------------------------

_IFA = "npu_incre_flash_attention"


def _ifa_call(query, key, value, padding_mask, atten_mask, pse_shift, actual_seq_lengths, block_table,
              kv_padding_size, num_heads, input_layout, num_key_value_heads, block_size, materialize):
    if padding_mask is not None:
        L.fail(_IFA, "padding_mask is reserved and must be None")
    call = _InferCall(_IFA, query, key, value, layouts=_IFA_LAYOUTS, input_layout=input_layout,
                      num_heads=num_heads, num_key_value_heads=num_key_value_heads, atten_mask=atten_mask,
                      pse_shift=pse_shift, actual_seq_lengths=None, actual_seq_lengths_kv=actual_seq_lengths,
                      sparse_mode=0, pre_tokens=2147483647, next_tokens=2147483647, decode=True,
                      block_table=block_table, block_size=block_size, kv_padding_size=kv_padding_size,
                      materialize=materialize)
    if call.problem.q_len != 1:
        L.fail(_IFA, f"incremental attention takes one query token per sequence (S = 1), got S = "
                     f"{call.problem.q_len}; use npu_prompt_flash_attention or npu_fused_infer_attention_score")
    return call


def _incre_flash_attention(query, key, value, *, padding_mask=None, atten_mask=None, pse_shift=None,
                           actual_seq_lengths=None, antiquant_scale=None, antiquant_offset=None, block_table=None,
                           dequant_scale1=None, quant_scale1=None, dequant_scale2=None, quant_scale2=None,
                           quant_offset2=None, kv_padding_size=None, num_heads=1, scale_value=1.0,
                           input_layout="BSH", num_key_value_heads=0, block_size=0, inner_precise=1):
    _unsupported(_IFA, antiquant_scale=antiquant_scale, antiquant_offset=antiquant_offset,
                 dequant_scale1=dequant_scale1, quant_scale1=quant_scale1, dequant_scale2=dequant_scale2,
                 quant_scale2=quant_scale2, quant_offset2=quant_offset2)
    call = _ifa_call(query, key, value, padding_mask, atten_mask, pse_shift, actual_seq_lengths, block_table,
                     kv_padding_size, num_heads, input_layout, num_key_value_heads, block_size, True)
    out, _, _ = call.run(scale_value, stats=True)
    return call.problem.to_layout(out)


def _incre_flash_attention_fake(query, key, value, *, padding_mask=None, atten_mask=None, pse_shift=None,
                                actual_seq_lengths=None, antiquant_scale=None, antiquant_offset=None,
                                block_table=None, dequant_scale1=None, quant_scale1=None, dequant_scale2=None,
                                quant_scale2=None, quant_offset2=None, kv_padding_size=None, num_heads=1,
                                scale_value=1.0, input_layout="BSH", num_key_value_heads=0, block_size=0,
                                inner_precise=1):
    _unsupported(_IFA, antiquant_scale=antiquant_scale, antiquant_offset=antiquant_offset,
                 dequant_scale1=dequant_scale1, quant_scale1=quant_scale1, dequant_scale2=dequant_scale2,
                 quant_scale2=quant_scale2, quant_offset2=quant_offset2)
    call = _ifa_call(query, key, value, padding_mask, atten_mask, pse_shift, actual_seq_lengths, block_table,
                     kv_padding_size, num_heads, input_layout, num_key_value_heads, block_size, False)
    return call.empty_out(query)


# ---- npu_fused_infer_attention_score -----------------------------------------------------------

_FIA = "npu_fused_infer_attention_score"


def _fia_call(query, key, value, kw, materialize):
    _unsupported(_FIA, **{n: kw[n] for n in (
        "dequant_scale1", "quant_scale1", "dequant_scale2", "quant_scale2", "quant_offset2", "antiquant_scale",
        "antiquant_offset", "key_antiquant_scale", "key_antiquant_offset", "value_antiquant_scale",
        "value_antiquant_offset", "key_rope_antiquant_scale")})
    return _InferCall(
        _FIA, query, key, value, layouts=_FIA_LAYOUTS, input_layout=kw["input_layout"], num_heads=kw["num_heads"],
        num_key_value_heads=kw["num_key_value_heads"], atten_mask=kw["atten_mask"], pse_shift=kw["pse_shift"],
        actual_seq_lengths=kw["actual_seq_lengths"], actual_seq_lengths_kv=kw["actual_seq_lengths_kv"],
        sparse_mode=kw["sparse_mode"], pre_tokens=kw["pre_tokens"], next_tokens=kw["next_tokens"],
        block_table=kw["block_table"], block_size=kw["block_size"], query_padding_size=kw["query_padding_size"],
        kv_padding_size=kw["kv_padding_size"], query_rope=kw["query_rope"], key_rope=kw["key_rope"],
        key_shared_prefix=kw["key_shared_prefix"], value_shared_prefix=kw["value_shared_prefix"],
        actual_shared_prefix_len=kw["actual_shared_prefix_len"], materialize=materialize)


_FIA_DEFAULTS = dict(
    pse_shift=None, atten_mask=None, actual_seq_lengths=None, actual_seq_lengths_kv=None, dequant_scale1=None,
    quant_scale1=None, dequant_scale2=None, quant_scale2=None, quant_offset2=None, antiquant_scale=None,
    antiquant_offset=None, key_antiquant_scale=None, key_antiquant_offset=None, value_antiquant_scale=None,
    value_antiquant_offset=None, block_table=None, query_padding_size=None, kv_padding_size=None,
    key_shared_prefix=None, value_shared_prefix=None, actual_shared_prefix_len=None, query_rope=None, key_rope=None,
    key_rope_antiquant_scale=None, num_heads=1, scale=1.0, pre_tokens=2147483647, next_tokens=2147483647,
    input_layout="BSH", num_key_value_heads=0, sparse_mode=0, inner_precise=0, block_size=0, antiquant_mode=0,
    softmax_lse_flag=False, key_antiquant_mode=0, value_antiquant_mode=0)


def _fused_infer_attention_score(query, key, value, **kwargs):
    kw = dict(_FIA_DEFAULTS, **kwargs)
    call = _fia_call(query, key, value, kw, True)
    out, lse, _ = call.run(kw["scale"], stats=True)
    if kw["softmax_lse_flag"]:
        lse = call.lse_out(lse)
    else:
        lse = torch.zeros(1, dtype=torch.float32, device=query.device)
    return call.problem.to_layout(out), lse


def _fused_infer_attention_score_fake(query, key, value, **kwargs):
    kw = dict(_FIA_DEFAULTS, **kwargs)
    call = _fia_call(query, key, value, kw, False)
    shape = call.lse_shape() if kw["softmax_lse_flag"] else [1]
    return call.empty_out(query), query.new_empty(shape, dtype=torch.float32)


# The kernels also serve cpu tensors (they are the runtime's host kernels). The shape functions
# are Meta kernels (FakeTensorMode runs them, and so do meta tensors): none needs the fake context.
_family = OpFamily(__name__)
_KEYS = ("CPU", "PrivateUse1")
_family.define(_PFA_SCHEMA, kernel=_prompt_flash_attention, fake=_prompt_flash_attention_fake, kernel_keys=_KEYS)
_family.define(_IFA_SCHEMA, kernel=_incre_flash_attention, fake=_incre_flash_attention_fake, kernel_keys=_KEYS)
_family.define(_FIA_SCHEMA, kernel=_fused_infer_attention_score, fake=_fused_infer_attention_score_fake,
               kernel_keys=_KEYS)

npu_prompt_flash_attention = torch.ops.npu.npu_prompt_flash_attention
npu_incre_flash_attention = torch.ops.npu.npu_incre_flash_attention
npu_fused_infer_attention_score = torch.ops.npu.npu_fused_infer_attention_score
