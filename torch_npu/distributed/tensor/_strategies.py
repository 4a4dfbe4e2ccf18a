"""How each npu operator shards: the acceptable (output, input) placements per mesh dimension.

Each entry follows ``torch.distributed.tensor.experimental.register_sharding``: given the
operator's arguments (tensors replaced by their DTensor specs), it returns the placement
lists DTensor may choose from, outputs first, then one entry per argument (``None`` for
non-tensor arguments). DTensor expands them over every mesh dimension and redistributes
inputs when they arrive in another placement. Replicating everything is always acceptable.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch.distributed.tensor import Partial, Replicate, Shard


def _broadcast_placement(x_ndim: int, other, dim: int):
    """Placement of a tensor broadcast against ``x`` when ``x`` is sharded on ``dim``."""
    if other is None:
        return None
    offset = x_ndim - other.ndim
    d = dim - offset
    if d < 0 or other.shape[d] == 1:
        return Replicate()
    return Shard(d)


def _reduced_placement(x_ndim: int, other, dim: int):
    """Placement of the gradient of a broadcast tensor: a partial sum where it was broadcast."""
    placement = _broadcast_placement(x_ndim, other, dim)
    return Partial() if isinstance(placement, Replicate) else placement


# --- normalisation -------------------------------------------------------------------------

def _rms_norm(x, gamma, epsilon=1e-6):
    out = [([Replicate(), Replicate()], [Replicate(), Replicate(), None])]
    for d in range(x.ndim - gamma.ndim):  # rows are independent; the normalised dims are not
        out.append(([Shard(d), Shard(d)], [Shard(d), Replicate(), None]))
    return out


def _rms_norm_backward(dy, x, gamma, rstd):
    out = [([Replicate(), Replicate()], [Replicate()] * 4)]
    for d in range(x.ndim - gamma.ndim):
        out.append(([Shard(d), Partial()], [Shard(d), Shard(d), Replicate(), Shard(d)]))
    return out


def _add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    out = [([Replicate()] * 3, [Replicate()] * 3 + [None])]
    for d in range(x1.ndim - gamma.ndim):
        out.append(([Shard(d)] * 3, [Shard(d), Shard(d), Replicate(), None]))
    return out


# --- activations ----------------------------------------------------------------------------

def _swiglu(x, dim=-1):
    split = dim % x.ndim  # the halves of this dimension are combined: it cannot be sharded
    out = [([Replicate()], [Replicate(), None])]
    out += [([Shard(d)], [Shard(d), None]) for d in range(x.ndim) if d != split]
    return out


def _swiglu_backward(grad, x, dim=-1):
    split = dim % x.ndim
    out = [([Replicate()], [Replicate(), Replicate(), None])]
    out += [([Shard(d)], [Shard(d), Shard(d), None]) for d in range(x.ndim) if d != split]
    return out


def _pointwise(n_tensors: int, n_trailing: int = 0):
    """An elementwise operator over ``n_tensors`` same-shaped tensors."""

    def strategy(first, *rest, **kwargs):
        out = [([Replicate()], [Replicate()] * n_tensors + [None] * n_trailing)]
        out += [([Shard(d)], [Shard(d)] * n_tensors + [None] * n_trailing) for d in range(first.ndim)]
        return out

    return strategy


# --- rotary embedding -------------------------------------------------------------------------

def _rotary_mul(x, r1, r2, rotary_mode="half", rotate=None):
    tail = [None, None if rotate is None else Replicate()]
    out = [([Replicate()], [Replicate(), Replicate(), Replicate()] + tail)]
    for d in range(x.ndim - 1):  # the last dimension is rotated in pairs or halves
        out.append(([Shard(d)], [Shard(d), _broadcast_placement(x.ndim, r1, d), _broadcast_placement(x.ndim, r2, d)] + tail))
    return out


def _rotary_mul_backward(grad, x, r1, r2, rotary_mode="half"):
    out = [([Replicate()] * 3, [Replicate()] * 4 + [None])]
    for d in range(x.ndim - 1):
        b1, b2 = _broadcast_placement(x.ndim, r1, d), _broadcast_placement(x.ndim, r2, d)
        out.append(
            (
                [Shard(d), _reduced_placement(x.ndim, r1, d), _reduced_placement(x.ndim, r2, d)],
                [Shard(d), Shard(d), b1, b2, None],
            )
        )
    return out


def _apply_rotary_pos_emb(q, k, cos, sin, layout="BSND", rotary_mode="half"):
    out = [([Replicate(), Replicate()], [Replicate()] * 4 + [None, None])]
    for d in range(q.ndim - 1):
        out.append(
            (
                [Shard(d), Shard(d)],
                [Shard(d), Shard(d), _broadcast_placement(q.ndim, cos, d), _broadcast_placement(q.ndim, sin, d), None, None],
            )
        )
    return out


# --- masked softmax ------------------------------------------------------------------------------

def _scaled_masked_softmax(x, mask, scale=1, fixed_triu_mask=False):
    out = [([Replicate()], [Replicate(), Replicate(), None, None])]
    for d in range(x.ndim - 1):  # softmax runs over the last dimension
        out.append(([Shard(d)], [Shard(d), _broadcast_placement(x.ndim, mask, d), None, None]))
    return out


def _scaled_masked_softmax_backward(y_grad, y, mask, scale, fixed_triu_mask):
    out = [([Replicate()], [Replicate(), Replicate(), Replicate(), None, None])]
    for d in range(y.ndim - 1):
        out.append(([Shard(d)], [Shard(d), Shard(d), _broadcast_placement(y.ndim, mask, d), None, None]))
    return out


# --- fused attention --------------------------------------------------------------------------

# Batch dimension of query/key/value and of the attention output, per input_layout. TND packs
# the batch into the token dimension: it is not split by batch.
_BATCH_DIM = {"BSH": 0, "BSND": 0, "BNSD": 0, "SBH": 1}


def _named(schema_args, args, kwargs):
    """(name, value) of the arguments in the order DTensor lists their strategies: the
    positional ones, then the keyword ones as passed."""
    names = [a.name for a in schema_args]
    return list(zip(names, args)) + list(kwargs.items())


def _is_spec(v):
    return v is not None and hasattr(v, "placements")


def _fusion_attention_rule(op_name):
    """Shard query/key/value/dy and the batch-shaped masks on the batch; replicate the rest."""

    def strategy(*args, **kwargs):
        schema = lookup(op_name)._schema
        named = _named(schema.arguments, args, kwargs)
        values = dict(named)
        q = values["query"]
        layout = values.get("input_layout", "BSH")
        n_out = len(schema.returns)
        tensor_args = [(n, v) for n, v in named if _is_spec(v)]
        replicate = ([None if _is_int_return(r) else Replicate() for r in schema.returns],
                     [Replicate() if _is_spec(v) else None for _, v in named])
        out = [replicate]
        b = _BATCH_DIM.get(layout)
        if b is None or values.get("dropout_mask") is not None or q.shape[b] < 2:
            return out
        batch = q.shape[b]
        inputs = []
        for name, v in named:
            if not _is_spec(v):
                inputs.append(None)
            elif name in ("query", "key", "value", "dy", "attention_in"):
                inputs.append(Shard(b))
            elif name in ("softmax_max", "softmax_sum"):
                inputs.append(Shard(0))
            elif name in ("pse", "atten_mask", "padding_mask") and v.ndim == 4 and v.shape[0] == batch:
                inputs.append(Shard(0))
            else:
                inputs.append(Replicate())
        if op_name.startswith("npu_fusion_attention_grad"):
            pse = values.get("pse")
            dpse = (Shard(0) if pse.ndim == 4 and pse.shape[0] == batch else Partial()) if _is_spec(pse) else Replicate()
            sink = values.get("sink")
            outputs = [Shard(b), Shard(b), Shard(b), dpse, Partial() if _is_spec(sink) else Replicate()]
        else:
            # attention_out, softmax_max, softmax_sum ([B, N, S, 8]), softmax_out (empty), seed, offset, numels
            outputs = [Shard(b), Shard(0), Shard(0), Replicate(), None, None, None]
        assert len(outputs) == n_out and sum(p is not None for p in inputs) == len(tensor_args)
        out.append((outputs, inputs))
        return out

    return strategy


def _is_int_return(ret) -> bool:
    return not isinstance(ret.type, torch.TensorType)


# Qualified operator name in the npu namespace -> its sharding strategy.
STRATEGIES: dict[str, Callable] = {
    "npu_rms_norm.default": _rms_norm,
    "npu_rms_norm_backward.default": _rms_norm_backward,
    "npu_add_rms_norm.default": _add_rms_norm,
    "npu_swiglu.default": _swiglu,
    "npu_swiglu_backward.default": _swiglu_backward,
    "npu_gelu.default": _pointwise(1),
    "npu_gelu_backward.default": _pointwise(2),
    "npu_silu.default": _pointwise(1),
    "npu_rotary_mul.default": _rotary_mul,
    "npu_rotary_mul_backward.default": _rotary_mul_backward,
    "npu_apply_rotary_pos_emb.default": _apply_rotary_pos_emb,
    "npu_scaled_masked_softmax.default": _scaled_masked_softmax,
    "npu_scaled_masked_softmax_backward.default": _scaled_masked_softmax_backward,
    "npu_fusion_attention.default": _fusion_attention_rule("npu_fusion_attention.default"),
    "npu_fusion_attention_grad.default": _fusion_attention_rule("npu_fusion_attention_grad.default"),
}


def lookup(qualified: str):
    """``torch.ops.npu.<name>.<overload>``, or None if this process does not define it."""
    name, _, overload = qualified.partition(".")
    packet = getattr(torch.ops.npu, name, None)
    if packet is None:
        return None
    return getattr(packet, overload or "default", None)


def register_strategies(table: dict[str, Callable] | None = None) -> tuple[str, ...]:
    """Register the strategies of ``table`` (default ``STRATEGIES``) whose operator exists;
    return their qualified names."""
    from torch.distributed.tensor.experimental import register_sharding

    done = []
    for qualified, strategy in (STRATEGIES if table is None else table).items():
        op = lookup(qualified)
        if op is None:
            continue
        register_sharding(op)(strategy)
        done.append(qualified)
    return tuple(done)
