"""Teaches the RNG higher-order ops of ``torch._prims.rng_prims`` the npu device.

Missing extension point: ``run_and_save_rng_state`` and ``run_with_rng_state`` (what
activation checkpointing with ``preserve_rng_state=True`` traces random ops into, so a
recomputation draws the same numbers) pick their implementation from a device table
local to their BackendSelect kernels -- cuda, cpu, hpu, xpu -- and raise "Backend not
supported for npu" otherwise; their fake-tensor and proxy kernels go through that same
table. A ``py_impl`` for PrivateUse1 is never reached (BackendSelect answers first), and
``py_impl`` refuses to register a second BackendSelect kernel. So the three table entries
are replaced by kernels that handle an npu call (the npu generator state, as the cuda
entry does with the cuda one) and hand every other device to the kernel that was there.

Applied from the compile trigger's Dynamo setup steps: only traced code reaches these
ops, and ``import torch`` has already created them. Delete this patch once those ops take
their device implementations from a registry (or from the device's generator).
"""
from __future__ import annotations

DEVICE_TYPE = "npu"


def _npu_device(args: tuple, kwargs: dict):  # noqa: ANN202 - a torch.device or None
    import torch
    from torch._prims import rng_prims

    if rng_prims.get_device(args, kwargs) != DEVICE_TYPE:
        return None
    device = kwargs.get("device")
    if device is not None:
        return torch.device(device)
    return next(a.device for a in args if isinstance(a, torch.Tensor))


def apply() -> None:
    import torch
    import torch.utils._pytree as pytree
    from torch._C import DispatchKey
    from torch._higher_order_ops.utils import registered_hop_fake_fns
    from torch._prims import rng_prims
    from torch.fx.experimental.proxy_tensor import ProxyTorchDispatchMode, track_tensor_tree

    save = rng_prims.run_and_save_rng_state
    run_with = rng_prims.run_with_rng_state
    if getattr(save.py_kernels[DispatchKey.BackendSelect], "_npu_aware", False):
        return

    def save_npu(device, op, *args, **kwargs):  # noqa: ANN001, ANN202
        return torch.npu.get_rng_state(device), op(*args, **kwargs)

    def run_with_npu(device, rng_state, op, *args, **kwargs):  # noqa: ANN001, ANN202
        current = torch.npu.get_rng_state(device)
        torch.npu.set_rng_state(rng_state.cpu(), device)
        try:
            return op(*args, **kwargs)
        finally:
            torch.npu.set_rng_state(current, device)

    def npu_aware(fn):  # noqa: ANN001, ANN202
        fn._npu_aware = True
        return fn

    save_select = save.py_kernels[DispatchKey.BackendSelect]
    save_fake = registered_hop_fake_fns[save]
    save_proxy = save.python_key_table[ProxyTorchDispatchMode]
    run_with_select = run_with.py_kernels[DispatchKey.BackendSelect]

    @npu_aware
    def save_backend_select(op, *args, **kwargs):  # noqa: ANN001, ANN202
        device = _npu_device(args, kwargs)
        if device is None:
            return save_select(op, *args, **kwargs)
        return save_npu(device, op, *args, **kwargs)

    @npu_aware
    def save_fake_tensor_mode(op, *args, **kwargs):  # noqa: ANN001, ANN202
        device = _npu_device(args, kwargs)
        if device is None:
            return save_fake(op, *args, **kwargs)
        return save_npu(device, op, *args, **kwargs)

    @npu_aware
    def save_proxy_dispatch_mode(mode, op, *args, **kwargs):  # noqa: ANN001, ANN202
        device = _npu_device(args, kwargs)
        if device is None:
            return save_proxy(mode, op, *args, **kwargs)
        out = save_npu(device, op, *args, **kwargs)
        proxy_args = pytree.tree_map(mode.tracer.unwrap_proxy, (op, *args))
        proxy_kwargs = pytree.tree_map(mode.tracer.unwrap_proxy, kwargs)
        out_proxy = mode.tracer.create_proxy("call_function", save, proxy_args, proxy_kwargs)
        return track_tensor_tree(out, out_proxy, constant=None, tracer=mode.tracer)

    @npu_aware
    def run_with_backend_select(rng_state, op, *args, **kwargs):  # noqa: ANN001, ANN202
        device = _npu_device(args, kwargs)
        if device is None:
            return run_with_select(rng_state, op, *args, **kwargs)
        return run_with_npu(device, rng_state, op, *args, **kwargs)

    save.py_kernels[DispatchKey.BackendSelect] = save_backend_select
    registered_hop_fake_fns[save] = save_fake_tensor_mode
    save.python_key_table[ProxyTorchDispatchMode] = save_proxy_dispatch_mode
    run_with.py_kernels[DispatchKey.BackendSelect] = run_with_backend_select
    for hop in (save, run_with):
        hop._dispatch_cache.clear()
