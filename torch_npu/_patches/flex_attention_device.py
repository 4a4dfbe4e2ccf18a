"""Lets ``torch.nn.attention.flex_attention`` accept npu tensors.

Missing extension point: ``flex_attention`` validates its inputs' device with the module
function ``_validate_device``, which accepts only a fixed set of device types (cuda, cpu,
xpu, hpu, mps) and raises "FlexAttention is only supported on CUDA, CPU, HPU, or MPS
devices" for every other one; no registry or hook extends that set. Past that check
nothing is device-specific for npu: eager runs the higher-order op's dense composite (as
on cpu, bit-equal to it), and npu's Inductor pass rewrites the op into that composite
(``torch_npu.compiler.inductor.flex_attention_dense``). So the module's function is
replaced by one that accepts npu inputs (all three on one npu device, forward and
backward) and hands every other device to the function that was there.

Applied from the compile trigger when ``torch.nn.attention.flex_attention`` is imported
(that module does not import Dynamo, and a user reaches the check before anything
imports it). Delete this patch once ``_validate_device`` accepts PrivateUse1 devices (or
asks the device for its support).
"""
from __future__ import annotations

DEVICE_TYPE = "npu"


def _npu_aware(original):  # noqa: ANN001, ANN202 - the replaced validator and its replacement
    def validate_device(query, key, value) -> None:  # noqa: ANN001 - torch's signature
        if query.device.type != DEVICE_TYPE:
            return original(query, key, value)
        if key.device != query.device or value.device != query.device:
            raise ValueError(
                "FlexAttention needs query, key and value on one device, but got "
                f"query on {query.device}, key on {key.device}, value on {value.device}; "
                "move them to the same npu device."
            )
        return None

    validate_device._npu_aware = True
    validate_device.__wrapped__ = original
    validate_device.__doc__ = original.__doc__
    return validate_device


def apply() -> None:
    from torch.nn.attention import flex_attention as module

    current = module._validate_device
    if getattr(current, "_npu_aware", False):
        return
    module._validate_device = _npu_aware(current)
