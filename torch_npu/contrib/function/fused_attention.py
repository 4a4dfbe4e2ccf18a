"""BERT's self-attention block as one call, as Ascend's contrib API offers it:
``npu_fused_attention`` and ``npu_fused_attention_with_layernorm`` (the same block after a
LayerNorm of the hidden states).

``npu_fused_attention(hidden_states, attention_mask, query_kernel, key_kernel, value_kernel,
query_bias, key_bias, value_bias, scale=1, keep_prob=0)``: with ``hidden_states`` ``(B * S, H)``
(``B`` is ``attention_mask.shape[0]``), heads of 64 (``N = H / 64``), each projection is
``x @ kernel + bias`` split into heads ``(B, N, S, 64)`` (``npu_linear`` and
``npu_confusion_transpose``), and ``torch_npu.npu_fused_attention_score`` gives
``(dropout(softmax(q @ k^T * scale + attention_mask)) @ v)`` with the heads merged back,
``(B * S, H)``. ``npu_fused_attention_with_layernorm(..., gamma, beta, scale=1, keep_prob=0)``
first normalises ``hidden_states`` (``layer_norm`` over ``H``, eps 1e-5) and returns
``(context, norm)``. Autograd gives the gradients of the hidden states, kernels, biases (and
``gamma``, ``beta``), the ones Ascend's backward returns; the mask gets none.

Ascend's preconditions are checked on every call (Ascend checks the first call only):
``hidden_states`` ``(B * S, H)`` with ``H`` 768 or 1024 and ``B * S`` a multiple of 32, the
mask ``(B, 1, S, S)``, kernels ``(H, H)``, biases ``(H,)``; the hidden states, mask and kernels
cast to FRACTAL_NZ (``torch_npu.npu_format_cast(t, 29)``), the biases (and ``gamma``,
``beta``) left ND. ``keep_prob`` is the probability of keeping an element (1 - dropout rate),
in ``(0, 1]``: the listed default 0 would keep nothing, so it is refused with that advice.
"""
from __future__ import annotations

import inspect

import torch
import torch.nn.functional as F

import torch_npu

__all__ = ["npu_fused_attention", "npu_fused_attention_with_layernorm"]

HEAD_SIZE = 64
HIDDEN_SIZES = (768, 1024)
FRACTAL_NZ, ND = 29, 2
LAYER_NORM_EPS = 1e-5


def _check(op, hidden_states, attention_mask, kernels, biases, norm_params, keep_prob):
    named = [("hidden_states", hidden_states), ("attention_mask", attention_mask)] + kernels + biases + norm_params
    for name, value in named:
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{op}: {name} must be a tensor, got {type(value).__name__}")
    if hidden_states.dim() != 2 or hidden_states.shape[0] % 32 != 0 or hidden_states.shape[1] not in HIDDEN_SIZES:
        raise RuntimeError(
            f"{op}: fused attention check compatibility failed, shape of hidden_states not matches: it must be "
            f"(B * S, H) with B * S a multiple of 32 and H in {HIDDEN_SIZES}, got {tuple(hidden_states.shape)}"
        )
    rows, hidden = hidden_states.shape
    mask_shape = tuple(attention_mask.shape)
    if len(mask_shape) != 4 or mask_shape[1] != 1 or mask_shape[2] != mask_shape[3]:
        raise RuntimeError(
            f"{op}: fused attention check compatibility failed, shape of attention_mask not matches: it must be "
            f"(B, 1, S, S), got {mask_shape}"
        )
    if rows != mask_shape[0] * mask_shape[2]:
        raise RuntimeError(
            f"{op}: hidden_states has {rows} rows but the mask {mask_shape} describes B * S = "
            f"{mask_shape[0] * mask_shape[2]} tokens"
        )
    for name, kernel in kernels:
        if tuple(kernel.shape) != (hidden, hidden):
            raise RuntimeError(
                f"{op}: fused attention check compatibility failed, shape of kernel not matches: {name} must be "
                f"(H, H) = ({hidden}, {hidden}), got {tuple(kernel.shape)}"
            )
    for name, vector in biases + norm_params:
        if tuple(vector.shape) != (hidden,):
            raise RuntimeError(f"{op}: {name} must have shape ({hidden},), got {tuple(vector.shape)}")
    nz = [("hidden_states", hidden_states), ("attention_mask", attention_mask)] + kernels
    for name, value in nz:
        if torch_npu.get_npu_format(value) != FRACTAL_NZ:
            raise RuntimeError(
                f"{op}: fused attention check compatibility failed, format not matches: {name} must be FRACTAL_NZ; "
                f"cast it with torch_npu.npu_format_cast({name}, 29)"
            )
    for name, value in biases + norm_params:
        if torch_npu.get_npu_format(value) != ND:
            raise RuntimeError(
                f"{op}: fused attention check compatibility failed, format not matches: {name} must be ND (2), "
                f"got format {torch_npu.get_npu_format(value)}"
            )
    if not 0.0 < keep_prob <= 1.0:
        raise ValueError(
            f"{op}: keep_prob={keep_prob} must be in (0, 1]: it is the probability of keeping an element "
            "(1 - dropout rate); pass keep_prob=1.0 for no dropout"
        )


def _heads(x, kernel, bias, batch, seq):
    projected = torch_npu.npu_linear(x, kernel.t(), bias)
    return torch_npu.npu_confusion_transpose(
        projected, (0, 2, 1, 3), (batch, seq, x.shape[1] // HEAD_SIZE, HEAD_SIZE), False)


def _attention(x, attention_mask, kernels, biases, scale, keep_prob):
    batch, seq = attention_mask.shape[0], attention_mask.shape[2]
    q, k, v = (_heads(x, kernel, bias, batch, seq) for kernel, bias in zip(kernels, biases))
    return torch_npu.npu_fused_attention_score(q, k, v, attention_mask, scale, keep_prob)


def _fused_attention(hidden_states, attention_mask, query_kernel, key_kernel, value_kernel,
                     query_bias, key_bias, value_bias, scale=1, keep_prob=0):
    kernels = [("query_kernel", query_kernel), ("key_kernel", key_kernel), ("value_kernel", value_kernel)]
    biases = [("query_bias", query_bias), ("key_bias", key_bias), ("value_bias", value_bias)]
    _check("npu_fused_attention", hidden_states, attention_mask, kernels, biases, [], keep_prob)
    return _attention(hidden_states, attention_mask, [k for _, k in kernels], [b for _, b in biases], scale, keep_prob)


def _fused_attention_with_layernorm(hidden_states, attention_mask, query_kernel, key_kernel, value_kernel,
                                    query_bias, key_bias, value_bias, gamma, beta, scale=1, keep_prob=0):
    kernels = [("query_kernel", query_kernel), ("key_kernel", key_kernel), ("value_kernel", value_kernel)]
    biases = [("query_bias", query_bias), ("key_bias", key_bias), ("value_bias", value_bias)]
    _check("npu_fused_attention_with_layernorm", hidden_states, attention_mask, kernels, biases,
           [("gamma", gamma), ("beta", beta)], keep_prob)
    norm = F.layer_norm(hidden_states, (hidden_states.shape[1],), gamma, beta, eps=LAYER_NORM_EPS)
    context = _attention(norm, attention_mask, [k for _, k in kernels], [b for _, b in biases], scale, keep_prob)
    return context, norm


def _bound(op, implementation, args, kwargs):
    try:
        return inspect.signature(implementation).bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{op}{inspect.signature(implementation)}: {exc}") from None


def npu_fused_attention(*args, **kwargs):
    """BERT self-attention: ``npu_fused_attention(hidden_states, attention_mask, query_kernel,
    key_kernel, value_kernel, query_bias, key_bias, value_bias, scale=1, keep_prob=0)``;
    returns the context ``(B * S, H)``."""
    bound = _bound("npu_fused_attention", _fused_attention, args, kwargs)
    return _fused_attention(*bound.args, **bound.kwargs)


def npu_fused_attention_with_layernorm(*args, **kwargs):
    """LayerNorm then BERT self-attention: ``npu_fused_attention_with_layernorm(hidden_states,
    attention_mask, query_kernel, key_kernel, value_kernel, query_bias, key_bias, value_bias,
    gamma, beta, scale=1, keep_prob=0)``; returns ``(context (B * S, H), norm (B * S, H))``."""
    bound = _bound("npu_fused_attention_with_layernorm", _fused_attention_with_layernorm, args, kwargs)
    return _fused_attention_with_layernorm(*bound.args, **bound.kwargs)
