"""``npu_grouped_matmul``: many matrix products in one call, as MoE layers on Ascend issue them.

Semantics (Ascend documentation) ``y_i = x_i @ weight_i + bias_i``, with the groups given in
one of these ways:

* several ``x`` and several ``weight`` (``group_type`` -1, or 0 with ``split_item`` 2/3): one
  product per pair; ``x_i`` may have 2 to 6 dimensions;
* one ``x`` of shape (M, K) split along M by ``group_list`` (``group_type`` 0) against several
  (K, N_i) weights or one (E, K, N) weight;
* one ``x`` of shape (M, K) and one ``weight`` (K, N) split along K (``group_type`` 2): the
  result is (E, M, N), one (M, N) product per K slice.

``group_list`` is, by ``group_list_type``: 0 the cumulative sizes, 1 the sizes, 2 (E, 2) rows of
``[group index, size]``. ``split_item`` 0/1 returns one tensor per group, 2/3 one tensor
(the groups' results concatenated along M). Quantised forms: int8 ``x`` and ``weight`` with
``scale`` (float32/bfloat16, per output channel) and optional ``per_token_scale`` give
``(x @ w + int32 bias) * scale * per_token_scale``; float ``x`` with int8 ``weight`` and
``antiquant_scale``/``antiquant_offset`` use ``(w + offset) * scale`` as the weight.
``act_type`` applies 1 relu, 2 gelu (tanh), 4 fast gelu or 5 silu to the result.

There is no backward (Ascend defines none). Inductor calls the operator as it is.
``torch_npu.npu_grouped_matmul`` picks the overload: a Python list ``group_list`` goes to
``npu_grouped_matmul.List`` (static group sizes), a Tensor to the default overload (the
sizes are data, so a per-group result has a data-dependent number of rows).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_grouped_matmul"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

OP = "npu_grouped_matmul"
MAX_GROUPS = 128
_FLOAT = check.FLOATING
_ACTIVATIONS = {
    0: None,
    1: F.relu,
    2: lambda t: F.gelu(t, approximate="tanh"),
    4: lambda t: t * torch.sigmoid(1.702 * t),
    5: F.silu,
}


def _group_sizes(group_list, group_list_type: int, total, count: int) -> list:
    """Sizes of the groups along the split axis, from either form of ``group_list``."""
    if group_list is None:
        raise ValueError(f"{OP}: this grouping needs group_list (the sizes of the groups)")
    if isinstance(group_list, torch.Tensor):
        values = [int(v) for v in group_list.reshape(-1).tolist()]
    else:
        values = [int(v) for v in group_list]
    if group_list_type == 0:
        sizes = [b - a for a, b in zip([0] + values[:-1], values)]
        if any(s < 0 for s in sizes):
            raise ValueError(f"{OP}: group_list={values} must be non-decreasing (group_list_type=0: cumulative sizes)")
    elif group_list_type == 1:
        sizes = values
    else:
        pairs = list(zip(values[0::2], values[1::2]))
        by_group = dict(pairs)
        sizes = [by_group.get(g, 0) for g in range(count)]
    if any(s < 0 for s in sizes):
        raise ValueError(f"{OP}: group_list={values} has a negative group size")
    if len(sizes) != count:
        raise ValueError(
            f"{OP}: group_list describes {len(sizes)} groups but there are {count} weights"
        )
    if sum(sizes) != total:
        raise ValueError(
            f"{OP}: the group sizes {sizes} (from group_list) add up to {sum(sizes)}, but the "
            f"split dimension has {total}"
        )
    return sizes


def _check_common(x, weight, split_item, group_type, group_list_type, act_type, output_dtype):
    if not isinstance(x, (list, tuple)) or not x:
        raise TypeError(f"{OP}: x must be a non-empty list of Tensors")
    if not isinstance(weight, (list, tuple)) or not weight:
        raise TypeError(f"{OP}: weight must be a non-empty list of Tensors")
    for name, tensors in (("x", x), ("weight", weight)):
        if len(tensors) > MAX_GROUPS:
            raise ValueError(f"{OP}: {name} has {len(tensors)} tensors; at most {MAX_GROUPS}")
        for i, t in enumerate(tensors):
            check.tensor(OP, f"{name}[{i}]", t)
            check.dtype(OP, f"{name}[{i}]", t, (*_FLOAT, torch.int8))
    check.choice(OP, "split_item", split_item, (0, 1, 2, 3))
    check.choice(OP, "group_type", group_type, (None, -1, 0, 2))
    check.choice(OP, "group_list_type", group_list_type, (0, 1, 2))
    check.choice(OP, "act_type", act_type, tuple(_ACTIVATIONS))
    for i, w in enumerate(weight):
        if w.dim() not in (2, 3):
            raise ValueError(f"{OP}: weight[{i}] must have 2 or 3 dimensions, got shape {tuple(w.shape)}")
    if output_dtype is not None:
        check.choice(OP, "output_dtype", output_dtype, (*_FLOAT, torch.int8, torch.int32))


def _output_dtype(x0: torch.Tensor, output_dtype) -> torch.dtype:
    return output_dtype if output_dtype is not None else x0.dtype


def _plan(x, weight, group_list, split_item, group_type, group_list_type):
    """How the groups are formed: ("pairs"|"split_m"|"split_k", sizes or None)."""
    if group_type is None:
        group_type = -1 if group_list is None and len(x) == len(weight) else 0
    if group_type == 2:
        if len(x) != 1 or len(weight) != 1 or x[0].dim() != 2 or weight[0].dim() != 2:
            raise ValueError(
                f"{OP}: group_type=2 (K-axis groups) needs one 2-dimensional x and one "
                "2-dimensional weight"
            )
        return "split_k", group_type
    if len(x) > 1 or (group_type == -1):
        if len(x) != len(weight):
            raise ValueError(
                f"{OP}: with {len(x)} x tensors there must be as many weights, got {len(weight)}"
            )
        return "pairs", group_type
    if x[0].dim() != 2:
        raise ValueError(f"{OP}: a single x split into groups must be 2-dimensional, got shape {tuple(x[0].shape)}")
    if len(weight) == 1 and weight[0].dim() != 3:
        raise ValueError(
            f"{OP}: a single weight for several groups must be 3-dimensional (E, K, N), got "
            f"shape {tuple(weight[0].shape)}"
        )
    return "split_m", group_type


def _weights_per_group(weight) -> list:
    if len(weight) == 1 and weight[0].dim() == 3:
        return list(weight[0].unbind(0))
    return list(weight)


def _dequantised_weight(w, i, antiquant_scale, antiquant_offset, dtype):
    if antiquant_scale is None:
        return w
    scale = antiquant_scale[min(i, len(antiquant_scale) - 1)]
    if len(antiquant_scale) == 1 and scale.dim() == 2:
        scale = scale[i]
    w = w.float()
    if antiquant_offset is not None:
        offset = antiquant_offset[min(i, len(antiquant_offset) - 1)]
        if len(antiquant_offset) == 1 and offset.dim() == 2:
            offset = offset[i]
        w = w + offset.float()
    return (w * scale.float()).to(dtype)


def _pick(tensors, i):
    if tensors is None:
        return None
    t = tensors[min(i, len(tensors) - 1)]
    if len(tensors) == 1 and t.dim() == 2:  # one stacked tensor for all groups
        return t[i]
    return t


def _product(a, w, i, bias, scale, per_token_scale, antiquant_scale, antiquant_offset,
             act_type, out_dtype, token_rows=None):
    if a.dtype == torch.int8:
        if w.dtype != torch.int8:
            raise TypeError(f"{OP}: an int8 x needs an int8 weight, got weight[{i}] of {w.dtype}")
        acc = torch.matmul(a.to(torch.int32), w.to(torch.int32))
        b = _pick(bias, i)
        if b is not None and b.dtype == torch.int32:
            acc = acc + b
        if out_dtype == torch.int32:
            return acc
        s = _pick(scale, i)
        if s is None:
            raise ValueError(f"{OP}: int8 x and weight need scale (the dequantisation scale)")
        if s.dtype == torch.int64:
            raise TypeError(
                f"{OP}: scale has dtype int64 (packed by npu_trans_quant_param), which the "
                "simulated npu does not read; pass the float32 or bfloat16 scale"
            )
        out = acc.double() * s.double()
        if per_token_scale is not None:
            pts = per_token_scale[0] if len(per_token_scale) == 1 else per_token_scale[i]
            if token_rows is not None:
                pts = pts[token_rows[0]:token_rows[1]]
            out = out * pts.double().unsqueeze(-1)
        if b is not None and b.dtype != torch.int32:
            out = out + b.double()
        activation = _ACTIVATIONS[act_type]
        if activation is not None:
            out = activation(out)
        if out_dtype == torch.int8:
            return torch.round(out).clamp(-128, 127).to(torch.int8)
        return out.to(out_dtype)
    w = _dequantised_weight(w, i, antiquant_scale, antiquant_offset, a.dtype)
    if w.dtype != a.dtype:
        raise TypeError(
            f"{OP}: weight[{i}] has dtype {w.dtype} but x has {a.dtype}; they must match "
            "(or give antiquant_scale for an int8 weight)"
        )
    out = torch.matmul(a.float(), w.float())
    b = _pick(bias, i)
    if b is not None:
        out = out + b.float()
    activation = _ACTIVATIONS[act_type]
    if activation is not None:
        out = activation(out)
    return out.to(out_dtype)


def _grouped_matmul(x, weight, *, bias=None, scale=None, offset=None, antiquant_scale=None,
                    antiquant_offset=None, per_token_scale=None, group_list=None,
                    activation_input=None, activation_quant_scale=None,
                    activation_quant_offset=None, split_item=0, group_type=None,
                    group_list_type=0, act_type=0, tuning_config=None, output_dtype=None):
    split_item = 0 if split_item is None else split_item
    group_list_type = 0 if group_list_type is None else group_list_type
    act_type = 0 if act_type is None else act_type
    _check_common(x, weight, split_item, group_type, group_list_type, act_type, output_dtype)
    _check_reserved(offset, activation_input, activation_quant_scale, activation_quant_offset)
    out_dtype = _output_dtype(x[0], output_dtype)
    kind, _ = _plan(x, weight, group_list, split_item, group_type, group_list_type)
    extra = (bias, scale, per_token_scale, antiquant_scale, antiquant_offset, act_type, out_dtype)
    if kind == "pairs":
        outs = [_product(a, w, i, *extra) for i, (a, w) in enumerate(zip(x, weight))]
    elif kind == "split_k":
        a, w = x[0], weight[0]
        sizes = _group_sizes(group_list, group_list_type, a.shape[1], _group_count(group_list, group_list_type))
        outs, start = [], 0
        for i, size in enumerate(sizes):
            outs.append(_product(a[:, start:start + size], w[start:start + size], i, *extra))
            start += size
        return [torch.stack(outs).contiguous()]
    else:
        weights = _weights_per_group(weight)
        a = x[0]
        sizes = _group_sizes(group_list, group_list_type, a.shape[0], len(weights))
        outs, start = [], 0
        for i, (size, w) in enumerate(zip(sizes, weights)):
            outs.append(_product(a[start:start + size], w, i, *extra, token_rows=(start, start + size)))
            start += size
    if split_item in (2, 3):
        return [torch.cat(outs, dim=0).contiguous()]
    return [o.contiguous() for o in outs]


def _group_count(group_list, group_list_type: int) -> int:
    if isinstance(group_list, torch.Tensor):
        return group_list.shape[0]
    if group_list is None:
        raise ValueError(f"{OP}: group_type=2 needs group_list (the sizes of the K slices)")
    return len(group_list) // 2 if group_list_type == 2 else len(group_list)


def _check_reserved(offset, activation_input, activation_quant_scale, activation_quant_offset):
    for name, value in (
        ("offset", offset),
        ("activation_input", activation_input),
        ("activation_quant_scale", activation_quant_scale),
        ("activation_quant_offset", activation_quant_offset),
    ):
        if value is not None:
            raise ValueError(f"{OP}: {name} is reserved by Ascend and must be None")


def _grouped_matmul_fake(x, weight, *, bias=None, scale=None, offset=None, antiquant_scale=None,
                         antiquant_offset=None, per_token_scale=None, group_list=None,
                         activation_input=None, activation_quant_scale=None,
                         activation_quant_offset=None, split_item=0, group_type=None,
                         group_list_type=0, act_type=0, tuning_config=None, output_dtype=None):
    split_item = 0 if split_item is None else split_item
    group_list_type = 0 if group_list_type is None else group_list_type
    act_type = 0 if act_type is None else act_type
    _check_common(x, weight, split_item, group_type, group_list_type, act_type, output_dtype)
    _check_reserved(offset, activation_input, activation_quant_scale, activation_quant_offset)
    out_dtype = _output_dtype(x[0], output_dtype)
    kind, _ = _plan(x, weight, group_list, split_item, group_type, group_list_type)
    if kind == "pairs":
        shapes = [(*a.shape[:-1], w.shape[-1]) for a, w in zip(x, weight)]
        if split_item in (2, 3):
            rows = sum(s[0] for s in shapes)
            return [x[0].new_empty((rows, shapes[0][-1]), dtype=out_dtype)]
        return [x[0].new_empty(s, dtype=out_dtype) for s in shapes]
    a = x[0]
    if kind == "split_k":
        groups = _group_count(group_list, group_list_type)
        return [a.new_empty((groups, a.shape[0], weight[0].shape[1]), dtype=out_dtype)]
    weights = _weights_per_group(weight)
    n = weights[0].shape[-1]
    if split_item in (2, 3):
        return [a.new_empty((a.shape[0], n), dtype=out_dtype)]
    if isinstance(group_list, torch.Tensor):
        ctx = torch.library.get_ctx()
        return [a.new_empty((ctx.new_dynamic_size(), w.shape[-1]), dtype=out_dtype) for w in weights]
    sizes = _group_sizes(group_list, group_list_type, a.shape[0], len(weights))
    return [a.new_empty((size, w.shape[-1]), dtype=out_dtype) for size, w in zip(sizes, weights)]


_ARGUMENTS = (
    "Tensor[] x, Tensor[] weight, *, Tensor[]? bias=None, Tensor[]? scale=None, "
    "Tensor[]? offset=None, Tensor[]? antiquant_scale=None, Tensor[]? antiquant_offset=None, "
    "Tensor[]? per_token_scale=None, {group_list}, Tensor[]? activation_input=None, "
    "Tensor[]? activation_quant_scale=None, Tensor[]? activation_quant_offset=None, "
    "int? split_item=0, int? group_type=None, int? group_list_type=0, int? act_type=0, "
    "int[]? tuning_config=None, ScalarType? output_dtype=None"
)
_family.define(
    "npu_grouped_matmul(" + _ARGUMENTS.format(group_list="Tensor? group_list=None") + ") -> Tensor[]",
    kernel=_grouped_matmul,
    fake=_grouped_matmul_fake,
    fake_needs_context=True,
)
_family.define(
    "npu_grouped_matmul.List(" + _ARGUMENTS.format(group_list="int[]? group_list=None") + ") -> Tensor[]",
    kernel=_grouped_matmul,
    fake=_grouped_matmul_fake,
    fake_needs_context=True,
)


def npu_grouped_matmul(x, weight, *, bias=None, scale=None, offset=None, antiquant_scale=None,
                       antiquant_offset=None, per_token_scale=None, group_list=None,
                       activation_input=None, activation_quant_scale=None,
                       activation_quant_offset=None, split_item=0, group_type=None,
                       group_list_type=0, act_type=0, output_dtype=None, tuning_config=None):
    """``y_i = x_i @ weight_i (+ bias_i)`` for each group; see the module docstring."""
    overload = torch.ops.npu.npu_grouped_matmul.default
    if isinstance(group_list, (list, tuple)):
        overload = torch.ops.npu.npu_grouped_matmul.List
        group_list = [int(v) for v in group_list]
    return overload(
        list(x), list(weight), bias=bias, scale=scale, offset=offset,
        antiquant_scale=antiquant_scale, antiquant_offset=antiquant_offset,
        per_token_scale=per_token_scale, group_list=group_list,
        activation_input=activation_input, activation_quant_scale=activation_quant_scale,
        activation_quant_offset=activation_quant_offset, split_item=split_item,
        group_type=group_type, group_list_type=group_list_type, act_type=act_type,
        tuning_config=tuning_config, output_dtype=output_dtype,
    )
