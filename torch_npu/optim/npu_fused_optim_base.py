"""The base of the fused optimizers: parameters, grads and states in combined buffers.

A fused optimizer updates all parameters of a group that share a device, dtype and step
count with one sequence of kernels over one flat buffer instead of one sequence per
parameter. ``NpuFusedOptimizerBase`` keeps those buffers ("buckets"): at each ``step`` it
checks that every parameter, its grad and its per-parameter state tensors are still views
of their bucket's combined tensors (``torch_npu.utils.npu_combine_tensors``) and rebuilds
a bucket whose members changed (a grad set to None and recreated, a state dict loaded,
a parameter re-allocated). Subclasses say which per-parameter state tensors they keep and
write the update over flat tensors in ``_bucket_step``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.optim.optimizer import Optimizer

from torch_npu.utils.combine_tensors import npu_combine_tensors

__all__ = ["NpuFusedOptimizerBase"]


def _same_storage(t, combined) -> bool:
    return t is not None and t.untyped_storage().data_ptr() == combined.untyped_storage().data_ptr()


@dataclass
class CombinedBucket:
    """Parameters of one group with one (device, dtype, step, state names) combined."""

    params: list
    param: torch.Tensor
    grad: torch.Tensor
    states: dict = field(default_factory=dict)  # state name -> combined tensor
    step: torch.Tensor | None = None  # the one step tensor every member's state["step"] is

    def intact(self, optimizer_state) -> bool:
        for p in self.params:
            if not _same_storage(p, self.param) or not _same_storage(p.grad, self.grad):
                return False
            st = optimizer_state[p]
            for name, combined in self.states.items():
                if not _same_storage(st.get(name), combined):
                    return False
            if self.step is not None and st.get("step") is not self.step:
                return False
        return True

    def views(self, name: str | None = None):
        """Per-parameter views of the combined tensor ``name`` (None: the parameters)."""
        flat = self.param if name is None else (self.grad if name == "grad" else self.states[name])
        out, offset = [], 0
        for p in self.params:
            n = p.numel()
            out.append(flat[offset:offset + n].view_as(p))
            offset += n
        return out


class NpuFusedOptimizerBase(Optimizer):
    """Base class of the fused optimizers (``params``, ``default`` as for ``torch.optim.Optimizer``).

    Subclasses set ``_uses_step`` (a shared step count per bucket, kept as
    ``state["step"]``, a 0-dim float tensor as torch.optim keeps it), implement
    ``_init_param_state(state, param, group)`` (create the per-parameter state tensors
    before the first update) and ``_bucket_step(group, bucket)`` (the update over
    ``bucket.param``, ``bucket.grad``, ``bucket.states[name]``).
    """

    _uses_step = True

    def __init__(self, params, default):
        super().__init__(params, default)
        self._buckets: list[list[CombinedBucket]] = [[] for _ in self.param_groups]

    # -- what subclasses provide ------------------------------------------------------
    def _init_param_state(self, state, param, group) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _init_param_state(state, param, group)")

    def _bucket_step(self, group, bucket: CombinedBucket) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _bucket_step(group, bucket)")

    def _before_group_step(self, group, buckets: list[CombinedBucket]) -> None:
        """Runs before a group's buckets are updated (for quantities over the whole group)."""

    # -- combination ------------------------------------------------------------------
    def _state_tensor_names(self, param) -> tuple:
        st = self.state[param]
        return tuple(sorted(k for k, v in st.items()
                            if k != "step" and isinstance(v, torch.Tensor) and v.shape == param.shape))

    def _bucket_key(self, p):
        st = self.state[p]
        step = float(st["step"]) if self._uses_step else None
        return (p.device, p.dtype, step, self._state_tensor_names(p))

    def _combine_group(self, index: int) -> list[CombinedBucket]:
        group = self.param_groups[index]
        with_grad = [p for p in group["params"] if p.grad is not None]
        for p in with_grad:
            if p.grad.is_sparse:
                raise RuntimeError(f"{type(self).__name__} does not support sparse gradients")
            st = self.state[p]
            if len(st) == 0:
                if self._uses_step:
                    st["step"] = torch.tensor(0.0, dtype=torch.float32)
                self._init_param_state(st, p, group)
        partitions: dict = {}
        for p in with_grad:
            partitions.setdefault(self._bucket_key(p), []).append(p)
        old = {tuple(map(id, b.params)): b for b in self._buckets[index]}
        buckets = []
        for members in partitions.values():
            bucket = old.get(tuple(map(id, members)))
            if bucket is None or not bucket.intact(self.state):
                bucket = self._build_bucket(members)
            buckets.append(bucket)
        self._buckets[index] = buckets
        return buckets

    def _build_bucket(self, members) -> CombinedBucket:
        with torch.no_grad():
            for p in members:
                if not p.is_contiguous():
                    p.set_(p.contiguous())
                # A grad that is strided, or that shares the parameter's memory, gets memory of
                # its own first: each combined buffer must own its members exclusively.
                if not p.grad.is_contiguous() or p.grad.untyped_storage().data_ptr() == p.untyped_storage().data_ptr():
                    p.grad = p.grad.contiguous().clone()
            param = npu_combine_tensors(list(members))
            grad = npu_combine_tensors([p.grad for p in members])
            states = {}
            for name in self._state_tensor_names(members[0]):
                tensors = []
                for p in members:
                    t = self.state[p][name]
                    if not t.is_contiguous() or t.device != p.device:
                        t = t.to(p.device).contiguous()
                        self.state[p][name] = t
                    tensors.append(t)
                states[name] = npu_combine_tensors(tensors)
        step = None
        if self._uses_step:
            step = torch.tensor(float(self.state[members[0]]["step"]), dtype=torch.float32)
            for p in members:
                self.state[p]["step"] = step
        return CombinedBucket(list(members), param, grad, states, step)

    def _combine_all(self) -> list[list[CombinedBucket]]:
        if len(self._buckets) != len(self.param_groups):  # add_param_group since last combination
            self._buckets += [[] for _ in range(len(self.param_groups) - len(self._buckets))]
        return [self._combine_group(i) for i in range(len(self.param_groups))]

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        if hasattr(self, "_buckets"):
            self._buckets.append([])

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        # Loaded states are new tensors: every bucket is rebuilt (values copied) at the next step.
        self._buckets = [[] for _ in self.param_groups]

    # -- public API -------------------------------------------------------------------
    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for index, buckets in enumerate(self._combine_all()):
            group = self.param_groups[index]
            self._before_group_step(group, buckets)
            for bucket in buckets:
                self._bucket_step(group, bucket)
        return loss

    def zero_grad(self, set_to_none=False):
        """Zeroes the grads (one fill per combined grad buffer), or drops them with ``set_to_none``."""
        if set_to_none:
            return super().zero_grad(set_to_none=True)
        zeroed = set()
        for index, buckets in enumerate(self._buckets):
            for bucket in buckets:
                if bucket.intact(self.state):
                    bucket.grad.zero_()
                    zeroed.update(map(id, bucket.params))
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None or id(p) in zeroed:
                    continue
                if p.grad.grad_fn is not None:
                    p.grad.detach_()
                else:
                    p.grad.requires_grad_(False)
                p.grad.zero_()

    def get_combined_params(self):
        """Per parameter group, the combined parameter tensors (one per device/dtype/step bucket)."""
        return [[b.param for b in buckets] for buckets in self._combine_all()]

    def get_combined_grads(self):
        """Per parameter group, the combined grad tensors, in the order of ``get_combined_params``."""
        return [[b.grad for b in buckets] for buckets in self._combine_all()]

    @torch.no_grad()
    def clip_grad_norm_fused_(self, max_norm, norm_type=2):
        """Scales all grads so that their joint ``norm_type`` norm is at most ``max_norm``; returns that norm.

        The same contract as ``torch.nn.utils.clip_grad_norm_`` over this optimizer's
        parameters, computed over the combined grad buffers.
        """
        max_norm, norm_type = float(max_norm), float(norm_type)
        grads = [g for per_group in self.get_combined_grads() for g in per_group]
        if not grads:
            return torch.tensor(0.0)
        device = grads[0].device
        if norm_type == float("inf"):
            norms = [g.detach().abs().max().to(device) for g in grads]
            total = norms[0] if len(norms) == 1 else torch.max(torch.stack(norms))
        else:
            norms = [torch.linalg.vector_norm(g.detach(), norm_type).to(device) for g in grads]
            total = torch.linalg.vector_norm(torch.stack(norms), norm_type)
        clip_coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
        for g in grads:
            g.mul_(clip_coef.to(g.device, g.dtype))
        return total
