"""The npu stream sanitizer's Python side: error classes, reports, enable/disable.

The checking itself runs in the runtime (``torch_npu/csrc/observe/sanitizer.cpp``); it calls
``_report`` with what it found, which raises :class:`NPUSanitizerErrors`. The public
names are re-exported by ``torch.npu._sanitizer`` (see there for the user-facing story).
"""

from __future__ import annotations

import atexit
import enum
import io
import os
import sys
import textwrap
import traceback
from dataclasses import dataclass
from typing import Any, Iterable

import torch

import torch_npu._C as _C
from torch_npu import _env_settings

__all__ = [
    "enable_npu_sanitizer",
    "disable_npu_sanitizer",
    "is_enabled",
    "check",
    "record_kernel",
    "NPUSanitizer",
    "NPUSanitizerErrors",
    "SynchronizationError",
    "UnsynchronizedAccessError",
    "FreedWhileInUseError",
    "Access",
    "AccessType",
    "ENV_VAR",
]

ENV_VAR = "TORCH_NPU_SANITIZER"

class AccessType(enum.Enum):
    READ = enum.auto()
    WRITE = enum.auto()

    def __str__(self) -> str:
        return "reading from" if self is AccessType.READ else "writing to"

@dataclass
class Access:
    """One access to a tensor's memory by a kernel."""

    type: AccessType
    stream: str
    operator: str
    argument: str
    is_output: bool
    stack_trace: traceback.StackSummary
    # Set for work of the autograd engine, whose threads run no Python code: the node it
    # ran, and then ``stack_trace`` is the stack of the forward operation that created it.
    backward_node: str = ""

class SynchronizationError(Exception):
    """Base class of the errors the npu sanitizer reports."""

def _format_access(out: io.StringIO, access: Access) -> None:
    out.write(f"{access.operator}\n{access.type}")
    if access.argument:
        out.write(f" argument(s) {access.argument}")
        if access.is_output:
            out.write(", and to")
    if access.is_output:
        out.write(" the output")
    if access.backward_node:
        out.write(f"\nIn backward, by the autograd engine running {access.backward_node}; the forward operation "
                  "that created it was called with stack trace:\n")
    else:
        out.write("\nWith stack trace:\n")
    out.write("".join(access.stack_trace.format()) or "  (no Python frames: runtime or autograd thread)\n")

class UnsynchronizedAccessError(SynchronizationError):
    """Two accesses to one tensor's memory from different streams, not ordered."""

    def __init__(
        self,
        data_ptr: int,
        tensor: str,
        allocation_stack_trace: traceback.StackSummary | None,
        current_access: Access,
        previous_access: Access,
        allocation_backward_node: str = "",
    ) -> None:
        super().__init__(data_ptr, tensor)
        self.data_ptr = data_ptr
        self.tensor = tensor
        self.allocation_stack_trace = allocation_stack_trace
        self.allocation_backward_node = allocation_backward_node
        self.current_access = current_access
        self.previous_access = previous_access

    def __str__(self) -> str:
        with io.StringIO() as out:
            out.write(
                textwrap.dedent(
                    f"""\
                    ============================
                    npu sanitizer: possible data race on tensor {self.tensor} (data pointer {self.data_ptr:#x})
                    Access by {self.current_access.stream} during kernel:
                    """
                )
            )
            _format_access(out, self.current_access)
            out.write(f"Previous access by {self.previous_access.stream} during kernel:\n")
            _format_access(out, self.previous_access)
            _format_allocation(out, self.allocation_stack_trace, self.allocation_backward_node)
            out.write(
                "Fix: order the two streams, e.g. torch.npu.current_stream().wait_stream(other) or an "
                "Event recorded on one and waited on by the other, before the second access.\n"
            )
            return out.getvalue()

class FreedWhileInUseError(SynchronizationError):
    """Memory freed while a stream other than its allocation stream may still use it."""

    def __init__(
        self,
        data_ptr: int,
        tensor: str,
        allocation_stream: str,
        allocation_stack_trace: traceback.StackSummary | None,
        free_stack_trace: traceback.StackSummary | None,
        last_use: Access,
        reuse: Access | None = None,
        allocation_backward_node: str = "",
    ) -> None:
        super().__init__(data_ptr, tensor)
        self.data_ptr = data_ptr
        self.tensor = tensor
        self.allocation_stream = allocation_stream
        self.allocation_stack_trace = allocation_stack_trace
        self.free_stack_trace = free_stack_trace
        self.last_use = last_use
        # The work that touched memory allocated on allocation_stream after the free, while
        # that stream was not ordered after last_use: the block may have been handed to it.
        self.reuse = reuse
        self.allocation_backward_node = allocation_backward_node

    def __str__(self) -> str:
        with io.StringIO() as out:
            out.write(
                "============================\n"
                f"npu sanitizer: tensor {self.tensor} (data pointer {self.data_ptr:#x}) was freed while "
                f"{self.last_use.stream} may still use it: its memory can be handed out again on "
                f"{self.allocation_stream}, where it was allocated, before that use is done.\n"
                f"Last use by {self.last_use.stream} during kernel:\n"
            )
            _format_access(out, self.last_use)
            out.write("Freed with stack trace:\n")
            out.write("".join(self.free_stack_trace.format()) if self.free_stack_trace else "  (not captured)\n")
            if self.reuse is not None:
                out.write(f"Memory allocated on {self.allocation_stream} after the free, which may be this block, "
                          f"used by {self.reuse.stream} during kernel:\n")
                _format_access(out, self.reuse)
            _format_allocation(out, self.allocation_stack_trace, self.allocation_backward_node)
            out.write(
                f"Fix: call tensor.record_stream(<that stream>) after using the tensor on it, or make "
                f"{self.allocation_stream} wait for that stream before the tensor is freed.\n"
            )
            return out.getvalue()

def _format_allocation(out: io.StringIO, stack: traceback.StackSummary | None, backward_node: str = "") -> None:
    if backward_node:
        out.write(f"Tensor was allocated in backward by the autograd engine running {backward_node}; the forward "
                  "operation that created it was called with stack trace:\n")
        out.write("".join(stack.format()) if stack else "  (not recorded: the node is older than the record)\n")
    elif stack:
        out.write("Tensor was allocated with stack trace:\n")
        out.write("".join(stack.format()))
    else:
        out.write("Trace for tensor allocation not found (allocated before the sanitizer was enabled).\n")

class NPUSanitizerErrors(Exception):
    """The races found at one point of the program (see ``errors``)."""

    def __init__(self, errors: list[SynchronizationError]) -> None:
        super().__init__(errors)
        self.errors = errors

    def __str__(self) -> str:
        return f"npu sanitizer detected {len(self.errors)} error(s):\n" + "\n".join(map(str, self.errors))

_THIS_FILE = os.path.abspath(__file__)

def _stack(frames: list[dict] | None) -> traceback.StackSummary | None:
    if frames is None:
        return None
    # Symbolised frames come innermost first; a StackSummary reads outermost first.
    entries = [
        traceback.FrameSummary(f["filename"], f["line"], f["name"], lookup_line=True)
        for f in reversed(frames)
        if os.path.abspath(f["filename"]) != _THIS_FILE
    ]
    return traceback.StackSummary.from_list(entries)

def _origin(d: dict, prefix: str = "") -> tuple[traceback.StackSummary | None, str]:
    """The stack of some work and, for work of the autograd engine (no Python frames on its
    threads), the node it ran, with the stack of the forward operation that created it."""
    stack = _stack(d[prefix + "stack"])
    node = d[prefix + "backward_node"]
    if stack or not node:
        return stack, ""
    return _stack(d[prefix + "forward_stack"]), node


def _access(d: dict) -> Access:
    stack, node = _origin(d)
    return Access(
        AccessType.WRITE if d["type"] == "write" else AccessType.READ,
        d["stream"],
        d["operator"],
        d["argument"],
        d["is_output"],
        stack or traceback.StackSummary(),
        node,
    )

def _errors_from(items: Iterable[dict]) -> list[SynchronizationError]:
    errors: list[SynchronizationError] = []
    for item in items:
        allocation_stack, allocation_node = _origin(item, "allocation_")
        if item["kind"] == "freed_in_use":
            errors.append(
                FreedWhileInUseError(
                    item["data_ptr"],
                    item["tensor"],
                    item["allocation_stream"],
                    allocation_stack,
                    _stack(item["free_stack"]),
                    _access(item["previous"]),
                    _access(item["current"]) if item["current"] is not None else None,
                    allocation_node,
                )
            )
        else:
            errors.append(
                UnsynchronizedAccessError(
                    item["data_ptr"],
                    item["tensor"],
                    allocation_stack,
                    _access(item["current"]),
                    _access(item["previous"]),
                    allocation_node,
                )
            )
    return errors

def _report(items: list[dict]) -> None:
    """Called by the runtime with its findings; raises them."""
    raise NPUSanitizerErrors(_errors_from(items))

_atexit_registered = False

def _report_pending_at_exit() -> None:
    if not _C._sanitizer_enabled() or _C._sanitizer_pending() == 0:
        return
    try:
        _C._sanitizer_check()
    except NPUSanitizerErrors as exc:
        print(f"npu sanitizer: findings pending at exit:\n{exc}", file=sys.stderr)

def enable_npu_sanitizer() -> None:
    """Start checking npu work for cross-stream races (see the module docstring)."""
    global _atexit_registered
    _C._sanitizer_enable(_report)
    if not _atexit_registered:
        atexit.register(_report_pending_at_exit)
        _atexit_registered = True

def disable_npu_sanitizer() -> None:
    """Stop checking and forget what was tracked (findings not raised yet are dropped)."""
    _C._sanitizer_disable()

def is_enabled() -> bool:
    return bool(_C._sanitizer_enabled())

def check() -> None:
    """Raise the findings not raised yet. Every current check raises in the npu work that
    races (a free in use is reported by the work that uses the memory again), so this only
    matters for findings a future check cannot raise where it finds them."""
    _C._sanitizer_check()

def record_kernel(
    name: str,
    reads: Iterable[torch.Tensor] = (),
    writes: Iterable[torch.Tensor] = (),
    stream: torch.Stream | None = None,
) -> None:
    """Announce work the runtime does not run itself, such as a collective.

    ``reads``/``writes`` are the npu tensors it reads and writes, ``stream`` the npu
    stream it runs on (default: the current stream of the tensors' device). Checked
    like any kernel: raises :class:`NPUSanitizerErrors` on a race. A no-op when the
    sanitizer is off.
    """
    if not _C._sanitizer_enabled():
        return
    _C._sanitizer_kernel(str(name), stream, list(reads), list(writes))

class NPUSanitizer:
    """Object form, as ``torch.cuda._sanitizer.CUDASanitizer``: ``enable()``/``disable()``."""

    def __init__(self) -> None:
        self.enabled = False

    def enable(self) -> None:
        enable_npu_sanitizer()
        self.enabled = True

    def disable(self) -> None:
        disable_npu_sanitizer()
        self.enabled = False

def enabled_by_environment() -> bool:
    """Whether ``TORCH_NPU_SANITIZER`` asks for the sanitizer (raises on a value it cannot read)."""
    return _env_settings.read_switch(
        ENV_VAR, False,
        accepted="1 (set it to 1 to enable the npu stream sanitizer) or 0 (or unset it) to leave it off",
    )
