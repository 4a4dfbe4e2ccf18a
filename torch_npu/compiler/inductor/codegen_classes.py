"""The four names ``torch.npu`` answers when Inductor asks the device module for codegen.

``torch._inductor.codegen.common.init_backend_registration()`` asks the PrivateUse1 device
module for ``Scheduling``, ``PythonWrapperCodegen``, ``CppWrapperCodegen`` and
``WrapperFxCodegen`` when no codegen is registered for the device yet. ``torch.npu`` loads
this module on first access to one of them (Inductor is already imported then). Being
asked means Inductor is registering npu right now, so the full registration (op overrides
and config module, which this route cannot carry) is done here too.
"""
from __future__ import annotations

from torch._inductor.codegen.wrapper_fxir import WrapperFxCodegen

from . import registration
from .registration import NpuScheduling as Scheduling
from .wrapper_codegen import NpuCppWrapperCodegen as CppWrapperCodegen
from .wrapper_codegen import NpuPythonWrapperCodegen as PythonWrapperCodegen

__all__ = ["Scheduling", "PythonWrapperCodegen", "CppWrapperCodegen", "WrapperFxCodegen"]

registration.setup()
