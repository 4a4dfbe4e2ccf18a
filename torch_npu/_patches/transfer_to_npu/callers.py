"""Whom transfer_to_npu answers as npu: the rule, in one place.

The script and the libraries it uses mean npu when they say cuda. PyTorch's own modules
mostly mean the CUDA runtime when they ask ``torch.cuda`` or ``tensor.is_cuda`` (Inductor
asks for a ROCm architecture name once CUDA looks available, ``nn.RNN`` takes cuDNN paths
for ``is_cuda`` tensors, ...), so they keep the real answers. Dynamo and FX are on the
script's side: Dynamo evaluates the script's calls while tracing, FX graph code calls what
was traced. The caller is read from its frame's module name.
"""
from __future__ import annotations

_SCRIPT_SIDE = ("torch._dynamo.", "torch.fx.")


def torch_internal(frame) -> bool:
    """True when ``frame`` runs code of PyTorch itself (not Dynamo or FX)."""
    module_name = frame.f_globals.get("__name__", "")
    if module_name == "torch":
        return True
    return module_name.startswith("torch.") and not module_name.startswith(_SCRIPT_SIDE)
