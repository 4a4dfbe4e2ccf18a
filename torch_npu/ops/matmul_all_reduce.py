"""``npu_mm_all_reduce_base``: a matmul followed by an all-reduce across a tensor-parallel
group, fused on Ascend, as Megatron-style inference code calls it.

Formula (Ascend documentation): ``output = all_reduce(x1 @ W + bias + x3)`` with
``W = (x2 + antiquant_offset) * antiquant_scale`` when ``x2`` is int8 and ``x1`` floating
(weight-only quantisation; per tensor, per channel, or per group of ``antiquant_group_size``
rows), ``W = x2`` otherwise; with int8 ``x1`` and ``x2`` (full quantisation) the int32
product is scaled by ``dequant_scale`` (and ``pertoken_scale`` per row) and the result is
bfloat16 if ``dequant_scale`` is, float16 otherwise. ``x1`` may be ``(m, k)`` or
``(b, s, k)``. ``hcom`` names the process group: the name ``get_hccl_comm_name`` of the
group's hccl backend returns (or the group's own name). ``reduce_op`` is ``"sum"``;
``comm_turn`` is 0 (Ascend supports only these). ``comm_quant_scale_1/2`` quantise the
communication on Ascend; the simulated collective sums in full precision, so they are only
validated. Arithmetic is float32, rounded once.
"""
from __future__ import annotations

import torch

from torch_npu.ops import _argument_checks as check
from torch_npu.ops._op_family import OpFamily

__all__ = ["npu_mm_all_reduce_base"]

_family = OpFamily(__name__)
INDUCTOR_DECOMPOSITIONS = _family.decompositions

HALF_DTYPES = (torch.float16, torch.bfloat16)


def process_group_named(hcom: str):
    """The process group whose hccl communicator (or group) is called ``hcom``."""
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized():
        raise RuntimeError(
            f"npu_mm_all_reduce_base: hcom={hcom!r} names no process group: torch.distributed is not "
            "initialised; call torch.distributed.init_process_group(backend='hccl') first"
        )
    world = dist.distributed_c10d._world
    for group, name in list(world.pg_names.items()):
        if name == hcom:
            return group
        try:
            backend = group._get_backend(torch.device("npu"))
        except RuntimeError:
            continue
        comm_name = getattr(backend, "get_hccl_comm_name", None)
        if comm_name is not None and comm_name(dist.get_rank(group)) == hcom:
            return group
    raise RuntimeError(
        f"npu_mm_all_reduce_base: hcom={hcom!r} names no process group of this process; pass "
        "group._get_backend(torch.device('npu')).get_hccl_comm_name(rank) of an hccl group"
    )


def _check_args(x1, x2, hcom, reduce_op, bias, antiquant_scale, antiquant_offset, x3, dequant_scale,
                pertoken_scale, comm_turn, antiquant_group_size) -> tuple:
    op = "npu_mm_all_reduce_base"
    check.tensor(op, "x1", x1)
    check.tensor(op, "x2", x2)
    check.dtype(op, "x1", x1, (*HALF_DTYPES, torch.int8))
    check.dtype(op, "x2", x2, (*HALF_DTYPES, torch.int8))
    check.rank(op, "x1", x1, (2, 3))
    check.rank(op, "x2", x2, (2,))
    check.choice(op, "reduce_op", reduce_op, ("sum",))
    check.choice(op, "comm_turn", comm_turn, (0,))
    if not isinstance(hcom, str):
        raise TypeError(f"{op}: hcom must be the communicator name (a str), got {type(hcom).__name__}")
    k, n = x2.shape
    check.condition(x1.shape[-1] == k, f"{op}: x1 of shape {tuple(x1.shape)} and x2 of shape {tuple(x2.shape)} cannot be multiplied")
    full_quant = x1.dtype == torch.int8
    weight_quant = not full_quant and x2.dtype == torch.int8
    if full_quant:
        if x2.dtype != torch.int8 or dequant_scale is None:
            raise ValueError(f"{op}: int8 x1 needs int8 x2 and a dequant_scale")
        check.dtype(op, "dequant_scale", dequant_scale, (torch.float32, torch.bfloat16))
        out_dtype = torch.bfloat16 if dequant_scale.dtype == torch.bfloat16 else torch.float16
    else:
        if not weight_quant:
            check.same_dtype(op, "x2", x2, "x1", x1)
        elif antiquant_scale is None:
            raise ValueError(f"{op}: int8 x2 with floating x1 (weight-only quantisation) needs antiquant_scale")
        out_dtype = x1.dtype
    if weight_quant:
        allowed = ((-(-k // antiquant_group_size), n),) if antiquant_group_size else ((1,), (n,), (1, n))
        if tuple(antiquant_scale.shape) not in allowed:
            raise ValueError(f"{op}: antiquant_scale must have shape {' or '.join(map(str, allowed))}, got {tuple(antiquant_scale.shape)}")
        if antiquant_offset is not None and tuple(antiquant_offset.shape) != tuple(antiquant_scale.shape):
            raise ValueError(f"{op}: antiquant_offset must have antiquant_scale's shape, got {tuple(antiquant_offset.shape)}")
    if bias is not None and tuple(bias.shape) != (n,):
        raise ValueError(f"{op}: bias must have shape ({n},), got {tuple(bias.shape)}")
    shape = (*x1.shape[:-1], n)
    if x3 is not None and tuple(x3.shape) != shape:
        raise ValueError(f"{op}: x3 must have the output's shape {shape}, got {tuple(x3.shape)}")
    if pertoken_scale is not None and pertoken_scale.numel() != x1.numel() // k:
        raise ValueError(f"{op}: pertoken_scale must hold one scale per row of x1 ({x1.numel() // k}), got {pertoken_scale.numel()}")
    return shape, out_dtype, full_quant, weight_quant


def _mm_all_reduce_base(x1, x2, hcom, *, reduce_op="sum", bias=None, antiquant_scale=None, antiquant_offset=None,
                        x3=None, dequant_scale=None, pertoken_scale=None, comm_quant_scale_1=None,
                        comm_quant_scale_2=None, antiquant_group_size=0, comm_turn=0, group_sizes=None,
                        y_dtype=None, x1_dtype=None, x2_dtype=None, dequant_scale_dtype=None,
                        pertoken_scale_dtype=None, comm_quant_mode=0, comm_mode=None):
    shape, out_dtype, full_quant, weight_quant = _check_args(
        x1, x2, hcom, reduce_op, bias, antiquant_scale, antiquant_offset, x3, dequant_scale, pertoken_scale,
        comm_turn, antiquant_group_size)
    group = process_group_named(hcom)
    rows = x1.reshape(-1, x1.shape[-1])
    if full_quant:
        out = torch.matmul(rows.to(torch.int32), x2.to(torch.int32)).double() * dequant_scale.double().reshape(1, -1)
        if pertoken_scale is not None:
            out = out * pertoken_scale.double().reshape(-1, 1)
        out = out.float()
    else:
        weight = x2.float()
        if weight_quant:
            scale, offset = antiquant_scale.float(), None if antiquant_offset is None else antiquant_offset.float()
            if antiquant_group_size:
                index = torch.arange(weight.shape[0], device=weight.device) // antiquant_group_size
                scale, offset = scale[index], None if offset is None else offset[index]
            else:
                scale, offset = scale.reshape(1, -1), None if offset is None else offset.reshape(1, -1)
            weight = (weight if offset is None else weight + offset) * scale
        out = rows.float() @ weight
    if bias is not None:
        out = out + bias.float()
    if x3 is not None:
        out = out + x3.float().reshape(out.shape)
    result = out.reshape(shape).to(out_dtype)
    import torch.distributed as dist

    dist.all_reduce(result, op=dist.ReduceOp.SUM, group=group)
    return result


def _mm_all_reduce_base_fake(x1, x2, hcom, *, reduce_op="sum", bias=None, antiquant_scale=None,
                             antiquant_offset=None, x3=None, dequant_scale=None, pertoken_scale=None,
                             comm_quant_scale_1=None, comm_quant_scale_2=None, antiquant_group_size=0, comm_turn=0,
                             group_sizes=None, y_dtype=None, x1_dtype=None, x2_dtype=None, dequant_scale_dtype=None,
                             pertoken_scale_dtype=None, comm_quant_mode=0, comm_mode=None):
    shape, out_dtype, _full, _weight = _check_args(
        x1, x2, hcom, reduce_op, bias, antiquant_scale, antiquant_offset, x3, dequant_scale, pertoken_scale,
        comm_turn, antiquant_group_size)
    return x1.new_empty(shape, dtype=out_dtype)


_family.define(
    "npu_mm_all_reduce_base(Tensor x1, Tensor x2, str hcom, *, str reduce_op='sum', Tensor? bias=None, "
    "Tensor? antiquant_scale=None, Tensor? antiquant_offset=None, Tensor? x3=None, Tensor? dequant_scale=None, "
    "Tensor? pertoken_scale=None, Tensor? comm_quant_scale_1=None, Tensor? comm_quant_scale_2=None, "
    "int antiquant_group_size=0, int comm_turn=0, int[]? group_sizes=None, int? y_dtype=None, int? x1_dtype=None, "
    "int? x2_dtype=None, int? dequant_scale_dtype=None, int? pertoken_scale_dtype=None, int comm_quant_mode=0, "
    "str? comm_mode=None) -> Tensor",
    kernel=_mm_all_reduce_base, fake=_mm_all_reduce_base_fake,
)


def npu_mm_all_reduce_base(x1, x2, hcom, reduce_op="sum", bias=None, antiquant_scale=None, antiquant_offset=None,
                           x3=None, dequant_scale=None, pertoken_scale=None, comm_quant_scale_1=None,
                           comm_quant_scale_2=None, antiquant_group_size=0, comm_turn=0):
    """``torch.ops.npu.npu_mm_all_reduce_base`` under the parameter order Ascend exports."""
    return torch.ops.npu.npu_mm_all_reduce_base(
        x1, x2, hcom, reduce_op=reduce_op, bias=bias, antiquant_scale=antiquant_scale,
        antiquant_offset=antiquant_offset, x3=x3, dequant_scale=dequant_scale, pertoken_scale=pertoken_scale,
        comm_quant_scale_1=comm_quant_scale_1, comm_quant_scale_2=comm_quant_scale_2,
        antiquant_group_size=antiquant_group_size, comm_turn=comm_turn,
    )
