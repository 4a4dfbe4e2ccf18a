"""Makes the autocast state functions answer for npu when asked about ``"cuda"``.

Missing extension point: ``torch.is_autocast_enabled``, ``set_autocast_enabled``,
``get_autocast_dtype``, ``set_autocast_dtype`` (with a device type, or in their legacy
forms without one, which mean CUDA), ``get_autocast_gpu_dtype``/``set_autocast_gpu_dtype``
and ``torch.amp.is_autocast_available`` are C functions, not torch functions: no mode sees
their ``"cuda"``. Scripts and libraries ask them inside ``torch.autocast("cuda")`` (which
the ``autocast`` patch makes an npu region), and would be told autocast is off.

``apply()`` replaces the six in the ``torch`` namespace and ``is_autocast_available`` in
``torch.amp`` and ``torch.amp.autocast_mode`` (eight patch sites) by functions that read
``"cuda"`` as ``"npu"`` and call the original. Autocast's own enter/exit calls them with
``"npu"``: one Python call more per region, none per operator.

Dynamo folds these functions to constants while tracing (its ``constant_fold_functions``
table, filled with whatever ``torch.is_autocast_enabled`` etc. are when Dynamo is imported).
It inlines the replacements, which call the originals; ``register_with_dynamo()`` (run with
the group's other Dynamo registrations, when Dynamo is first imported) puts the originals
in that table, as they are when Dynamo is imported before the group.

Delete with ``autocast``.
"""
from __future__ import annotations

import torch
import torch.amp
import torch.amp.autocast_mode as autocast_mode

_NPU = "npu"
_originals: dict[tuple[str, str], object] = {}


def _npu_type(device_type):
    return _NPU if device_type == "cuda" else device_type


def _wrappers(real: dict[str, object]) -> dict[str, object]:
    is_enabled, set_enabled = real["is_autocast_enabled"], real["set_autocast_enabled"]
    get_dtype, set_dtype = real["get_autocast_dtype"], real["set_autocast_dtype"]

    def is_autocast_enabled(*args):
        # No argument: the legacy form, which asks about CUDA.
        return is_enabled(_npu_type(args[0]) if args else _NPU, *args[1:])

    def set_autocast_enabled(*args):
        if len(args) == 1:  # set_autocast_enabled(enabled): the legacy CUDA form.
            return set_enabled(_NPU, args[0])
        return set_enabled(_npu_type(args[0]) if args else _NPU, *args[1:])

    def get_autocast_dtype(device_type):
        return get_dtype(_npu_type(device_type))

    def set_autocast_dtype(device_type, dtype):
        return set_dtype(_npu_type(device_type), dtype)

    def get_autocast_gpu_dtype():
        return get_dtype(_NPU)

    def set_autocast_gpu_dtype(dtype):
        return set_dtype(_NPU, dtype)

    available = real["is_autocast_available"]

    def is_autocast_available(device_type: str) -> bool:
        return available(_npu_type(device_type))

    made = {
        "is_autocast_enabled": is_autocast_enabled,
        "set_autocast_enabled": set_autocast_enabled,
        "get_autocast_dtype": get_autocast_dtype,
        "set_autocast_dtype": set_autocast_dtype,
        "get_autocast_gpu_dtype": get_autocast_gpu_dtype,
        "set_autocast_gpu_dtype": set_autocast_gpu_dtype,
        "is_autocast_available": is_autocast_available,
    }
    for name, function in made.items():
        function.__doc__ = getattr(real[name], "__doc__", None)
    return made


TORCH_FUNCTIONS = (
    "is_autocast_enabled", "set_autocast_enabled", "get_autocast_dtype", "set_autocast_dtype",
    "get_autocast_gpu_dtype", "set_autocast_gpu_dtype",
)
AMP_NAMESPACES = (torch.amp, autocast_mode)


def _site_list() -> list[tuple[object, str]]:
    return [(torch, name) for name in TORCH_FUNCTIONS] + [
        (namespace, "is_autocast_available") for namespace in AMP_NAMESPACES
    ]


def apply() -> None:
    if _originals:
        return
    real = {name: getattr(torch, name) for name in TORCH_FUNCTIONS}
    real["is_autocast_available"] = autocast_mode.is_autocast_available
    made = _wrappers(real)
    for namespace, name in _site_list():
        _originals[(namespace.__name__, name)] = getattr(namespace, name)
        setattr(namespace, name, made[name])


def revert() -> None:
    for namespace, name in _site_list():
        original = _originals.pop((namespace.__name__, name), None)
        if original is not None:
            setattr(namespace, name, original)


def register_with_dynamo() -> None:
    """Let Dynamo fold the original state functions the replacements call (needs torch._dynamo)."""
    if not _originals:
        return
    from torch._dynamo.variables import torch as dynamo_torch

    folded = dynamo_torch.constant_fold_functions
    for (namespace, name), original in _originals.items():
        if namespace == "torch" and original not in folded and name in _FOLDED_BY_DYNAMO:
            folded[original] = None


# The state functions Dynamo constant-folds (torch/_dynamo/variables/torch.py).
_FOLDED_BY_DYNAMO = ("is_autocast_enabled", "get_autocast_dtype", "get_autocast_gpu_dtype")


def sites() -> tuple[str, ...]:
    return tuple(f"{namespace.__name__}.{name}" for namespace, name in _site_list())
