"""The backward of an operator whose npu kernel is a plain differentiable ATen formula: the
vector-Jacobian product of that same formula, computed by autograd inside the backward kernel.

Ascend ships a hand-written backward kernel for many of its operators (``npu_giou_backward``,
``npu_roi_align_backward``, ...). Where our forward is an ATen formula, its exact gradient is
what autograd computes for it, so the backward operator reruns the formula on detached copies
with grad mode on and returns ``torch.autograd.grad``; one mechanism instead of a derivation
per operator that could drift from the forward. Backward kernels run below the autograd
dispatch keys, where grad mode can still be turned on (the copies are fresh leaves); inference
tensors are cloned outside inference mode first.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch


def vjp(formula: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor], grad: torch.Tensor,
        *, compute_dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
    """Gradients of ``formula(*inputs)`` (in ``compute_dtype``) against ``grad``, one per input,
    each in its input's dtype."""
    with torch.inference_mode(False), torch.enable_grad():
        leaves = [t.detach().clone().to(compute_dtype).requires_grad_(True) for t in inputs]
        out = formula(*leaves)
        grads = torch.autograd.grad(out, leaves, grad.detach().clone().to(out.dtype), allow_unused=True)
    return tuple(
        torch.zeros_like(t) if g is None else g.to(t.dtype) for g, t in zip(grads, inputs)
    )
