"""fairseq's ``MultiheadAttention`` as Ascend's model zoo calls it, over the fused
``torch_npu.npu_multi_head_attention``.

The calling convention is Ascend's, not fairseq's: ``query`` is ``(bsz * tgt_len, embed_dim)``
and ``key``/``value`` are ``(bsz * s_len, kdim / vdim)`` (rows batch-major), with ``bsz``,
``tgt_len`` and ``s_len`` passed explicitly; ``forward`` returns ``(attn, weights)`` with
``attn`` of shape ``(bsz * tgt_len, embed_dim)``.

``key_padding_mask`` is either Ascend's additive mask ``(bsz, num_heads, tgt_len, s_len)``
(added to the scores) or fairseq's ``(bsz, s_len)`` padding mask (True / nonzero = padding,
excluded). ``attn_mask`` is an additive (float) or excluding (bool) ``(tgt_len, s_len)`` mask.

When the projections are square (``kdim == vdim == embed_dim``) and no key/value bias or zero
attention is added, the fused operator computes everything (its dropout mask comes from this
layer's ``NpuFairseqDropout``); the other configurations are the same formula in plain
PyTorch. ``q_noise`` (iPQ quantisation noise) and incremental decoding are not provided and
say so.
"""
import math
from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn import Parameter

from .ensemble_dropout import NpuFairseqDropout

__all__ = ["Matmul_transpose", "MultiheadAttention"]


class _MatmulTranspose(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor1, tensor2):
        ctx.save_for_backward(tensor1, tensor2)
        return torch.matmul(tensor1, tensor2.transpose(-2, -1))

    @staticmethod
    def backward(ctx, grad):
        tensor1, tensor2 = ctx.saved_tensors
        return torch.matmul(grad, tensor2), torch.matmul(grad.transpose(-2, -1), tensor1)


def Matmul_transpose(tensor1, tensor2):  # noqa: N802  (Ascend's name)
    """``tensor1 @ tensor2.transpose(-2, -1)`` with its own backward (no transposed copy kept)."""
    return _MatmulTranspose.apply(tensor1, tensor2)


class MultiheadAttention(nn.Module):
    """Multi-headed attention ("Attention Is All You Need"), fairseq's parameters and layout:
    ``q_proj``, ``k_proj``, ``v_proj``, ``out_proj`` (``nn.Linear``), ``bias_k``/``bias_v``."""

    def __init__(self, embed_dim, num_heads, kdim=None, vdim=None, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, self_attention=False, encoder_decoder_attention=False, q_noise=0.0,
                 qn_block_size=8):
        super().__init__()
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self.qkv_same_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        if num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"MultiheadAttention: embed_dim={embed_dim} must be divisible by num_heads={num_heads}")
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.dropout_module = NpuFairseqDropout(dropout, module_name=self.__class__.__name__)
        self.dropout_prob = dropout
        self.use_dropout_optim = True
        self.self_attention = self_attention
        self.encoder_decoder_attention = encoder_decoder_attention
        if self_attention and not self.qkv_same_dim:
            raise ValueError("MultiheadAttention: self_attention requires query, key and value of the same size "
                             f"(embed_dim={embed_dim}, kdim={self.kdim}, vdim={self.vdim})")
        if q_noise > 0:
            raise NotImplementedError(
                f"MultiheadAttention: q_noise={q_noise} (iPQ quantisation noise on the projections) is not provided; "
                "pass q_noise=0.0")
        self.q_noise = q_noise
        self.qn_block_size = qn_block_size
        self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias)
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        if add_bias_kv:
            self.bias_k = Parameter(torch.empty(1, 1, embed_dim))
            self.bias_v = Parameter(torch.empty(1, 1, embed_dim))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self.reset_parameters()
        self.onnx_trace = False
        self.tpu = False
        self.batch_size = None
        self.squence_length = None

    def prepare_for_onnx_export_(self):
        self.onnx_trace = True

    def prepare_for_tpu_(self, **kwargs):
        self.tpu = True

    def reset_parameters(self):
        """fairseq's initialisation: Xavier-uniform projections (gain 1/sqrt(2) when q, k, v
        have one size), zero output bias, Xavier-normal key/value biases."""
        gain = 1 / math.sqrt(2) if self.qkv_same_dim else 1.0
        for proj in (self.k_proj, self.v_proj, self.q_proj):
            nn.init.xavier_uniform_(proj.weight, gain=gain)
        nn.init.xavier_uniform_(self.out_proj.weight)
        if self.out_proj.bias is not None:
            nn.init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            nn.init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            nn.init.xavier_normal_(self.bias_v)

    def transpose_for_scores(self, x):
        """``(batch, length, embed_dim)`` (or ``(batch * length, embed_dim)`` with the batch of the
        last ``forward``) -> ``(batch, num_heads, length, head_dim)``."""
        if x.dim() == 2:
            if not self.batch_size:
                raise ValueError("MultiheadAttention.transpose_for_scores: a 2-D input needs the batch size of a "
                                 "previous forward; pass a (batch, length, embed_dim) tensor")
            x = x.reshape(self.batch_size, -1, x.shape[-1])
        if x.dim() != 3 or x.shape[-1] != self.num_heads * self.head_dim:
            raise ValueError(f"MultiheadAttention.transpose_for_scores: expected (batch, length, {self.embed_dim}), "
                             f"got {tuple(x.shape)}")
        return x.reshape(x.shape[0], x.shape[1], self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    # -- the forward ----------------------------------------------------------------------------

    def forward(self, query, key: Optional[Tensor], value: Optional[Tensor], bsz, tgt_len, s_len,
                key_padding_mask: Optional[Tensor] = None,
                incremental_state: Optional[Dict[str, Dict[str, Optional[Tensor]]]] = None,
                need_weights: bool = True, static_kv: bool = False, attn_mask: Optional[Tensor] = None,
                before_softmax: bool = False, need_head_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        if incremental_state is not None:
            raise NotImplementedError("MultiheadAttention: incremental decoding (incremental_state) is not provided; "
                                      "pass the whole key/value sequence with incremental_state=None")
        if key is None:
            key = query
        if value is None:
            value = key
        self._check_inputs(query, key, value, bsz, tgt_len, s_len)
        self.batch_size, self.squence_length = bsz, tgt_len
        mask = self._additive_mask(key_padding_mask, attn_mask, bsz, tgt_len, s_len, query)
        if self._fused_applies() and not before_softmax:
            outputs = self._fused(query, key, value, mask, bsz, tgt_len, s_len)
            attn, probs = outputs[0], outputs[6]
        else:
            result = self._composite(query, key, value, mask, bsz, tgt_len, s_len, before_softmax)
            if before_softmax:
                return result
            attn, probs = result
        if not (need_weights or need_head_weights):
            return attn, None
        weights = probs.transpose(0, 1) if need_head_weights else probs.mean(dim=1)
        return attn, weights

    def multi_attn(self, query, key, value, key_padding_mask, bsz, tgt_len):
        """The fused operator's attention output ``(bsz * tgt_len, embed_dim)``; ``key_padding_mask``
        is the additive ``(bsz, num_heads, tgt_len, src_len)`` mask (or None)."""
        src_len = key.size(0) // bsz
        if not self._fused_applies():
            raise ValueError("MultiheadAttention.multi_attn: the fused operator needs kdim == vdim == embed_dim and "
                             "no add_bias_kv / add_zero_attn; call forward instead")
        self._check_inputs(query, key, value, bsz, tgt_len, src_len)
        mask = self._additive_mask(key_padding_mask, None, bsz, tgt_len, src_len, query)
        return self._fused(query, key, value, mask, bsz, tgt_len, src_len)[0]

    def _fused_applies(self):
        return self.qkv_same_dim and self.bias_k is None and not self.add_zero_attn

    def _check_inputs(self, query, key, value, bsz, tgt_len, s_len):
        for name, x, rows, width in (("query", query, bsz * tgt_len, self.embed_dim),
                                     ("key", key, bsz * s_len, self.kdim),
                                     ("value", value, bsz * s_len, self.vdim)):
            if not isinstance(x, torch.Tensor) or x.dim() != 2 or tuple(x.shape) != (rows, width):
                shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
                raise ValueError(f"MultiheadAttention: {name} must have shape (bsz * length, features) = "
                                 f"({rows}, {width}) for bsz={bsz}, tgt_len={tgt_len}, s_len={s_len}; got {shape}")

    def _additive_mask(self, key_padding_mask, attn_mask, bsz, tgt_len, s_len, like):
        """One additive ``(bsz, num_heads, tgt_len, s_len)`` float32 mask (zeros when none)."""
        mask = torch.zeros((bsz, self.num_heads, tgt_len, s_len), dtype=torch.float32, device=like.device)
        if key_padding_mask is not None:
            kpm = key_padding_mask
            if tuple(kpm.shape) == (bsz, s_len):
                mask = mask.masked_fill(kpm.bool().view(bsz, 1, 1, s_len), float("-inf"))
            elif tuple(kpm.shape) == (bsz, self.num_heads, tgt_len, s_len):
                mask = mask + (kpm.float() if kpm.dtype != torch.bool else
                               torch.zeros_like(mask).masked_fill(kpm, float("-inf")))
            else:
                raise ValueError(f"MultiheadAttention: key_padding_mask must be (bsz, s_len) = ({bsz}, {s_len}) or "
                                 f"(bsz, num_heads, tgt_len, s_len) = ({bsz}, {self.num_heads}, {tgt_len}, {s_len}); "
                                 f"got {tuple(kpm.shape)}")
        if attn_mask is not None:
            if tuple(attn_mask.shape) != (tgt_len, s_len):
                raise ValueError(f"MultiheadAttention: attn_mask must be (tgt_len, s_len) = ({tgt_len}, {s_len}), "
                                 f"got {tuple(attn_mask.shape)}")
            if attn_mask.dtype == torch.bool:
                mask = mask.masked_fill(attn_mask, float("-inf"))
            else:
                mask = mask + attn_mask.float()
        return mask

    def _dropout_probability(self):
        return self.dropout_prob if self.training else 0.0

    def _fused(self, query, key, value, mask, bsz, tgt_len, s_len):
        import torch_npu

        p = self._dropout_probability()
        keep = self.dropout_module([(bsz, self.num_heads, tgt_len, s_len), query.dtype, query.device]) if p else None
        return torch_npu.npu_multi_head_attention(
            query, key, value, self.q_proj.weight, self.k_proj.weight, self.v_proj.weight, mask.to(query.dtype),
            self.out_proj.weight, self.q_proj.bias, self.k_proj.bias, self.v_proj.bias, self.out_proj.bias, keep,
            self.num_heads, self.head_dim, s_len, tgt_len, p, True)

    def _composite(self, query, key, value, mask, bsz, tgt_len, s_len, before_softmax):
        heads, dim = self.num_heads, self.head_dim
        q = self.q_proj(query).view(bsz, tgt_len, heads, dim).transpose(1, 2) * self.scaling
        k = self.k_proj(key).view(bsz, s_len, self.embed_dim)
        v = self.v_proj(value).view(bsz, s_len, self.embed_dim)
        if self.bias_k is not None:
            k = torch.cat([k, self.bias_k.expand(bsz, 1, -1)], dim=1)
            v = torch.cat([v, self.bias_v.expand(bsz, 1, -1)], dim=1)
            mask = F.pad(mask, (0, 1))
        k = k.view(bsz, -1, heads, dim).transpose(1, 2)
        v = v.view(bsz, -1, heads, dim).transpose(1, 2)
        if self.add_zero_attn:
            k = torch.cat([k, k.new_zeros(bsz, heads, 1, dim)], dim=2)
            v = torch.cat([v, v.new_zeros(bsz, heads, 1, dim)], dim=2)
            mask = F.pad(mask, (0, 1))
        scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) + mask
        scores = self.apply_sparse_mask(scores, tgt_len, scores.shape[-1], bsz)
        if before_softmax:
            return (scores.to(query.dtype).reshape(bsz * heads, tgt_len, -1), v.reshape(bsz * heads, -1, dim))
        probs = torch.softmax(scores, dim=-1)
        p = self._dropout_probability()
        if p:
            keep = self.dropout_module([tuple(probs.shape), query.dtype, query.device])
            dropped = probs * keep.to(probs.dtype) / (1.0 - p)
        else:
            dropped = probs
        context = torch.matmul(dropped, v.float()).to(query.dtype)
        attn = self.out_proj(context.transpose(1, 2).reshape(bsz * tgt_len, self.embed_dim))
        return attn, probs.to(query.dtype)

    def apply_sparse_mask(self, attn_weights, tgt_len: int, src_len: int, bsz: int):
        """Hook for sparse-attention subclasses; dense attention leaves the weights as they are."""
        return attn_weights

    def upgrade_state_dict_named(self, state_dict, name):
        """Split an old checkpoint's packed ``in_proj_weight``/``in_proj_bias`` into the q, k, v
        projections, in place."""
        prefix = name + "." if name != "" else ""
        for k in [k for k in state_dict.keys() if k.endswith(prefix + "in_proj_weight")]:
            packed = state_dict.pop(k)
            dim = packed.shape[0] // 3
            for i, proj in enumerate(("q_proj", "k_proj", "v_proj")):
                state_dict[f"{prefix}{proj}.weight"] = packed[i * dim:(i + 1) * dim]
            bias_key = prefix + "in_proj_bias"
            if bias_key in state_dict:
                packed_bias = state_dict.pop(bias_key)
                for i, proj in enumerate(("q_proj", "k_proj", "v_proj")):
                    state_dict[f"{prefix}{proj}.bias"] = packed_bias[i * dim:(i + 1) * dim]
