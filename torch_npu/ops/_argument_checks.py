"""Argument checks shared by the fused ``npu_*`` operators, with errors that name the argument.

Ascend documents, per operator, which dtypes, ranks and option strings each argument accepts;
a call outside that range must fail at once with a message that says which argument is wrong,
what it was and what is accepted, rather than deep inside a kernel. The same checks run in the
npu kernel and in the fake kernel, so ``torch.compile`` and ``torch.export`` reject a bad call
while tracing, as eager does. Conditions on sizes go through ``torch._check`` so that they also
hold for symbolic sizes.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import torch

FLOATING = (torch.float16, torch.bfloat16, torch.float32)


def _dtype_names(dtypes: Iterable[torch.dtype]) -> str:
    return ", ".join(str(d).replace("torch.", "") for d in dtypes)


def tensor(op: str, name: str, value: Any) -> torch.Tensor:
    """``value`` must be a Tensor."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(value).__name__}")
    return value


def dtype(op: str, name: str, value: torch.Tensor, allowed: Sequence[torch.dtype]) -> None:
    """``value.dtype`` must be one of ``allowed``."""
    if value.dtype not in allowed:
        raise TypeError(
            f"{op}: {name} has dtype {_dtype_names([value.dtype])}; "
            f"supported: {_dtype_names(allowed)}"
        )


def same_dtype(op: str, name: str, value: torch.Tensor, other_name: str, other: torch.Tensor) -> None:
    if value.dtype != other.dtype:
        raise TypeError(
            f"{op}: {name} has dtype {_dtype_names([value.dtype])} but {other_name} has "
            f"{_dtype_names([other.dtype])}; they must be equal"
        )


def rank(op: str, name: str, value: torch.Tensor, allowed: Iterable[int]) -> None:
    """``value.dim()`` must be one of ``allowed``."""
    allowed = tuple(allowed)
    if value.dim() not in allowed:
        ranks = ", ".join(str(r) for r in allowed)
        raise ValueError(
            f"{op}: {name} must have {ranks} dimensions, got shape {tuple(value.shape)}"
        )


def choice(op: str, name: str, value: Any, allowed: Sequence[Any]) -> None:
    """``value`` must be one of ``allowed``."""
    if value not in allowed:
        options = ", ".join(repr(a) for a in allowed)
        raise ValueError(f"{op}: {name}={value!r} is not supported; use one of {options}")


def dim_index(op: str, name: str, value: int, ndim: int) -> int:
    """A dimension index in ``[-ndim, ndim)``, returned non-negative."""
    if not -ndim <= value < ndim:
        raise IndexError(
            f"{op}: {name}={value} is out of range for a tensor of {ndim} dimensions "
            f"(expected {-ndim} to {ndim - 1})"
        )
    return value % ndim


def condition(ok: Any, message: str) -> None:
    """A size condition, symbolic-size safe; ``message`` says what is wrong and how to fix it."""
    # A plain bool is decided here: torch._check_value imports the symbolic-shapes machinery
    # on first use (seconds), which an eager call with concrete sizes never needs.
    if type(ok) is bool:
        if not ok:
            raise ValueError(message)
        return
    torch._check_value(ok, lambda: message)


def broadcastable(op: str, name: str, value: Any, target_name: str, target: Any) -> None:
    """``value`` (a Tensor or a shape) must broadcast to ``target``'s shape, without growing it."""
    shape = tuple(getattr(value, "shape", value))
    target_shape = tuple(getattr(target, "shape", target))
    ok = len(shape) <= len(target_shape)
    if ok:
        for size, target_size in zip(reversed(shape), reversed(target_shape)):
            if not (size == 1 or size == target_size):
                ok = False
                break
    if not ok:
        raise ValueError(
            f"{op}: {name} of shape {shape} does not broadcast to {target_name} of shape "
            f"{target_shape}"
        )
